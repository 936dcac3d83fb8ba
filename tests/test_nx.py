"""Execute-disable pages (PAE paging with EFER.NXE): guest/programs/nx, natively, under ring3 in
both isolation modes, and under QEMU TCG with the plain kernel.

The program writes code into pages that mmap, mprotect, .data and the stack leave without
PROT_EXEC, and into pages with it, and calls it. The guest kernel (PAE) sets the XD bit of the
first kind; ring3 maps them into the host without PROT_EXEC (monitor/mmu/mmu.c), and a call
there is the guest's #PF with I/D set (monitor/mmu/paging.c), which Linux turns into SIGSEGV at
the code's address. This host's CPU and kernel are the oracle, and QEMU agrees with them.
"""
import subprocess

import pytest

from conftest import BUILD, ring3_ok
import qemu_guest  # tools/qemu_guest.py, on the path by conftest.py

NX = BUILD / "guest" / "programs" / "nx"


@pytest.fixture(scope="module")
def native():
    p = subprocess.run([NX], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    # The host runs the 32-bit program with NX: what it says is what the guest must say.
    assert "stack: SIGSEGV SEGV_ACCERR at code+0" in lines, p.stdout
    assert "mprotect read-exec: ran, returned 42" in lines, p.stdout
    return lines


def differences(mine, native):
    return "\n".join(f"native: {n!r}\nguest:  {m!r}" for n, m in zip(native, mine) if n != m)


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_nx_as_natively(isolation, native):
    mine = ring3_ok("nx", "--isolation", isolation).replace("\r", "").splitlines()
    assert mine == native, differences(mine, native) or f"{len(mine)} lines, natively {len(native)}"


def test_nx_under_qemu_as_natively(native):
    if not qemu_guest.KERNEL.exists():
        pytest.skip(f"{qemu_guest.KERNEL} is not built")
    r = qemu_guest.run("nx", timeout=300)
    assert r.status == 0, r.output
    mine = r.output.replace("\r", "").splitlines()
    assert mine == native, differences(mine, native)

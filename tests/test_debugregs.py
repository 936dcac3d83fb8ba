"""The guest's debug registers (DR0-DR3, DR7) as a debugger in the guest uses them.

ring3 makes each breakpoint the guest kernel enables a host breakpoint on the task that runs
the guest process (monitor/host/breakpoints.c). Two programs check it:
- guest/programs/debugregs sets every slot, kind and length through ptrace and lists the
  operations that trapped and DR6's slot bits. The same program run natively on this host is
  the oracle: hardware decides which accesses a breakpoint catches. (QEMU TCG is not: it
  also reports unaligned accesses next to the watched bytes.)
- the kernel's own tools/testing/selftests/breakpoints/breakpoint_test.c (mk/selftests.mk),
  whose TAP lines must be QEMU's. It fails the same way natively and under QEMU after its
  first data watchpoint; what counts is that ring3 says the same, line for line.
"""
import re
import subprocess

import pytest

from conftest import BUILD, ring3_ok
import qemu_guest  # tools/qemu_guest.py, on the path by conftest.py

DEBUGREGS = BUILD / "guest" / "programs" / "debugregs"
SELFTESTS_INITRAMFS = BUILD / "guest" / "initramfs-selftests.cpio.gz"
BREAKPOINT_TEST = "/usr/selftests/breakpoint_test_32"
SLOT_LINE = re.compile(r"^slot \d .*$", re.M)
TAP_LINE = re.compile(r"^(?:not )?ok \d+ .*$", re.M)


@pytest.fixture(scope="module")
def native():
    p = subprocess.run([DEBUGREGS], capture_output=True, text=True, timeout=120)
    lines = SLOT_LINE.findall(p.stdout)
    if p.returncode != 0 or len(lines) != 28 or " op " not in p.stdout:
        pytest.skip(f"this host's own debug registers do not work through ptrace "
                    f"(exit {p.returncode}): {p.stdout[-300:]} {p.stderr[-300:]}")
    return lines


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_breakpoints_trap_as_natively(isolation, native):
    out = ring3_ok("debugregs", "--isolation", isolation, timeout=300)
    assert SLOT_LINE.findall(out.replace("\r", "")) == native, out


@pytest.fixture(scope="module")
def qemu_tap():
    if not qemu_guest.KERNEL.exists():
        pytest.skip("make guest-kernel-plain builds the oracle's kernel")
    r = qemu_guest.run(BREAKPOINT_TEST, timeout=300, initramfs=SELFTESTS_INITRAMFS)
    lines = TAP_LINE.findall(r.output.replace("\r", ""))
    assert lines, r.output
    return lines


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_breakpoint_selftest_as_under_qemu(isolation, qemu_tap):
    out = ring3_ok(BREAKPOINT_TEST, "--isolation", isolation, "--initrd", SELFTESTS_INITRAMFS,
                   timeout=300)
    mine = TAP_LINE.findall(out.replace("\r", ""))
    differ = [f"QEMU: {q}\nring3: {m}" for q, m in zip(qemu_tap, mine) if q != m]
    assert len(mine) == len(qemu_tap) and not differ, "\n".join(differ[:10]) or out

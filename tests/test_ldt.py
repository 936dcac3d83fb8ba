"""A guest process's own LDT (modify_ldt): guest/programs/ldt, run natively and under ring3.

The program installs data segments with a base and a limit, read-only, expand-down and
not-present ones, and code segments (flat, and with a base) that it far-calls; it reports
lar and lsl of each, the signal every access outside the rules raises, the selectors a signal
frame holds, and the table after fork, after an entry is cleared, after a child with all 8192
entries was stopped and continued while the program waited, full (a child loads the last,
selector 0xffff, and makes a system call) and after exec. Natively, this
host's CPU and kernel are the oracle: under ring3 the guest kernel keeps the table, and ring3
mirrors it into the host LDT of the process that runs the guest process's code
(monitor/cpu/ldt.c), a stub or ring3's own.
"""
import re

import pytest

from conftest import BUILD, native_lines, ring3_cmd

LDT = BUILD / "guest" / "programs" / "ldt"


@pytest.fixture(scope="module")
def native():
    return native_lines(LDT, "far call, based: ok")


def differences(mine, native):
    return "\n".join(f"native: {n!r}\nring3:  {m!r}" for n, m in zip(native, mine) if n != m)


# Host LDT entries the whole program may cost ring3 (--stats): the table filled twice (by the
# program, and by the child that is stopped and continued) and emptied twice (for the parent
# after that child, and after exec), one host modify_ldt per entry. The parent the kernel wakes
# while it waits, and puts back to sleep, must cost none: each such switch to its smaller
# table and back used to clear and write again 8182 entries (monitor/cpu/ldt.c, here_stale).
LDT_WRITES_MAX = 5 * 8192


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_ldt_segments_as_natively(isolation, native):
    p = ring3_cmd("ldt", "--isolation", isolation, "--stats", timeout=120)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    mine = p.stdout.replace("\r", "").splitlines()
    assert mine == native, differences(mine, native) or f"{len(mine)} lines, natively {len(native)}"
    written = re.search(r"host LDT entries written\s+(\d+)", p.stderr)
    assert written and int(written.group(1)) < LDT_WRITES_MAX, p.stderr[-3000:]


def test_a_stub_left_a_large_ldt_is_replaced_not_cleared(native):
    """The process exec'ed at the end runs on the page directory of the child that had all
    8192 entries. Clearing them in that stub's host LDT would take 8192 host modify_ldt calls,
    each a copy of the whole table; ring3 takes a fresh stub instead (monitor/mmu/aspace.c,
    push_ldt), and the process sees the same empty table as natively."""
    p = ring3_cmd("ldt", "--stats", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    mine = p.stdout.replace("\r", "").splitlines()
    assert mine == native, differences(mine, native)
    assert re.search(r"replaced, not its large LDT cleared\s+[1-9]", p.stderr), p.stderr[-3000:]

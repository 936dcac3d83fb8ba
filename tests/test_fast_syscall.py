"""System calls of --isolation=none that leave the guest's vector registers live
(monitor/cpu/fast_syscall.c): SYSENTER from CPL 3 and SYSEXIT back, in their common case,
without the gate's XSAVE and XRSTOR.

What the guest sees is checked where the programs already run in both isolation modes: the
vector registers across system calls and context switches (tests/test_linux.py, `simd`, and
its commands compared with QEMU's output), segment registers a process loads itself before a
system call (tests/test_ldt.py), single-stepping through sysenter and the rest of the kernel's
x86 selftests (tests/test_selftests.py). Here: that the path is taken at all, and only where
it may be.
"""
import re

import pytest

from conftest import ring3_cmd


def fast_counts(stderr):
    """{'SYSENTER': n, 'SYSEXIT': n} from --stats' rows for the fast path (absent: 0)."""
    found = dict(re.findall(r"gate\s+(SYSENTER|SYSEXIT), vector registers left live\s+(\d+)", stderr))
    return {k: int(found.get(k, 0)) for k in ("SYSENTER", "SYSEXIT")}


def test_a_system_call_loop_takes_the_fast_path():
    p = ring3_cmd("/usr/bench/getpid 3000", "--isolation", "none", "--stats")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "RESULT getpid_libc" in p.stdout, p.stdout     # the program checks each result
    counts = fast_counts(p.stderr)
    assert counts["SYSENTER"] >= 3000 and counts["SYSEXIT"] >= 3000, p.stderr[-3000:]


@pytest.mark.parametrize("options", [("--isolation", "process"), ("--isolation", "none", "--trace-file", "/dev/null")],
                         ids=["process", "none-traced"])
def test_no_fast_path_where_it_does_not_apply(options):
    """Stub processes keep the vector state themselves; --trace logs every event, which the fast
    path would not."""
    p = ring3_cmd("/usr/bench/getpid 100", *options, "--stats")
    assert p.returncode == 0, p.stdout + p.stderr
    assert fast_counts(p.stderr) == {"SYSENTER": 0, "SYSEXIT": 0}, p.stderr[-3000:]

"""System calls of --isolation=none that leave the guest's vector registers live
(monitor/cpu/fast_syscall.c): SYSENTER from CPL 3 and SYSEXIT back, in their common case,
without the gate's XSAVE and XRSTOR; and SYSENTER done by the runtime's 32-bit code without
entering the monitor at all (monitor/cpu/runtime.S, sysenter_lazy).

What the guest sees is checked where the programs already run in both isolation modes: the
vector registers across system calls and context switches (tests/test_linux.py, `simd`, and
its commands compared with QEMU's output), segment registers a process loads itself before a
system call (tests/test_ldt.py), single-stepping through sysenter and the rest of the kernel's
x86 selftests (tests/test_selftests.py). Here: that the path is taken at all, and only where
it may be.
"""
import re

import pytest

from conftest import BUILD, native_lines, ring3_cmd


def fast_counts(stderr):
    """{'SYSENTER': n, 'SYSEXIT': n, 'runtime': n} from --stats' rows for the fast path, and for
    SYSENTER done in the runtime without the monitor (absent: 0)."""
    found = dict(re.findall(r"gate\s+(SYSENTER|SYSEXIT), vector registers left live\s+(\d+)", stderr))
    found["runtime"] = re.search(r"gate\s+SYSENTER, in the runtime without the monitor\s+(\d+)|$",
                                 stderr).group(1)
    return {k: int(found.get(k) or 0) for k in ("SYSENTER", "SYSEXIT", "runtime")}


def test_a_system_call_loop_takes_the_fast_path():
    """SYSENTER in the runtime (fast_syscall.h) for the loop's calls, SYSEXIT by fast_syscall."""
    p = ring3_cmd("/usr/bench/getpid 3000", "--isolation", "none", "--stats")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "RESULT getpid_libc" in p.stdout, p.stdout     # the program checks each result
    counts = fast_counts(p.stderr)
    assert counts["runtime"] >= 3000 and counts["SYSEXIT"] >= 3000, p.stderr[-3000:]


@pytest.mark.parametrize("options", [("--isolation", "process"), ("--isolation", "none", "--trace-file", "/dev/null")],
                         ids=["process", "none-traced"])
def test_no_fast_path_where_it_does_not_apply(options):
    """Stub processes keep the vector state themselves; --trace logs every event, which the fast
    path would not."""
    p = ring3_cmd("/usr/bench/getpid 100", *options, "--stats")
    assert p.returncode == 0, p.stdout + p.stderr
    assert fast_counts(p.stderr) == {"SYSENTER": 0, "SYSEXIT": 0, "runtime": 0}, p.stderr[-3000:]


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_vdso_calls_next_to_a_guard_page_as_natively(isolation):
    """guest/programs/vsyscall-edge: getpid through the vDSO with the stack pointer just above
    an inaccessible page. The CPU's SYSENTER writes nothing below the vDSO's pushes; the
    runtime's sysenter_lazy saves two words there, and where that faults it takes the gate
    instead (runtime_sysenter_fault) rather than ring3 dying of it."""
    native = native_lines(BUILD / "guest" / "programs" / "vsyscall-edge", "64 bytes above the guard page: getpid ok")
    p = ring3_cmd("vsyscall-edge", "--isolation", isolation)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.replace("\r", "").splitlines() == native, p.stdout + p.stderr[-3000:]

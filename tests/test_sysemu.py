"""--syscalls=sysemu: guest processes in stub processes that ring3 traces with ptrace, each
system call a PTRACE_SYSEMU stop (stub/trace.c), the paper's redirection.

The oracle is QEMU, as for the default mode (tests/test_linux.py): every differential command
prints the same and ends with the same status. The hostile program runs in this mode too
(tests/test_isolation.py).
"""
import subprocess

import pytest

import qemu_guest  # noqa: E402  (tools/qemu_guest.py, on the path by conftest.py)
from test_linux import BOOT_TIMEOUT, DIFFERENTIAL, RING3
from test_stats import stats_of

SYSEMU = ("--syscalls", "sysemu")


def guest(command, *options):
    return subprocess.run([RING3, "run", *SYSEMU, *options, "--cmd", command], capture_output=True,
                          text=True, timeout=BOOT_TIMEOUT, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(not qemu_guest.KERNEL.exists(), reason="make guest-kernel-plain builds it")
def test_same_output_as_qemu():
    for command in DIFFERENTIAL:
        want = qemu_guest.run(command)
        p = guest(command)
        assert (p.stdout, p.returncode) == (want.output, want.status), f"{command}\nstderr: {p.stderr}"


def test_system_calls_are_ptrace_stops_and_handoffs_are_counted():
    """A raw int $0x80 reaches the guest kernel as the SIGSYS that the default mode's seccomp
    trap gives (stub/host.c reports a PTRACE_SYSEMU stop as one), once a call; --stats counts
    the hand-offs, the waiting and the checked maps."""
    n = 300
    p = guest(f"getpid {n}", "--stats")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"getpid: {n} calls"), p.stdout
    rows = stats_of(p.stderr)
    assert rows[("signal", "int $n or sysenter of a process (SIGSYS)")][0] >= n, rows
    handoffs, waited = rows[("stub", "hand-off, guest code, event (waited)")]
    assert handoffs >= 2 * n and waited > 0, rows
    maps = rows[("stub", "hand-offs carrying a checked map")][0]
    pages = [count for (kind, event), (count, _) in rows.items() if kind == "stub" and event.startswith("pages mapped")]
    assert maps > 0 and pages and pages[0] >= maps, rows

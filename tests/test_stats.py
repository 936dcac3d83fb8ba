"""`ring3 run --stats`: the table of monitor events printed at exit.

Counts are checked against what the guest is known to do: a guest process's getpid loop
enters the kernel once per call (a gate SYSENTER from the vDSO, a SIGSYS for int $0x80), the
kernel's timer interrupt arrives on vector 48 (IRQ 0 after Linux programs the 8259), and
starting processes writes cr3.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import stats_of

ROOT = Path(__file__).resolve().parent.parent
RING3 = os.environ.get("RING3_BIN", str(ROOT / "build" / "bin" / "ring3"))


def test_linux_getpid_counts():
    n = 300
    p = subprocess.run([RING3, "run", "--stats", "--cmd", f"getpid {n}"], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"getpid: {n} calls"), p.stdout
    rows = stats_of(p.stderr)
    assert rows[("gate", "SYSENTER")][0] >= n, rows
    assert rows[("gate", "SYSEXIT")][0] >= n, rows
    assert rows[("signal", "int $n or sysenter of a process (SIGSYS)")][0] >= n, rows
    assert rows[("interrupt", "vector 48")][0] > 0, rows
    assert rows[("mmu", "cr3 write (host mappings dropped)")][0] > 0, rows
    # each call is a hand-off to the process's stub and back (two: the vDSO's and int $0x80)
    assert rows[("stub", "hand-off, guest code, event (waited)")][0] >= 2 * n, rows
    assert rows[("stub", "hand-offs carrying a checked map")][0] > 0, rows
    # a switch of address space holds the stub it leaves (stub/host.h, stub_hold)
    assert rows[("stub", "held at its map site (waited)")][0] > 0, rows
    assert all(ms is None or ms >= 0 for _, ms in rows.values()), rows
    assert not lost_stubs(rows), rows


def lost_stubs(rows):
    """{"stub lost: WHY, signal N": count} of the stubs given up in a run (monitor/mmu/aspace.c,
    stub_lost), by cause and the signal that ended each."""
    return {event: n for (kind, event), (n, _) in rows.items() if event.startswith("stub lost: ")}


def test_stubs_lost_counted_by_cause():
    """The hostile program breaks its stub on purpose in several ways (guest/programs/hostile.c):
    an mmap its filter answers by killing it, jumps into its code, a forged signal frame. Each
    costs the process its stub, and the table counts them by cause (stub/host.h, stub_loss)."""
    p = subprocess.run([RING3, "run", "--stats", "--cmd", "hostile all /tmp/mark >/dev/null"],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    lost = lost_stubs(stats_of(p.stderr))
    # the plant attempt: an mmap the filter kills the stub for (SIGSYS, SECCOMP_RET_KILL_PROCESS)
    assert lost.get("stub lost: it died, signal 31", 0) > 0, p.stderr
    # the forged munmap: a stub held at the guest kernel's TLB flush that never comes
    assert lost.get("stub lost: killed, silent too long, signal 9", 0) > 0, p.stderr
    causes = ("it died", "killed, silent too long", "killed, broke the protocol")
    assert all(re.fullmatch(r"stub lost: (.*), signal \d+", why)[1] in causes for why in lost), lost


def test_insert_kernel_counts_traps_by_entry_and_no_gate():
    """The kernel built in insert mode has no call sites: each sensitive instruction traps, and
    the table counts them by entry. A getpid through the vDSO is its marked sysenter and the
    kernel's sysexit, which faults by itself."""
    n = 300
    kernel = ROOT / "build" / "guest" / "bzImage-insert"
    initrd = ROOT / "build" / "guest" / "initramfs.cpio.gz"
    p = subprocess.run([RING3, "run", "--stats", "--initrd", str(initrd), "--cmd", f"getpid {n}",
                        str(kernel)], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"getpid: {n} calls"), p.stdout
    rows = stats_of(p.stderr)
    assert rows[("insert", "SYSENTER")][0] >= n, rows
    assert rows[("insert", "SYSEXIT")][0] >= n, rows
    assert rows[("signal", "insert-mode instruction (SIGILL, SIGSEGV)")][0] >= 2 * n, rows
    assert not [event for kind, event in rows if kind == "gate"], rows


def test_placement_tried_both_ways():
    """--placement auto (the default) runs windows of hand-offs on the other placement and keeps
    the faster (stub/placement.c); spread and shared stay where they are told."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: every placement is shared, and nothing moves")
    counts = {}
    for placement in ["auto", "spread", "shared"]:
        p = subprocess.run([RING3, "run", "--stats", "--placement", placement, "--cmd", "/usr/bench/forkexec 100"],
                           capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert p.returncode == 0 and "RESULT forkexec" in p.stdout, p.stdout + p.stderr
        rows = stats_of(p.stderr)
        counts[placement] = (rows.get(("stub", "placement tried the other way"), (0,))[0],
                             rows.get(("stub", "placement moves (time on one core)"), (0,))[0])
    trials, moves = counts["auto"]
    assert trials >= 1 and moves >= trials, counts
    assert counts["spread"] == (0, 0), counts
    assert counts["shared"] == (0, 1), counts     # the one move to a single core, at start


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_host_cpuid_asked_once_per_leaf(isolation):
    """Each exec of a static glibc program asks CPUID about 59 times (init_cpu_features, the
    cache sizes); with CPUID faulting (Intel) each is a #GP the monitor answers, and the
    guest kernel asks about 200 times at boot. The host is asked once per leaf and sub-leaf
    (monitor/cpu/cpu_model.c, host_answer): in a VM each host CPUID exits to the hypervisor,
    8 us on an Intel Xeon VM, 27 us with the arch_prctl pair that turns faulting off around
    it. Leaf 0, whose ECX glibc leaves as a stack address, must not miss at each exec."""
    n = 100
    p = subprocess.run([RING3, "run", "--stats", "--isolation", isolation, "--cmd", f"/usr/bench/forkexec {n}"],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and "RESULT forkexec" in p.stdout, p.stdout + p.stderr
    rows = stats_of(p.stderr)
    asked = rows[("cpu", "host CPUID executed")][0]
    assert 0 < asked < n, rows


def test_no_table_without_the_option():
    p = subprocess.run([RING3, "run", "--cmd", "true"], capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and "ring3 stats" not in p.stderr, p.stderr


def test_multiboot_guest_exceptions_counted():
    """The exceptions test guest raises each exception it tests once through the guest IDT."""
    elf = ROOT / "build" / "testguests" / "ring3" / "exceptions.elf"
    p = subprocess.run([RING3, "run", "--stats", str(elf)], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert "exceptions: pass" in p.stdout, p.stdout + p.stderr
    rows = stats_of(p.stderr)
    for vector in (0, 6, 13, 14):      # #DE, #UD, #GP, #PF, as the guest's expect file lists
        assert rows.get(("exception", f"vector {vector}"), (0,))[0] > 0, p.stderr

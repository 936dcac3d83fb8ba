"""A guest process's cpuid: the monitor's answer, or the same answer from its stub.

Where the host has CPUID faulting (the `cpuid_fault` flag; Intel here), a process's cpuid is a
#GP that the monitor answers with the guest kernel's filtered view (monitor/cpu/cpu_model.c).
Each answer it gives, it also writes into a page every stub maps read-only, and a stub answers
a cpuid found there itself, without a hand-off (stub/protocol.h, "CPUID"). The oracle for those
answers is the monitor's own: guest/programs/cpuid run with --isolation=none, where every one
comes from the monitor. Where the host has no CPUID faulting, cpuid runs on the CPU in both
modes, and the outputs must agree all the same.
"""
import re
from pathlib import Path

import pytest

from conftest import BUILD, native_lines, ring3_cmd, stats_count

CPUID = BUILD / "guest" / "programs" / "cpuid"
FAULTING = "cpuid_fault" in Path("/proc/cpuinfo").read_text().split()


def runs(*options, times=2):
    """`cpuid show` (times) times in one boot: the outputs, and the stderr with --stats."""
    p = ring3_cmd("; ".join(["cpuid show; echo ==="] * times), "--stats", *options)
    assert p.returncode == 0, p.stdout + p.stderr
    outs = p.stdout.replace("\r", "").split("===\n")[:times]
    return outs, p.stderr


@pytest.fixture(scope="module")
def monitor_answers():
    outs, _ = runs("--isolation", "none", times=1)
    assert "differs" not in outs[0], outs[0]
    return outs[0]


@pytest.mark.parametrize("syscalls", ["sud", "sysemu"])
def test_stub_answers_as_the_monitor(monitor_answers, syscalls):
    """The first run teaches the page, the second is answered from it; both as the monitor."""
    outs, stderr = runs("--syscalls", syscalls)
    assert outs == [monitor_answers, monitor_answers], (outs, monitor_answers)
    asked = 2 * int(re.search(r"^asked (\d+)$", monitor_answers, re.M).group(1))
    gp = stats_count(stderr, "#GP: in/out, cpuid or guest #GP")
    here = stats_count(stderr, "cpuid answered in a stub")
    if FAULTING:
        # Each distinct question reaches the monitor about once: 19 pairs, 71 cpuids a run.
        assert gp < asked // 2, stderr
        # The rest the stubs answered, and --stats counts them (busybox's own start-up asks too).
        assert gp + here >= asked, stderr
    else:
        assert here == 0, stderr


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_single_step_over_cpuid_traps_after_it(isolation):
    """With TF set the stub leaves cpuid to the monitor, which raises the trap after it, as
    hardware does (guest/programs/cpuid step): answered in the stub, it came one instruction
    late. Asked twice, so that the second finds its answer in the page."""
    native = native_lines(CPUID, "step:", "step")
    p = ring3_cmd("cpuid step; cpuid step", "--isolation", isolation)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.replace("\r", "").splitlines() == native * 2, p.stdout

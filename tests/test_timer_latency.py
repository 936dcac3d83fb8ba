"""A guest's timer interrupts reach a process that computes as soon as they reach an idle CPU.

testguests/timer-storm.c takes a third of its interrupts halted, a third in a ring 0 loop and a
third in a ring 3 loop, and with `timing=1` gives each busy phase's time per interrupt as a
percentage of the halted phase's, by the TSC. Its ring 3 loop runs in a stub process, or in
ring3's own under --isolation=none. An interrupt for a stub that computes needs the monitor to
get the CPU from it: on one core that is the host's wake-up preemption, which a monitor of
SCHED_BATCH does not have (stub/placement.c). Measured on a 2-core Intel Xeon VM, 30000
interrupts at 10 kHz: ring 3 code 150-215% in every placement, 2400-2900% under `chrt -b 0`;
QEMU 117%. 600% leaves the noise of a loaded host room and still fails the batch case.
"""
import re

import pytest

from conftest import BUILD, make
from test_guests import QEMU, RING3, STATUS_PASS, Guest, run, show

GUEST = Guest(append="count=30000 hz=10000 timing=1", timeout=120)
PERCENT = re.compile(rb"ring 0 code (\d+), ring 3 code (\d+)")
LIMIT_PCT = 600


def percentages(cmd):
    """Runs timer-storm by (cmd): the two percentages it gives, once it passed."""
    out, err, status = run(cmd, GUEST)
    m = PERCENT.search(out)
    assert status == STATUS_PASS and m, show(out, err)
    return int(m.group(1)), int(m.group(2))


def test_qemu_measure():
    """The measure itself, on the reference: no phase is far from the halted one."""
    elf = BUILD / "testguests" / "plain" / "timer-storm.elf"
    make(elf)
    ring0, ring3 = percentages([*QEMU, "-kernel", str(elf), "-append", GUEST.append])
    assert ring0 < LIMIT_PCT and ring3 < LIMIT_PCT, (ring0, ring3)


@pytest.mark.parametrize("options", [["--placement", "shared"], ["--placement", "spread"], [],
                                     ["--isolation", "none"]],
                         ids=["shared", "spread", "auto", "none"])
def test_interrupts_reach_a_computing_process(options):
    elf = BUILD / "testguests" / "ring3" / "timer-storm.elf"
    make(RING3, elf)
    ring0, ring3 = percentages([str(RING3), "run", *options, "--append", GUEST.append, str(elf)])
    assert ring0 < LIMIT_PCT, f"ring 0 code took {ring0}% of the halted phase's time per interrupt"
    assert ring3 < LIMIT_PCT, f"ring 3 code took {ring3}% of the halted phase's time per interrupt"

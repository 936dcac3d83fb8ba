"""Signals and interrupts at many points of a computing process (guest/programs/sigstress.c).

The process computes a chain in which every instruction, register and the carry flag show, while
a timer at one guest tick, a process that sends it SIGUSR1 in a loop and a ping-pong pair beside
it interrupt it; its handlers overwrite every register. It stops once DELIVERIES signals have
reached it and prints how many chunks it computed and the state. The same program run natively
for that many chunks, with nothing to disturb it, is the oracle: no instruction may have run twice
or been skipped, and no register or flag may have changed across an interruption.
"""
import re
import subprocess

import pytest

from conftest import BUILD, ring3_ok, soak_size

PROGRAM = BUILD / "guest" / "programs" / "sigstress"
# About 100 a second: one per guest timer tick (HZ=100); 25 s in make test, 100 s in make soak.
DELIVERIES = soak_size(2500, 10000)
LINE = re.compile(r"^chunks (\d+) state ([0-9a-f]{16}) deliveries (\d+)$", re.M)


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_interruptions_change_nothing(isolation):
    out = ring3_ok(f"sigstress {DELIVERIES}", "--isolation", isolation, timeout=900)
    m = LINE.search(out)
    assert m, out
    chunks, state, deliveries = m.group(1), m.group(2), int(m.group(3))
    assert deliveries >= DELIVERIES, out
    native = subprocess.run([PROGRAM, "--chunks", chunks], capture_output=True, text=True,
                            timeout=120, check=True).stdout
    assert native == f"chunks {chunks} state {state}\n", (
        f"after {deliveries} deliveries in {chunks} chunks ring3 computed {state}; natively:\n"
        f"{native}")

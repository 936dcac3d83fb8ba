"""A fault of the monitor's own is reported, not died of (the standard: "the monitor never dies of
a segfault of its own"): one line that says so and the guest's registers on stderr, exit status
4 (lib/fail.h, EXIT_INTERNAL).

Most monitor code runs in its signal handler: guest events, the timer, the stubs' waits. A fault
there used to end ring3 with the host's SIGSEGV (status 139) and no word: the handler ran with
every signal blocked, and a blocked synchronous fault kills at once. The fault is injected by
LD_PRELOAD (tests/fault/fault_in_handler.c): a clock_gettime called on the signal stack writes
to address 0, as a bug in monitor code would.
"""
import os
import subprocess

import pytest

from conftest import BUILD, RING3, make

FAULT = BUILD / "tests" / "fault" / "fault_in_handler.so"
# Long enough that the injected fault always comes first: 300 rounds made 5,000 to 20,000 calls.
LOOP = "i=0; while [ $i -lt 3000 ]; do /bin/true; i=$((i+1)); done; echo done"


@pytest.mark.parametrize("isolation", ["process", "none"])
@pytest.mark.parametrize("after", [0, 3000], ids=["first event", "3000 calls later"])
def test_a_fault_in_the_handler_is_reported(isolation, after):
    make(FAULT)
    env = dict(os.environ, LD_PRELOAD=str(FAULT), FAULT_AFTER=str(after))
    p = subprocess.run([RING3, "run", "--isolation", isolation, "--cmd", LOOP], env=env,
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 4, f"exit {p.returncode}\nstdout: {p.stdout[-2000:]}\nstderr: {p.stderr}"
    lines = p.stderr.splitlines()
    assert lines[0].startswith("ring3: internal error: signal 11 at "), p.stderr
    assert lines[0].endswith("(address (nil)) in the monitor; guest state:"), p.stderr
    assert any(line.startswith("eax=") for line in lines) and any("cr0=" in line for line in lines), p.stderr

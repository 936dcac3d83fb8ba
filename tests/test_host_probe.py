"""The start-up probe of what a compatibility-mode sysenter does on this host (monitor/host_probe.c).

AMD CPUs raise #UD (SIGILL); Intel CPUs enter the host kernel, which returns at its 32-bit
vDSO landing pad (a SIGSYS under Syscall User Dispatch). The probe's verdict, in the trace,
must match the CPU's vendor.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RING3 = os.environ.get("RING3_BIN", str(ROOT / "build" / "bin" / "ring3"))
GUEST = ROOT / "build" / "testguests" / "ring3" / "hello.elf"
SIGILL, SIGSYS = 4, 31


def vendor():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("vendor_id"):
            return line.split(":")[1].strip()
    return ""


def test_sysenter_probe_matches_the_vendor(tmp_path):
    trace = tmp_path / "trace"
    subprocess.run([RING3, "run", "--trace-file", str(trace), str(GUEST)], capture_output=True,
                   timeout=30, stdin=subprocess.DEVNULL)
    m = re.search(r"host: a compatibility-mode sysenter gives signal (\d+), pc ([0-9a-f]{8})",
                  trace.read_text())
    assert m, "no probe line in the trace"
    sig, pc = int(m.group(1)), int(m.group(2), 16)
    if vendor() == "AuthenticAMD":
        assert (sig, pc) == (SIGILL, 0)
    elif vendor() == "GenuineIntel":
        assert sig == SIGSYS and pc != 0
    else:
        pytest.skip(f"no expectation for vendor {vendor()!r}")

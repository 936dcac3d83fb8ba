"""The start-up probe of what a compatibility-mode sysenter does on this host (monitor/host/host_probe.c).

AMD CPUs raise #UD. Intel CPUs enter the host kernel, which sends the call back to its 32-bit
vDSO landing pad: an offset (which depends on the host kernel's build) from this process's
vDSO base, reported as a SIGSYS under Syscall User Dispatch. The verdict in the trace must
match the CPU's vendor.
"""
import re
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD

RING3 = BUILD / "bin" / "ring3"
GUEST = BUILD / "testguests" / "ring3" / "hello.elf"
VERDICT = re.compile(r"host: sysenter in compatibility mode (raises #UD|returns at ([0-9a-f]{16}) "
                     r"\(vDSO at ([0-9a-f]{16})\))")


def vendor():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("vendor_id"):
            return line.split(":")[1].strip()
    return ""


def probe_verdict(tmp_path):
    """(pad, vdso) from a run's trace: (0, 0) for #UD."""
    trace = tmp_path / "trace"
    subprocess.run([RING3, "run", "--trace-file", trace, GUEST], capture_output=True, timeout=30,
                   stdin=subprocess.DEVNULL)
    m = VERDICT.search(trace.read_text())
    assert m, "no probe verdict in the trace"
    return (int(m.group(2), 16), int(m.group(3), 16)) if m.group(2) else (0, 0)


def test_sysenter_probe_matches_the_vendor(tmp_path):
    pad, vdso = probe_verdict(tmp_path)
    if vendor() == "AuthenticAMD":
        assert pad == 0, f"AMD raises #UD, but the probe found a landing pad at {pad:x}"
    elif vendor() == "GenuineIntel":
        # The kernel's pad is vDSO base + offset (do_fast_syscall_32); a host that returned to
        # compatibility mode with only EIP would show it cut to 32 bits.
        offset = (pad - vdso) % (1 << 32)
        assert pad and offset < 0x10000, f"landing pad {pad:x} is not in the vDSO at {vdso:x}"
        assert pad in (vdso + offset, (vdso + offset) % (1 << 32))
    else:
        pytest.skip(f"no expectation for vendor {vendor()!r}")

"""The stub processes of --isolation=process: build/tests/stub/test_stub drives real stubs (stub/host.c)."""
import subprocess

import pytest

from conftest import BUILD, make


@pytest.mark.parametrize("syscalls,placement", [("sud", "spread"), ("sysemu", "spread"), ("sud", "shared")])
def test_stub_driver(syscalls, placement):
    """Every check in both ways a stub's system calls reach the monitor (stub/host.h); and with
    the stubs on the monitor's core (stub/placement.h), where a stub parks at every hand-off."""
    make(BUILD / "tests/stub/test_stub")
    path = BUILD / "tests/stub/must-not-exist"
    r = subprocess.run([str(BUILD / "tests/stub/test_stub"), str(path), syscalls, placement],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"test_stub failed:\n{r.stdout}\n{r.stderr}"
    assert not path.exists()
    print(r.stdout)

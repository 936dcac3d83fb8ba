"""Runs the C unit tests of the device models (tests/unit/test_*.c, built by mk/unit.mk)."""
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "tests" / "unit").glob("test_*.c"))


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_unit(source):
    binary = ROOT / "build" / "tests" / "unit" / source.stem
    assert binary.exists(), f"{binary.relative_to(ROOT)} is not built; run `make unit`"
    result = subprocess.run([binary], capture_output=True, text=True, timeout=30)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "SUCCESS" in result.stdout, output

"""Shared paths and helpers for the pytest suite (run by `make test`)."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def run(cmd, **kw):
    """Runs a command; on failure, the assertion shows its output."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}"
    return r

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


def make(*targets):
    """Builds (targets), paths in the tree, by their names relative to the top: make's rules
    are written that way and do not match an absolute path."""
    names = [str(pathlib.Path(t).relative_to(ROOT)) if pathlib.Path(t).is_absolute() else str(t)
             for t in targets]
    return run(["make", "-s", *names], cwd=ROOT)

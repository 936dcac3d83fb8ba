"""native: the i386 benchmark programs run directly on the host, the baseline of every ratio."""
import subprocess

from . import ROOT, missing

NAME = "native"
PROGRAMS = ROOT / "build" / "bench" / "programs" / "i386"


def prepare():
    return missing(PROGRAMS / "loop")


def run(argv, timeout):
    p = subprocess.run([str(PROGRAMS / argv[0]), *argv[1:]], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    if p.returncode:
        raise RuntimeError(f"{argv[0]} exited with status {p.returncode}: "
                           f"{(p.stdout + p.stderr).strip()[-300:]}")
    return p.stdout

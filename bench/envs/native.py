"""native: the i386 benchmark programs run directly on the host, the baseline of every ratio."""
from . import ROOT, missing, run_process

NAME = "native"
PROGRAMS = ROOT / "build" / "bench" / "programs" / "i386"


def prepare():
    return missing(PROGRAMS / "loop")


def run(argv, timeout):
    return run_process([PROGRAMS / argv[0], *argv[1:]], timeout, argv[0]).stdout

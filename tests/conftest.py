"""Shared paths and helpers for the pytest suite (run by `make test`)."""
import hashlib
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
RING3 = BUILD / "bin" / "ring3"
# `make soak` sets RING3_SOAK=1: the stress tests run at their long sizes (soak_size).
SOAK = os.environ.get("RING3_SOAK") == "1"


def soak_size(test, soak):
    """A stress test's size: (test) in `make test`, (soak) in `make soak`. The short one goes
    through every path the long one does; the long one gives rare interleavings and slow
    leaks their chance."""
    return soak if SOAK else test
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tools"))     # qemu_guest: a command in the same guest under QEMU


# A row of `ring3 run --stats`'s table: kind, event, count, then total ms and mean us if timed.
STATS_ROW = re.compile(r"^  (\S+)\s+(.+?)\s+(\d+)(?:\s+([\d.]+)\s+([\d.]+))?\s*$")


def stats_of(stderr):
    """{(kind, event): (count, total_ms or None)} from the --stats table on stderr."""
    lines = stderr.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("ring3 stats:"))
    rows = {}
    for line in lines[start + 2:]:
        m = STATS_ROW.match(line)
        if not m:
            break
        rows[(m[1], m[2])] = (int(m[3]), float(m[4]) if m[4] else None)
    return rows


def stats_count(stderr, event):
    """The count of the first --stats row whose event starts with (event), or 0 when none does."""
    return next((count for (_, name), (count, _) in stats_of(stderr).items() if name.startswith(event)), 0)


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


def ring3_cmd(command, *options, timeout=120):
    """`ring3 run OPTIONS --cmd COMMAND` with no input: its CompletedProcess (text)."""
    return subprocess.run([str(RING3), "run", *map(str, options), "--cmd", command],
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def ring3_ok(command, *options, timeout=120):
    """ring3_cmd, which must end with status 0: what the command printed."""
    p = ring3_cmd(command, *options, timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    return p.stdout


def native_lines(program, expect, *args):
    """Run a static i386 guest program (build/guest/programs) with (args) on the host, the
    oracle: the lines it printed, which must hold (expect)."""
    p = subprocess.run([str(program), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert expect in p.stdout, p.stdout
    return p.stdout.splitlines()


def file_sha256(path):
    """The SHA-256 of a file, read in 1 MiB blocks (disk images are large)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

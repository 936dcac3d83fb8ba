"""The tree draws the design: the rooms of the C code include one another without a circle.

Every `#include "..."` of the monitor's C sources is resolved as the compiler does (the file's
own folder, then the top of the tree, then include/). A room is a top-level folder; an include
from one room into another is an edge. The rooms must form a graph without a cycle, so that
each one can be read, built and tested with only the rooms below it.
"""
import re
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
# Folders of C that are not rooms of build/bin/ring3 or the stub, but users of them: tests, test
# guests, the guest's own programs, benchmarks, fuzz targets, and the build tree.
NOT_ROOMS = {"tests", "testguests", "guest", "bench", "build", "rootfs", "tools", "rewriter", "mk", "fuzz"}
ROOMS = sorted(p.name for p in TOP.iterdir()
               if p.is_dir() and not p.name.startswith(".") and p.name not in NOT_ROOMS)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(path):
    return path.relative_to(TOP).parts[0]


def resolve(src, name):
    for base in (src.parent, TOP, TOP / "include"):
        if (base / name).is_file():
            return (base / name).resolve()
    raise AssertionError(f"{src.relative_to(TOP)}: #include \"{name}\" names no file")


def edges():
    out = {}
    for room in ROOMS:
        for src in sorted((TOP / room).rglob("*")):
            if src.suffix not in (".c", ".h", ".S"):
                continue
            for name in INCLUDE.findall(src.read_text()):
                target = resolve(src, name)
                a, b = room_of(src), room_of(target)
                if a != b:
                    out.setdefault((a, b), []).append(f"{src.relative_to(TOP)} -> {name}")
    return out


def test_no_room_includes_a_room_above_it():
    found = edges()
    graph = {}
    for a, b in found:
        graph.setdefault(a, set()).add(b)
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycle = path[path.index(nxt):] + [nxt]
                why = "; ".join(found[(x, y)][0] for x, y in zip(cycle, cycle[1:]))
                raise AssertionError(f"rooms in a circle: {' -> '.join(cycle)} ({why})")
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for room in sorted(graph):
        if room not in state:
            visit(room, [room])


def test_loaders_and_devices_know_nothing_of_the_monitor():
    for (a, b), where in edges().items():
        if b in ("monitor", "cli", "audit"):
            assert a in ("cli", "monitor"), f"{a}/ includes {b}/: {where}"

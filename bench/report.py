"""What the tables of `make bench` after Table 1 share (bench/table2.py, bench/table_net.py,
bench/table_shimos.py): the environments a run is limited to, repeated runs of one environment,
medians over them, what was not run or failed, and their section of bench/RESULTS.md."""
import os
import statistics
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def repeat(tag, label, run, times):
    """(runs, errors): (run)'s result (times) times, each failure's message instead where it
    raised RuntimeError or timed out; each reported on stderr as '(tag): (label) run N: ...'."""
    runs, errors = [], []
    for i in range(times):
        try:
            runs.append(run())
            print(f"{tag}: {label} run {i + 1}: {runs[-1]}", file=sys.stderr)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            errors.append(str(e))
            print(f"{tag}: {label} run {i + 1} failed: {e}", file=sys.stderr)
    return runs, errors


def chosen(tag, variable, envs, default):
    """The environments named in (variable) (comma-separated; (default) when unset), each one of
    (envs); exits with one line naming the known ones otherwise."""
    names = os.environ.get(variable, default).split(",")
    unknown = [n for n in names if n not in envs]
    if unknown:
        sys.exit(f"{tag}: unknown environment {unknown}; known: {', '.join(envs)}")
    return names


def not_run_notes(record, names):
    """The markdown list of (names)' environments in (record) that were not run, and why, and of
    each failed run's message; empty when there is none."""
    notes = [f"- {record[n]['label']}: {record[n]['why']}" for n in names if "why" in record[n]]
    notes += [f"- {record[n]['label']}: {e}" for n in names for e in record[n].get("errors", [])]
    return ["", "Not run and failed:", ""] + notes if notes else []


def median(record, name, row):
    """The median of (row) over environment (name)'s runs in (record), or None."""
    values = [r[row] for r in record.get(name, {}).get("runs", []) if row in r]
    return statistics.median(values) if values else None


def fmt(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def write_section(section, markdown):
    """Put (markdown), which starts with the heading (section), in RESULTS.md in place of that
    section, or at its end; the sections before and after it stay."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    after = ""
    if section in text:
        text, rest = text.split(section, 1)
        after = rest[rest.index("\n# "):] if "\n# " in rest else ""
    RESULTS.write_text(text.rstrip("\n") + "\n\n" + markdown + after)

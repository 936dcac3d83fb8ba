#!/usr/bin/python3
"""`make bench`: the paper's Table 1 in the guest. Each benchmark program (bench/programs/)
runs in each environment of bench/envs/; every figure is the median of BENCH_REPEAT runs
(default 5), shown with its min and max and its ratio to native.

    bench/table.py           every environment: bench/RESULTS.md, results.json, results.png
    bench/table.py --quick   each program once on each ring3 mode (QUICK_ENVS) with its starting
                             count, checking that every result line came and holds a sane number
                             (make bench-quick)

BENCH_ENVS=native,ring3 (module names) limits a run to those environments.

Iteration counts: one calibration run per program and environment, from a count small enough
for the slowest environment, then counts scaled so that one run does about BENCH_SECONDS
(default 1) of measured work; each run has a wall-clock cap of BENCH_CAP / BENCH_REPEAT s.
"""
import datetime
import importlib
import json
import math
import os
import platform
import re
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

# program: (starting count, its results as (name, unit, row label)), in the table's order.
PROGRAMS = {
    "loop": (10_000_000, [("loop", "ns", "loop: increment a volatile variable")]),
    "getpid": (1000, [("getpid_libc", "us", "getpid through libc (vDSO entry)"),
                      ("getpid_raw", "us", "getpid by raw int $0x80 (x86-64: syscall)")]),
    "pipesw": (200, [("pipesw", "us", "pipe ping-pong round trip")]),
    "fork": (10, [("fork", "ms", "fork + _exit + waitpid")]),
    "openclose": (1000, [("openclose", "us", "open + close")]),
    "forkexec": (5, [("forkexec", "ms", "fork + execve + waitpid")]),
    "mmap": (20, [("mmap", "us", "mmap 1 MiB, touch every page, munmap")]),
}
BOOT = ("boot", "s", "boot to the first guest process")
ROWS = [r for _, results in PROGRAMS.values() for r in results] + [BOOT]
FIRST_ENVS = ["native", "ring3", "ring3_none", "ring3_sysemu", "ring3_insert", "qemu_tcg", "qemu_kvm"]    # then the others, by name
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
MAX_COUNT = 2**31 - 1       # the programs' count is an i386 long
RESULT_LINE = re.compile(r"^RESULT (\S+) (\S+) (ns|us|ms)$")

REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
TARGET = float(os.environ.get("BENCH_SECONDS", "1"))
CAP = float(os.environ.get("BENCH_CAP", "300"))


def parse(output, program):
    """{result: value} from a program's output; ValueError unless every result of (program)
    is there once, with its unit and a finite positive value, and no FAIL line."""
    found = {}
    for line in output.splitlines():
        if line.startswith("FAIL "):
            raise ValueError(line)
        m = RESULT_LINE.match(line.strip())
        if m:
            if m.group(1) in found:
                raise ValueError(f"{m.group(1)} reported twice")
            found[m.group(1)] = (float(m.group(2)), m.group(3))
    values = {}
    for name, unit, _ in PROGRAMS[program][1]:
        if name not in found:
            raise ValueError(f"no RESULT {name} in {output.strip()[-200:]!r}")
        value, got = found[name]
        if got != unit or not math.isfinite(value) or value <= 0:
            raise ValueError(f"RESULT {name} {value} {got}: want a positive number of {unit}")
        values[name] = value
    return values


def work_seconds(program, values, count):
    """The measured time of one run: each result is per iteration, each loop does (count)."""
    return count * sum(values[name] * UNIT_SECONDS[unit] for name, unit, _ in PROGRAMS[program][1])


def calibrate(env, program, timeout):
    """The count that makes one run of (program) in (env) do about TARGET s of work."""
    count = PROGRAMS[program][0]
    for _ in range(4):
        work = work_seconds(program, parse(env.run([program, str(count)], timeout), program), count)
        # A quarter of the target at least, so that one noisy short run cannot skew the count.
        if work >= TARGET / 4 or count == MAX_COUNT:
            break
        count = min(MAX_COUNT, count * min(1000, math.ceil(TARGET / 2 / max(work, 1e-9))))
    return max(1, min(MAX_COUNT, round(count * TARGET / max(work, 1e-9))))


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def median_of(record, row):
    """The median of (record)'s figure (row), or None when it has none."""
    fig = record["figures"].get(row) if record else None
    return statistics.median(fig["values"]) if fig else None


def ratio(value, native):
    """value / native, or None where either is missing."""
    return value / native if value is not None and native else None


def discover():
    """The environment modules of bench/envs/ (only those BENCH_ENVS lists, when set), native
    and ring3 first."""
    names = sorted(p.stem for p in (BENCH / "envs").glob("*.py") if not p.stem.startswith("_"))
    if os.environ.get("BENCH_ENVS"):
        names = [n for n in names if n in os.environ["BENCH_ENVS"].split(",")]
    names = [n for n in FIRST_ENVS if n in names] + [n for n in names if n not in FIRST_ENVS]
    return [(n, importlib.import_module(f"envs.{n}")) for n in names]


def fail(record, program, why):
    """(program) failed in (record)'s environment: its results become an error."""
    for result, _, _ in PROGRAMS[program][1]:
        record["figures"].pop(result, None)
        record["errors"][result] = str(why)
    print(f"   {record['name']}: {program} failed: {why}", flush=True)


def measure(envs):
    """Every figure of every environment: one record each, {"figures": {row: {unit, count,
    values}}, "errors": {row: why}, "reason": why unavailable}. The repetitions take turns
    (one run of each program in each environment, then the next round), so that a load from
    elsewhere on a shared machine falls on every environment alike."""
    records, counts = {}, {}
    for name, env in envs.items():
        records[name] = record = {"module": name, "name": env.NAME, "reason": env.prepare(),
                                  "figures": {}, "errors": {}}
        print(f"== {env.NAME}: " + (f"unavailable: {record['reason']}" if record["reason"]
                                    else "calibrating"), flush=True)
        for program in [] if record["reason"] else PROGRAMS:
            try:
                counts[name, program] = calibrate(env, program, CAP / REPEAT)
            except (RuntimeError, ValueError) as e:
                fail(record, program, e)
    for round_ in range(REPEAT):
        print(f"== round {round_ + 1} of {REPEAT}", flush=True)
        for (name, program), count in list(counts.items()):
            record = records[name]
            try:
                values = parse(envs[name].run([program, str(count)], CAP / REPEAT), program)
            except (RuntimeError, ValueError) as e:
                del counts[name, program]
                fail(record, program, e)
                continue
            for result, unit, _ in PROGRAMS[program][1]:
                record["figures"].setdefault(result, {"unit": unit, "count": count, "values": []})
                record["figures"][result]["values"].append(values[result])
        for name, env in envs.items():
            if records[name]["reason"] or not hasattr(env, "boot_seconds") \
                    or "boot" in records[name]["errors"]:
                continue
            try:
                seconds = env.boot_seconds()
            except RuntimeError as e:
                records[name]["errors"]["boot"] = str(e)
                continue
            if seconds is not None:
                records[name]["figures"].setdefault("boot", {"unit": "s", "count": 1, "values": []})
                records[name]["figures"]["boot"]["values"].append(seconds)
    for record in records.values():
        for row, fig in record["figures"].items():
            print(f"   {record['name']:<16} {row:<12} {statistics.median(fig['values']):10.4g} "
                  f"{fig['unit']}  (count {fig['count']})", flush=True)
    return list(records.values())


def slowest(record, native):
    """(row, ratio) of (record)'s figure furthest above native, or None."""
    ratios = [(median_of(record, row) / median_of(native, row), row)
              for row in record["figures"] if row in native["figures"]]
    return max(ratios, default=None)


def add_profiles(results, envs):
    """For each environment that can say where its time went (ring3's --stats), one more run
    of its slowest figure relative to native, with that profile kept."""
    native = next((e for e in results["environments"] if e["module"] == "native"), None)
    for record in results["environments"]:
        env = envs[record["module"]]
        worst = native and slowest(record, native)
        if not hasattr(env, "profile") or not worst:
            continue
        row = worst[1]
        program = next(p for p, (_, rs) in PROGRAMS.items() if row in [r[0] for r in rs])
        try:
            text = env.profile([program, str(record["figures"][row]["count"])], CAP / REPEAT)
        except RuntimeError as e:
            text = f"no profile: {e}\n"
        record["profile"] = {"row": row, "ratio": worst[0], "program": program, "text": text}


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "load": os.getloadavg()[0],
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def fmt(value):
    """Three significant digits, without exponents for the sizes these figures have."""
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"


def cell(record, row, native):
    """One table cell: median (min-max) and the ratio to native's median."""
    if record["reason"]:
        return "unavailable"
    if row in record["errors"]:
        return "failed"
    fig = record["figures"].get(row)
    if not fig:
        return "—"
    s = summary(fig["values"])
    text = f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])})"
    r = ratio(s["median"], native)
    return text + (f" **{r:.3g}×**" if r is not None and record["module"] != "native" else "")


def targets(envs):
    """The targets for ring3 (issue 20: the default mode, and --isolation=none), as this run
    measured them: lines of Markdown."""
    by = {e["module"]: e for e in envs}

    def med(env, row):
        return median_of(by.get(env), row)
    lines = []

    def within(env, row, limit, what):
        r = ratio(med(env, row), med("native", row))
        if r is not None:
            lines.append(f"- {what}: {r:.3g}× native, " + ("met" if r <= limit else "not met"))

    def under(env, limit, what):
        v = med(env, "getpid_libc")
        if v is not None:
            lines.append(f"- {what}: {v:.3g} us through libc, " + ("met" if v < limit else "not met"))
    under("ring3", 0.8, "default mode: `getpid` under 0.8 us")
    within("ring3", "fork", 3, "default mode: `fork` within 3× native")
    within("ring3", "forkexec", 2.5, "default mode: `forkexec` within 2.5× native")
    within("ring3", "mmap", 3, "default mode: `mmap` within 3× native")
    under("ring3_none", 0.4, "`--isolation=none`: `getpid` under 0.4 us")
    for env, what in (("ring3", "default mode"), ("ring3_none", "`--isolation=none`")):
        within(env, "loop", 1.02, f"{what}: `loop` within 2% of native")
        slower = [row for row, _, _ in ROWS if row != "boot" and med(env, row) is not None
                  and med("qemu_tcg", row) is not None and med(env, row) >= med("qemu_tcg", row)]
        if med("qemu_tcg", "loop") is not None and med(env, "loop") is not None:
            lines.append(f"- {what}: every benchmark faster than QEMU TCG: " + (
                "met" if not slower else "not met; slower in " + ", ".join(slower)))
    return lines


def markdown(results):
    m, envs = results["machine"], results["environments"]
    native = next((e for e in envs if e["module"] == "native"), None)
    lines = ["# Benchmarks: the paper's Table 1 in the guest",
             "",
             f"Generated by `make bench` (bench/table.py) on {m['date']}: {m['cpu']}, "
             f"{m['cores']} cores, host Linux {m['kernel']}; load average {m.get('load', 0):.2f} "
             "at the start (other work on the machine shows in the spread).",
             "",
             f"Each cell: median of {results['repeat']} runs (min–max), then in bold the ratio "
             "to native's median. Each run does about "
             f"{results['target_seconds']:g} s of measured work; the guest rows boot once per "
             "run and time themselves inside the guest.",
             "",
             "| figure | unit | " + " | ".join(e["name"] for e in envs) + " |",
             "|---|---|" + "---|" * len(envs)]
    for row, unit, label in ROWS:
        lines.append(f"| {label} | {unit} | "
                     + " | ".join(cell(e, row, median_of(native, row)) for e in envs) + " |")
    goals = targets(envs)
    if goals:
        lines += ["", "ring3 against its targets (measured, not asserted):", ""] + goals
    notes = [f"- **{e['name']}** unavailable: {e['reason']}" for e in envs if e["reason"]]
    notes += [f"- **{e['name']}**, {row}: {why}" for e in envs for row, why in e["errors"].items()]
    if notes:
        lines += ["", "Unavailable and failed:", ""] + notes
    for e in envs:
        if e.get("profile"):
            p = e["profile"]
            label = next(label for row, _, label in ROWS if row == p["row"])
            lines += ["", f"Where {e['name']}'s time goes in its slowest row relative to native, "
                      f"{label} ({p['ratio']:.3g}×): one more run of `{p['program']}` with the "
                      "same count,", "", "```", p["text"].rstrip(), "```"]
    lines += ["", "Counts per run (iterations) are in bench/results.json with every repetition."]
    return "\n".join(lines) + "\n"


def chart(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    envs = [e for e in results["environments"] if e["figures"]]
    rows = [r for r in ROWS if any(r[0] in e["figures"] for e in envs)]
    fig, ax = plt.subplots(figsize=(13, 5.5))
    width = 0.8 / max(1, len(envs))
    for i, e in enumerate(envs):
        xs, ys, lo, hi = [], [], [], []
        for x, (row, _, _) in enumerate(rows):
            if row in e["figures"]:
                s = summary(e["figures"][row]["values"])
                xs.append(x + (i - (len(envs) - 1) / 2) * width)
                ys.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=e["name"])
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{row}\n({unit})" for row, unit, _ in rows], fontsize=8)
    ax.set_ylabel("median per iteration (log scale; bars: min–max)")
    m = results["machine"]
    ax.set_title(f"ring3 benchmarks: {m['cpu']}, {m['cores']} cores, {m['date']}")
    ax.legend()
    missing = [f"{e['name']}: {e['reason']}" for e in results["environments"] if e["reason"]]
    if missing:
        fig.text(0.01, 0.005, "\n".join("unavailable: " + m[:150] for m in missing), fontsize=7)
    fig.tight_layout(rect=(0, 0.02 * len(missing), 1, 1))
    fig.savefig(path, dpi=100)


QUICK_ENVS = ("ring3", "ring3_none", "ring3_sysemu")   # both isolations, both redirections


def quick():
    """Each program once on each ring3 mode, with its starting count; every result must be sane."""
    failed = 0
    for name in QUICK_ENVS:
        env = importlib.import_module(f"envs.{name}")
        why = env.prepare()
        if why:
            sys.exit(f"bench-quick: {env.NAME} unavailable: {why}")
        for program, (count, _) in PROGRAMS.items():
            try:
                values = parse(env.run([program, str(count)], 120), program)
                print(f"{env.NAME}: " + " ".join(f"{k} {v:.4g}" for k, v in values.items()), flush=True)
            except (RuntimeError, ValueError) as e:
                print(f"{env.NAME}: {program}: FAILED: {e}", flush=True)
                failed += 1
    if failed:
        sys.exit(f"bench-quick: {failed} of {len(PROGRAMS) * len(QUICK_ENVS)} runs failed")
    print(f"bench-quick: all {len(PROGRAMS)} programs ran on {', '.join(QUICK_ENVS)}")


def main():
    if sys.argv[1:] == ["--quick"]:
        return quick()
    if sys.argv[1:]:
        sys.exit(__doc__)
    envs = dict(discover())
    results = {"machine": machine(), "repeat": REPEAT, "target_seconds": TARGET,
               "environments": measure(envs)}
    add_profiles(results, envs)
    (BENCH / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    # bench/table2.py keeps its own section at the end of the file; it stays.
    old = (BENCH / "RESULTS.md").read_text() if (BENCH / "RESULTS.md").exists() else ""
    table2 = old[old.index("\n# Table 2"):] if "\n# Table 2" in old else ""
    (BENCH / "RESULTS.md").write_text(markdown(results) + table2)
    chart(results, BENCH / "results.png")
    print((BENCH / "RESULTS.md").read_text())


if __name__ == "__main__":
    main()

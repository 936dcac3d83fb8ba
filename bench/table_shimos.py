#!/usr/bin/python3
"""`make bench`, the SHIMOS table: ring3 instances sharing devices through the IKC channel
(ikc/), against what they would use without it, all measured in one run:
  - the channel alone between two processes (build/bench/ikc-channel), and the same 64-byte
    packets over a UNIX stream socket, the stream backend's transport (SHIMOS's Table 4);
  - ping and TCP between two guests on an IKC switch (--net ikc), on a stream (--net stream),
    and between two QEMU TCG guests on -netdev stream (SHIMOS's Table 5);
  - O_DIRECT write and read of 1 GiB on a disk another ring3 serves (--disk ikc:NAME) against a
    local one (SHIMOS's Fig. 15);
  - GNU patch built in the Debian root served by another ring3 against a local root (SHIMOS's
    Table 6).
Each figure is the median of BENCH_SHIMOS_REPEAT runs (default 3).

    bench/table_shimos.py      the section "SHIMOS" of bench/RESULTS.md, results-shimos.json

BENCH_SHIMOS_ENVS=a,b (names below) limits a run to those environments.
"""
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import table2  # noqa: E402
import table_net  # noqa: E402
from report import chosen, fmt, median, not_run_notes, repeat, write_section  # noqa: E402

RING3 = ROOT / "build" / "bin" / "ring3"
IMAGE = ROOT / "build" / "rootfs.img"
CHANNEL = ROOT / "build" / "bench" / "ikc-channel"
SECTION = "# SHIMOS"
REPEAT = int(os.environ.get("BENCH_SHIMOS_REPEAT", "3"))
TIMEOUT = 3600
DD_GIB = 1

# SHIMOS's published figures (its own hardware): Table 4, Table 5, Table 6.
SHIMOS = {"rtt_spin": "2.723", "pps": "1.209", "rtt": "10", "make_total": "206.1 (local 205.8)"}


# ---- the channel alone ----

def run_channel(*args):
    def run():
        p = subprocess.run([str(CHANNEL), *args], capture_output=True, text=True, timeout=600)
        if p.returncode:
            raise RuntimeError(f"ikc-channel ended with {p.returncode}: {p.stderr[-300:]}")
        return {name: float(value) for name, value, _ in (l.split() for l in p.stdout.splitlines())}
    return run


# ---- a disk: O_DIRECT write and read of 1 GiB ----

DD = (f"dd if=/dev/zero of=/dev/vdb bs=1M count={DD_GIB * 1024} oflag=direct 2>&1 | tail -1; "
      f"dd if=/dev/vdb of=/dev/null bs=1M count={DD_GIB * 1024} iflag=direct 2>&1 | tail -1")


def dd_results(output):
    rates = [DD_GIB * 1024 * 1048576 / float(m.group(1)) / 1e6
             for m in map(table2.DD_SECONDS.search, output.splitlines()) if m]
    if len(rates) != 2:
        raise RuntimeError(f"dd did not finish: {output.strip()[-300:]}")
    return {"dd_write": rates[0], "dd_read": rates[1]}


def run_dd(served):
    def run():
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp) / "scratch.img"
            with open(scratch, "wb") as f:
                f.truncate(DD_GIB << 30)
            root = ["--disk", f"{IMAGE},snapshot=on", "--append", "root=/dev/vda"]
            server = None
            disk = ["--disk", str(scratch)]
            if served:
                group = f"shimos-{os.getpid()}"
                server = subprocess.Popen([RING3, "run", "--ikc", group, "--disk",
                                           f"{scratch},export=scratch", "--cmd", "sleep 3600"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          stdin=subprocess.DEVNULL)
                disk = ["--ikc", group, "--disk", "ikc:scratch"]
            try:
                p = subprocess.run([RING3, "run", *root, *disk, "--cmd", DD], capture_output=True,
                                   text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
            finally:
                if server:
                    table2.stop(server)
        if p.returncode:
            raise RuntimeError(f"ring3 ended with {p.returncode}: {(p.stdout + p.stderr)[-300:]}")
        return dd_results(p.stdout)
    return run


def run_build(served):
    run = table2.run_ring3(served=served)

    def build():
        r = run()
        r["make_total"] = r["configure"] + r["make"]
        return r
    return build


# name: (part, column label, run)
ENVS = {
    "channel_ikc": ("channel", "IKC channel", run_channel()),
    "channel_stream": ("channel", "UNIX stream socket", run_channel("--stream")),
    "net_ikc": ("net", "two ring3 on ikc", table_net.run_ring3_pair("ikc")),
    "net_stream": ("net", "two ring3 on a stream", table_net.run_ring3_pair("stream")),
    "net_qemu": ("net", "two QEMU TCG on a stream", table_net.run_qemu_pair),
    "disk_served": ("disk", "served disk (ikc)", run_dd(True)),
    "disk_local": ("disk", "local disk", run_dd(False)),
    "build_served": ("build", "served root (ikc)", run_build(True)),
    "build_local": ("build", "local root", run_build(False)),
}

ROWS = {
    "channel": [("rtt_spin", "us", "round trip, both sides polling (median of 100,000)"),
                ("rtt_sleep", "us", "round trip, both sides asleep until notified"),
                ("pps", "M/s", "64-byte packets one way, 1,000,000 of them")],
    "net": [("rtt", "us", f"ping round trip, median of {table_net.PINGS}"),
            ("tx", "Gbit/s", "TCP, guest to peer (iperf3, 1 stream)"),
            ("rx", "Gbit/s", "TCP, peer to guest (iperf3 -R)")],
    "disk": [("dd_write", "MB/s", f"O_DIRECT write of {DD_GIB} GiB (dd, 1 MiB blocks)"),
             ("dd_read", "MB/s", f"O_DIRECT read of {DD_GIB} GiB (dd, 1 MiB blocks)")],
    "build": [("configure", "s", "`./configure` of GNU patch 2.7.6"),
              ("make", "s", "`make -j1` of GNU patch 2.7.6"),
              ("make_total", "s", "both")],
}
TITLES = {
    "channel": "**The channel alone** (`build/bench/ikc-channel`; SHIMOS's Table 4): two "
               "processes that joined one group as two monitors do, against the same packets "
               "behind a 4-byte length on a UNIX stream socket, the stream backend's transport.",
    "net": "**Two guests** (the Debian root, `snapshot=on`; SHIMOS's Table 5): 192.168.7.2 "
           "measures against 192.168.7.1 with iputils ping and iperf3.",
    "disk": "**A served disk** (SHIMOS's Fig. 15): the Debian root as vda, a 1 GiB scratch "
            "image as vdb, local or served by a second ring3 (`--disk ikc:scratch`).",
    "build": "**GNU patch built on a served root** (SHIMOS's Table 6): the Debian root served by "
             "a second ring3 (`--disk ikc:root`) or the guest's own disk, 1 GiB of memory.",
}


def missing(name):
    if name.startswith("channel") and not CHANNEL.exists():
        return "build/bench/ikc-channel is missing (make bench builds it)"
    if not name.startswith("channel") and not IMAGE.exists():
        return "build/rootfs.img is missing (make rootfs)"
    if name == "net_qemu":
        return table_net.qemu_missing()
    return None


def measure(names):
    record = {}
    for name in names:
        part, label, run = ENVS[name]
        why = missing(name)
        if why:
            record[name] = {"part": part, "label": label, "why": why}
            print(f"table_shimos: {label}: not run: {why}", file=sys.stderr)
            continue
        runs, errors = repeat("table_shimos", label, run, REPEAT)
        record[name] = {"part": part, "label": label, "runs": runs, "errors": errors}
    return record


def table(record, part):
    names = [n for n in record if record[n]["part"] == part]
    if not names:
        return []
    shimos = part in ("channel", "net", "build")
    lines = ["| figure | unit | " + " | ".join(record[n]["label"] for n in names) +
             (" | SHIMOS (published) |" if shimos else " |"),
             "|---|---|" + "---|" * (len(names) + shimos)]
    for row, unit, label in ROWS[part]:
        cells = []
        for n in names:
            values = [r[row] for r in record[n].get("runs", []) if row in r]
            cells.append(f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"
                         if values else "not run" if "why" in record[n] else "failed")
        extra = [SHIMOS.get(row, "")] if shimos else []
        lines.append(f"| {label} | {unit} | " + " | ".join(cells + extra) + " |")
    return ["", TITLES[part], ""] + lines


def verdict(ok):
    return "met" if ok else "not met"


def targets(record):
    lines = []
    rtt, pps = median(record, "channel_ikc", "rtt_spin"), median(record, "channel_ikc", "pps")
    if rtt and pps:
        lines.append(f"- the channel: round trip under SHIMOS's 2.7 us and over its 1.2 million "
                     f"packets per second: {rtt:.3g} us, {pps:.3g} M/s, "
                     f"{verdict(rtt < 2.723 and pps > 1.209)}")
    ping = median(record, "net_ikc", "rtt")
    if ping:
        lines.append(f"- ping between two guests at most SHIMOS's 10 us: {ping:.0f} us, "
                     f"{verdict(ping <= 10)}")
    tx, base = median(record, "net_ikc", "tx"), median(record, "net_stream", "tx")
    if tx and base:
        lines.append(f"- TCP between two guests at least 4× the stream backend's: {tx:.2f} "
                     f"against {base:.2f} Gbit/s ({tx / base:.1f}×), {verdict(tx >= 4 * base)}")
    served, local = median(record, "build_served", "make_total"), median(record, "build_local", "make_total")
    if served and local:
        lines.append(f"- the GNU patch build on a served root within 2% of a local root: "
                     f"{served:.1f} s against {local:.1f} s ({(served / local - 1) * 100:+.1f}%), "
                     f"{verdict(served <= 1.02 * local)}")
    return lines


def markdown(record, started):
    lines = [SECTION + ": several ring3 on one host, sharing devices through the IKC channel", "",
             f"Generated by `make bench` (bench/table_shimos.py) on {started}. Each cell: median "
             f"of {REPEAT} runs (min–max). SHIMOS's figures are its own published ones, on its "
             "own hardware (two kernels on one 2008 machine), for scale."]
    for part in ROWS:
        lines += table(record, part)
    lines += ["", "Targets (measured, not asserted):", ""] + (targets(record) or ["(none run)"])
    lines += not_run_notes(record, record)
    return "\n".join(lines) + "\n"


def main():
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    names = chosen("table_shimos", "BENCH_SHIMOS_ENVS", ENVS, ",".join(ENVS))
    t0 = time.monotonic()
    record = measure(names)
    (BENCH / "results-shimos.json").write_text(json.dumps(record, indent=1) + "\n")
    write_section(SECTION, markdown(record, started))
    print(markdown(record, started))
    print(f"table_shimos: {time.monotonic() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()

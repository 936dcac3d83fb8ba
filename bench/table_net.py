#!/usr/bin/python3
"""`make bench`, the network table: TCP throughput (iperf3, one stream, both directions) and
ping round trips, measured in one run for
  - user-mode networking (libslirp) between the guest and the host: ring3 in both isolation
    modes and QEMU TCG (each the Debian root of `make rootfs`, iperf3 and iputils ping in it,
    the host's iperf3 server at 10.0.2.2), beside the host's own loopback;
  - two guests joined by QEMU's stream protocol on a UNIX socket: two ring3 (--net stream),
    and two QEMU TCG (-netdev stream). bench/table_shimos.py puts two ring3 on an IKC switch
    beside them (run_ring3_pair("ikc")).
Each figure is the median of BENCH_NET_REPEAT runs (default 3), each in freshly booted guests;
the round trip is the median of PINGS pings within one run.

    bench/table_net.py          the section "Network" of bench/RESULTS.md (after Table 2), and
                                bench/results-net.json
    bench/table_net.py --quick  ring3 only, short measurements, nothing written: the harness's
                                smoke test (tests/test_bench.py)

BENCH_NET_ENVS=native,ring3 (names below) limits a run to those environments.
"""
import datetime
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "tools"))
import qemu_guest  # noqa: E402
from report import chosen, fmt, median, not_run_notes, repeat, write_section  # noqa: E402

RING3 = ROOT / "build" / "bin" / "ring3"
IMAGE = ROOT / "build" / "rootfs.img"
SECTION = "# Network"
TIMEOUT = 900
QUICK = "--quick" in sys.argv[1:]
REPEAT = 1 if QUICK else int(os.environ.get("BENCH_NET_REPEAT", "3"))
SECONDS = 2 if QUICK else 10            # each iperf3 direction
PINGS = 20 if QUICK else 1000
PING_INTERVAL = 0.01                    # s (root in the guest and, natively, here)

ROWS = [("tx", "Gbit/s", "TCP, guest to peer (iperf3, 1 stream)"),
        ("rx", "Gbit/s", "TCP, peer to guest (iperf3 -R)"),
        ("rtt", "us", f"ping round trip, median of {PINGS}")]

IPERF = re.compile(r"([0-9.]+) Mbits/sec\s+(?:\d+\s+)?receiver")
PING = re.compile(r"time=([0-9.]+) ms")


def measure_script(peer, port):
    """What the measuring side runs: the pings, then both iperf3 directions, each marked
    (a second apart: a peer guest's iperf3 server takes one test at a time)."""
    return (f"echo PING; ping -n -c {PINGS} -i {PING_INTERVAL} {peer} | grep time=; "
            f"echo TX; iperf3 -f m -c {peer} -p {port} -t {SECONDS} | grep receiver; sleep 1; "
            f"echo RX; iperf3 -f m -R -c {peer} -p {port} -t {SECONDS} | grep receiver")


def results(output):
    """{tx, rx (Gbit/s), rtt (us)} from measure_script's output; RuntimeError when a part is
    missing."""
    parts = re.split(r"^(TX|RX|PING)\r?$", output, flags=re.M)
    found = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in ("TX", "RX"):
            m = IPERF.search(body)
            if m:
                found[name.lower()] = float(m.group(1)) / 1000
        else:
            times = [float(t) for t in PING.findall(body)]
            if len(times) >= PINGS * 0.9:
                found["rtt"] = statistics.median(times) * 1000
    if len(found) != 3:
        raise RuntimeError(f"missing {sorted({'tx', 'rx', 'rtt'} - set(found))}: "
                           f"{output.strip()[-400:]}")
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HostIperf:
    """The host's iperf3 server on 127.0.0.1, for the guests at 10.0.2.2 and for native."""
    def __enter__(self):
        self.port = free_port()
        self.p = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(self.port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()


def ring3_cmd(command, *options):
    return [RING3, "run", *options, "--disk", f"{IMAGE},snapshot=on", "--append", "root=/dev/vda",
            "--cmd", command]


def check(p, what):
    if p.returncode:
        raise RuntimeError(f"{what} ended with {p.returncode}: {(p.stdout + p.stderr)[-300:]}")
    return p.stdout


# ---- user-mode networking: guest and host ----

def run_native():
    with HostIperf() as server:
        p = subprocess.run(["sh", "-c", measure_script("127.0.0.1", server.port)],
                           capture_output=True, text=True, timeout=TIMEOUT)
    return results(check(p, "native"))


def run_ring3_user(*options):
    def run():
        with HostIperf() as server:
            p = subprocess.run(ring3_cmd(measure_script("10.0.2.2", server.port), *options),
                               capture_output=True, text=True, timeout=TIMEOUT,
                               stdin=subprocess.DEVNULL)
        return results(check(p, "ring3"))
    return run


def run_qemu_user():
    with HostIperf() as server:
        r = qemu_guest.run(measure_script("10.0.2.2", server.port), "tcg", TIMEOUT, disk=IMAGE)
    if r.status:
        raise RuntimeError(f"the guest's command ended with {r.status}: {r.output[-300:]}")
    return results(r.output)


# ---- two guests on a stream ----

LAN = "ip addr add 192.168.7.{}/24 dev eth0"
# The serving guest: iperf3's server for the two tests of measure_script, then it ends.
SERVE = f"{LAN.format(1)}; iperf3 -s -1 >/dev/null; iperf3 -s -1 >/dev/null"
SERVE_TIMEOUT = 400         # s: a QEMU that serves is ended by then whatever happened
WAIT = "until ping -c 1 -W 1 192.168.7.1 >/dev/null; do :; done; sleep 1"


def measuring_side():
    return f"{LAN.format(2)}; {WAIT}; {measure_script('192.168.7.1', 5201)}"


def wait_for(path, proc, what):
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} never listened on its socket")
        time.sleep(0.05)


def run_ring3_pair(backend, *options):
    """Two ring3 on a stream (backend "stream") or on an IKC group's switch ("ikc")."""
    def run():
        with tempfile.TemporaryDirectory() as tmp:
            sock = f"{tmp}/lan.sock"
            group = f"bench{os.getpid()}"
            serve, measure = ((f"stream,path={sock},server=on", f"stream,path={sock}")
                              if backend == "stream" else (f"ikc,group={group}",) * 2)
            server = subprocess.Popen(ring3_cmd(SERVE, *options, "--net", serve),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, text=True)
            try:
                if backend == "stream":
                    wait_for(sock, server, "the serving ring3")
                p = subprocess.run(ring3_cmd(measuring_side(), *options, "--net", measure),
                                   capture_output=True, text=True, timeout=TIMEOUT,
                                   stdin=subprocess.DEVNULL)
                server.wait(timeout=120)
            finally:
                server.kill()
        return results(check(p, "ring3"))
    return run


def run_qemu_pair():
    with tempfile.TemporaryDirectory() as tmp:
        sock = f"{tmp}/lan.sock"
        served = {}

        def serve():
            try:
                served["r"] = qemu_guest.run(SERVE, "tcg", SERVE_TIMEOUT, disk=IMAGE, nic=[
                    "-netdev", f"stream,id=lan,server=on,addr.type=unix,addr.path={sock}",
                    "-device", "virtio-net-pci,netdev=lan"])
            except RuntimeError as e:
                served["error"] = e
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        deadline = time.monotonic() + 60
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.05)
        r = qemu_guest.run(measuring_side(), "tcg", TIMEOUT, disk=IMAGE, nic=[
            "-netdev", f"stream,id=lan,server=off,addr.type=unix,addr.path={sock}",
            "-device", "virtio-net-pci,netdev=lan"])
        t.join(timeout=120)
    if r.status:
        raise RuntimeError(f"the guest's command ended with {r.status}: {r.output[-300:]}")
    return results(r.output)


def qemu_missing():
    if not shutil.which("qemu-system-i386"):
        return "qemu-system-i386 is not installed"
    if not qemu_guest.KERNEL.exists():
        return "build/guest/bzImage-plain is missing (make guest-kernel-plain)"
    return None


# name: (group, row label, run, None or a function saying why it cannot run here)
ENVS = {
    "native": ("user", "native (loopback)", run_native, None),
    "ring3": ("user", "ring3", run_ring3_user(), None),
    "ring3_none": ("user", "ring3 isolation=none", run_ring3_user("--isolation", "none"), None),
    "qemu_tcg": ("user", "QEMU TCG", run_qemu_user, qemu_missing),
    "qemu_tcg_pair": ("stream", "two QEMU TCG", run_qemu_pair, qemu_missing),
    "ring3_pair": ("stream", "two ring3", run_ring3_pair("stream"), None),
    "ring3_none_pair": ("stream", "two ring3 isolation=none",
                        run_ring3_pair("stream", "--isolation", "none"), None),
}


def measure(names):
    record = {}
    for name in names:
        group, label, run, missing = ENVS[name]
        why = missing() if missing else None
        if why is None and name != "native" and not IMAGE.exists():
            why = "build/rootfs.img is missing (make rootfs)"
        if why is None and not shutil.which("iperf3"):
            why = "the host has no iperf3"
        if why:
            record[name] = {"group": group, "label": label, "why": why}
            print(f"table_net: {label}: not run: {why}", file=sys.stderr)
            continue
        runs, errors = repeat("table_net", label, run, REPEAT)
        record[name] = {"group": group, "label": label, "runs": runs, "errors": errors}
    return record


def table(record, names, base):
    lines = ["| figure | unit | " + " | ".join(record[n]["label"] for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for row, unit, label in ROWS:
        cells = []
        for n in names:
            values = [r[row] for r in record[n].get("runs", []) if row in r]
            if not values:
                cells.append("not run" if "why" in record[n] else "failed")
                continue
            med = statistics.median(values)
            cell = f"{fmt(med)} ({fmt(min(values))}–{fmt(max(values))})"
            ref = median(record, base, row)
            if ref and n != base:
                # above 1× is better than the reference for throughput, worse for the round trip
                cell += f" **{med / ref:.2f}×**"
            cells.append(cell)
        lines.append(f"| {label} | {unit} | " + " | ".join(cells) + " |")
    return lines


def targets(record):
    lines = []
    tcg_tx = median(record, "qemu_tcg", "tx")
    tcg_rtt = median(record, "qemu_tcg", "rtt")
    for n in ("ring3", "ring3_none"):
        tx, rtt = median(record, n, "tx"), median(record, n, "rtt")
        label = record.get(n, {}).get("label", n)
        if tx:
            ok = tx >= 1 and (tcg_tx is None or tx >= 3 * tcg_tx)
            against = f", {tx / tcg_tx:.1f}× QEMU TCG's {tcg_tx:.2f}" if tcg_tx else ""
            lines.append(f"- {label}: guest to host through `user` at least 1 Gbit/s and 3× QEMU "
                         f"TCG's: {tx:.2f} Gbit/s{against}, {'met' if ok else 'not met'}")
        if rtt and tcg_rtt:
            lines.append(f"- {label}: round trip no higher than QEMU TCG's: {rtt:.0f} us against "
                         f"{tcg_rtt:.0f} us, {'met' if rtt <= tcg_rtt else 'not met'}")
    for n in ("ring3_pair", "ring3_none_pair"):
        tx = median(record, n, "tx")
        if tx:
            lines.append(f"- {record[n]['label']}: at least 3 Gbit/s between two guests on a "
                         f"stream: {tx:.2f} Gbit/s, {'met' if tx >= 3 else 'not met'}")
    return lines


def markdown(record, started):
    user = [n for n in record if record[n]["group"] == "user"]
    pair = [n for n in record if record[n]["group"] == "stream"]
    lines = [SECTION + ": TCP and ping through the guest's NIC", "",
             f"Generated by `make bench` (bench/table_net.py) on {started}. The guests are the "
             "Debian 12 i386 root of `make rootfs` (`snapshot=on`, 256 MiB) with its iperf3 "
             f"and iputils ping; each run boots them afresh. Each backend's default MTU: "
             "65520 on ring3's `user` (1500 on QEMU's), 1500 on a stream. iperf3: one TCP stream for "
             f"{SECONDS} s each way, the receiver's rate. Ping: {PINGS} echoes "
             f"{PING_INTERVAL * 1000:g} ms apart, their median. Each cell: median of {REPEAT} "
             "runs (min–max), then in bold the ratio to the first column (throughput: above "
             "1× is faster; round trip: above 1× is slower).", "",
             "**User-mode networking (libslirp), guest and host.** The peer is the host's "
             "iperf3 server through 10.0.2.2; natively, the same over loopback.", ""]
    lines += table(record, user, user[0]) if user else ["(not run)"]
    lines += ["", "**Two guests on one stream** (QEMU's `-netdev stream` protocol over a UNIX "
              "socket): 192.168.7.2 measures against 192.168.7.1. The SHIMOS section puts two "
              "guests on an IKC switch beside them.", ""]
    lines += table(record, pair, pair[0]) if pair else ["(not run)"]
    lines += ["", "Targets (measured, not asserted):", ""] + (targets(record) or ["(none run)"])
    lines += not_run_notes(record, record)
    return "\n".join(lines) + "\n"


def main():
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    default = "ring3" if QUICK else ",".join(ENVS)
    names = chosen("table_net", "BENCH_NET_ENVS", ENVS, default)
    record = measure(names)
    if QUICK:
        failed = [n for n in names if not record[n].get("runs")]
        print(json.dumps(record, indent=1))
        sys.exit(1 if failed else 0)
    (BENCH / "results-net.json").write_text(json.dumps(record, indent=1) + "\n")
    write_section(SECTION, markdown(record, started))
    print(markdown(record, started))


if __name__ == "__main__":
    main()

"""bench/table.py, the harness of `make bench`: its parsing, statistics, calibration and table,
on made-up outputs; and bench-quick, each benchmark program once on each ring3 mode."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import table  # noqa: E402


def test_parse_takes_result_lines_among_console_noise():
    out = "[ 1.2] some kernel line\nRESULT getpid_libc 0.512 us\r\nRESULT getpid_raw 2 us\nbye\n"
    assert table.parse(out, "getpid") == {"getpid_libc": 0.512, "getpid_raw": 2.0}


@pytest.mark.parametrize("out", [
    "RESULT getpid_libc 0.5 us\n",                              # a result missing
    "RESULT getpid_libc 0.5 us\nRESULT getpid_raw 1 ms\n",      # wrong unit
    "RESULT getpid_libc 0.5 us\nRESULT getpid_raw 0 us\n",      # not positive
    "RESULT getpid_libc nan us\nRESULT getpid_raw 1 us\n",      # not finite
    "RESULT getpid_libc 1 us\nRESULT getpid_libc 1 us\nRESULT getpid_raw 1 us\n",
    "FAIL getpid: libc call 3 did not return 1\nRESULT getpid_libc 1 us\nRESULT getpid_raw 1 us\n",
])
def test_parse_refuses_what_is_not_a_clean_result(out):
    with pytest.raises(ValueError):
        table.parse(out, "getpid")


def test_summary_and_ratio():
    assert table.summary([3, 1, 2, 5, 4]) == {"median": 3, "min": 1, "max": 5}
    assert table.ratio(6.0, 2.0) == 3.0
    assert table.ratio(None, 2.0) is None and table.ratio(1.0, None) is None


class FakeEnv:
    """An environment whose getpid costs (cost) us per call on each of its two paths."""
    NAME = "fake"

    def __init__(self, cost):
        self.cost, self.counts = cost, []

    def run(self, argv, timeout):
        self.counts.append(int(argv[1]))
        return f"RESULT getpid_libc {self.cost} us\nRESULT getpid_raw {self.cost} us\n"


@pytest.mark.parametrize("cost", [0.01, 1.0, 500.0, 5e5])
def test_calibrate_aims_at_the_target_work(cost, monkeypatch):
    monkeypatch.setattr(table, "TARGET", 1.0)
    env = FakeEnv(cost)
    count = table.calibrate(env, "getpid", 10)
    assert count >= 1 and len(env.counts) <= 4
    if cost < 5e5:      # the slowest still runs once: one iteration is already 1 s of work
        assert 0.5 <= table.work_seconds("getpid", {"getpid_libc": cost, "getpid_raw": cost},
                                         count) <= 2
    # the first run is short however slow the environment (its starting count)
    assert env.counts[0] == table.PROGRAMS["getpid"][0]


class FakeGuest:
    """An environment where every result of every program costs 1 of its unit; (broken) names a
    program that fails from its (broken_at + 1)th run on. Every run goes into (log)."""

    def __init__(self, log, name, reason=None, broken=None, broken_at=0):
        self.log, self.NAME, self.reason = log, name, reason
        self.broken, self.broken_at = broken, broken_at

    def prepare(self):
        return self.reason

    def run(self, argv, timeout):
        self.log.append((self.NAME, argv[0]))
        if argv[0] == self.broken and self.log.count((self.NAME, argv[0])) > self.broken_at:
            raise RuntimeError(f"{argv[0]} crashed")
        return "".join(f"RESULT {name} 1 {unit}\n" for name, unit, _ in table.PROGRAMS[argv[0]][1])

    def boot_seconds(self):
        return 0.5


def test_measure_takes_turns_and_keeps_failures_apart(monkeypatch):
    monkeypatch.setattr(table, "REPEAT", 3)
    monkeypatch.setattr(table, "TARGET", 1e-9)      # one calibration run per program
    log, programs = [], list(table.PROGRAMS)
    envs = {"a": FakeGuest(log, "A", broken="fork", broken_at=2), "b": FakeGuest(log, "B"),
            "c": FakeGuest(log, "C", reason="not here")}
    a, b, c = table.measure(envs)
    assert c["reason"] == "not here" and not c["figures"]
    assert set(b["figures"]) == {r[0] for r in table.ROWS} and not b["errors"]
    assert all(len(f["values"]) == 3 for f in b["figures"].values())
    # fork passed calibration and its first round, then failed: no figure, its reason instead
    assert "fork" not in a["figures"] and a["errors"] == {"fork": "fork crashed"}
    # calibration, then rounds in which the environments take turns
    turn = lambda env, skip=(): [(env, p) for p in programs if p not in skip]   # noqa: E731
    assert log == (turn("A") + turn("B")) * 3 + turn("A", ["fork"]) + turn("B")


def test_markdown_has_ratios_and_says_why_a_row_is_missing():
    fig = lambda *v: {"unit": "us", "count": 10, "values": list(v)}   # noqa: E731
    results = {"machine": {"cpu": "Some CPU", "cores": 2, "kernel": "6.1", "date": "today"},
               "repeat": 3, "target_seconds": 1.0, "environments": [
                   {"module": "native", "name": "native", "reason": None,
                    "figures": {"getpid_libc": fig(1, 2, 3)}, "errors": {}},
                   {"module": "ring3", "name": "ring3", "reason": None,
                    "figures": {"getpid_libc": fig(4, 6, 9)}, "errors": {"fork": "it broke"}},
                   {"module": "qemu_kvm", "name": "QEMU KVM", "reason": "no /dev/kvm",
                    "figures": {}, "errors": {}}]}
    md = table.markdown(results)
    row = next(l for l in md.splitlines() if l.startswith("| getpid through libc"))
    assert row.split(" | ")[2:] == ["2 (1–3)", "6 (4–9) **3×**", "unavailable |"]
    assert "**QEMU KVM** unavailable: no /dev/kvm" in md
    assert "**ring3**, fork: it broke" in md and "Some CPU, 2 cores" in md


def test_targets_say_met_or_not():
    fig = lambda v: {"unit": "us", "count": 1, "values": [v]}   # noqa: E731
    env = lambda module, **rows: {"module": module, "name": module, "reason": None,  # noqa: E731
                                  "errors": {}, "figures": {r: fig(v) for r, v in rows.items()}}
    goals = table.targets([env("native", loop=1.0, fork=1.0, pipesw=1.0, forkexec=1.0, mmap=1.0),
                           env("ring3", loop=1.01, fork=4.0, pipesw=3.0, getpid_libc=0.9, forkexec=2.0,
                               mmap=9.0),
                           env("ring3_none", loop=1.0, fork=1.5, pipesw=2.0, getpid_libc=0.3),
                           env("qemu_tcg", loop=5.0, fork=2.0, mmap=10.0)])
    assert goals == ["- default mode: `getpid` under 0.8 us: 0.9 us through libc, not met",
                     "- default mode: `fork` within 3× native: 4× native, not met",
                     "- default mode: `forkexec` within 2.5× native: 2× native, met",
                     "- default mode: `mmap` within 3× native: 9× native, not met",
                     "- `--isolation=none`: `getpid` under 0.4 us: 0.3 us through libc, met",
                     "- default mode: `loop` within 2% of native: 1.01× native, met",
                     "- default mode: every benchmark faster than QEMU TCG: not met; slower in fork",
                     "- `--isolation=none`: `loop` within 2% of native: 1× native, met",
                     "- `--isolation=none`: every benchmark faster than QEMU TCG: met"]


@pytest.mark.skipif(not (ROOT / "build" / "bench" / "programs" / "i386" / "loop").exists(),
                    reason="make bench-programs builds them")
def test_bench_quick():
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "table.py"), "--quick"],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"all {len(table.PROGRAMS)} programs ran on {', '.join(table.QUICK_ENVS)}" in p.stdout
    assert set(table.QUICK_ENVS) == {"ring3", "ring3_none", "ring3_sysemu"}


# ---- bench/table_net.py, the network table ----

import table_net  # noqa: E402


def test_net_results_parse_iperf3_and_ping():
    pings = "".join(f"64 bytes from 10.0.2.2: icmp_seq={i} ttl=255 time=0.{i % 5 + 1}00 ms\n"
                    for i in range(table_net.PINGS))
    out = ("noise\nTX\n[  5]   0.00-10.00  sec  1.26 GBytes  1080 Mbits/sec                  receiver\n"
           "RX\r\n[  5]   0.00-10.00  sec  5.7 GBytes  4900 Mbits/sec    0             receiver\n"
           "PING\n" + pings)
    assert table_net.results(out) == {"tx": 1.08, "rx": 4.9, "rtt": 300.0}


def test_net_results_refuse_a_missing_part():
    with pytest.raises(RuntimeError, match="missing"):
        table_net.results("TX\n[  5]   0.00-10.00  sec  1 GBytes  1080 Mbits/sec  receiver\nRX\nPING\n")


@pytest.mark.skipif(not (ROOT / "build" / "rootfs.img").exists(), reason="make rootfs builds it")
def test_net_bench_quick():
    """ring3 in the Debian root against the host's iperf3 and ping, briefly: the harness runs."""
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "table_net.py"), "--quick"],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr


# ---- bench/table_shimos.py, the SHIMOS table ----

import table_shimos  # noqa: E402


@pytest.mark.parametrize("transport", [[], ["--stream"]])
def test_ikc_channel_bench_quick(transport):
    """The channel alone (and the stream socket it is compared with), briefly: both round trips
    and the packet rate come out, positive; the table shows them beside SHIMOS's."""
    found = table_shimos.run_channel(*transport, "1000", "10000")()
    assert set(found) == {"rtt_spin", "rtt_sleep", "pps"} and min(found.values()) > 0, found
    record = {"channel_ikc": {"part": "channel", "label": "IKC channel", "runs": [found]}}
    md = table_shimos.markdown(record, "now")
    assert "| 2.723 |" in md and "- the channel: round trip" in md, md


def test_shimos_dd_results_parse_both_rates():
    out = ("1024+0 records out\n1073741824 bytes (1.1 GB, 1.0 GiB) copied, 2.0 s, 537 MB/s\n"
           "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.0 s, 1.1 GB/s\n")
    assert table_shimos.dd_results(out) == {"dd_write": 1073741824 / 2 / 1e6,
                                            "dd_read": 1073741824 / 1e6}
    with pytest.raises(RuntimeError):
        table_shimos.dd_results("dd: error writing '/dev/vdb'\n")

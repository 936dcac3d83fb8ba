#!/usr/bin/env python3
"""Per-event costs of ring3 against QEMU (TCG), from one run of both.

Each event kind of bench/events.c runs with count=0 and count=N, REPEAT
times each, under `ring3 run` and under `qemu-system-i386 -accel tcg`; the
cost of one event is (median(N) - median(0)) / N, so start-up is excluded.
Medians, because these machines are shared and noisy. The table gives both
costs and their ratio (QEMU / ring3: above 1 means ring3 is faster).
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
RING3 = os.path.join(BUILD, "bin", "ring3")
EVENTS = {0: ("clisti", "cli + sti pair", 2_000_000),
          1: ("gate", "gate round trip (mov from %cr0)", 200_000),
          2: ("softint", "int $0x30 + iret through the IDT", 200_000)}
IRQ_WORK = 300_000_000       # steps of the computation the PIT interrupts (event 3, 4 without)
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
QEMU = ["qemu-system-i386", "-accel", "tcg", "-m", "64", "-display", "none", "-monitor", "none",
        "-serial", "stdio", "-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]


def timed(cmd, out=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    elapsed = time.perf_counter() - t
    if b"done" not in r.stdout:
        sys.exit(f"bench: {' '.join(cmd)} failed: {r.stdout[-300:]!r} {r.stderr[-300:]!r}")
    if out is not None:
        out.append(int(r.stdout.split(b" irqs ")[1].split()[0]))
    return elapsed


def per_irq(make_cmd):
    """Cost of one injected interrupt: the slowdown of a computation, per interrupt taken."""
    irqs = []
    with_irq = statistics.median(timed(make_cmd(f"event=3 count={IRQ_WORK}"), irqs)
                                 for _ in range(REPEAT))
    without = statistics.median(timed(make_cmd(f"event=4 count={IRQ_WORK}")) for _ in range(REPEAT))
    return (with_irq - without) / statistics.median(irqs), statistics.median(irqs)


def per_event(make_cmd, kind, n):
    zero = statistics.median(timed(make_cmd(f"event={kind} count=0")) for _ in range(REPEAT))
    full = statistics.median(timed(make_cmd(f"event={kind} count={n}")) for _ in range(REPEAT))
    return (full - zero) / n


def main():
    ring3_elf = os.path.join(BUILD, "bench", "ring3", "events.elf")
    plain_elf = os.path.join(BUILD, "bench", "plain", "events.elf")
    ring3 = lambda a: [RING3, "run", "--append", a, ring3_elf]          # noqa: E731
    qemu = lambda a: QEMU + ["-kernel", plain_elf, "-append", a]         # noqa: E731
    print(f"{'event':<40} {'ring3':>12} {'qemu-tcg':>12} {'qemu/ring3':>11}")
    for kind, (name, what, n) in EVENTS.items():
        r = per_event(ring3, kind, n)
        q = per_event(qemu, kind, n)
        print(f"{what:<40} {r * 1e9:>9.0f} ns {q * 1e9:>9.0f} ns {q / r:>10.2f}x", flush=True)
    (r, rn), (q, qn) = per_irq(ring3), per_irq(qemu)
    what = "PIT interrupt injected + iret"
    print(f"{what:<40} {r * 1e9:>9.0f} ns {q * 1e9:>9.0f} ns {q / r:>10.2f}x", flush=True)
    print(f"(median of {REPEAT} runs each; per event = (t(N) - t(0)) / N; interrupts: slowdown of "
          f"{IRQ_WORK} steps / interrupts taken ({rn} ring3, {qn} qemu))")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""`make bench`, Table 2 (the paper's second table): GNU patch 2.7.6 built inside the guest's
Debian 12 i386 root (build/rootfs.img, make rootfs), `./configure` and `make -j1` timed apart,
beside the same build natively; and a sequential read of 256 MiB from the guest's virtio disk
beside the host's read of the same file. Every figure is the median of BENCH_T2_REPEAT runs
(default 3), each in a freshly booted guest.

    bench/table2.py     the section "Table 2" of bench/RESULTS.md (the rest of the file is
                        bench/table.py's), and bench/results-table2.json

BENCH_T2_ENVS=native,ring3 (names below) limits a run to those environments.
"""
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "tools"))
import qemu_guest  # noqa: E402
from report import chosen, fmt, median, not_run_notes, repeat, write_section  # noqa: E402

RING3 = ROOT / "build" / "bin" / "ring3"
IMAGE = ROOT / "build" / "rootfs.img"
TREE = ROOT / "build" / "rootfs" / "tree"
TARBALL = "/usr/src/patch-2.7.6.tar.xz"     # inside the root (rootfs/build.sh puts it there)
MEMORY = "1G"                               # room for the read's 256 MiB of page cache
REPEAT = int(os.environ.get("BENCH_T2_REPEAT", "3"))
TIMEOUT = 3600
SECTION = "# Table 2"

# The same script runs natively (in a chroot of the same root) and in each guest. The build
# goes on the root's disk, in a directory of its own.
BUILD = f"""set -e
d=$(mktemp -d /root/table2.XXXXXX)
cd "$d" && tar xf {TARBALL} && cd patch-2.7.6
now() {{ date +%s.%N; }}
t0=$(now); ./configure > ../configure.log 2>&1; t1=$(now)
make -j1 > ../make.log 2>&1; t2=$(now)
./src/patch --version | head -1
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {{ printf "RESULT configure %.3f\\nRESULT make %.3f\\n", b - a, c - b }}'
cd / && rm -rf "$d"
"""
# The guest's read: its page cache emptied first, then the disk itself from its start.
READ = """sync; echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/vda of=/dev/null bs=1M count=256 2>&1 | tail -1
"""
DD_SECONDS = re.compile(r"copied, ([0-9.]+) s,")

ROWS = [("configure", "s", "`./configure` of GNU patch 2.7.6"),
        ("make", "s", "`make -j1` of GNU patch 2.7.6"),
        ("read", "MB/s", "sequential read of 256 MiB from the disk (dd, cache dropped)")]


def results(output):
    """{row: value} from one run's output; RuntimeError unless the build's rows are there."""
    found = {}
    for line in output.splitlines():
        m = re.match(r"RESULT (configure|make) ([0-9.]+)$", line.strip())
        if m:
            found[m.group(1)] = float(m.group(2))
        m = DD_SECONDS.search(line)
        if m:
            found["read"] = 256 * 1048576 / float(m.group(1)) / 1e6
    if "configure" not in found or "make" not in found or "GNU patch 2.7.6" not in output:
        raise RuntimeError(f"the build did not finish: {output.strip()[-400:]}")
    return found


def host_read():
    """The host's sequential read of the image's first 256 MiB, from its page cache (read
    once before, so that the host's disk does not count)."""
    cmd = ["dd", f"if={IMAGE}", "of=/dev/null", "bs=1M", "count=256"]
    subprocess.run(cmd, capture_output=True, check=True)
    err = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    return 256 * 1048576 / float(DD_SECONDS.search(err).group(1)) / 1e6


def native_how():
    """How the native build runs: a chroot into the same root when this process may make one
    (root), else a user-namespace chroot where the host allows one, else None."""
    if os.geteuid() == 0:
        return ["chroot", str(TREE)], "a chroot into the same i386 root (build/rootfs/tree)"
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "chroot", str(TREE), "true"],
                           capture_output=True)
    if probe.returncode == 0:
        return (["unshare", "--user", "--map-root-user", "chroot", str(TREE)],
                "a user-namespace chroot into the same i386 root (build/rootfs/tree)")
    return None, None


def run_native():
    prefix, _ = native_how()
    if prefix is None:
        raise RuntimeError("no chroot possible here (not root, no user namespaces)")
    p = subprocess.run([*prefix, "/bin/sh", "-c", BUILD], capture_output=True, text=True,
                       timeout=TIMEOUT, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                             "HOME": "/root", "LC_ALL": "C"})
    if p.returncode:
        raise RuntimeError(f"native build ended with {p.returncode}: {p.stderr[-300:]}")
    found = results(p.stdout)
    found["read"] = host_read()
    return found


def stop(server):
    """End a serving ring3 as a user would (SIGTERM): it leaves its IKC group, and the last
    member out removes the group's shared object."""
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def run_ring3(*options, served=False):
    """ring3 on its own disk, or (served) on the same image served by a second ring3 of an IKC
    group (SHIMOS's virtual block device: bench/table_shimos.py, its Table 6)."""
    def run():
        disk = ["--disk", f"{IMAGE},snapshot=on"]
        server = None
        if served:
            group = f"table2-{os.getpid()}"
            server = subprocess.Popen([RING3, "run", "--ikc", group, "--disk",
                                       f"{IMAGE},snapshot=on,export=root", "--cmd", "sleep 3600"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, text=True)
            disk = ["--ikc", group, "--disk", "ikc:root"]
        try:
            p = subprocess.run([RING3, "run", "-m", MEMORY, *options, *disk,
                                "--append", "root=/dev/vda", "--cmd", READ + BUILD],
                               capture_output=True, text=True, timeout=TIMEOUT,
                               stdin=subprocess.DEVNULL)
        finally:
            if server:
                stop(server)
        if p.returncode:
            raise RuntimeError(f"ring3 ended with {p.returncode}: {(p.stdout + p.stderr)[-300:]}")
        return results(p.stdout)
    return run


def run_qemu(accel):
    def run():
        r = qemu_guest.run(READ + BUILD, accel, TIMEOUT, disk=IMAGE, memory=MEMORY)
        if r.status:
            raise RuntimeError(f"the build ended with {r.status}: {r.output[-300:]}")
        return results(r.output)
    return run


def qemu_missing(accel):
    if not shutil.which("qemu-system-i386"):
        return "qemu-system-i386 is not installed"
    if not qemu_guest.KERNEL.exists():
        return "build/guest/bzImage-plain is missing (make guest-kernel-plain)"
    if accel == "kvm":
        # Table 1's probe: one short boot, since a nested /dev/kvm may open and still hang.
        from envs import qemu_kvm
        return qemu_kvm.prepare()
    return None


# name: (row label, run, None or a function saying why it cannot run here, or None)
ENVS = {
    "native": ("native", run_native, None),
    "ring3": ("ring3", run_ring3(), None),
    "ring3_none": ("ring3 isolation=none", run_ring3("--isolation", "none"), None),
    "ring3_sysemu": ("ring3 syscalls=sysemu", run_ring3("--syscalls", "sysemu"), None),
    "ring3_spread": ("ring3 placement=spread", run_ring3("--placement", "spread"), None),
    "qemu_tcg": ("QEMU TCG", run_qemu("tcg"), lambda: qemu_missing("tcg")),
    "qemu_kvm": ("QEMU KVM", run_qemu("kvm"), lambda: qemu_missing("kvm")),
    "uml": ("User Mode Linux", None, lambda: "the benchmark's UML is an x86-64 kernel "
            "(bench/envs/uml.py), which cannot run this i386 root"),
}


def measure(names):
    record = {}
    for name in names:
        label, run, check = ENVS[name]
        why = check() if check else None
        if why is None and not IMAGE.exists():
            why = "build/rootfs.img is missing (make rootfs)"
        if why:
            record[name] = {"label": label, "why": why}
            print(f"table2: {label}: not run: {why}", file=sys.stderr)
            continue
        runs, errors = repeat("table2", label, run, REPEAT)
        record[name] = {"label": label, "runs": runs, "errors": errors}
    return record


def markdown(record, started):
    _, how = native_how()
    names = list(record)
    lines = [SECTION + ": GNU patch built inside the guest", "",
             f"Generated by `make bench` (bench/table2.py) on {started}. The guest is the "
             "Debian 12 i386 root of `make rootfs` on a virtio disk (`snapshot=on`), with "
             f"{MEMORY} of memory; each run boots it afresh. Native is {how or 'not run'}. "
             f"Each cell: median of {REPEAT} runs (min–max), then in bold the ratio to native "
             "(time over native's time; for the read, native's speed over the guest's, so "
             "that above 1× is slower everywhere).", "",
             "| figure | unit | " + " | ".join(record[n]["label"] for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for row, unit, label in ROWS:
        cells = []
        base = median(record, "native", row)
        for n in names:
            if "why" in record[n] or not record[n]["runs"]:
                cells.append("not run" if "why" in record[n] else "failed")
                continue
            values = [r[row] for r in record[n]["runs"] if row in r]
            if not values:
                cells.append("—")
                continue
            med = statistics.median(values)
            cell = f"{fmt(med)} ({fmt(min(values))}–{fmt(max(values))})"
            if base and n != "native":
                ratio = base / med if row == "read" else med / base
                cell += f" **{ratio:.2f}×**"
            cells.append(cell)
        label = label + (" (native: the host's read of the image file, from its cache)"
                         if row == "read" else "")
        lines.append(f"| {label} | {unit} | " + " | ".join(cells) + " |")
    lines += ["", "Targets (measured, not asserted):", ""]
    native_make, native_read = median(record, "native", "make"), median(record, "native", "read")
    native_configure = median(record, "native", "configure")
    # issue 20: (make -j1, ./configure) within these ratios to native
    for n, limits in (("ring3", (1.6, 2.5)), ("ring3_none", (1.25, 2.0))):
        make, read = median(record, n, "make"), median(record, n, "read")
        tcg = median(record, "qemu_tcg", "make")
        label = record.get(n, {}).get("label", n)
        for row, value, base, limit in (("make -j1", make, native_make, limits[0]),
                                        ("./configure", median(record, n, "configure"),
                                         native_configure, limits[1])):
            if value and base:
                r = value / base
                lines.append(f"- {label}: `{row}` within {limit}× native: {r:.2f}×, "
                             f"{'met' if r <= limit else 'not met'}")
        if make and tcg:
            lines.append(f"- {label}: `make -j1` faster than QEMU TCG: {make:.1f} s against "
                         f"{tcg:.1f} s, {'met' if make < tcg else 'not met'}")
        if read and native_read:
            lines.append(f"- {label}: read at least half the host's speed: {read:.0f} MB/s "
                         f"against {native_read:.0f} MB/s, "
                         f"{'met' if read >= native_read / 2 else 'not met'}")
    lines += not_run_notes(record, names)
    return "\n".join(lines) + "\n"


def main():
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    names = chosen("table2", "BENCH_T2_ENVS", ENVS, ",".join(ENVS))
    record = measure(names)
    (BENCH / "results-table2.json").write_text(json.dumps(record, indent=1) + "\n")
    write_section(SECTION, markdown(record, started))
    print(markdown(record, started))


if __name__ == "__main__":
    main()

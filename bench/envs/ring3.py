"""ring3: the default guest (build/guest/bzImage, rewrite mode) with `ring3 run --cmd`, its
processes in stub processes of their own (the default --isolation=process)."""
import re
import shutil
import tempfile
from pathlib import Path

from . import INITRAMFS, ROOT, guest_command, missing, run_process

NAME = "ring3"
RING3 = ROOT / "build" / "bin" / "ring3"
KERNEL = ROOT / "build" / "guest" / "bzImage"


def prepare():
    return missing(RING3, KERNEL, INITRAMFS)


def _ring3(command, timeout, *options):
    return run_process([RING3, "run", *options, "--cmd", command], timeout, f"`{command}`")


def run(argv, timeout):
    return _ring3(guest_command(argv), timeout).stdout


def profile(argv, timeout):
    """Where one run of argv spends its time: the monitor's `--stats` table and, where the host
    lets perf sample, the host's view of the whole process (boot included) by object and by
    symbol."""
    command = [RING3, "run", "--stats", "--cmd", guest_command(argv)]
    what = f"{argv[0]} with --stats"
    perf, err, host = shutil.which("perf"), None, "(no host profile: perf is not installed)\n"
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        if perf:
            try:
                err = run_process([perf, "record", "-q", "-F", "999", "-o", data, "--",
                                   *command], timeout, what).stderr
                host = _perf_report(perf, data)
            except RuntimeError as e:
                host = f"(no host profile: {e})\n"
        if err is None:
            err = run_process(command, timeout, what).stderr
    if "ring3 stats:" not in err:
        raise RuntimeError(f"no --stats table: {err.strip()[-300:]}")
    return err[err.index("ring3 stats:"):].rstrip() + "\n\n" + host


def _perf_report(perf, data):
    text = ("perf record -F 999, host view (memfd:ring3-guest-ram is guest code, ring3 the "
            "monitor, [kernel.kallsyms] the host kernel):\n")
    for sort in ("dso", "dso,symbol"):
        report = run_process([perf, "report", "-i", data, "--stdio", "--sort", sort,
                              "--percent-limit", "1.5"], 60, "perf report").stdout
        lines = [re.sub(r"(\s+-)+$", "", l.rstrip()) for l in report.splitlines()
                 if l.strip() and not l.startswith("#")]
        text += "\n" + "\n".join(lines) + "\n"
    return text


def boot_seconds(*options):
    """--time: the monitor's own clock, from its start to the guest's first process."""
    err = _ring3("true", 120, "--time", *options).stderr
    m = re.search(r"ring3: ([0-9.]+) s to the first guest process", err)
    if not m:
        raise RuntimeError(f"no boot time in --time's output: {err.strip()[-300:]}")
    return float(m.group(1))


def with_options(*options, kernel=KERNEL):
    """prepare, run and boot_seconds of ring3 run with (options) added (and (kernel), when it
    names one of its own among them), for the environments that are ring3 with an option."""
    def prepare():
        return missing(RING3, kernel, INITRAMFS)

    def run(argv, timeout):
        return _ring3(guest_command(argv), timeout, *options).stdout

    def boot():
        return boot_seconds(*options)

    return prepare, run, boot

"""ring3: the default guest (build/guest/bzImage, rewrite mode) with `ring3 run --cmd`."""
import re

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
    """`--stats`: where the monitor's time went in one run of argv (its table, as printed)."""
    err = _ring3(guest_command(argv), timeout, "--stats").stderr
    if "ring3 stats:" not in err:
        raise RuntimeError(f"no --stats table: {err.strip()[-300:]}")
    return err[err.index("ring3 stats:"):].rstrip() + "\n"


def boot_seconds():
    """--time: the monitor's own clock, from its start to the guest's first process."""
    err = _ring3("true", 120, "--time").stderr
    m = re.search(r"ring3: ([0-9.]+) s to the first guest process", err)
    if not m:
        raise RuntimeError(f"no boot time in --time's output: {err.strip()[-300:]}")
    return float(m.group(1))

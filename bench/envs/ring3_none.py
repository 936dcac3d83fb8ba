"""ring3 with --isolation=none: the default guest with its processes in the monitor's own
process, as the paper ran them (faster, but a hostile guest process can reach the monitor)."""
from . import INITRAMFS, guest_command, missing
from . import ring3

NAME = "ring3 isolation=none"
OPTIONS = ("--isolation", "none")


def prepare():
    return missing(ring3.RING3, ring3.KERNEL, INITRAMFS)


def run(argv, timeout):
    return ring3._ring3(guest_command(argv), timeout, *OPTIONS).stdout


def boot_seconds():
    return ring3.boot_seconds(*OPTIONS)

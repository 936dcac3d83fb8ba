"""ring3 running the same kernel source built in insert mode (the paper's PE-Insert):
build/guest/bzImage-insert, where each sensitive instruction traps (a marker's #UD, or its own
#GP) and the monitor decodes it with Capstone, with the default initramfs."""
from . import INITRAMFS, ROOT, guest_command, missing
from . import ring3

NAME = "ring3 insert"
KERNEL = ROOT / "build" / "guest" / "bzImage-insert"
OPTIONS = ("--initrd", INITRAMFS, KERNEL)    # naming a kernel drops the default initramfs


def prepare():
    return missing(ring3.RING3, KERNEL, INITRAMFS)


def run(argv, timeout):
    return ring3._ring3(guest_command(argv), timeout, *OPTIONS).stdout


def boot_seconds():
    return ring3.boot_seconds(*OPTIONS)

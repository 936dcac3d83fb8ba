"""QEMU TCG: qemu-system-i386's full emulation, the paper's Bochs row; the plain build of the
same kernel source and configuration (no ring3-as), with the same initramfs."""
from . import qemu_guest, qemu_prepare, qemu_run

NAME = "QEMU TCG"


def prepare():
    return qemu_prepare()


def run(argv, timeout):
    return qemu_run("tcg", argv, timeout)


def boot_seconds():
    """From starting QEMU to /init's first line."""
    return qemu_guest.run("true", "tcg", 120).boot_seconds

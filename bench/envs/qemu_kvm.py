"""QEMU KVM: the paper's VMware row, where the host's /dev/kvm works. On a nested paravirtual
KVM, QEMU guests fail before printing anything; prepare() finds that out with one short boot
and says what it saw."""
import os

from . import qemu_guest, qemu_prepare, qemu_run

NAME = "QEMU KVM"
PROBE_SECONDS = 30      # a KVM guest reaches /init in a second or two


def prepare():
    if not os.path.exists("/dev/kvm"):
        return "no /dev/kvm on this host"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "/dev/kvm: permission denied"
    why = qemu_prepare()
    if why:
        return why
    try:
        out = qemu_guest.run("echo kvm-ok", "kvm", PROBE_SECONDS).output
    except RuntimeError as e:
        return f"KVM guest did not boot: {e}"
    if out != "kvm-ok\n":
        return f"KVM guest printed {out[-100:]!r}, not kvm-ok"
    return None


def run(argv, timeout):
    return qemu_run("kvm", argv, timeout)


def boot_seconds():
    """From starting QEMU to /init's first line."""
    return qemu_guest.run("true", "kvm", 120).boot_seconds

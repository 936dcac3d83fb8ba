"""The environments bench/table.py compares, one module each (the module's docstring says what
it stands for). Each module has:

    NAME = "QEMU TCG"                              # the row label
    def prepare() -> str | None                    # None when usable, else why not (one line)
    def run(argv: list[str], timeout: float) -> str
        # run one benchmark program (argv[0] is its name, e.g. "getpid", then its arguments);
        # return its stdout; raise RuntimeError(reason) on failure
    def boot_seconds() -> float | None             # optional: boot to a shell-run command
    def profile(argv, timeout) -> str              # optional: where one run's time went

What the guest environments share is here.
"""
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GUEST_PROGRAMS = "/usr/bench"       # where mk/initramfs.mk puts the i386 programs
INITRAMFS = ROOT / "build" / "guest" / "initramfs.cpio.gz"

sys.path.insert(0, str(ROOT / "tools"))
import qemu_guest  # noqa: E402


def guest_command(argv):
    """The guest shell command line that runs benchmark program argv[0] with its arguments."""
    return shlex.join([f"{GUEST_PROGRAMS}/{argv[0]}", *argv[1:]])


def run_process(cmd, timeout, what):
    """Run host command (cmd); its CompletedProcess (text), or RuntimeError naming (what) when
    it does not end within (timeout) s or ends with a status other than 0."""
    try:
        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what} did not end within {timeout:g} s") from None
    if p.returncode:
        raise RuntimeError(f"{what} ended with status {p.returncode}: "
                           f"{(p.stdout + p.stderr).strip()[-300:]}")
    return p


def missing(*paths):
    """Why a needed build output is absent (one line naming the make target), or None."""
    for path in paths:
        if not Path(path).exists():
            return f"{Path(path).relative_to(ROOT)} is missing (make bench builds it)"
    return None


def qemu_prepare():
    """What every QEMU environment needs: the emulator, the plain kernel, the initramfs."""
    if not shutil.which("qemu-system-i386"):
        return "qemu-system-i386 is not installed (make deps installs it)"
    return missing(qemu_guest.KERNEL, INITRAMFS)


def qemu_run(accel, argv, timeout):
    """Run one program in the guest under QEMU with (accel); its output, or RuntimeError."""
    r = qemu_guest.run(guest_command(argv), accel, timeout)
    if r.status:
        raise RuntimeError(f"{argv[0]} exited with status {r.status}: {r.output.strip()[-300:]}")
    return r.output

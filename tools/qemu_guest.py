"""Run one shell command line in the default guest under QEMU, framed as `ring3 run --cmd`
frames it (monitor/host/guest_console.c, guest/initramfs/init): the kernel is the plain build of the
same source and configuration, less the debug information (build/guest/bzImage-plain), the
initramfs is the same, and the command and its token reach /init as a second cpio archive
appended to it.

Used by tests/test_linux.py (the differential test) and bench/envs/qemu_*.py.
"""
import os
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "build" / "guest" / "bzImage-plain"
INITRAMFS = ROOT / "build" / "guest" / "initramfs.cpio.gz"


def newc(entries):
    """A newc cpio archive of (name, mode, data) entries, as `ring3 run --cmd` appends one."""
    out = b""
    for ino, (name, mode, data) in enumerate(entries + [("TRAILER!!!", 0, b"")]):
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
        hdr = b"070701" + b"".join(b"%08X" % f for f in fields) + name.encode() + b"\0"
        out += hdr + b"\0" * (-len(hdr) % 4) + data + b"\0" * (-len(data) % 4)
    return out


@dataclass
class Result:
    output: str          # what the command printed, as `ring3 run --cmd` shows it
    status: int          # the command's exit status
    boot_seconds: float  # from starting QEMU to /init's begin marker


def run(command, accel="tcg", timeout=300, disk=None, memory="256M", initramfs=INITRAMFS, net=(),
        nic=None):
    """Run (command) in the guest under qemu-system-i386 -accel (accel). With (disk), a raw
    image as the first virtio disk with snapshot=on, and the guest's root on it (what
    `ring3 run --disk DISK,snapshot=on --append root=/dev/vda` gives). (initramfs) is ring3's
    initramfs or one that extends it. The guest has ring3's default NIC, virtio-net on user-mode
    networking; (net) adds options to it (e.g. "hostfwd=tcp::8080-:80"), and (nic), QEMU's
    arguments for another NIC, replaces it. Raises RuntimeError saying what happened when the
    command's end marker does not arrive within (timeout) s."""
    token = os.urandom(8).hex()
    begin, end = f"{token}-begin".encode(), f"{token}-end ".encode()
    base = Path(initramfs).read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        initrd = Path(tmp) / "initrd"
        initrd.write_bytes(base + b"\0" * (-len(base) % 4) + newc(
            [("ring3", 0o40755, b""), ("ring3/cmd", 0o100644, command.encode()),
             ("ring3/token", 0o100644, token.encode() + b"\n")]))
        errors = open(Path(tmp) / "stderr", "w+b")
        start = time.monotonic()
        drive = ["-drive", f"file={disk},format=raw,if=virtio,snapshot=on"] if disk else []
        # the NIC ring3 gives by default: virtio-net on user-mode networking (hostfwd: more)
        if nic is None:
            nic = ["-nic", ",".join(["user,model=virtio-net-pci", *net])]
        root = " root=/dev/vda" if disk else ""
        # QEMU's default CPU model for i386 (qemu32) has PAE but no NX; ring3 offers both.
        p = subprocess.Popen(["qemu-system-i386", "-accel", accel, "-cpu", "qemu32,+nx",
                              "-m", memory, "-nographic",
                              "-no-reboot", "-monitor", "none", "-kernel", str(KERNEL),
                              "-initrd", str(initrd), *drive, *nic,
                              "-append", "console=ttyS0 quiet" + root],
                             stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL)
        out, booted = b"", None
        try:
            while end not in out or not out.split(end, 1)[1].count(b"\n"):
                left = start + timeout - time.monotonic()
                if left <= 0 or not select.select([p.stdout], [], [], left)[0]:
                    raise RuntimeError(_failure(f"no end of the command within {timeout:g} s",
                                                out, begin, errors))
                chunk = p.stdout.read1(4096)
                if not chunk:
                    p.wait()
                    raise RuntimeError(_failure(f"QEMU exited (status {p.returncode}; under "
                                                "-no-reboot a guest reset, such as a triple "
                                                "fault, ends it) before the command ended",
                                                out, begin, errors))
                out += chunk
                if booted is None and begin in out:
                    booted = time.monotonic() - start
        finally:
            p.kill()
            p.wait()
            errors.close()
    body = out.split(begin, 1)[1].split(b"\n", 1)[1]
    shown, status = body.split(end, 1)
    return Result(shown.decode(errors="replace"), int(status.split(b"\n")[0]), booted)


def _failure(what, out, begin, errors):
    """One line: (what), how far the guest got, and QEMU's last message."""
    if begin in out:
        seen = "the command had started"
    elif out.strip():
        seen = "the guest kernel printed nothing (only the firmware did)"
    else:
        seen = "nothing was printed"
    errors.seek(0)
    last = [l for l in errors.read().decode(errors="replace").splitlines() if l.strip()]
    return f"{what}; {seen}" + (f"; QEMU: {last[-1].strip()}" if last else "")

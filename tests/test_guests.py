"""Test guests: each runs natively under QEMU and under ring3; both serial transcripts must agree.

(a) build/testguests/plain/NAME.elf under qemu-system-i386 must print testguests/NAME.expect and
    exit with status 1 (isa-debug-exit value 0: pass).
(b) build/testguests/ring3/NAME.elf (rewritten) and build/testguests/insert/NAME.elf (insert mode:
    the monitor decodes each trapping instruction) under `ring3 run` must print what QEMU printed
    and exit with the same status. Where QEMU is known to differ from hardware
    (Guest.qemu_differs says how), QEMU must print testguests/NAME.qemu instead, and NAME.expect
    is ring3's oracle.
A guest with a disk (Guest.disk) gets a fresh raw image with a known pattern in each run (QEMU
-drive if=virtio, ring3 --disk) and must leave it unchanged. A guest with a NIC (Guest.net) gets
user-mode networking: QEMU's -netdev user on a virtio-net-pci without its boot ROM, ring3's
default --net user (every ring3 guest has that NIC; the others do not look for it).
"""
import contextlib
import functools
import os
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUEST_SRC = ROOT / "testguests"
PLAIN = ROOT / "build" / "testguests" / "plain"
# ring3-as mode -> the directory of the guests it assembled, and the make target that builds them.
VARIANTS = {"rewrite": ("ring3", "testguests-ring3"), "insert": ("insert", "testguests-insert")}
RING3 = ROOT / "build" / "bin" / "ring3"

# The isa-debug-exit device turns the guest's value V into status 2V+1; guests write 0 on success.
STATUS_PASS = 1

# QEMU's default CPU model for qemu-system-i386, named so a newer default cannot change the transcript.
# Without -nographic no firmware banner reaches the serial port; -nic none drops the iPXE ROM.
QEMU = ["qemu-system-i386", "-cpu", "qemu32", "-m", "64", "-accel", "tcg",
        "-display", "none", "-monitor", "none", "-serial", "stdio", "-nic", "none", "-no-reboot",
        "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]


@dataclass(frozen=True)
class Guest:
    append: str = ""           # multiboot command line (QEMU -append, ring3 --append)
    stdin: str = ""            # file in testguests/ sent to the serial port
    ready: bytes = b""         # the guest prints this when it is ready for stdin
    timeout: float = 60.0
    qemu_differs: str = ""     # how QEMU departs from hardware here; QEMU must print NAME.qemu
    insert_append: str = ""    # the command line in insert mode, where it must differ (say why)
    disk: bool = False         # a virtio disk holding DISK_SECTORS sectors of disk_pattern()
    net: bool = False          # a virtio NIC on user-mode networking
    qemu_cpu: str = "qemu32"   # QEMU's -cpu, where the guest needs a feature qemu32 lacks


GUESTS = {
    "hello": Guest(append="greeting=0x10"),
    "segments": Guest(),
    "exceptions": Guest(),
    "pit": Guest(),
    "uart-input": Guest(stdin="uart-input.input", ready=b"uart-input: ready\n"),
    "paging": Guest(),
    "paging-pae": Guest(qemu_cpu="qemu32,+nx",
                        qemu_differs="QEMU 7.2 TCG reports a reserved-bit #PF without P in the "
                                     "error code, and mov to cr3 does not check the PDPTEs; "
                                     "hardware sets P with RSVD and raises #GP(0)"),
    "accessed-dirty": Guest(),
    "usermode": Guest(),
    "cpuid-msr": Guest(),
    "msr-unknown": Guest(qemu_differs="QEMU 7.2 TCG reads unknown MSRs as 0 and ignores writes "
                                      "to them; hardware raises #GP(0)"),
    "syscall-loop": Guest(append="count=20000"),
    # In insert mode each tick costs a dozen host signals (the handler's segment pushes and pops,
    # the EOI, iret), about 100 us here: at 10 kHz the next tick is due before the handler returns
    # and the guest never runs again, as hardware would behave with so slow a handler. The
    # transcript depends on count only.
    "timer-storm": Guest(append="count=3000 hz=10000", insert_append="count=3000 hz=2000"),
    "virtio-blk": Guest(disk=True),
    "virtio-net": Guest(net=True),
}

# QEMU's NIC for Guest.net: the one ring3 gives by default (52:54:00:12:34:56, libslirp).
QEMU_NIC = ["-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0,romfile="]

DISK_SECTORS = 2048     # 1 MiB


def disk_pattern():
    """The test disk's bytes: sector s starts with s (32-bit little-endian), then byte i holds
    (s + i) & 0xff, as testguests/virtio-blk.c checks."""
    image = bytearray()
    for s in range(DISK_SECTORS):
        sector = bytearray((s + i) & 0xFF for i in range(512))
        sector[0:4] = s.to_bytes(4, "little")
        image += sector
    return bytes(image)


@contextlib.contextmanager
def scratch_disk(guest):
    """A fresh raw image for the run of a guest with a disk (else None); afterwards, the guest
    must have left it byte for byte as it was."""
    if not guest.disk:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="ring3-disk-") as tmp:
        path = Path(tmp) / "disk.img"
        pattern = disk_pattern()
        path.write_bytes(pattern)
        yield path
        assert path.read_bytes() == pattern, "the guest changed its disk image"


def run(cmd, guest):
    """Runs cmd, feeding guest.stdin after guest.ready appears; returns (stdout, stderr, status)."""
    feed = (GUEST_SRC / guest.stdin).read_bytes() if guest.stdin else None
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.PIPE if feed is not None else subprocess.DEVNULL)
    deadline = time.monotonic() + guest.timeout
    out = b""
    try:
        if feed is not None:
            while guest.ready not in out:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([proc.stdout], [], [], max(left, 0))
                if not ready:
                    raise subprocess.TimeoutExpired(cmd, guest.timeout, out)
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                out += chunk
            proc.stdin.write(feed)
            proc.stdin.close()
            proc.stdin = None   # communicate() must not flush it again
        rest, err = proc.communicate(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, err = proc.communicate()
        pytest.fail(f"{cmd[0]} timed out after {guest.timeout}s; output so far:\n"
                    f"{(out + rest).decode(errors='replace')}\nstderr:\n{err.decode(errors='replace')}")
    return out + rest, err, proc.returncode


@functools.lru_cache(maxsize=None)
def run_qemu(name):
    elf = PLAIN / f"{name}.elf"
    if not elf.exists():
        pytest.fail(f"{elf.relative_to(ROOT)} is missing: run `make testguests`")
    guest = GUESTS[name]
    qemu = list(QEMU)
    qemu[qemu.index("-cpu") + 1] = guest.qemu_cpu
    nic = qemu.index("-nic")
    qemu = qemu[:nic] + qemu[nic + 2:] + QEMU_NIC if guest.net else qemu
    cmd = qemu + ["-kernel", str(elf)] + (["-append", guest.append] if guest.append else [])
    with scratch_disk(guest) as disk:
        drive = ["-drive", f"file={disk},if=virtio,format=raw"] if disk else []
        return run(cmd + drive, guest)


def expected(name):
    return (GUEST_SRC / f"{name}.expect").read_bytes()


def show(out, err):
    return f"stdout:\n{out.decode(errors='replace')}\nstderr:\n{err.decode(errors='replace')}"


def test_every_guest_is_listed():
    """GUESTS, the .expect files and TG_NAMES in mk/testguests.mk name the same guests."""
    mk = (ROOT / "mk" / "testguests.mk").read_text()
    names = mk.split("TG_NAMES :=", 1)[1].split("\nTG_DIR", 1)[0].replace("\\", " ").split()
    assert set(names) == set(GUESTS)
    assert {p.stem for p in GUEST_SRC.glob("*.expect")} == set(GUESTS)


@pytest.mark.parametrize("name", sorted(GUESTS))
def test_qemu_matches_expect(name):
    out, err, status = run_qemu(name)
    want = (GUEST_SRC / f"{name}.qemu").read_bytes() if GUESTS[name].qemu_differs else expected(name)
    assert out.decode(errors="replace") == want.decode(), show(out, err)
    assert status == STATUS_PASS, show(out, err)


# Guests with ring 3 code, run in-process as well (--isolation=none), where a return to ring 3
# is the runtime's way back (monitor/cpu/runtime.S, exit64) and not a stub's. Not usermode,
# which prints the selectors its process reads: in-process those are the host's.
IN_PROCESS = ("syscall-loop", "timer-storm")


RUNS = [(name, mode) for name in sorted(GUESTS) for mode in sorted(VARIANTS)] + \
       [(name, "none") for name in IN_PROCESS]


@pytest.mark.parametrize("name,mode", RUNS, ids=[f"{name}-{mode}" for name, mode in RUNS])
def test_ring3_matches_qemu(name, mode):
    subdir, target = VARIANTS.get(mode, VARIANTS["rewrite"])
    elf = ROOT / "build" / "testguests" / subdir / f"{name}.elf"
    if not elf.exists():
        pytest.fail(f"{elf.relative_to(ROOT)} is missing: run `make {target}`")
    guest = GUESTS[name]
    append = guest.insert_append if mode == "insert" and guest.insert_append else guest.append
    with scratch_disk(guest) as disk:
        cmd = [str(RING3), "run"] + (["--append", append] if append else [])
        cmd += ["--isolation", "none"] if mode == "none" else []
        out, err, status = run(cmd + (["--disk", str(disk)] if disk else []) + [str(elf)], guest)
    if guest.qemu_differs:
        want, want_status = expected(name), STATUS_PASS
    else:
        want, _, want_status = run_qemu(name)
    assert out.decode(errors="replace") == want.decode(errors="replace"), show(out, err)
    assert status == want_status, show(out, err)

"""Ctrl-C at an interactive busybox shell, many times, until the shell stops answering.

    python3 tools/ctrl_c_stress.py {native,process,none,qemu} [--times N] [--seed S]

The shell is Debian's busybox-static:i386 `sh` of the initramfs (build/guest/initramfs/busybox):
run on this host directly (native), in the default guest under ring3 in either isolation mode, or
under QEMU TCG with the plain kernel. On a pty it starts a background job that forks every few
seconds and reports the shell's system call if the shell is waiting on a futex, then N times types
`while :; do :; done`, Ctrl-C after 50-400 ms, and an echo that must come back. It stops at the
first time the shell does not answer and prints what the job reported.

What it shows (issue 17): busybox's ash leaves its SIGINT handler by longjmp when no INT_OFF is
in force, and its line editor calls glibc stdio (clearerr, fflush) outside INT_OFF. An interrupt
that lands between glibc's `lock cmpxchg` of a FILE lock and the store of its owner, or between
the owner's reset and the releasing `xchg`, leaves the lock taken by nobody, and the shell's
next clearerr(stdin) waits on it for ever (futex on stdin's lock). It happens natively (exit 1
after a few hundred Ctrl-Cs here) and under ring3 about as often; QEMU TCG takes interrupts only
between translation blocks, never inside that window, and does not show it
(guest/programs/lockwindow counts how often signals land there).
"""
import argparse
import os
import pty
import random
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
BUSYBOX = BUILD / "guest" / "initramfs" / "busybox"
WATCHER = (b'SH=$$; (while :; do sleep 3; set -- $(cat /proc/$SH/syscall); '
           b'if [ "$1" = 240 ]; then echo "futex wait: $*"; fi; done) &\r')


def read_until(fd, needle, timeout):
    seen, end = b"", time.monotonic() + timeout
    while needle not in seen:
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError(seen)
        chunk = os.read(fd, 4096)
        if not chunk:
            raise TimeoutError(seen)
        seen += chunk
    return seen


def command(where, bindir):
    if where == "native":
        return [BUSYBOX, "sh", "-i"], {"PS1": "# ", "PATH": bindir, "HOME": "/", "TERM": "vt100"}
    if where == "qemu":
        return (["qemu-system-i386", "-accel", "tcg", "-m", "256M", "-nographic", "-no-reboot",
                 "-kernel", BUILD / "guest" / "bzImage-plain", "-initrd",
                 BUILD / "guest" / "initramfs.cpio.gz", "-append", "console=ttyS0 quiet",
                 "-nic", "none"], None)
    return [BUILD / "bin" / "ring3", "run", "--isolation", where, "--net", "none"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("where", choices=["native", "process", "none", "qemu"])
    ap.add_argument("--times", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as bindir:
        for applet in ("sleep", "cat"):
            os.symlink(BUSYBOX, Path(bindir) / applet)
        argv, env = command(a.where, bindir)
        master, slave = pty.openpty()

        def controlling_tty():
            import fcntl
            import termios
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        p = subprocess.Popen([str(x) for x in argv], stdin=slave, stdout=slave, stderr=slave,
                             env=env, start_new_session=True,
                             preexec_fn=controlling_tty if a.where == "native" else None)
        try:
            read_until(master, b"# ", 120)
            os.write(master, WATCHER)
            time.sleep(1)
            rng = random.Random(a.seed)
            for i in range(1, a.times + 1):
                os.write(master, b"while :; do :; done\r")
                time.sleep(rng.uniform(0.05, 0.4))
                os.write(master, b"\x03")
                try:
                    read_until(master, b"# ", 10)
                    os.write(master, b"echo answer-$((%d+0))\r" % i)
                    read_until(master, b"answer-%d" % i, 10)
                except TimeoutError as e:
                    time.sleep(4)
                    late = os.read(master, 65536) if select.select([master], [], [], 0)[0] else b""
                    print(f"{a.where}: the shell stopped answering after Ctrl-C number {i}:\n"
                          f"{(e.args[0] + late).decode(errors='replace')[-600:]}")
                    return 1
            print(f"{a.where}: the shell answered after each of {a.times} Ctrl-Cs")
            return 0
        finally:
            p.kill()
            os.close(master)
            os.close(slave)


if __name__ == "__main__":
    sys.exit(main())

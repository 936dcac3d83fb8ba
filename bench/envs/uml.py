"""User Mode Linux: the benchmark programs in an x86-64 UML built from the guest's own source.

`make uml` (mk/uml.mk) builds build/uml/linux (ARCH=um, defconfig + bench/uml/uml.config) and
build/uml/initramfs.cpio.gz, whose /init (bench/uml/init.c) runs the program named after `--` on
the UML command line and powers off. UML x86-64 runs no i386 binaries, so the programs are their
x86-64 builds.

Each run is one UML boot with nothing shared:
  - the program's standard output arrives on UML's first serial line (ssl0), wired to a pipe of
    ours, apart from everything else;
  - the console (con0), UML's own messages before it and the kernel's messages go to a second
    pipe, read for the verdict ("uml-init: status N") and for the reason of a failure;
  - uml_dir= is a fresh temporary directory (the mconsole socket lives there; without it UML
    uses $HOME/.uml and dies in make_uml_dir when HOME is unset), removed afterwards;
  - UML runs in a session of its own, and its whole process group (the kernel, its helper
    threads and one stub process per address space) is killed after the run, timed out or not.
"""

import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

NAME = "User Mode Linux"

ROOT = Path(__file__).resolve().parents[2]
LINUX = ROOT / "build" / "uml" / "linux"
INITRD = ROOT / "build" / "uml" / "initramfs.cpio.gz"
MEM = "256M"
BUILD_TIMEOUT = 3600.0
PREPARE_TIMEOUT = 60.0


def _command(argv, uml_dir, out_fd):
    return [str(LINUX), f"mem={MEM}", f"initrd={INITRD}",
            # UML appends root= and console= when absent, and they would then follow `--`
            # into init's arguments.
            "root=98:0", "console=tty0",
            "con=null", "con0=null,fd:1", "ssl=null", f"ssl0=null,fd:{out_fd}",
            f"uml_dir={uml_dir}", "umid=bench",
            "--", *argv]


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _reason(console, timed_out=False):
    """The console line that says best why a run failed (with the program's last message
    before it when /init reports its status)."""
    lines = [ln.strip() for ln in console.splitlines()
             if ln.strip() and "epollctl add err" not in ln]   # UML's noise about /dev/null
    if timed_out:
        return lines[-1] if lines else "no output at all"
    for i, ln in enumerate(lines):
        if re.match(r"uml-init: (?!status 0$)", ln):
            if ln.startswith("uml-init: status") and i > 0 and "Run /init" not in lines[i - 1]:
                return f"{ln} ({lines[i - 1]})"
            return ln
    for pattern in (r"wait_stub_done", r"Kernel panic", r"panic", r"Segfault", r"failed"):
        hits = [ln for ln in lines if re.search(pattern, ln)]
        if hits:
            return hits[0]
    return lines[-1] if lines else "no output at all"


def _boot(argv, timeout):
    """Boots UML to run argv; returns (the program's stdout, the console)."""
    if not LINUX.exists() or not INITRD.exists():
        raise RuntimeError(f"{LINUX.relative_to(ROOT)} or {INITRD.relative_to(ROOT)} missing "
                           "(make uml)")
    uml_dir = tempfile.mkdtemp(prefix="ring3-uml-")
    out_r, out_w = os.pipe()
    try:
        proc = subprocess.Popen(_command(argv, uml_dir, out_w), cwd=uml_dir,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, pass_fds=(out_w,),
                                start_new_session=True)
    except OSError as e:
        os.close(out_r)
        os.close(out_w)
        shutil.rmtree(uml_dir, ignore_errors=True)
        raise RuntimeError(f"cannot start {LINUX.name}: {e}") from e
    os.close(out_w)
    con_r = proc.stdout.fileno()
    chunks = {out_r: [], con_r: []}
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        with selectors.DefaultSelector() as sel:
            for fd in chunks:
                sel.register(fd, selectors.EVENT_READ)
            open_fds = set(chunks)
            # Both pipes reach end of file when every process of UML has exited.
            while open_fds:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for key, _ in sel.select(min(left, 1.0)):
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
                        open_fds.discard(key.fd)
    finally:
        _kill_group(proc)
        os.close(out_r)
        proc.stdout.close()
        shutil.rmtree(uml_dir, ignore_errors=True)
    out = b"".join(chunks[out_r]).decode(errors="replace")
    console = b"".join(chunks[con_r]).decode(errors="replace")
    if timed_out:
        raise RuntimeError(f"timed out after {timeout:g} s; last console line: "
                           f"{_reason(console, timed_out=True)}")
    if not re.search(r"^uml-init: status 0\s*$", console, re.M):
        raise RuntimeError(_reason(console) + (f"; program output: {out.strip()}" if out.strip()
                                               else ""))
    return out, console


def prepare():
    try:
        r = subprocess.run(["make", "--no-print-directory", "uml"], cwd=ROOT,
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"make uml took longer than {BUILD_TIMEOUT:g} s"
    if r.returncode != 0:
        lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "rror" in ln or "No rule" in ln]
        return "make uml failed: " + (errors or lines or ["(no output)"])[-1].strip()
    try:
        _boot(["true"], PREPARE_TIMEOUT)
    except RuntimeError as e:
        return f"UML does not run a process on this host: {e}"
    return None


def run(argv, timeout):
    out, _ = _boot(list(argv), timeout)
    return out


def boot_seconds():
    t0 = time.monotonic()
    try:
        _boot(["true"], PREPARE_TIMEOUT)
    except RuntimeError:
        return None
    return time.monotonic() - t0

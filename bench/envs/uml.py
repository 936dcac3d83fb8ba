"""User Mode Linux: the benchmark programs in a UML built from the guest's own source.

`make uml` (mk/uml.mk) builds build/uml/i386/linux (ARCH=um SUBARCH=i386, defconfig +
bench/uml/uml.config: a 32-bit host program) and build/uml/i386/initramfs.cpio.gz, whose /init
(bench/uml/init.c) runs the program named after `--` on the UML command line and powers off.
An i386 UML runs the very i386 programs that every other row runs, so the figures compare the
same binaries. BENCH_UML_SUBARCH=x86_64 measures the x86-64 UML instead (`make uml-x86_64`,
with the x86-64 builds of the programs), the one a new user would build first.

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
SUBARCH = os.environ.get("BENCH_UML_SUBARCH", "i386")
LINUX = ROOT / "build" / "uml" / SUBARCH / "linux"
INITRD = ROOT / "build" / "uml" / SUBARCH / "initramfs.cpio.gz"
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


def _host_cpu():
    """The host CPU as the failure lines name it: vendor, family, model, AT_MINSIGSTKSZ."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
                if not line.strip():
                    break
    except OSError:
        pass
    minsig = "?"
    try:
        with open("/proc/self/auxv", "rb") as f:
            words = f.read()
        pairs = [int.from_bytes(words[i:i + 8], "little") for i in range(0, len(words), 8)]
        for key, value in zip(pairs[0::2], pairs[1::2]):
            if key == 51:   # AT_MINSIGSTKSZ
                minsig = str(value)
    except OSError:
        pass
    return (f"{info.get('model name', '?')} ({info.get('vendor_id', '?')} family "
            f"{info.get('cpu family', '?')} model {info.get('model', '?')}), "
            f"AT_MINSIGSTKSZ {minsig}")


# Where UML 6.12 puts a stub process's code page, and the words of PTRACE_GETREGS that hold
# the instruction and stack pointers. The stub data pages, 8 KiB, lie right above the code page
# and are the stub's signal stack. x86-64: os_get_top_address() is fixed at 0x7fc0002000;
# i386: it probes, and finds 0xffffd000 for a 32-bit process on an x86-64 host
# (arch/um/kernel/um_arch.c rounds it down to 8 KiB, then one page lower for the code).
def _stub_code(top):
    return ((top - 1) & ~0x1fff) - 0x1000


STUBS = {"x86_64": {"code": _stub_code(0x7fc0002000), "ip": 16, "sp": 19},
         "i386": {"code": _stub_code(0xffffd000), "ip": 12, "sp": 15}}
STUB = STUBS[SUBARCH]


def _stub_failure(lines):
    """A precise line for UML's panic when its stub process did not stop with SIGTRAP."""
    hit = next((ln for ln in lines if "failed to wait for SIGTRAP" in ln), None)
    if hit is None:
        return None
    m = re.search(r"status = 0x([0-9a-f]+)", hit)
    status = int(m.group(1), 16) if m else None
    regs = {}
    for ln in lines:
        r = re.match(r"(\w*)\s*\(\s*(\d+)\): ([0-9a-f]+)$", ln)
        if r:
            regs[int(r.group(2))] = int(r.group(3), 16)
    if status is not None and status & 0xff == 0x7f:
        sig = (status >> 8) & 0xff
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        what = f"stopped by {name}"
    elif status is not None:
        what = f"status {status:#x}"
    else:
        what = "no status"
    where = ""
    if STUB["ip"] in regs:
        ip = regs[STUB["ip"]]
        place = ("in the stub's code" if STUB["code"] <= ip < STUB["code"] + 0x3000 else
                 "in the user process, i.e. while delivering its page fault to the stub's "
                 "SIGSEGV handler")
        where = f" at IP {ip:#x} (SP {regs.get(STUB['sp'], 0):#x}), {place}"
    return (f"UML's stub process {what} instead of SIGTRAP (wait_stub_done){where}; "
            f"host CPU {_host_cpu()}")


def _reason(console, timed_out=False):
    """The console line that says best why a run failed (with the program's last message
    before it when /init reports its status)."""
    lines = [ln.strip() for ln in console.splitlines()
             if ln.strip() and "epollctl add err" not in ln]   # UML's noise about /dev/null
    if timed_out:
        return lines[-1] if lines else "no output at all"
    stub = _stub_failure(lines)
    if stub:
        return stub
    for i, ln in enumerate(lines):
        if re.match(r"uml-init: (?!status 0$)", ln):
            if ln.startswith("uml-init: status") and i > 0 and "Run /init" not in lines[i - 1]:
                return f"{ln} ({lines[i - 1]})"
            return ln
    for pattern in (r"Kernel panic", r"panic", r"Segfault", r"failed"):
        hits = [ln for ln in lines if re.search(pattern, ln)]
        if hits:
            return hits[0]
    return lines[-1] if lines else "no output at all"


def _boot(argv, timeout):
    """Boots UML to run argv; returns (the program's stdout, the console)."""
    if not LINUX.exists() or not INITRD.exists():
        raise RuntimeError(f"{LINUX.relative_to(ROOT)} or {INITRD.relative_to(ROOT)} missing "
                           f"(make uml-{SUBARCH})")
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
    # A make of our own, not a child of the one running the harness: its jobserver is not
    # ours (without these variables the inner make would build with -j1).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    try:
        r = subprocess.run(["make", "--no-print-directory", f"uml-{SUBARCH}"], cwd=ROOT, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"make uml-{SUBARCH} took longer than {BUILD_TIMEOUT:g} s"
    if r.returncode != 0:
        lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "rror" in ln or "No rule" in ln]
        return f"make uml-{SUBARCH} failed: " + (errors or lines or ["(no output)"])[-1].strip()
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

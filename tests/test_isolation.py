"""A hostile guest process (guest/programs/hostile.c) against the two isolation modes.

Default (--isolation=process): guest processes run in stub processes of their own
(stub/, monitor/mmu/aspace.c). Every attempt of the program to reach past its own pages ends
with a signal to it, or reaches nothing; the guest goes on, the monitor lives, and nothing
appears on the host. --isolation=none (the paper's mode, guest processes inside the
monitor's own process) is run too, to show what it cannot stop: 64-bit code of a guest
process reads the monitor's memory.
"""
import os
import pty
import re
import subprocess
import time
from pathlib import Path

import pytest

from test_linux import BOOT_TIMEOUT, RING3, read_until

STUB_TEXT_ADDR = 0x1000000000       # stub/protocol.h


class Shell:
    """ring3 run with the default guest on a pty, driven command by command."""

    def __init__(self, *options):
        self.master, self.slave = pty.openpty()
        self.p = subprocess.Popen([RING3, "run", *options], stdin=self.slave, stdout=self.slave,
                                  stderr=self.slave, start_new_session=True)
        self.n = 0
        read_until(self.master, b"# ", BOOT_TIMEOUT)
        # Kernel messages (the switch to the TSC clocksource comes about a second after
        # boot) would otherwise land in the middle of a line the test parses.
        self.run("dmesg -n 1")

    def run(self, command, timeout=120):
        """Run (command); return what it printed, up to a marker the shell computes (the
        echoed command line cannot contain it)."""
        self.n += 1
        os.write(self.master, f"{command}; echo END-$(({self.n}*1000+7))\r".encode())
        out = read_until(self.master, f"END-{self.n * 1000 + 7}".encode(), timeout)
        return out.decode(errors="replace").replace("\r", "")

    def close(self):
        if self.p.poll() is None:
            os.write(self.master, b"poweroff\r")
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
        os.close(self.master)
        os.close(self.slave)


def monitor_text(pid):
    """Start address of ring3's own code in the host process (pid)."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5].endswith("/ring3") and "x" in fields[1]:
            return int(fields[0].split("-")[0], 16)
    raise AssertionError("no executable mapping of ring3 in its own maps")


def stub_code(pid):
    """(first address, pages) of a stub's code: a child of the monitor (pid) mapping
    executable memory at STUB_TEXT_ADDR."""
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            maps = Path(f"/proc/{child}/maps").read_text().splitlines()
        except OSError:
            continue
        for line in maps:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            if start >= STUB_TEXT_ADDR and "x" in line.split()[1] and start < STUB_TEXT_ADDR + (1 << 20):
                return start, (end - start) // 4096
    raise AssertionError(f"no stub with code at {STUB_TEXT_ADDR:#x} among the children of {pid}")


def results(out):
    """{attempt: outcome} from hostile's "NAME: signal N" / "NAME: exit N" lines."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^(.+?): ((?:signal|exit) \d+)$", out, re.M)}


@pytest.mark.parametrize("syscalls", ["sud", "sysemu"])
def test_hostile_process_is_contained(tmp_path, syscalls):
    """Both ways a stub's system calls reach ring3: its own seccomp trap and hand-off (sud),
    and ring3 as its ptrace tracer (sysemu), where a jump to the stub's trap site or command
    entry is one more way in."""
    mark = tmp_path / "mark"
    shell = Shell("--syscalls", syscalls)
    try:
        addr = monitor_text(shell.p.pid)
        out = shell.run(f"hostile all {mark} {addr:x}")
        first, pages = stub_code(shell.p.pid)
        out_stub = shell.run(f"hostile stub {first:x} {pages}", timeout=60 + 6 * pages)
        # Not in --isolation=none, where the process's PKRU is the monitor's own.
        out_pkru = shell.run("hostile pkru")
        after = shell.run("echo alive-$((6*7)); cat /proc/version")
        assert shell.p.poll() is None, "the monitor died"
    finally:
        shell.close()
    assert shell.p.returncode == 0, out
    assert not mark.exists(), "a guest system call reached the host"
    got = results(out)
    assert len(got) == 1 + 1 + 2 + 2 * 16 + 7 * 7 + 1 + 4 + 1 + 1 + 1, out     # cli, the gate by a jump, ...
    # On hardware each of these is a signal (`syscall` on an i386 CPU is #UD: SIGILL; the
    # host reports AMD's compatibility-mode syscall with a return address that is not the
    # guest's, and the guest gets SIGSEGV instead: contained all the same).
    # "plant": an anonymous page made through the stub's own mmap, which would outlive the
    # process in its stub (stub/protocol.h); the filter ends the stub instead.
    # "forge munmap": a system-call event forged in the stub's control area, the process
    # running on to read the page it asked to unmap; before the stub was held at the guest
    # kernel's TLB flush (stub/host.h, stub_hold) it read the page after the guest kernel had
    # freed it, and printed what the kernel had put there since ("read 46524744").
    # "write64 cpuid answers": the page of CPUID answers all stubs map read-only (stub/protocol.h).
    for name in ["rewritten cli", "sysenter gate by a jump", "read c0000000", "write c0000000",
                 "read ffff1000", "write ffff1000", "read64 monitor", "write64 cpuid answers",
                 "syscall64 creat", "syscall32 creat", "plant", "forge munmap"]:
        assert got[name].startswith("signal"), f"{name}: {got[name]}\n{out}"
    assert not re.search(r"^read [0-9a-f]{16}$", out, re.M), "64-bit code read the monitor"
    # The host's CR4.PKE lets wrpkru run at CPL 3 (hardware without it: SIGILL); the value
    # stays in the process's stub and is gone at its next event (x86/xstate.h).
    assert set(results(out_pkru)) == {"wrpkru 3", "wrpkru fffffffc"}, out_pkru
    jumps = results(out_stub)
    assert len(jumps) == pages, out_stub
    assert "alive-42" in after and "Linux version 6.12" in after, after


def test_a_stub_given_up_as_its_process_exits_costs_the_next_processes_nothing():
    """`hostile forge-exit`: exit_group as an event forged in the stub's control area, guest
    code running on there, so that the hold at the guest kernel's exit_mmap gives the stub up
    (monitor/mmu/aspace.c, aspace_hold). The process is gone by then; the processes after it,
    which may get its page directory, run as they would. (Its #GP once went to whichever
    process ran there next: a Segmentation fault of the first /bin/true.)"""
    loop = 'i=0; while [ $i -lt 20 ]; do /bin/true || echo "failed $?"; i=$((i+1)); done'
    p = subprocess.run([RING3, "run", "--stats", "--cmd", f'hostile forge-exit; echo "exit $?"; {loop}; echo done'],
                       capture_output=True, text=True, timeout=BOOT_TIMEOUT, stdin=subprocess.DEVNULL)
    out = p.stdout.replace("\r", "")
    assert p.returncode == 0, p.stderr
    assert "exit 0" in out and "done" in out and "failed" not in out, out
    assert "stub lost: killed, silent too long" in p.stderr, p.stderr


def test_isolation_none_cannot_stop_64_bit_code(tmp_path):
    """The paper's mode: a guest process switches to 64-bit mode and reads the monitor's
    code; the bytes it prints are the monitor's own. Its host system calls still go to the
    guest (Syscall User Dispatch), its accidental accesses to the kernel and to every page of
    ring3's runtime area fault as on hardware, a rewritten cli at CPL 3 faults too, and the
    guest goes on."""
    mark = tmp_path / "mark"
    shell = Shell("--isolation", "none")
    try:
        addr = monitor_text(shell.p.pid)
        with open(f"/proc/{shell.p.pid}/mem", "rb") as mem:
            mem.seek(addr)
            real = int.from_bytes(mem.read(8), "little")
        out = shell.run(f"hostile all {mark} {addr:x}")
        after = shell.run("echo alive-$((6*7))")
    finally:
        shell.close()
    assert f"read {real:016x}" in out, out
    assert not mark.exists()
    assert "alive-42" in after
    got = results(out)
    runtime = [f"{how} {0xFFFF0000 + i * 0x1000:08x}" for i in range(16) for how in ("read", "write")]
    for name in ["rewritten cli", "sysenter gate by a jump", "read c0000000", "write c0000000", *runtime]:
        assert got[name].startswith("signal"), f"{name}: {got[name]}\n{out}"

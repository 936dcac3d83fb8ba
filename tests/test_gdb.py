"""The gdb stub (--gdb, -s, -S; monitor/gdb/): the system's gdb against the default kernel, and
the remote protocol's bad input on a raw socket.

gdb runs with -batch on a copy of build/guest/vmlinux without its debug information (symbols
only: the stub is tested, not gdb's reading of DWARF, which `make gdb`'s test covers). What gdb
prints is checked against the kernel's own symbol table and gdb's own disassembly."""
import gzip
import re
import socket
import subprocess
import time

import pytest

from conftest import BUILD, RING3, ROOT, make, run

VMLINUX = BUILD / "tests" / "gdb" / "vmlinux-symbols"
TESTS = BUILD.parent / "tests"


@pytest.fixture(scope="module", autouse=True)
def built():
    make(RING3)                         # the default kernel is one of make test's own targets
    VMLINUX.parent.mkdir(parents=True, exist_ok=True)
    run(["objcopy", "--strip-debug", BUILD / "guest" / "vmlinux", VMLINUX])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(port, command, *options):
    return subprocess.Popen([str(RING3), "run", "--gdb", f"tcp::{port}", *options, "--cmd", command],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def connect(port):
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def symbol(name):
    out = run(["nm", VMLINUX]).stdout
    return int(re.search(rf"^([0-9a-f]+) [tT] {name}$", out, re.M).group(1), 16)


def packet(data):
    return b"$" + data + b"#%02x" % (sum(data) % 256)


def reply(s):
    """The next packet's data from the stub, acknowledged; acks before it are dropped."""
    buf = b""
    while True:
        m = re.search(rb"\$([^#]*)#([0-9a-f]{2})", buf)
        if m:
            assert int(m.group(2), 16) == sum(m.group(1)) % 256, buf
            s.sendall(b"+")
            return m.group(1)
        chunk = s.recv(65536)
        assert chunk, f"connection closed; got {buf!r}"
        buf += chunk


def ask(s, data):
    s.sendall(packet(data))
    return reply(s)


def test_kernel_breakpoint_step_and_exit():
    """-S: gdb finds the guest at its first instruction; a breakpoint on do_sys_openat2 (set
    while paging is off, placed once the kernel maps itself) stops `cat /proc/version`; bt names
    the system call that called it; finish (at the entry, where gdb finds the frame without
    debug info) returns to it; at the next open, stepi goes one instruction at a time, as x/4i
    says; a watchpoint on jiffies stops in do_timer; after delete and continue the command's
    output arrives and gdb hears the guest exit."""
    port = free_port()
    p = start(port, "cat /proc/version", "-S")
    script = ["set pagination off", f"target remote :{port}", "info registers eip",
              "break do_sys_openat2", "continue", "info registers eip", "bt 2", "finish", "continue",
              "x/4i $pc", "stepi", "stepi", "stepi", "info registers eip", "monitor info registers",
              "delete", "watch *(unsigned long *)&jiffies", "continue", "delete", "continue"]
    g = subprocess.run(["gdb", "-batch", "-nx", *[a for c in script for a in ("-ex", c)], str(VMLINUX)],
                       capture_output=True, text=True, timeout=120)
    out, err = p.communicate(timeout=60)
    log = g.stdout + g.stderr
    assert p.returncode == 0 and "Linux version 6.12" in out, (out, err, log)
    entry = re.search(r"^eip\s+0x([0-9a-f]+)", log, re.M)
    assert entry and int(entry.group(1), 16) == 0x1000000, log     # the bzImage's protected-mode entry
    target = symbol("do_sys_openat2")
    assert f"Breakpoint 1, 0x{target:08x} in do_sys_openat2 ()" in log, log
    assert re.search(r"^#1 .* in __ia32_sys_open(at)? \(\)", log, re.M), log
    insns = [int(a, 16) for a in re.findall(r"^(?:=> )?\s*0x([0-9a-f]+) <do_sys_openat2(?:\+\d+)?>:", log, re.M)]
    steps = [int(a, 16) for a in re.findall(r"^0x([0-9a-f]+) in do_sys_openat2 \(\)", log, re.M)]
    assert len(insns) == 4 and insns[0] == target and steps == insns[1:4], log
    # gdb's `monitor` is the monitor prompt's command (tests/test_prompt.py)
    assert re.search(rf"^eip={steps[2]:08x} eflags=[0-9a-f]{{8}} cpl=0$", log, re.M), log
    # finish: back in the system call that called it (gdb -batch prints only where it stopped)
    assert re.search(r"^0x[0-9a-f]+ in __ia32_sys_open(at)? \(\)$", log, re.M), log
    # a write watchpoint (a host perf breakpoint) on jiffies: the next tick's write stops there
    tick = re.search(r"^Old value = (\d+)\nNew value = (\d+)\n0x[0-9a-f]+ in (\w+) \(\)$", log, re.M)
    assert tick and int(tick.group(2)) == int(tick.group(1)) + 1 and tick.group(3) == "do_timer", log
    assert "exited normally" in log, log


def test_make_gdb_with_linux_gdb_scripts(tmp_path):
    """`make gdb` (README): the default kernel's debug information names the source line of a
    breakpoint and its arguments; Linux's own scripts/gdb run: lx-dmesg prints the boot log from
    its first line, lx-ps lists init; the guest's console is in build/gdb/console.log; its time
    stands still while gdb holds it."""
    script = tmp_path / "session.gdb"
    script.write_text("set pagination off\nbreak do_sys_openat2\ncontinue\nlx-dmesg\nlx-ps\n"
                      "delete\nbreak hrtimer_nanosleep\ncontinue\nshell sleep 3\ndelete\ncontinue\n")
    command = "cat /proc/version /proc/uptime; sleep 1; cat /proc/uptime"
    p = subprocess.run(["make", "--no-print-directory", "-s", "gdb", f"CMD={command}",
                        f"GDB_ARGS=-batch -x {script}"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, stdin=subprocess.DEVNULL)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log
    assert re.search(r"^Breakpoint 1, do_sys_openat2 \(dfd=.*, filename=.*\) at .*fs/open\.c:\d+$", log, re.M), log
    assert re.search(r"^\[\s*0\.000000\] Linux version 6\.12", log, re.M), log
    assert re.search(r"^0x[0-9a-f]+\s+1\s+init$", log, re.M), log
    assert "exited normally" in log, log
    console = (BUILD / "gdb" / "console.log").read_text()
    assert "Linux version 6.12" in console, console
    # the guest slept 1 s of its own time, though gdb held it 3 s in the middle: its clock (the
    # PIT, as make gdb boots it) stood still meanwhile
    before, after = [float(m) for m in re.findall(r"^(\d+\.\d+) \d+\.\d+$", console, re.M)]
    assert 1.0 <= after - before < 1.5, console


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_user_process_breakpoint(tmp_path, isolation):
    """A breakpoint at main of a static program (add-symbol-file, with its debug info), set
    before the program exists: placed when the process maps the page, hit in the process,
    in both isolation modes; next steps over a call; at probe(), gdb reads xmm1 and st0 and
    writes them, and the program prints what it wrote; then it runs to its end."""
    target = tmp_path / "target"
    run(["gcc", "-m32", "-msse2", "-static", "-g", "-O0", "-Wl,-Ttext-segment=0x30000000", "-o", target,
         TESTS / "data" / "gdb_target.c"])
    extra = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], input=b"target\n", cwd=tmp_path,
                           capture_output=True, check=True).stdout
    initrd = tmp_path / "initrd.gz"       # Linux unpacks concatenated archives one after another
    initrd.write_bytes((BUILD / "guest" / "initramfs.cpio.gz").read_bytes() + gzip.compress(extra))
    port = free_port()
    p = start(port, "/target a b; echo status=$?", "-S", "--isolation", isolation, "--initrd", str(initrd))
    script = ["set pagination off", f"target remote :{port}", f"add-symbol-file {target}",
              "break main", "continue", "info registers eip", "next", "delete", "break probe",
              "continue", "p/x $xmm1.v4_int32", "p $st0", "info registers ftag", "set $xmm1.v4_int32[0] = 42",
              "set $st0 = 2.5", "delete", "continue"]
    g = subprocess.run(["gdb", "-batch", "-nx", *[a for c in script for a in ("-ex", c)], str(VMLINUX)],
                       capture_output=True, text=True, timeout=120)
    out, err = p.communicate(timeout=60)
    log = g.stdout + g.stderr
    main = int(re.search(r"^([0-9a-f]+) T main$", run(["nm", target]).stdout, re.M).group(1), 16)
    assert re.search(r"^Breakpoint 1, main \(argc=3, argv=0x[0-9a-f]+\) at .*gdb_target.c:\d+$", log, re.M), log
    assert re.search(rf"^eip\s+0x{main:x}\s", log, re.M), log
    assert re.search(r"^\d+\s+printf\(\"target argc=%d\\n\", argc\);$", log, re.M), log
    # the x87 and SSE registers (the target description's): read, then written
    assert "$1 = {0x11111111, 0x22222222, 0x33333333, 0x44444444}" in log, log
    assert "$2 = 3.14159265358979323851" in log, log
    assert re.search(r"^ftag\s+0x3fff\s", log, re.M), log     # fldpi: R7 valid (TOP 7), the rest empty
    assert (p.returncode, out) == (0, "target argc=3\nxmm1 0000002a 22222222 33333333 44444444 st0 2.5\n"
                                      "status=43\n"), (out, err, log)
    assert "exited normally" in log, log


def test_bad_input_on_the_socket():
    """Bad sums get `-` and a resend is answered; unknown packets get the empty answer; an
    unmapped address E14; watchpoints the debug registers cannot hold E22; `monitor` (qRcmd)
    runs the prompt's commands; noise and a 1 MiB packet change nothing; then `c` runs the guest."""
    port = free_port()
    p = start(port, "echo still-here", "-S")
    s = connect(port)
    assert ask(s, b"?") == b"S05"               # stopped when gdb attaches
    s.sendall(b"$g#00")
    assert s.recv(1) == b"-"
    assert len(ask(s, b"g")) == 2 * (16 * 4 + 8 * 10 + 8 * 4 + 8 * 16 + 4)   # with x87 and SSE
    assert b"<feature name=\"org.gnu.gdb.i386.sse\">" in ask(s, b"qXfer:features:read:target.xml:0,3000")
    assert ask(s, b"qXfer:features:read:other.xml:0,10") == b"E00"
    assert ask(s, b"qThisIsNoPacket") == b""
    assert ask(s, b"m1,4") != b"" and ask(s, b"mfffff000,4") == b"E14"
    assert ask(s, b"Z1,1000000,1") == b"" and ask(s, b"Z3,1000,4") == b""     # gdb says it cannot
    assert ask(s, b"Z2,1001,4") == b"E22" and ask(s, b"Z4,1000,3") == b"E22"  # not a DR7 length
    assert ask(s, b"Z2,1000,4") == b"OK" and ask(s, b"z2,1000,4") == b"OK"
    assert bytes.fromhex(ask(s, b"qRcmd," + b"info status".hex().encode()).decode()) == \
        b"the guest is stopped\n"
    assert ask(s, b"qRcmd,zz") == b"E01"
    s.sendall(bytes(range(256)) * 64 + b"$" + b"A" * (1 << 20) + b"#00")
    assert ask(s, b"?") == b"S05"
    s.sendall(packet(b"c"))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and "still-here" in out, (out, err)


def test_ctrl_c_detach_and_a_second_client():
    """Ctrl-C (0x03) stops a running guest; after D it runs on; a second client attaches,
    stops it again, and its `c` lets the command finish."""
    port = free_port()
    p = start(port, "sleep 3; echo done")
    s = connect(port)
    assert ask(s, b"?") == b"S05"
    s.sendall(packet(b"c"))
    time.sleep(0.5)
    s.sendall(b"\x03")
    assert reply(s) == b"S02"
    assert ask(s, b"D") == b"OK"
    s.close()
    s = connect(port)
    assert ask(s, b"?") == b"S05"
    s.sendall(packet(b"c"))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and "done" in out, (out, err)


def test_exit_waits_for_the_acknowledgement():
    """The exit (W) is acknowledged with `+` like every packet, and ring3 keeps the connection
    until it has the `+`: gdb's write of it to a socket already closed fails (EPIPE), and gdb
    then reports a lost target instead of the exit."""
    port = free_port()
    p = start(port, "echo bye", "-S")
    s = connect(port)
    assert ask(s, b"?") == b"S05"
    s.sendall(packet(b"c"))
    buf = b""
    while not re.search(rb"\$W00#[0-9a-f]{2}", buf):
        chunk = s.recv(65536)
        assert chunk, f"connection closed; got {buf!r}"
        buf += chunk
    time.sleep(0.5)                     # gdb slow to answer: ring3 waits
    assert p.poll() is None, p.communicate()
    s.sendall(b"+")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and "bye" in out, (out, err)


@pytest.mark.parametrize("spec", ["tcp:1234", "tcp::0", "tcp::99999", "tcp:nohost:1", "unix:", "serial:x"])
def test_bad_gdb_address(spec):
    p = subprocess.run([str(RING3), "run", "--gdb", spec], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--gdb" in p.stderr, p.stderr


def test_gdb_port_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = subprocess.run([str(RING3), "run", "--gdb", f"tcp::{port}", "--cmd", "true"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode != 0 and p.stderr == f"ring3: cannot listen for gdb on tcp::{port}: Address already in use\n", p.stderr

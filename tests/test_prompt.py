"""The monitor prompt (monitor/prompt/): Ctrl-A c on the terminal, --monitor unix:PATH, and the
same commands through gdb's `monitor` in tests/test_gdb.py. Each test runs once per isolation
mode: `stop` must hold the guest whether the timer finds it in the kernel or in a process."""
import os
import re
import socket
import subprocess
import time

import pytest

from test_linux import RING3, interactive, isolation, read_until, ring3_run  # noqa: F401 (isolation: the fixture)

PROMPT = b"(ring3) "
REGISTERS = re.compile(r"eax=[0-9a-f]{8} .*\n.*\neip=([0-9a-f]{8}) eflags=[0-9a-f]{8} cpl=[03]\n", re.S)


def ask(master, line):
    """Type (line) at the terminal's prompt; returns the answer, without the echo and prompt."""
    os.write(master, line + b"\r")
    out = read_until(master, b"\r\n" + PROMPT, 10)
    echo, answer = out.split(line + b"\r\n", 1)
    assert echo == b"", out
    return answer[:-len(PROMPT)].replace(b"\r\n", b"\n").decode()


def test_ctrl_a_c_prompt_on_the_terminal():
    """Ctrl-A c, info registers, stop, x, cont, Ctrl-A c: the guest's shell runs on."""
    with interactive() as (p, master, _, _):
        os.write(master, b"\x01h")
        read_until(master, b"C-a c    switch between the guest's console and the monitor prompt", 10)
        os.write(master, b"\x01c")
        read_until(master, b"ring3 monitor - type 'help' for more information\r\n" + PROMPT, 10)
        assert REGISTERS.search(ask(master, b"info registers"))
        assert ask(master, b"stop") == ""
        assert ask(master, b"info status") == "the guest is stopped\n"
        esp = int(re.search(r"esp=([0-9a-f]{8})", ask(master, b"info registers")).group(1), 16)
        words = ask(master, b"x/6x $esp")
        assert re.fullmatch(rf"{esp:08x}:( 0x[0-9a-f]{{8}}){{4}}\n{esp + 16:08x}:( 0x[0-9a-f]{{8}}){{2}}\n",
                            words), words
        assert re.fullmatch(r"0000000000000000: 0x[0-9a-f]{4} 0x[0-9a-f]{4}\n", ask(master, b"xp/2xh 0"))
        assert ask(master, b"xp/1x 0x7fffffffff") == "0000007fffffffff: outside guest memory\n"
        assert ask(master, b"x/2x 0") == "00000000: not mapped\n"     # Linux never maps page 0
        assert ask(master, b"frobnicate") == "unknown command: 'frobnicate' (help lists them)\n"
        assert ask(master, b"cont") == ""
        assert ask(master, b"info status") == "the guest is running\n"
        os.write(master, b"\x01c")
        os.write(master, b"echo still-$((6*7))\r")
        read_until(master, b"still-42", 10)
        os.write(master, b"\x01c")
        read_until(master, PROMPT, 10)
        os.write(master, b"quit\r")
        read_until(master, b"ring3: terminated (monitor quit)", 10)
        assert p.wait(timeout=10) == 0


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    deadline = time.monotonic() + 30
    while True:
        try:
            s.connect(str(path))
            s.settimeout(30)
            return s
        except (FileNotFoundError, ConnectionRefusedError):
            assert time.monotonic() < deadline, "the monitor socket never came"
            time.sleep(0.05)


def until_prompt(s):
    data = b""
    while not data.endswith(PROMPT):
        chunk = s.recv(65536)
        assert chunk, f"the monitor hung up; got {data!r}"
        data += chunk
    return data[:-len(PROMPT)].decode()


def stat_rows(table):
    """The --stats table's rows (the first line, with the time in all, left out)."""
    return table.splitlines()[1:]


def test_monitor_socket_stops_and_continues(tmp_path):
    """--monitor unix:PATH with --stats: while stopped, the guest takes no event at all (the
    table stands still); after cont, the command ends as it would have."""
    path = tmp_path / "mon.sock"
    p = subprocess.Popen(ring3_run("--stats", "--monitor", f"unix:{path}", "--cmd",
                                   "i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; echo done-$i"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        s = connect(path)
        assert until_prompt(s) == "ring3 monitor - type 'help' for more information\n"
        s.sendall(b"stop\r\n")          # \r\n is one line
        assert until_prompt(s) == ""
        s.sendall(b"info stats\n")
        before = until_prompt(s)
        assert "ring3 stats:" in before and "device deadline (SIGALRM)" in before, before
        time.sleep(1)
        s.sendall(b"info stats\n")
        assert stat_rows(until_prompt(s)) == stat_rows(before)
        s.sendall(b"y" * 5000 + b"\n")
        assert until_prompt(s) == "the line is too long: at most 1023 bytes\n"
        s.sendall(b"info registers\n")
        assert REGISTERS.search(until_prompt(s))
        s.sendall(b"cont\n")
        assert until_prompt(s) == ""
        s.close()                       # the guest runs on without a client
        out, err = p.communicate(timeout=60)
        assert (p.returncode, out) == (0, "done-30\n"), err
    finally:
        p.kill()
        p.wait()


def test_monitor_socket_quit_and_a_second_client(tmp_path):
    path = tmp_path / "mon.sock"
    p = subprocess.Popen(ring3_run("--monitor", f"unix:{path}", "--cmd", "sleep 60"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = connect(path)
        until_prompt(first)
        first.sendall(b"info")          # half a line, then gone
        first.close()
        second = connect(path)
        until_prompt(second)
        second.sendall(b"info status\nquit\n")
        assert until_prompt(second) == "the guest is running\n"
        _, err = p.communicate(timeout=30)
        assert p.returncode == 0 and "ring3: terminated (monitor quit)" in err, err
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("spec, why", [
    ("tcp::4444", "--monitor 'tcp::4444': give unix:PATH"),
    ("unix:", "--monitor 'unix:': give unix:PATH"),
])
def test_monitor_bad_address_is_one_line(spec, why):
    p = subprocess.run([RING3, "run", "--monitor", spec], capture_output=True, text=True, timeout=30)
    assert (p.returncode, p.stderr) == (2, f"ring3: {why}\n")


def test_monitor_socket_that_cannot_listen_is_one_line(tmp_path):
    spec = f"unix:{tmp_path}/no/such/dir/mon.sock"
    p = subprocess.run([RING3, "run", "--monitor", spec, "--cmd", "true"], capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    assert p.stderr == f"ring3: cannot listen for the monitor on {spec}: No such file or directory\n"


def test_stop_holds_the_guests_clock(tmp_path):
    """With the PIT as the guest's clock source (as `make gdb` boots it), `stop` stops the
    guest's time: a `sleep 2` held 3 s in the middle still takes 2 s of the guest's uptime."""
    path = tmp_path / "mon.sock"
    p = subprocess.Popen(ring3_run("--monitor", f"unix:{path}", "--append", "clocksource=pit tsc=unstable",
                                   "--cmd", "cat /proc/uptime; sleep 2; cat /proc/uptime"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        s = connect(path)
        until_prompt(s)
        time.sleep(1)                   # the guest is in its sleep
        s.sendall(b"stop\n")
        until_prompt(s)
        time.sleep(3)
        s.sendall(b"cont\n")
        until_prompt(s)
        out, err = p.communicate(timeout=60)
        before, after = [float(line.split()[0]) for line in out.splitlines()]
        assert 2.0 <= after - before < 2.5, (out, err)
    finally:
        p.kill()
        p.wait()

"""The channel between ring3 instances (ikc/) and the switch on it (--net ikc, net/ikc.c), with
the default guest. Two and eight instances on one switch; a member killed with SIGKILL in the
middle of a transfer; `ring3 ikc list`; bad options. tests/unit/test_ikc.c is the hostile member
(garbage in the rings and packets). Each test runs in both isolation modes.
"""
import os
import signal
import subprocess
import time
import uuid

import pytest

from test_linux import BOOT_TIMEOUT, ISOLATION, RING3, isolation  # noqa: F401 (the fixture)
from test_net import pattern_sha256, send_pattern

LAN = "ip addr add 192.168.7.{}/24 dev eth0; ip link set eth0 up"
WAIT_FOR_1 = "until ping -c 1 -W 1 192.168.7.1 >/dev/null; do :; done; sleep 1"
# Wait (at most 60 s) until 192.168.7.N answers.
REACH = ("i=0; until ping -c 1 -W 1 192.168.7.{0} >/dev/null; do i=$((i+1)); "
         "[ $i -ge 60 ] && break; done; ping -c 1 -W 2 192.168.7.{0} >/dev/null && echo reach {0}")


@pytest.fixture
def group():
    name = f"t{uuid.uuid4().hex[:12]}"
    yield name
    path = f"/dev/shm/ring3-ikc.{os.getuid()}.{name}"
    leftover = os.path.exists(path)
    if leftover:
        os.unlink(path)
    assert not leftover, "the last member out leaves the group's shared object behind"


def member(group, command, *options):
    return subprocess.Popen(
        [RING3, "run", *ISOLATION, "--net", f"ikc,group={group}", *options, "--cmd", command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def finish(p, timeout=BOOT_TIMEOUT + 120):
    """(status, stdout, stderr) of member (p) once it ends; one that is still running after
    (timeout) s is ended as a user would (SIGTERM: it leaves its group), and its status is
    "timed out", with what it printed so far."""
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            out, err = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        return "timed out", out, err
    finally:
        p.kill()


def report(results):
    """Every member's status and the end of its output, for an assertion's message."""
    return "\n".join(f"member {i}: {status}\n  out: {out[-600:]!r}\n  err: {err[-600:]!r}"
                     for i, (status, out, err) in enumerate(results, start=1))


def ikc_list(group):
    return subprocess.run([RING3, "ikc", "list", group], capture_output=True, text=True,
                          timeout=30)


def test_two_guests_ping_and_move_64_mib(group):
    """Ping both ways, and 64 MiB with nc from one guest to the other, checksummed on both ends;
    while both run, `ring3 ikc list` shows the two members and their NICs."""
    size = 64 << 20
    server = member(group, f"{LAN.format(1)}; nc -l -p 5000 | sha256sum; {REACH.format(2)}")
    try:
        client = member(group, f"{LAN.format(2)}; {REACH.format(1)}; {send_pattern(size, 5000)}; "
                               "sleep 3")
        time.sleep(2)
        listing = ikc_list(group)
        c = finish(client)
        s = finish(server)
    finally:
        server.kill()
    assert c[0] == 0 and c[1].split() == ["reach", "1"], c
    assert s[0] == 0 and s[1].split() == [pattern_sha256(size), "-", "reach", "2"], s
    assert listing.returncode == 0, listing.stderr
    rows = [l for l in listing.stdout.splitlines()[2:] if l.strip()]
    assert len(rows) == 2 and all(" net 52:54:01:" in r for r in rows), listing.stdout


def test_eight_guests_all_pairs_ping_and_move_64_mib(group):
    """Eight instances on one switch: each pings the seven others (by learnt or flooded
    addresses), then stays up long enough for the others to ping it; meanwhile the eighth sends
    the first 64 MiB with nc, checksummed on both ends, past the six others."""
    n, size = 8, 64 << 20
    ps = []
    try:
        for i in range(1, n + 1):
            reach = "; ".join(REACH.format(j) for j in range(1, n + 1) if j != i)
            # the listener's stdin stays open (a background job's is /dev/null, whose end
            # would end busybox's nc): a FIFO that this shell holds
            extra = ("mkfifo /tmp/keep; (nc -l -p 5000 </tmp/keep | sha256sum) & exec 3>/tmp/keep;"
                     if i == 1 else
                     f"({WAIT_FOR_1}; {send_pattern(size, 5000)}) &" if i == n else "")
            ps.append(member(group, f"{LAN.format(i)}; {extra} {reach}; sleep 12; wait",
                             "-m", "96M"))
        # one deadline for all: once one member is found hung, the others are not waited
        # for as long again, and every member's output shows where it stood
        deadline = time.monotonic() + BOOT_TIMEOUT + 240
        results = [finish(p, timeout=max(1.0, deadline - time.monotonic())) for p in ps]
    finally:
        for p in ps:
            p.kill()
    for i, (status, out, err) in enumerate(results, start=1):
        want = [f"reach {j}" for j in range(1, n + 1) if j != i]
        lines = out.splitlines()
        if i == 1:
            assert f"{pattern_sha256(size)}  -" in lines, report(results)
            lines.remove(f"{pattern_sha256(size)}  -")
        assert status == 0 and lines == want, report(results)


def test_a_member_killed_mid_transfer(group):
    """Three members; the third streams to the first through the switch and is killed with
    SIGKILL. Within a second its slot is free (`ring3 ikc list`); the first two still reach
    each other, and a new member joins and reaches both."""
    a = member(group, f"{LAN.format(1)}; sleep 600 | nc -l -p 5000 >/dev/null & {REACH.format(4)}; "
                      f"{REACH.format(2)}; sleep 5")
    b = member(group, f"{LAN.format(2)}; {REACH.format(4)}; {REACH.format(1)}; sleep 5")
    # the first member's listener may start after it answers a ping: connect until it does
    c = member(group, f"{LAN.format(3)}; {REACH.format(1)}; "
                      "until yes 0123456789abcdef | nc 192.168.7.1 5000; do sleep 0.2; done")
    ps = [a, b, c]
    try:
        # the transfer is under way once the first member's guest has read a few MiB
        deadline = time.monotonic() + BOOT_TIMEOUT
        while time.monotonic() < deadline and str(c.pid) not in ikc_list(group).stdout:
            time.sleep(0.2)
        time.sleep(4)
        assert c.poll() is None, c.communicate()
        os.kill(c.pid, signal.SIGKILL)
        c.wait()
        killed = time.monotonic()
        while str(c.pid) in ikc_list(group).stdout and time.monotonic() - killed < 5:
            time.sleep(0.05)
        gone_after = time.monotonic() - killed
        d = member(group, f"{LAN.format(4)}; {REACH.format(1)}; {REACH.format(2)}; sleep 5")
        ps.append(d)
        results = [finish(p) for p in (a, b, d)]
    finally:
        for p in ps:
            p.kill()
    assert gone_after < 1.5, f"the killed member was listed {gone_after:.2f} s after"
    assert results[0][0] == 0 and results[0][1].split() == ["reach", "4", "reach", "2"], results[0]
    assert results[1][0] == 0 and results[1][1].split() == ["reach", "4", "reach", "1"], results[1]
    assert results[2][0] == 0 and results[2][1].split() == ["reach", "1", "reach", "2"], results[2]


@pytest.mark.parametrize("args, says", [
    (["--net", "ikc"], "--net ikc needs its group"),
    (["--net", "ikc,group=a/b"], "'group=a/b' is not group=NAME (1 to 32 of"),
    (["--ikc", "a b", "--net", "ikc"], "--ikc 'a b': a group name is 1 to 32 of"),
    (["--net", "ikc,group=" + "x" * 33], "'group=" + "x" * 33 + "' is not group=NAME"),
    (["--net", "ikc,group=g,color=red"], "'color=red' is not group=NAME"),
])
def test_bad_ikc_option_is_one_line(args, says):
    p = subprocess.run([RING3, "run", *args, "--cmd", "true"], capture_output=True, text=True,
                       timeout=BOOT_TIMEOUT, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and says in p.stderr, p.stderr


def test_ikc_list_of_no_group_is_one_line():
    p = ikc_list(f"none{uuid.uuid4().hex[:8]}")
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "is running" in p.stderr, p.stderr

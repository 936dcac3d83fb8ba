"""virtio-net (virtio/net.c) on user-mode networking (net/user.c, libslirp) and on QEMU's stream
protocol (net/stream.c), with the default guest: its /init brings eth0 up by DHCP. Each test
runs in both isolation modes. tests/unit/test_net_stream.c feeds the stream backend bad frames.
"""
import functools
import hashlib
import http.server
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest

import qemu_guest  # tools/qemu_guest.py, on the path by conftest.py

from test_linux import BOOT_TIMEOUT, ISOLATION, RING3, guest, isolation, ok  # noqa: F401 (the fixture)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(tmp_path):
    """Python's http.server on 127.0.0.1 serving (tmp_path), for the guest at 10.0.2.2."""
    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Handler, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield tmp_path, server.server_address[1], requests
    server.shutdown()
    server.server_close()


DHCP_VIEW = ("ip -4 addr show eth0 | grep -o 'inet [0-9./]*'; ip route | grep default; "
             "cat /etc/resolv.conf")


def test_dhcp_gives_the_user_network_address():
    out = ok(DHCP_VIEW)
    assert out == ("inet 10.0.2.15/24\ndefault via 10.0.2.2 dev eth0 \n"
                   "nameserver 10.0.2.3\n"), out


@pytest.mark.skipif(not qemu_guest.KERNEL.exists(), reason="make guest-kernel-plain builds it")
def test_dhcp_as_under_qemu():
    """The same /init under qemu-system-i386 with -nic user,model=virtio-net-pci."""
    want = qemu_guest.run(DHCP_VIEW)
    assert (ok(DHCP_VIEW), 0) == (want.output, want.status)


def test_wget_from_a_host_server_matches_its_sha256(http_server):
    """64 MiB over TCP from the host through 10.0.2.2, checksummed on both ends."""
    directory, port, _ = http_server
    data = bytes(range(256)) * 4096 * 64
    (directory / "blob").write_bytes(data)
    out = ok(f"wget -q -O - http://10.0.2.2:{port}/blob | sha256sum")
    assert out.split()[0] == hashlib.sha256(data).hexdigest()


def test_restrict_on_keeps_the_guest_from_the_host(http_server):
    """restrict=on: DHCP still answers, a connection from the guest to 10.0.2.2 reaches
    nothing. What the guest prints is what it prints under QEMU with restrict=on (busybox's
    wget dies of SIGSEGV when its connection fails, there as here)."""
    directory, port, requests = http_server
    (directory / "f").write_text("x")
    command = (f"ip -4 addr show eth0 | grep -o 'inet [0-9.]*'; "
               f"wget -q -T 3 -O - http://10.0.2.2:{port}/f; echo wget $?")
    out = ok(command, "--net", "user,restrict=on")
    assert out.startswith("inet 10.0.2.15\n") and not requests, out
    if qemu_guest.KERNEL.exists():
        want = qemu_guest.run(command, net=["restrict=on"])
        assert (out, 0) == (want.output, want.status)


def test_hostfwd_reaches_a_guest_listener():
    """--net user,hostfwd=tcp::PORT-:7000: a host client talks to busybox nc in the guest."""
    port = free_port()
    p = subprocess.Popen([RING3, "run", *ISOLATION,
                          "--net", f"user,hostfwd=tcp:127.0.0.1:{port}-:7000",
                          "--cmd", "echo from-guest | nc -l -p 7000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True)
    got = b""
    deadline = time.monotonic() + BOOT_TIMEOUT
    try:
        while time.monotonic() < deadline and not got:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    got = c.recv(100)
            except OSError:
                pass
            if not got:
                time.sleep(0.2)
        out, err = p.communicate(timeout=BOOT_TIMEOUT)
    finally:
        p.kill()
    assert got == b"from-guest\n", err
    assert p.returncode == 0, err


def test_the_mtu_is_libslirps_largest_on_user_unless_given():
    """VIRTIO_NET_F_MTU: 65520 on user-mode networking (as slirp4netns), mtu= otherwise."""
    assert ok("cat /sys/class/net/eth0/mtu") == "65520\n"
    assert ok("cat /sys/class/net/eth0/mtu", "--net", "user,mtu=1500") == "1500\n"


# Feature bits of virtio-net (virtio 1.2, 5.1.3) as the guest's sysfs shows the negotiated ones.
F_CSUM, F_GUEST_CSUM, F_GUEST_TSO4, F_GUEST_TSO6 = 0, 1, 7, 8
F_HOST_TSO4, F_HOST_TSO6, F_HOST_ECN, F_MRG_RXBUF = 11, 12, 13, 15
FEATURES = "cat /sys/class/net/eth0/device/features"


def negotiated(line):
    """The bit numbers set in a virtio device's sysfs features (one character per bit)."""
    return {i for i, c in enumerate(line.strip()) if c == "1"}


def test_the_guest_takes_the_offloads_and_merged_buffers():
    """Linux's virtio_net accepts checksum and TCP segmentation offloads for what it sends (the
    monitor segments for libslirp) and MRG_RXBUF; GUEST_TSO4/6 are offered only by a backend
    that delivers such frames (a TAP device)."""
    bits = negotiated(ok(FEATURES))
    assert {F_CSUM, F_GUEST_CSUM, F_HOST_TSO4, F_HOST_TSO6, F_HOST_ECN, F_MRG_RXBUF} <= bits, bits
    assert not {F_GUEST_TSO4, F_GUEST_TSO6} & bits, bits


def test_net_none_leaves_no_nic():
    assert ok("ls /sys/class/net", "--net", "none") == "lo\n"


# Two guests on one stream: the server's address, and how the client waits for it to listen.
LAN = "ip addr add 192.168.7.{}/24 dev eth0"
WAIT_FOR_PEER = "until ping -c 1 -W 1 192.168.7.1 >/dev/null; do :; done; sleep 1"
PATTERN = b"0123456789abcdef\n"
# Wait (at most 30 s) for the peer to go, then show the carrier.
CARRIER_GONE = ("for i in $(seq 300); do [ $(cat /sys/class/net/eth0/carrier) = 0 ] && break; "
                "sleep 0.1; done; cat /sys/class/net/eth0/carrier")


def pattern_sha256(size):
    data = PATTERN * (size // len(PATTERN) + 1)
    return hashlib.sha256(data[:size]).hexdigest()


def send_pattern(size, port):
    return f"yes 0123456789abcdef | head -c {size} | nc 192.168.7.1 {port}"


def wait_for_socket(path, p, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(path), p.stderr.read() if p.poll() is not None else "no socket"


def test_two_guests_on_a_stream_ping_and_move_64_mib(tmp_path):
    """--net stream,server=on in one ring3, --net stream in another: ping both ways, and
    64 MiB from the client to the server with nc, checksummed on both ends. When the server's
    ring3 ends, the client's link goes down (its carrier: 1, then 0)."""
    sock = str(tmp_path / "lan.sock")
    size = 64 << 20
    server = subprocess.Popen(
        [RING3, "run", *ISOLATION, "--net", f"stream,path={sock},server=on", "--cmd",
         f"{LAN.format(1)}; nc -l -p 5000 | sha256sum; "
         "ping -c 2 192.168.7.2 | grep -c 'bytes from'"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for_socket(sock, server)
        client = guest(f"{LAN.format(2)}; {WAIT_FOR_PEER}; cat /sys/class/net/eth0/carrier; "
                       f"{send_pattern(size, 5000)}; {CARRIER_GONE}",
                       "--net", f"stream,path={sock}", timeout=BOOT_TIMEOUT + 120)
        out, err = server.communicate(timeout=BOOT_TIMEOUT)
    finally:
        server.kill()
    assert client.returncode == 0 and client.stdout.endswith("1\n0\n"), client.stdout + client.stderr
    assert server.returncode == 0, err
    assert out.split() == [pattern_sha256(size), "-", "2"], out + err
    assert not os.path.exists(sock), "the server's socket file outlives it"


@pytest.mark.skipif(not qemu_guest.KERNEL.exists(), reason="make guest-kernel-plain builds it")
def test_a_ring3_guest_and_a_qemu_guest_on_a_stream(tmp_path):
    """ring3 listens with --net stream,server=on; qemu-system-i386 joins with its own
    -netdev stream. 16 MiB from ring3 to QEMU (QEMU TCG is the slow end), checksummed."""
    sock = str(tmp_path / "lan.sock")
    size = 16 << 20
    server = subprocess.Popen(
        [RING3, "run", *ISOLATION, "--net", f"stream,path={sock},server=on", "--cmd",
         f"{LAN.format(2)}; until ping -c 1 -W 1 192.168.7.1 >/dev/null; do :; done; "
         f"sleep 2; {send_pattern(size, 5001)}; {CARRIER_GONE}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for_socket(sock, server)
        qemu = qemu_guest.run(
            f"{LAN.format(1)}; nc -l -p 5001 | sha256sum; ping -c 2 192.168.7.2 | grep -c 'bytes from'",
            nic=["-netdev", f"stream,id=lan,server=off,addr.type=unix,addr.path={sock}",
                 "-device", "virtio-net-pci,netdev=lan"], timeout=300)
        out, err = server.communicate(timeout=BOOT_TIMEOUT)
    finally:
        server.kill()
    assert (qemu.output.split(), qemu.status) == ([pattern_sha256(size), "-", "2"], 0), qemu.output
    assert server.returncode == 0 and out.endswith("0\n"), out + err


@pytest.mark.skipif(shutil.which("passt") is None, reason="passt is not installed")
def test_a_guest_on_passt_through_a_stream(http_server):
    """passt (Debian's, `-s SOCKET`) speaks the same stream protocol: its DHCP configures the
    guest's eth0, and the guest reaches a host server through passt's gateway address."""
    directory, port, _ = http_server
    (directory / "f").write_text("through passt\n")
    sockets = tempfile.mkdtemp(prefix="ring3-passt-", dir="/tmp")
    os.chmod(sockets, 0o1777)           # passt run as root becomes nobody, and binds there
    sock = os.path.join(sockets, "passt.sock")
    passt = subprocess.Popen(["passt", "-q", "-f", "-1", "-s", sock], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and passt.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if passt.poll() is not None:
            # passt needs a host interface with a route to copy; a machine without one has none
            pytest.skip(f"passt did not start here: {passt.stderr.read().strip()[-200:]}")
        out = ok("ip -4 addr show eth0 | grep -c 'inet '; "
                 "gw=$(ip route | awk '/^default/ { print $3 }'); "
                 f"wget -q -O - http://$gw:{port}/f", "--net", f"stream,path={sock}")
    finally:
        passt.kill()
        passt.wait()
        shutil.rmtree(sockets, ignore_errors=True)
    assert out == "1\nthrough passt\n", out


def can_make_taps():
    return (os.geteuid() == 0 and os.path.exists("/dev/net/tun")
            and subprocess.run(["ip", "tuntap", "help"], capture_output=True).returncode in (0, 255))


@pytest.fixture
def tap():
    """A TAP device of the host, 192.168.77.1/24 on the host's side, owned by this user."""
    if not can_make_taps():
        pytest.skip("making a TAP device needs root and /dev/net/tun")
    name = f"r3tap{os.getpid() % 10000}"
    subprocess.run(["ip", "tuntap", "add", "dev", name, "mode", "tap", "user", str(os.getuid())],
                   check=True)
    try:
        subprocess.run(["ip", "addr", "add", "192.168.77.1/24", "dev", name], check=True)
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "link", "del", name])


def test_a_guest_on_a_tap_device_reaches_the_host(tap):
    """--net tap,ifname=NAME: the guest pings the host's side of the device, and its nc
    reaches a host listener there."""
    got = []
    with socket.socket() as listener:
        listener.bind(("192.168.77.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def serve():
            c, _ = listener.accept()
            with c:
                got.append(c.recv(100))
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        out = ok("ip addr add 192.168.77.2/24 dev eth0; "
                 "ping -c 2 192.168.77.1 | grep -c 'bytes from'; "
                 f"echo from-the-guest | nc 192.168.77.1 {port}", "--net", f"tap,ifname={tap}")
        thread.join(timeout=10)
    assert out.endswith("2\n"), out
    assert got == [b"from-the-guest\n"], got


def tap_stat(name, what):
    return int((pathlib.Path("/sys/class/net") / name / "statistics" / what).read_text())


TAP_STATS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets")


def frame_average(a, b, way):
    """The average length of the frames a TAP device counted one way (rx: from the guest)."""
    frames = b[f"{way}_packets"] - a[f"{way}_packets"]
    return (b[f"{way}_bytes"] - a[f"{way}_bytes"]) / max(frames, 1), frames


def test_a_guest_on_a_tap_device_moves_data_with_offloads(tap):
    """A TAP device with vnet headers takes the guest's TCP segments of up to 64 KiB whole and
    gives it such segments (GUEST_TSO4): 16 MiB each way, checksummed on both ends (busybox's
    httpd sends a file with sendfile, which fills such segments; nc writes 1 KiB at a time), and
    the device's counters show frames far longer than the MTU of 1500 both ways."""
    size = 16 << 20
    data = (PATTERN * (size // len(PATTERN) + 1))[:size]
    stats = [{k: tap_stat(tap, k) for k in TAP_STATS}]
    got = {}

    def host_side():
        deadline = time.monotonic() + BOOT_TIMEOUT
        while time.monotonic() < deadline and "sha" not in got:
            try:
                with urllib.request.urlopen("http://192.168.77.2:8000/blob", timeout=30) as r:
                    got["sha"] = hashlib.sha256(r.read()).hexdigest()
            except OSError:
                time.sleep(0.2)
        stats.append({k: tap_stat(tap, k) for k in TAP_STATS})
        while time.monotonic() < deadline:              # then the guest listens for the data
            try:
                with socket.create_connection(("192.168.77.2", 6000), timeout=2) as c:
                    c.settimeout(None)
                    c.sendall(data)
                    return
            except OSError:
                time.sleep(0.2)

    thread = threading.Thread(target=host_side, daemon=True)
    thread.start()
    out = ok(f"ip addr add 192.168.77.2/24 dev eth0; {FEATURES}; mkdir /tmp/www; "
             f"yes 0123456789abcdef | head -c {size} > /tmp/www/blob; httpd -p 8000 -h /tmp/www; "
             "nc -l -p 6000 | sha256sum", "--net", f"tap,ifname={tap}", timeout=BOOT_TIMEOUT + 120)
    thread.join(timeout=30)
    stats.append({k: tap_stat(tap, k) for k in TAP_STATS})
    lines = out.splitlines()
    assert {F_GUEST_CSUM, F_GUEST_TSO4, F_GUEST_TSO6, F_HOST_TSO4} <= negotiated(lines[0]), out
    assert got.get("sha") == pattern_sha256(size), got
    assert lines[1].split()[0] == pattern_sha256(size), out
    sent, frames = frame_average(stats[0], stats[1], "rx")
    assert sent > 3000, f"the guest's {frames} frames: {sent:.0f} bytes on average"
    received, frames = frame_average(stats[1], stats[2], "tx")
    assert received > 3000, f"the host's {frames} frames: {received:.0f} bytes on average"


def test_a_tap_device_held_elsewhere_is_one_line(tap):
    first = subprocess.Popen([RING3, "run", *ISOLATION, "--net", f"tap,ifname={tap}",
                              "--cmd", "sleep 20"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        time.sleep(1)
        p = guest("true", "--net", f"tap,ifname={tap}", timeout=30)
    finally:
        first.kill()
        first.wait()
    assert p.returncode != 0 and f"TAP device {tap} is held by another process" in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr


def test_a_stream_client_needs_its_server(tmp_path):
    p = guest("true", "--net", f"stream,path={tmp_path}/nobody.sock", timeout=30)
    assert p.returncode != 0 and "cannot connect to" in p.stderr, p.stderr
    assert "server=on" in p.stderr and p.stderr.count("\n") == 1, p.stderr


@pytest.mark.parametrize("value, says", [
    ("bogus", "the backend is 'user', 'stream', 'tap', 'ikc' or 'none'"),
    ("tap", "a TAP device needs ifname=NAME"),
    ("tap,ifname=a-name-of-16-chars", "is not ifname=NAME"),
    ("user,mtu=67", "mtu=68..65520"),
    ("stream,path=/tmp/x,mtu=65521", "mtu=68..65520"),
    ("stream", "needs either path=SOCKET or port=PORT"),
    ("stream,path=/tmp/x,port=5", "needs either path=SOCKET or port=PORT"),
    ("stream,port=5,server=yes", "is not path=SOCKET"),
    ("stream,port=0", "is not path=SOCKET"),
    ("stream,path=/tmp/x,host=h", "host= goes with port="),
    ("user,hostfwd=tcp::70000-:22", "is not hostfwd="),
    ("user,hostfwd=tcp::2222", "is not hostfwd="),
    ("user,mac=01:00:5e:00:00:01", "is not hostfwd="),
    ("user,speed=fast", "is not hostfwd="),
])
def test_bad_net_option_is_one_line_and_exit_2(value, says):
    p = subprocess.run([RING3, "run", "--net", value], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and says in p.stderr and p.stderr.count("\n") == 1, p.stderr


def test_net_none_with_another_net_is_refused():
    p = subprocess.run([RING3, "run", "--net", "none", "--net", "user"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2 and "--net none and another --net" in p.stderr, p.stderr


def test_forwarded_port_in_use_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = guest("true", "--net", f"user,hostfwd=tcp:127.0.0.1:{port}-:22", timeout=30)
    assert p.returncode != 0 and f"cannot forward host TCP port {port}" in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr

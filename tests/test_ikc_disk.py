"""A disk one ring3 serves to another in an IKC group (block/served.h: --disk FILE,export=NAME and
--disk ikc:NAME): the Debian root booted from a served image, data synced then either side
killed with SIGKILL, one user at a time, `ring3 ikc list`, bad options. The serving guest is the
default initramfs, idle; the image is a copy (test_debian's fixture).
"""
import os
import subprocess
import time
import uuid

import pytest

from conftest import RING3, SOAK
from test_debian import DEBIAN, IMAGE, TIMEOUT, fsck_clean, host_file_sha256, image  # noqa: F401

pytestmark = pytest.mark.skipif(not IMAGE.exists(), reason="make rootfs builds build/rootfs.img")


@pytest.fixture
def group():
    name = f"d{uuid.uuid4().hex[:12]}"
    yield name
    path = f"/dev/shm/ring3-ikc.{os.getuid()}.{name}"
    if os.path.exists(path):        # every member here ends by SIGKILL: nobody left to remove it
        os.unlink(path)


def start(*args):
    return subprocess.Popen([RING3, "run", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)


def serve(group, disk, name="root"):
    """A ring3 that serves (disk) as (name) and idles; listed once it serves."""
    p = start("--ikc", group, "--disk", f"{disk},export={name}", "--cmd", "sleep 600")
    deadline = time.monotonic() + 30
    while f"disk export {name}" not in ikc_list(group):
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.1)
    return p


def ikc_list(group):
    return subprocess.run([RING3, "ikc", "list", group], capture_output=True, text=True,
                          timeout=30).stdout


def read_until(p, word):
    lines = []
    while word not in lines:
        line = p.stdout.readline()
        assert line, f"the guest ended early: {lines} {p.stderr.read()}"
        lines.append(line.strip())
    return lines


def test_the_debian_root_from_a_served_disk_keeps_what_it_synced(group, image):
    """The client boots the Debian root from the served copy, writes 16 MiB, syncs, and is
    killed; the host reads the file whole from the image, a second client is refused while the
    first holds the disk, and after the server is killed too the filesystem checks clean."""
    server = serve(group, image)
    client = start("--ikc", group, "--disk", "ikc:root", *DEBIAN, "--cmd",
                   "cat /etc/debian_version; head -c 16M /dev/urandom > /root/synced.bin && "
                   "sync && sha256sum /root/synced.bin && echo synced && sleep 600")
    try:
        lines = read_until(client, "synced")
        listing = ikc_list(group)
        second = subprocess.run([RING3, "run", "--ikc", group, "--disk", "ikc:root", "--cmd",
                                 "true"], capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)
        client.kill()
        client.wait()
        digest = lines[-2].split()[0]
        assert host_file_sha256(image, "/root/synced.bin") == digest
    finally:
        client.kill()
        server.kill()
        server.wait()
    assert lines[0].startswith("12."), lines
    assert "disk export root" in listing and "disk ikc:root" in listing, listing
    assert second.returncode == 2 and len(second.stderr.splitlines()) == 1, second.stderr
    assert "is in use by member" in second.stderr, second.stderr
    subprocess.run(["e2fsck", "-fy", image], capture_output=True)
    fsck_clean(image)
    assert host_file_sha256(image, "/root/synced.bin") == digest


def test_sync_then_kill_9_of_the_server_loses_nothing(group, tmp_path):
    """8 MiB written to the served disk and synced, then the server killed: the image holds
    them. The client's guest goes on (its disk fails from then on, as one pulled out)."""
    disk = tmp_path / "data.img"
    disk.write_bytes(b"\0" * (32 << 20))
    server = serve(group, disk, "data")
    client = start("--ikc", group, "--disk", "ikc:data", "--cmd",
                   "yes ring3-served | head -c 8388608 > /dev/vda && sync && echo synced && "
                   "sleep 3 && echo alive")
    try:
        read_until(client, "synced")
        server.kill()
        server.wait()
        out, err = client.communicate(timeout=60)
    finally:
        client.kill()
        server.kill()
    assert client.returncode == 0 and out.split() == ["alive"], out + err
    want = (b"ring3-served\n" * ((8 << 20) // 13 + 1))[:8 << 20]
    assert disk.read_bytes()[:8 << 20] == want


@pytest.mark.parametrize("args, says", [
    (["--disk", "ikc:root"], "needs their group: add --ikc NAME"),
    (["--disk", "x.img,export=root"], "needs their group: add --ikc NAME"),
    (["--ikc", "g", "--disk", "ikc:a/b"], "a served disk's name is 1 to 32 of"),
    (["--ikc", "g", "--disk", "ikc:root,snapshot=on"], "'snapshot=on' is not"),
    (["--ikc", "g", "--disk", "x.img,export=a/b"], "'export=a/b' is not"),
    (["--ikc", "g", "--disk", "x.img,export=a", "--disk", "y.img,export=b"],
     "serves export=a already, and serves one disk only"),
])
def test_bad_served_disk_option_is_one_line(args, says):
    p = subprocess.run([RING3, "run", *args, "--cmd", "true"], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and says in p.stderr, p.stderr


def test_a_disk_nobody_serves_is_one_line(group):
    """No member serves the name: one line after the wait, exit 2."""
    p = subprocess.run([RING3, "run", "--ikc", group, "--disk", "ikc:nothing", "--cmd", "true"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "serves a disk 'nothing'" in p.stderr, p.stderr


def test_two_disks_from_one_server_is_one_line(group, tmp_path):
    """Two served disks from one member would share its one answer ring: refused, one line."""
    disk = tmp_path / "d.img"
    disk.write_bytes(bytes(1 << 20))
    server = serve(group, disk)
    try:
        p = subprocess.run([RING3, "run", "--ikc", group, "--disk", "ikc:root", "--disk",
                            "ikc:root,readonly=on", "--cmd", "true"], capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        server.kill()
        server.wait()
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "the member serving ikc:root serves it too" in p.stderr, p.stderr


@pytest.mark.skipif(not SOAK, reason="make soak runs it (about 4 minutes); bench/table_shimos.py too")
def test_gnu_patch_builds_on_a_served_root(group):
    """GNU patch's upstream source, configured and built with the Debian root's gcc on a root
    another ring3 serves (snapshot=on on the server: the image stays as it is); the built patch
    runs. In-process guest processes (--isolation none), the faster mode; bench/table_shimos.py
    times both roots."""
    server = serve(group, f"{IMAGE},snapshot=on")
    try:
        p = subprocess.run([RING3, "run", "--isolation", "none", "-m", "1G", "--ikc", group,
                            "--disk", "ikc:root", *DEBIAN, "--cmd",
                            "set -e; cd /root; tar xf /usr/src/patch-2.7.6.tar.xz; cd patch-2.7.6; "
                            "./configure >/dev/null 2>&1; make -j1 >/dev/null 2>&1; "
                            "./src/patch --version | head -1"],
                           capture_output=True, text=True, timeout=TIMEOUT * 2,
                           stdin=subprocess.DEVNULL)
    finally:
        server.kill()
        server.wait()
    assert p.returncode == 0 and p.stdout == "GNU patch 2.7.6\n", p.stdout + p.stderr

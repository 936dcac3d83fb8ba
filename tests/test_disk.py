"""virtio-blk disks (`ring3 run --disk`) with the busybox guest: reads and writes through the
guest's own virtio_blk driver, readonly=on, snapshot=on, and image locking against a second
ring3 and against QEMU. The Debian root on a disk is tests/test_debian.py.
"""
import hashlib
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RING3, file_sha256, ring3_cmd, ring3_ok

TIMEOUT = 120


@pytest.fixture
def pattern_image(tmp_path):
    """A 4 MiB raw image: sector n holds the line 'sector n' repeated."""
    path = tmp_path / "pattern.img"
    with open(path, "wb") as f:
        for n in range(8192):
            f.write((f"sector {n:5d}\n" * 39).encode().ljust(512, b"."))
    return path


@pytest.fixture
def ext4_image(tmp_path):
    """A 64 MiB ext4 image with one file, made on the host."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "hello").write_text("hello from the host\n")
    path = tmp_path / "ext4.img"
    subprocess.run(["mke2fs", "-q", "-t", "ext4", "-d", tree, "-F", path, "64M"], check=True)
    return path


def test_guest_reads_the_image_as_the_host_does(pattern_image):
    """The guest's /dev/vda holds the image's bytes: its checksum of the whole disk, and of
    one sector read with an offset, match the host's."""
    out = ring3_ok("cat /sys/block/vda/size; sha256sum /dev/vda; "
             "dd if=/dev/vda bs=512 skip=4321 count=1 2>/dev/null | sha256sum",
             "--disk", pattern_image).split()
    data = pattern_image.read_bytes()
    assert out[0] == str(len(data) // 512)
    assert out[1] == hashlib.sha256(data).hexdigest()
    assert out[3] == hashlib.sha256(data[4321 * 512:4322 * 512]).hexdigest()


def test_guest_writes_reach_the_image(pattern_image):
    before = pattern_image.read_bytes()
    ring3_ok("printf 'written by the guest' | dd of=/dev/vda bs=512 seek=7 conv=notrunc,fsync "
       "2>/dev/null", "--disk", pattern_image)
    after = pattern_image.read_bytes()
    assert after[7 * 512:7 * 512 + 20] == b"written by the guest"
    assert after[:7 * 512] == before[:7 * 512] and after[7 * 512 + 512:] == before[7 * 512 + 512:]


def test_ext4_made_on_the_host_mounts_and_takes_files(ext4_image):
    out = ring3_ok("mkdir -p /mnt && mount -t ext4 /dev/vda /mnt && cat /mnt/hello && "
             "seq 1 20000 > /mnt/numbers && umount /mnt && echo unmounted", "--disk", ext4_image)
    assert out == "hello from the host\nunmounted\n"
    subprocess.run(["e2fsck", "-fn", ext4_image], check=True, capture_output=True)
    numbers = subprocess.run(["debugfs", "-R", "cat /numbers", ext4_image],
                             capture_output=True, text=True, check=True).stdout
    assert numbers == "".join(f"{i}\n" for i in range(1, 20001))


def test_two_disks_in_order(pattern_image, ext4_image):
    out = ring3_ok("cat /sys/block/vda/size /sys/block/vdb/size", "--disk", ext4_image,
             "--disk", f"{pattern_image},readonly=on")
    assert out.split() == [str(64 << 11), "8192"]


def test_readonly_write_fails_and_the_image_is_untouched(pattern_image):
    """readonly=on offers VIRTIO_BLK_F_RO, as QEMU's does: the guest's kernel marks the disk
    read-only for good (blockdev --setrw cannot clear what the device reports) and fails every
    write with EPERM before it reaches the device, which would fail it too (the unit test
    tests/unit/test_virtio_blk.c sends one)."""
    before = file_sha256(pattern_image)
    out = ring3_ok("cat /sys/block/vda/ro; "
             "dd if=/dev/zero of=/dev/vda bs=512 count=1 2>&1; echo status $?; "
             "blockdev --setrw /dev/vda; "
             "dd if=/dev/zero of=/dev/vda bs=512 count=1 conv=fsync 2>&1; echo status $?",
             "--disk", f"{pattern_image},readonly=on")
    lines = out.splitlines()
    assert lines[0] == "1", out
    assert out.count("error writing '/dev/vda': Operation not permitted") == 2, out
    assert out.count("status 1") == 2, out
    assert file_sha256(pattern_image) == before


def test_snapshot_leaves_the_image_byte_identical(ext4_image):
    before = file_sha256(ext4_image)
    out = ring3_ok("mkdir -p /mnt && mount /dev/vda /mnt && seq 1 100000 > /mnt/big && sync && "
             "umount /mnt && mount /dev/vda /mnt && wc -l < /mnt/big && rm /mnt/hello && "
             "umount /mnt && dd if=/dev/zero of=/dev/vda bs=4096 count=64 conv=fsync "
             "2>/dev/null && echo zeroed", "--disk", f"{ext4_image},snapshot=on")
    assert out == "100000\nzeroed\n"
    assert file_sha256(ext4_image) == before


def wait_for_line(proc, want, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        if want in line:
            return
    pytest.fail(f"no {want!r} from the guest; it printed:\n{seen}")


@pytest.fixture
def holder(pattern_image):
    """A ring3 that has the image open read-write, sleeping in its guest."""
    p = subprocess.Popen([RING3, "run", "--disk", pattern_image, "--cmd",
                          "echo holding; sleep 600"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for_line(p, "holding")
        yield p
    finally:
        p.kill()
        p.wait()


def test_second_writer_is_refused(pattern_image, holder):
    before = file_sha256(pattern_image)
    for spec in (pattern_image, f"{pattern_image},readonly=on"):
        p = ring3_cmd("echo ran", "--disk", spec, timeout=30)
        assert p.returncode == 2, p
        assert p.stdout == "" and p.stderr.count("\n") == 1, p
        assert "in use by another ring3 or QEMU" in p.stderr, p.stderr
    # snapshot=on with readonly=on does not write the image, but still wants it consistent:
    # QEMU's rule refuses it too while a writer runs.
    assert ring3_cmd("echo ran", "--disk", f"{pattern_image},snapshot=on", timeout=30).returncode == 2
    holder.kill()
    holder.wait()
    # The lock went with the process, kill -9 and all.
    assert ring3_ok("echo ran", "--disk", pattern_image) == "ran\n"
    assert file_sha256(pattern_image) == before


def test_readers_share_an_image(pattern_image):
    p = subprocess.Popen([RING3, "run", "--disk", f"{pattern_image},snapshot=on", "--cmd",
                          "echo holding; sleep 600"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for_line(p, "holding")
        assert ring3_ok("cat /sys/block/vda/ro", "--disk", f"{pattern_image},readonly=on") == "1\n"
        p2 = ring3_cmd("echo ran", "--disk", pattern_image, timeout=30)
        assert p2.returncode == 2 and "in use" in p2.stderr, p2
    finally:
        p.kill()
        p.wait()


QEMU = ["qemu-system-i386", "-display", "none", "-monitor", "none", "-serial", "none",
        "-nic", "none", "-S"]


def test_ring3_and_qemu_refuse_each_other(pattern_image, holder):
    """QEMU's image locking and ring3's are the same locks: QEMU cannot open the image ring3
    writes, and (below) ring3 cannot open one QEMU writes."""
    q = subprocess.run(QEMU + ["-drive", f"file={pattern_image},format=raw,if=virtio"],
                       capture_output=True, text=True, timeout=30)
    assert q.returncode != 0 and "lock" in q.stderr, q.stderr


def locked_bytes(file):
    """The bytes of (file), MAJOR:MINOR:INODE as /proc/locks names it, that some lock covers."""
    ranges = re.findall(rf" {file} (\d+) (\d+|EOF)$", Path("/proc/locks").read_text(), re.M)
    return {b for first, last in ranges for b in range(int(first), 300 if last == "EOF" else int(last) + 1)}


def test_qemu_holding_the_image_refuses_ring3(pattern_image):
    q = subprocess.Popen(QEMU + ["-drive", f"file={pattern_image},format=raw,if=virtio"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        # QEMU takes its locks while it starts, in steps (the open, then the device's
        # permissions); -S then waits with the CPU stopped. Until the locks that refuse a writer
        # show in /proc/locks, a ring3 started would take the image first: byte 101, QEMU
        # writes, and 201, nobody else may (block/image.c). /proc/locks names a file
        # MAJOR:MINOR:INODE and a range FIRST LAST, neighbouring bytes merged (fs/locks.c).
        st = os.stat(pattern_image)
        file = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        deadline = time.monotonic() + 60
        while not {101, 201} <= locked_bytes(file):
            assert q.poll() is None, q.stderr.read()
            assert time.monotonic() < deadline, "QEMU took no write lock on the image within 60 s"
            time.sleep(0.1)
        p = ring3_cmd("echo ran", "--disk", pattern_image, timeout=30)
        assert p.returncode == 2 and "in use by another ring3 or QEMU" in p.stderr, p
    finally:
        q.kill()
        q.wait()

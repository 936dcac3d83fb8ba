"""The Debian 12 i386 root on a virtio disk (build/rootfs.img, make rootfs): booting it, and
keeping what it writes. The image is never written by these tests: each works on a copy, or
uses snapshot=on.
"""
import contextlib
import hashlib
import os
import pty
import re
import select
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import BUILD, RING3, file_sha256, ring3_cmd, ring3_ok

IMAGE = BUILD / "rootfs.img"
TIMEOUT = 300
DEBIAN = ["--append", "root=/dev/vda"]


def debian(command, disk, *options):
    return ring3_cmd(command, "--disk", disk, *DEBIAN, *options, timeout=TIMEOUT)


def ok(command, disk, *options):
    return ring3_ok(command, "--disk", disk, *DEBIAN, *options, timeout=TIMEOUT)


@pytest.fixture
def image(tmp_path):
    """A copy of the root image, for a test that writes."""
    copy = tmp_path / "root.img"
    subprocess.run(["cp", "--sparse=always", IMAGE, copy], check=True)
    return copy


def host_file_sha256(image, path):
    """The file's checksum as the host reads it from the image, without mounting it."""
    p = subprocess.run(["debugfs", "-R", f"cat {path}", image], capture_output=True)
    assert p.returncode == 0, p.stderr
    return hashlib.sha256(p.stdout).hexdigest()


def fsck_clean(image):
    """`e2fsck -fn` on the image: exit 0 and nothing wrong but the free-space totals, which
    ext4 keeps lazily and e2fsck always recounts."""
    p = subprocess.run(["e2fsck", "-fn", image], capture_output=True, text=True)
    lazy = ("Free blocks count wrong", "Free inodes count wrong", "Fix? no",
            "skipping journal recovery")
    problems = [l for l in p.stdout.splitlines()
                if l.strip() and not l.startswith(("Pass ", "ring3-root: ", "e2fsck ")) and
                not any(s in l for s in lazy)]
    assert p.returncode == 0 and not problems, p.stdout + p.stderr
    return p.stdout


def test_debian_shell_commands():
    """The Debian root answers --cmd: its release, apt's package list, gcc, and the
    command's exit status."""
    out = ok("cat /etc/debian_version; apt list --installed 2>/dev/null | grep -c installed; "
             "gcc --version | head -1; id -un; uname -m; findmnt -no SOURCE,FSTYPE /",
             f"{IMAGE},snapshot=on").splitlines()
    assert out[0].startswith("12."), out
    assert int(out[1]) > 100, out
    assert out[2].startswith("gcc (Debian 12."), out
    assert out[3:5] == ["root", "i686"], out
    assert out[5].split() == ["/dev/vda", "ext4"], out
    assert debian("exit 3", f"{IMAGE},snapshot=on").returncode == 3


def read_until(fd, want, timeout):
    seen = b""
    deadline = time.monotonic() + timeout
    while want not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            pytest.fail(f"no {want!r} within {timeout} s; the console showed:\n"
                        f"{seen[-2000:].decode(errors='replace')}")
        try:
            seen += os.read(fd, 4096)
        except OSError:
            pytest.fail(f"the console closed before {want!r}:\n{seen[-2000:].decode(errors='replace')}")
    return seen


@contextlib.contextmanager
def console(image):
    """ring3 booting (image) as its root, on a pty as `make run ROOT=debian` gives it: the
    process and the pty's master end; ring3 is killed if it is still running at the end."""
    master, slave = pty.openpty()
    p = subprocess.Popen([RING3, "run", "--disk", f"{image},snapshot=on", *DEBIAN],
                         stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    try:
        yield p, master
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        os.close(master)


def test_interactive_shell_then_poweroff():
    """`make run ROOT=debian` as a user sees it: Debian's boot on the console, a root shell
    with a prompt, commands answered, and `poweroff` (Debian's own shutdown: runlevel 0, the
    root remounted read-only, then halt, as the kernel has no power-off driver) ends ring3
    with status 0."""
    with console(IMAGE) as (p, master):
        boot = read_until(master, b"root@ring3:", TIMEOUT)
        assert b"INIT: version" in boot and b"Debian GNU/Linux 12" in boot
        os.write(master, b"gcc --version | head -1; echo done-$((6 * 7))\n")
        assert b"gcc (Debian 12." in read_until(master, b"done-42", 60)
        os.write(master, b"poweroff\n")
        shutdown = read_until(master, b"System halted", 120)
        assert b"Will now halt" in shutdown and b"re-mounted" in shutdown
        assert p.wait(timeout=60) == 0


def test_64_mib_survive_a_reboot(image):
    """64 MiB of pseudo-random data written in the guest read back the same after the guest
    powered off and a second ring3 booted the same image; and the host reads the same bytes
    from the image; and the filesystem checks clean."""
    first = ok("head -c 64M /dev/urandom > /root/random.bin && sha256sum /root/random.bin",
               image).split()[0]
    second = ok("sha256sum /root/random.bin; stat -c %s /root/random.bin", image).split()
    assert second == [first, "/root/random.bin", str(64 << 20)]
    fsck_clean(image)
    assert host_file_sha256(image, "/root/random.bin") == first


def test_sync_then_kill_9_loses_nothing(image):
    """Data the guest synced (a virtio flush, fdatasync on the host) is on the image when the
    monitor is killed at once afterwards: the filesystem checks clean, before and after its
    journal is replayed, and the file is whole."""
    p = subprocess.Popen([RING3, "run", "--disk", image, *DEBIAN, "--cmd",
                          "head -c 16M /dev/urandom > /root/synced.bin && sync && "
                          "sha256sum /root/synced.bin && echo synced && sleep 600"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    try:
        lines = []
        while "synced" not in lines:
            line = p.stdout.readline()
            assert line, f"the guest ended early: {lines} {p.stderr.read()}"
            lines.append(line.strip())
    finally:
        p.kill()
        p.wait()
    digest = lines[-2].split()[0]
    print(fsck_clean(image))
    assert host_file_sha256(image, "/root/synced.bin") == digest
    # What the guest's next mount would do first: replay the journal. Then clean again.
    subprocess.run(["e2fsck", "-fy", image], capture_output=True)
    fsck_clean(image)
    assert host_file_sha256(image, "/root/synced.bin") == digest
    assert ok("sha256sum /root/synced.bin", image).split()[0] == digest


def test_snapshot_boot_leaves_the_image_byte_identical(image):
    before = file_sha256(image)
    out = ok("echo scratch > /root/scratch && sync && cat /root/scratch && rm -rf /usr/share/doc",
             f"{image},snapshot=on")
    assert out == "scratch\n"
    assert file_sha256(image) == before
    assert ok("test -e /root/scratch || echo gone; test -d /usr/share/doc && echo doc",
              f"{image},snapshot=on") == "gone\ndoc\n"


DEBUGGEE = r"""
#include <stdio.h>
int total;
static int square(int x)
{
    int y = x * x;
    return y;
}
int main(void)
{
    for (int i = 1; i <= 4; i++)
        total += square(i);
    printf("total %d\n", total);
    return 0;
}
"""

# gdb's own commands: a breakpoint, a step into the function, a local, a watchpoint on a
# global, and the run to the end. The watchpoint is gdb's default, a hardware one (the debug
# registers through ptrace: host breakpoints, monitor/host/breakpoints.c), or a software one
# (set can-use-hw-watchpoints 0: single steps and a compare after each).
GDB = ["break square", "run", "next", "print y", "finish",
       "delete 1", "watch total", "continue", "continue", "delete", "continue"]


@pytest.mark.parametrize("watchpoint", ["Hardware watchpoint", "Watchpoint"])
def test_gdb_in_the_guest(watchpoint):
    """gdb inside the Debian root on a program gcc -g built there: it stops at a breakpoint
    (int3), steps a line (single steps, TF), prints a local, stops where a watched global
    changes, and runs the program to its end."""
    commands = GDB if watchpoint == "Hardware watchpoint" else ["set can-use-hw-watchpoints 0"] + GDB
    script = " ".join(f"-ex '{c}'" for c in commands)
    out = ok(f"cd /tmp && cat > t.c <<'EOF'\n{DEBUGGEE}\nEOF\n"
             f"gcc -g -O0 -o t t.c && gdb -batch -nx {script} ./t 2>&1",
             f"{IMAGE},snapshot=on")
    assert "Breakpoint 1, square (x=1) at t.c:" in out, out
    assert "$1 = 1" in out, out
    assert re.search(rf"^{watchpoint} 2: total\r?$", out, re.M), out
    assert "Old value = 0" in out and "New value = 1" in out, out
    assert "Old value = 1" in out and "New value = 5" in out, out
    assert "total 30" in out and "exited normally" in out, out


def test_strace_of_a_pipeline():
    """strace -f follows both sides of a shell pipeline and shows their system calls."""
    out = ok("strace -f -e trace=execve,write,pipe,pipe2,wait4 "
             "sh -c 'echo ring3 | tr r R >/dev/null' 2>&1", f"{IMAGE},snapshot=on")
    assert 'execve("/usr/bin/sh"' in out or 'execve("/bin/sh"' in out, out
    assert 'execve("/usr/bin/tr"' in out, out
    # With -f, strace may split a call that another process interrupts into
    # `write(1, "ring3\\n", 6 <unfinished ...>` and `<... write resumed>) = 6`.
    assert 'write(1, "ring3\\n", 6' in out and 'write(1, "Ring3\\n", 6' in out, out
    assert "+++ exited with 0 +++" in out, out


# ---- the network (issue 18): DHCP at boot, ssh in through hostfwd, apt from the mirror ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dhcp_at_boot_and_ping_the_host():
    """Debian's networking script brings eth0 up by DHCP (ifupdown, dhclient); iputils ping
    reaches the user network's host address."""
    out = ok("ip -4 -br addr show eth0 | tr -s ' '; cat /etc/resolv.conf | grep nameserver; "
             "ping -c 2 -q 10.0.2.2 | grep -o '2 received'", f"{IMAGE},snapshot=on")
    assert out == "eth0 UP 10.0.2.15/24 \nnameserver 10.0.2.3\n2 received\n", out


def test_ssh_into_the_root_through_hostfwd(tmp_path):
    """The host's own ssh client runs a command in the guest's sshd through
    --net user,hostfwd=tcp:127.0.0.1:PORT-:22, as root with a key the guest was given."""
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    public = (tmp_path / "key.pub").read_text().strip()
    port = free_port()
    guest = subprocess.Popen(
        [RING3, "run", "--disk", f"{IMAGE},snapshot=on", *DEBIAN,
         "--net", f"user,hostfwd=tcp:127.0.0.1:{port}-:22", "--cmd",
         f"echo '{public}' >> /root/.ssh/authorized_keys; "
         "for i in $(seq 1200); do [ -s /tmp/done ] && break; sleep 0.1; done; "
         # the session that wrote it ends first: a guest powered off while sshd still closes
         # it leaves the client with "closed by remote host" (exit 255), not the command's 0
         "for i in $(seq 100); do grep -qs '^sshd: root@' /proc/[0-9]*/cmdline || break; sleep 0.1; done; "
         "cat /tmp/done"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    ssh = ["ssh", "-p", str(port), "-i", str(key), "-o", "BatchMode=yes",
           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
           "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR", "root@127.0.0.1",
           "uname -m; echo by-ssh > /tmp/done"]
    try:
        deadline, p = time.monotonic() + TIMEOUT, None
        while time.monotonic() < deadline and guest.poll() is None:
            p = subprocess.run(ssh, capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
            if p.returncode == 0:
                break
            time.sleep(0.5)
        out, err = guest.communicate(timeout=TIMEOUT)
    finally:
        guest.kill()
    assert p is not None and p.returncode == 0, (p and p.stderr, err)
    assert p.stdout == "i686\n", p.stdout
    assert guest.returncode == 0 and out == "by-ssh\n", out + err


def mirror():
    """The first mirror the root's apt names (make rootfs wrote the system's), or None."""
    sources = BUILD / "rootfs" / "tree" / "etc" / "apt" / "sources.list"
    for line in sources.read_text().splitlines() if sources.exists() else []:
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            return f"{words[1]}/dists/{words[2]}/Release"
    return None


def mirror_reachable():
    url = mirror()
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status == 200
    except (OSError, ValueError, TypeError):
        return False


def test_apt_get_install_from_the_mirror():
    """apt-get update and install in the guest, through user-mode networking and DNS, from
    the mirror make rootfs used; the installed program runs."""
    if not mirror_reachable():
        pytest.skip(f"the mirror of the root's apt ({mirror()}) does not answer from this host")
    out = ok("apt-get -q update >/dev/null 2>&1 && "
             "DEBIAN_FRONTEND=noninteractive apt-get -q -y install hello >/dev/null 2>&1 && hello",
             f"{IMAGE},snapshot=on")
    assert out == "Hello, world!\n", out

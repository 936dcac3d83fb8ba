"""What Debian's programs need of the guest kernel (guest/linux/ring3.config): all the memory
-m gives, System V IPC, inotify, seccomp, namespaces and cgroups, and systemd as init.

CPython's own regression tests (libpython3.11-testsuite in the Debian root) are the oracle
for the system calls: the modules that failed for the kernel's configuration alone run under
ring3 and under QEMU TCG with the plain kernel, and each test case must end the same way in
both.
"""
import os
import re
from xml.etree import ElementTree

import pytest

from conftest import BUILD, ring3_cmd, ring3_ok
from test_debian import console, read_until
import qemu_guest  # tools/qemu_guest.py, on the path by conftest.py

IMAGE = BUILD / "rootfs.img"
SYSTEMD_IMAGE = BUILD / "rootfs-systemd.img"
TIMEOUT = 600
ROOT = ["--append", "root=/dev/vda"]

# CPython 3.11's test modules that failed under ring3 and QEMU alike while the kernel had no
# madvise, fadvise, sockets, SysV IPC, inotify or seccomp.
CPYTHON_MODULES = ["test_mmap", "test_posix", "test_os", "test_signal", "test_fcntl", "test_pty"]


def on_root(command, image=IMAGE, *options, timeout=TIMEOUT):
    return ring3_ok(command, "--disk", f"{image},snapshot=on", *ROOT, *options, timeout=timeout)


def test_all_of_2g_is_usable():
    """-m 2G: the kernel sees it all (high memory), and a process fills and checks 1.5 GiB."""
    out = ring3_ok("free -m | sed -n 2p; touchmem 1536", "-m", "2G", timeout=300)
    total = int(out.split()[1])
    assert abs(total - 2048) <= 0.05 * 2048, out
    assert "touchmem: 1536 MiB ok" in out, out


def test_memory_above_4g_is_usable():
    """-m 5G: 3 GiB of RAM below 4 GiB and 2 GiB above it, which only the PAE kernel reaches.
    2000 MiB of files in the initramfs's root and a process that fills and checks 1500 MiB (of
    the 2 GiB a process has under the 2G/2G split) hold more than all the RAM below 4 GiB.
    (Several processes at once would do too, but --isolation none checks every mapping at each
    switch between them: minutes.)"""
    out = ring3_ok("free -m | sed -n 2p; dd if=/dev/zero of=/tmp/fill bs=1M count=2000 2>/dev/null;"
                   " touchmem 1500", "-m", "5G", "--isolation", "none", timeout=300)
    total = int(out.split()[1])
    assert abs(total - 5120) <= 0.05 * 5120, out
    assert "touchmem: 1500 MiB ok" in out, out


def test_sysv_ipc_inotify_and_seccomp_are_there():
    out = on_root("python3 -c '"
                  "import os, signal, select, ctypes, sys\n"
                  "libc = ctypes.CDLL(None, use_errno=True)\n"
                  "shm = libc.shmget(0, 4096, 0o1600)\n"
                  "print(\"shmget\", shm >= 0)\n"
                  "fd = libc.inotify_init1(0)\n"
                  "print(\"inotify\", fd >= 0)\n"
                  "print(\"seccomp\", open(\"/proc/self/status\").read().count(\"Seccomp:\"))\n"
                  "'")
    assert "shmget True" in out and "inotify True" in out and "seccomp 1" in out, out


def test_a_container_in_the_guest():
    """unshare gives a shell its own user, PID and mount namespaces: it is root there, and
    PID 1."""
    out = on_root("unshare --user --map-root-user --pid --mount --fork --mount-proc "
                  "sh -c 'echo pid $$ uid $(id -u)'")
    assert "pid 1 uid 0" in out, out


def test_a_cgroup_memory_limit_stops_a_process():
    """cgroup v2's memory controller: a process that goes past memory.max is killed."""
    out = on_root("mount -t cgroup2 none /sys/fs/cgroup && "
                  "echo +memory > /sys/fs/cgroup/cgroup.subtree_control && "
                  "mkdir /sys/fs/cgroup/small && echo 32M > /sys/fs/cgroup/small/memory.max && "
                  "sh -c 'echo $$ > /sys/fs/cgroup/small/cgroup.procs; "
                  "exec python3 -c \"b = bytearray(96 << 20); print(len(b))\"'; "
                  "echo status $?; grep -w oom_kill /sys/fs/cgroup/small/memory.events")
    assert "status 137" in out and re.search(r"oom_kill [1-9]", out), out


# Cases whose outcome the machine's timing decides, not the kernel: each measures the interval
# setitimer gives, and skips itself above 10 ms; the guest kernel has 100 Hz ticks and no
# high-resolution timers, so the interval is 10 ms give or take the host's timer latency, and
# lands on either side of the threshold (QEMU's and ring3's alike).
TIMING_DEPENDENT = {"test.test_signal.StressTest.test_stress_delivery_dependent",
                    "test.test_signal.StressTest.test_stress_delivery_simultaneous"}

# The test runner's JUnit report, printed after the run: one <testcase> a test case.
CPYTHON_COMMAND = ("cd /tmp && python3 -m test --junit-xml /tmp/cpython.xml " + " ".join(CPYTHON_MODULES)
                   + " > /dev/null 2>&1; echo; cat /tmp/cpython.xml")


def cpython_cases(output):
    """{test case: ok, skipped, failure or error} from the JUnit report in (output)."""
    start, end = output.find("<testsuites"), output.rfind("</testsuites>")
    assert start >= 0 and end > start, output[-2000:]
    cases = {}
    for case in ElementTree.fromstring(output[start:end + len("</testsuites>")]).iter("testcase"):
        outcome = [c.tag for c in case if c.tag in ("skipped", "failure", "error")]
        cases[case.get("name")] = outcome[0] if outcome else "ok"
    return cases


@pytest.fixture(scope="module")
def qemu_cpython():
    if not qemu_guest.KERNEL.exists():
        pytest.skip("make guest-kernel-plain builds the oracle's kernel")
    r = qemu_guest.run(CPYTHON_COMMAND, timeout=1800, disk=IMAGE, memory="512M")
    cases = cpython_cases(r.output)
    assert len(cases) > 300, r.output[-2000:]
    return cases


def test_cpython_tests_end_as_under_qemu(qemu_cpython):
    out = on_root(CPYTHON_COMMAND, IMAGE, "-m", "512M", timeout=1800)
    mine = cpython_cases(out)
    differ = sorted(f"{case}: QEMU {qemu_cpython.get(case)}, ring3 {mine.get(case)}"
                    for case in set(mine) | set(qemu_cpython)
                    if mine.get(case) != qemu_cpython.get(case) and
                    not (case in TIMING_DEPENDENT and {mine.get(case), qemu_cpython.get(case)} <= {"ok", "skipped"}))
    failing = sorted(c for c, r in qemu_cpython.items() if r in ("failure", "error"))
    assert not differ, "\n".join(differ[:40])
    assert not failing, f"failing under QEMU too (configuration?): {failing}"


def test_systemd_boots_the_debian_root():
    """systemd as init: the system is running (or degraded only by units said why), a service
    started with systemctl runs, and the guest powers off with status 0."""
    command = ("systemctl is-system-running --wait; systemctl --failed --no-legend --plain; "
               "printf '[Service]\\nType=oneshot\\nExecStart=/bin/sh -c \"echo hello from a unit "
               "> /run/hello\"\\n' > /run/systemd/system/hello.service && systemctl daemon-reload && "
               "systemctl start hello.service && cat /run/hello")
    p = ring3_cmd(command, "--disk", f"{SYSTEMD_IMAGE},snapshot=on", *ROOT, timeout=TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    state = p.stdout.split()[0]
    assert state == "running", p.stdout
    assert "hello from a unit" in p.stdout, p.stdout


def test_systemd_interactive_shell_then_poweroff():
    """`make run ROOT=debian INIT=systemd` as a user sees it: systemd's boot on the console,
    the root shell of ring3-console.service, and `poweroff` (systemd's own shutdown) ending
    ring3 with status 0."""
    with console(SYSTEMD_IMAGE) as (p, master):
        boot = read_until(master, b"root@ring3:", TIMEOUT)
        assert b"systemd" in boot, boot[-2000:]
        os.write(master, b"ps -o comm= -p 1; echo done-$((6 * 7))\n")
        assert b"systemd" in read_until(master, b"done-42", 60)
        os.write(master, b"poweroff\n")
        read_until(master, b"System halted", 120)     # no power-off driver: the kernel halts
        assert p.wait(timeout=60) == 0

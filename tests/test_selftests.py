"""The kernel's own x86 selftests as a conformance suite (mk/selftests.mk).

The 32-bit programs of tools/testing/selftests/x86, from the same linux-source-6.12 the guest
is built from and unchanged, run one after another in the guest: under QEMU TCG with the plain
kernel (the oracle), and under ring3 in both isolation modes. A program passes when it exits 0
and prints no [FAIL]. Every program that passes under QEMU must pass under ring3; the ones that
fail under QEMU too are listed below with QEMU's reason, and the list must stay true.
"""
import re
import subprocess

import pytest

from conftest import BUILD, RING3
import qemu_guest  # tools/qemu_guest.py, on the path by conftest.py

SELFTESTS = BUILD / "selftests" / "x86"
INITRAMFS = BUILD / "guest" / "initramfs-selftests.cpio.gz"
PROGRAM_TIMEOUT = 120       # seconds for one program inside the guest (busybox timeout)
RUN_TIMEOUT = 1800          # seconds for all of them in one guest

# Not run at all, and why.
LEFT_OUT = {
    "mov_ss_trap_32": "loops forever natively on a nested VM (a data breakpoint on the SS "
                      "load is never taken there), and so under ring3, whose breakpoints are "
                      "the host's (tests/test_debugregs.py)",
}

# Programs that fail under QEMU TCG with the plain kernel as well, with QEMU's reason.
QEMU_FAILS = {
    "test_syscall_vdso_32": "needs a 64-bit kernel (it far-calls into 64-bit code)",
}

MARK = re.compile(r"^@@ (\S+)(?: exit (\d+))?$", re.M)


def programs():
    return sorted(p.name for p in SELFTESTS.glob("*_32") if p.name not in LEFT_OUT)


def runner(names):
    """The shell command that runs (names) in turn, each between two marker lines, and kills
    one that runs past PROGRAM_TIMEOUT. The watcher sleeps once: busybox's timeout would wake
    each second, and with --isolation=none each of its wake-ups while ldt_gdt_32 holds 8192
    LDT entries costs ring3 2 x 8192 host modify_ldt calls (the watcher's user code must not
    see them; monitor/cpu/ldt.c), which made that one program take minutes. A killed
    watcher's sleep ends on its own, with nothing left to kill."""
    steps = [f'echo "@@ {n}"; ./{n} & p=$!; (sleep {PROGRAM_TIMEOUT}; kill -KILL $p) 2>/dev/null & '
             f'w=$!; wait $p; s=$?; kill $w; echo "@@ {n} exit $s"'
             for n in names]
    return "cd /usr/selftests; " + "; ".join(steps)


def results(output):
    """{program: (exit status or None when it never ended, its output)} from runner's output."""
    out, current, start = {}, None, 0
    for m in MARK.finditer(output):
        name, status = m.group(1), m.group(2)
        if status is None:
            current, start = name, m.end()
            out[name] = (None, output[start:])
        elif name == current:
            out[name] = (int(status), output[start:m.start()])
            current = None
    return out


def passed(result):
    status, text = result
    return status == 0 and "[FAIL]" not in text


def describe(name, result):
    if result is None:
        return f"{name}: never started"
    status, text = result
    tail = "\n    ".join(text.strip().splitlines()[-6:])
    return f"{name}: exit {status}\n    {tail}"


@pytest.fixture(scope="module")
def qemu_results():
    if not qemu_guest.KERNEL.exists():
        pytest.skip("make guest-kernel-plain builds the oracle's kernel")
    r = qemu_guest.run(runner(programs()), timeout=RUN_TIMEOUT, initramfs=INITRAMFS)
    return results(r.output)


def test_the_programs_are_built():
    names = programs()
    assert len(names) >= 20, f"only {names} in {SELFTESTS}"


def test_qemu_fails_only_where_listed(qemu_results):
    """The oracle itself: what fails under QEMU is what QEMU_FAILS says, no more, no less."""
    failing = {n for n in programs() if not passed(qemu_results.get(n, (None, "")))}
    report = "\n".join(describe(n, qemu_results.get(n)) for n in sorted(failing ^ set(QEMU_FAILS)))
    assert failing == set(QEMU_FAILS), report


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_ring3_passes_what_qemu_passes(isolation, qemu_results):
    p = subprocess.run([RING3, "run", "--isolation", isolation, "--initrd", INITRAMFS,
                        "--cmd", runner(programs())],
                       capture_output=True, text=True, timeout=RUN_TIMEOUT,
                       stdin=subprocess.DEVNULL)
    mine = results(p.stdout)
    broken = [n for n in programs() if passed(qemu_results.get(n, (None, "")))
              and not passed(mine.get(n, (None, "")))]
    report = "\n".join(describe(n, mine.get(n)) for n in broken)
    assert not broken, (f"{len(broken)} of the programs QEMU passes fail under ring3 "
                        f"(ring3 exit {p.returncode}; stderr: {p.stderr.strip()[-800:]}):\n"
                        f"{report}")

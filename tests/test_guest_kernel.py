"""The guest kernel recipe (mk/guest.mk): Linux 6.12 i386 built through ring3-as, audited clean."""
import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUEST = ROOT / "build" / "guest"
CHECK_CONFIG = ROOT / "guest" / "linux" / "check-config.sh"


def guest_kernel_in_test_deps():
    """mk/guest.mk adds guest-kernel to TEST_DEPS once the audit of the kernel is clean."""
    text = (ROOT / "mk" / "guest.mk").read_text()
    return re.search(r"^TEST_DEPS\s*\+=.*\bguest-kernel\b", text, re.M) is not None


def make(*targets):
    # A clean build of the kernel through the rewriter takes several minutes on 2 cores.
    return subprocess.run(["make", *targets], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600)


def check_config(tmp_path, fragment, config):
    (tmp_path / "frag").write_text(fragment)
    (tmp_path / "config").write_text(config)
    return subprocess.run([str(CHECK_CONFIG), str(tmp_path / "frag"), str(tmp_path / "config")],
                          capture_output=True, text=True)


def test_check_config_accepts_a_config_that_kept_the_fragment(tmp_path):
    r = check_config(tmp_path, "# comment\nCONFIG_TTY=y\n# CONFIG_SMP is not set\n"
                               "# CONFIG_ACPI is not set\nCONFIG_HZ=100\n",
                     "CONFIG_TTY=y\n# CONFIG_SMP is not set\nCONFIG_HZ=100\n")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("fragment, config, complaint", [
    ("CONFIG_TTY=y\n", "# CONFIG_TTY is not set\n", "got '# CONFIG_TTY is not set'"),
    ("CONFIG_TYPO=y\n", "CONFIG_TTY=y\n", "got '# CONFIG_TYPO is not set'"),
    ("CONFIG_HZ=100\n", "CONFIG_HZ=250\n", "got 'CONFIG_HZ=250'"),
    ("# CONFIG_SMP is not set\n", "CONFIG_SMP=y\n", "got 'CONFIG_SMP=y'"),
])
def test_check_config_rejects_a_setting_kconfig_dropped(tmp_path, fragment, config, complaint):
    r = check_config(tmp_path, fragment, config)
    assert r.returncode != 0
    assert complaint in r.stderr


def test_guest_kernel_is_rewritten_and_audits_clean():
    assert guest_kernel_in_test_deps(), "make test must build and audit the guest kernel"
    r = make("guest-kernel")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"(?<![0-9])0 unrewritten sensitive instructions", r.stdout), r.stdout[-3000:]
    audit = (GUEST / "audit.txt").read_text()
    assert re.search(r"^(?<![0-9])0 unrewritten sensitive instructions", audit, re.M), audit
    # The vDSO, which guest processes run, is audited on its own line.
    assert re.search(r"^vdso32: 0 unrewritten sensitive instructions", audit, re.M), audit

    elf = (GUEST / "vmlinux").read_bytes()[:20]
    assert elf[:4] == b"\x7fELF"
    assert elf[4] == 1, "not a 32-bit ELF"
    assert int.from_bytes(elf[18:20], "little") == 3, "not EM_386"

    # Every object went through ring3-as: gcc was told to look for `as` in build/asbin.
    cmd = (GUEST / "rewritten" / "init" / ".main.o.cmd").read_text()
    assert "-B" + str(ROOT / "build" / "asbin") + "/" in cmd


def test_insert_kernel_is_marked_and_audits_clean_in_insert_mode():
    """make guest-kernel-insert: the same source through ring3-as --ring3-mode=insert. The
    audit (--insert) accepts a sensitive unprivileged instruction only behind its marker."""
    text = (ROOT / "mk" / "guest.mk").read_text()
    assert re.search(r"^TEST_DEPS\s*\+=.*\bguest-kernel-insert\b", text, re.M)
    r = make("guest-kernel-insert")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    audit = (GUEST / "audit-insert.txt").read_text()
    assert re.search(r"^(?<![0-9])0 unrewritten sensitive instructions", audit, re.M), audit
    assert re.search(r"^vdso32: 0 unrewritten sensitive instructions", audit, re.M), audit
    cmd = (GUEST / "insert" / "init" / ".main.o.cmd").read_text()
    assert "-B" + str(ROOT / "build" / "asbin") + "/" in cmd and "--ring3-mode=insert" in cmd
    # Markers (ud1 %edi,%edi), and no call into the entry table (call *%cs:0xffff00NN).
    code = (GUEST / "vmlinux-insert").read_bytes()
    assert code.count(bytes.fromhex("0fb9ff")) > 500     # 927 in 6.12 with our configuration
    assert not re.search(rb"\x2e\xff\x15[\x00-\xfc]\x00\xff\xff", code)


def test_guest_kernel_rebuild_with_nothing_changed_does_nothing():
    # Up to the link, not the audit: this is about the recipe being incremental.
    assert make(str(GUEST.relative_to(ROOT) / "vmlinux")).returncode == 0
    before = os.stat(GUEST / "vmlinux")
    r = make(str(GUEST.relative_to(ROOT) / "vmlinux"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    after = os.stat(GUEST / "vmlinux")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert "  CC " not in r.stdout and "  LD " not in r.stdout, r.stdout[-3000:]

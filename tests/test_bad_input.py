"""Bad input to `ring3 run`: each case ends with one line on stderr, exit status 2, no crash.

The kernels are crafted here byte by byte, so each test names exactly what is
wrong with its file. RING3_BIN overrides the binary under test (default
build/bin/ring3).
"""
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RING3 = os.environ.get("RING3_BIN", str(ROOT / "build" / "bin" / "ring3"))

EM_386, EM_ARM, EM_X86_64, EM_AARCH64, EM_RISCV = 3, 40, 62, 183, 243
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_INTERP = 1, 3
MB_MAGIC = 0x1BADB002


def elf32(segments, entry=None, machine=EM_386, etype=ET_EXEC, multiboot=True, phtypes=None,
          code=b"\xfa\xf4\xeb\xfd"):
    """An i386 ELF: header, program headers, a Multiboot header, (code: `cli; hlt; jmp .-1`).

    segments: (paddr, memsz) pairs; the first holds the whole file from offset 0.
    """
    phnum = len(segments)
    code_off = 52 + 32 * phnum + (12 if multiboot else 0)
    body = b""
    if multiboot:
        body += struct.pack("<III", MB_MAGIC, 3, (-(MB_MAGIC + 3)) & 0xFFFFFFFF)
    body += code
    size = code_off + len(code)
    if entry is None:
        entry = segments[0][0] + code_off
    eh = struct.pack("<16sHHIIIIIHHHHHH", b"\x7fELF\x01\x01\x01" + bytes(9), etype, machine, 1,
                     entry, 52, 0, 0, 52, 32, phnum, 40, 0, 0)
    ph = b""
    for i, (paddr, memsz) in enumerate(segments):
        ptype = phtypes[i] if phtypes else PT_LOAD
        filesz = size if i == 0 else 0
        ph += struct.pack("<IIIIIIII", ptype, 0, paddr, paddr, filesz, max(memsz, filesz), 7, 0x1000)
    return eh + ph + body


def good_kernel():
    return elf32([(0x100000, 0x1000)])


def elf64_header(machine):
    return struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), ET_EXEC, machine, 1,
                       0x1000, 64, 0, 0, 64, 56, 0, 64, 0, 0)


def run(*args, timeout=10):
    """Run `ring3 run ARGS`; the guest must never start, so a timeout is a failure."""
    return subprocess.run([RING3, "run", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def assert_one_line_error(p, *needles):
    # A crash shows as a negative status (the signal), so this also says "no crash".
    assert p.returncode == 2, f"exit {p.returncode}, stderr: {p.stderr!r}"
    assert p.stdout == "", f"stdout should be empty: {p.stdout!r}"
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and p.stderr.endswith("\n"), f"want one line, got {p.stderr!r}"
    assert lines[0].startswith("ring3: "), lines[0]
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture
def write(tmp_path):
    def _write(name, data):
        path = tmp_path / name
        path.write_bytes(data)
        return path
    return _write


# ---- the kernel file ----

def test_missing_kernel_file(tmp_path):
    path = tmp_path / "no-such-vmlinux"
    assert_one_line_error(run(path), f"cannot open kernel '{path}': No such file or directory")


def test_kernel_is_directory(tmp_path):
    assert_one_line_error(run(tmp_path), "is a directory")


def test_empty_file(write):
    assert_one_line_error(run(write("empty", b"")), "is empty")


def test_not_elf(write):
    path = write("notes.txt", b"this is not a kernel\n" * 10)
    assert_one_line_error(run(path), f"'{path}' is not an ELF file")


def bzimage_header(version, loadflags=1):
    image = bytearray(4096)
    image[0x1F1] = 1                                    # setup_sects
    image[0x1FE:0x200] = b"\x55\xaa"
    image[0x201] = 0x66                                 # the jump: header ends at 0x268
    image[0x202:0x206] = b"HdrS"
    image[0x206:0x208] = struct.pack("<H", version)
    image[0x211] = loadflags
    image[0x238:0x23C] = struct.pack("<I", 2047)        # cmdline_size
    return image


def test_bzimage_old_protocol(write):
    assert_one_line_error(run(write("bzImage", bytes(bzimage_header(0x0204)))),
                          "boot protocol 2.04", "2.10 or later")


def test_zimage(write):
    assert_one_line_error(run(write("zImage", bytes(bzimage_header(0x020f, loadflags=0)))),
                          "is a zImage", "build a bzImage")


def test_bzimage_not_rewritten(write):
    # A well-formed header over code that holds no ring3 call site: a kernel built with plain as.
    assert_one_line_error(run(write("bzImage", bytes(bzimage_header(0x020f)) + bytes(8192))),
                          "not assembled by ring3-as", "make guest-kernel")


def test_vmlinux_not_rewritten(write):
    # An i386 ELF without a Multiboot header is booted as Linux, and must carry call sites.
    plain = elf32([(0x100000, 0x1000)], multiboot=False)
    assert_one_line_error(run(write("vmlinux", plain)), "not assembled by ring3-as")


def rewritten_vmlinux():
    # cli; hlt as ring3-as writes them: call *%cs:R3_TABLE+4*N (2E FF 15 addr32).
    site = b"\x2e\xff\x15" + struct.pack("<I", 0xFFFF0000 + 4 * 1)
    return elf32([(0x100000, 0x1000)], multiboot=False, code=site + b"\xeb\xfe")


def test_bzimage_with_absurd_header_fields_boots_safely(write):
    """cmdline_size and init_size as a corrupt header might have them: the loader keeps the
    command line to its own page and runs the code (cli; hlt as ring3-as writes them)."""
    sys.path.insert(0, str(ROOT / "rewriter"))
    from ring3as import abi
    image = bzimage_header(0x020f)
    image[0x238:0x23C] = struct.pack("<I", 0xFFFFFFFF)              # cmdline_size
    image[0x258:0x260] = struct.pack("<Q", 0x1000000)               # pref_address
    image[0x260:0x264] = struct.pack("<I", 0x1000)                  # init_size
    code = b"".join(b"\x2e\xff\x15" + struct.pack("<I", abi.slot_address(e)) for e in ("CLI", "HLT"))
    p = run("--append", "x" * 3000, write("bzImage", bytes(image[:1024]) + code + bytes(64)))
    assert (p.returncode, p.stderr) == (0, ""), p.stderr


def test_initrd_not_cpio(write):
    assert_one_line_error(run("--initrd", write("initrd", b"hello world\n"),
                              write("vmlinux", rewritten_vmlinux())),
                          "is not a cpio archive")


def test_cmdline_too_long(write):
    assert_one_line_error(run("--append", "x" * 3000, write("vmlinux", rewritten_vmlinux())),
                          "command line is", "at most 2047")


def test_cmd_needs_linux(write):
    assert_one_line_error(run("--cmd", "true", "--initrd", write("initrd", b"070701" + bytes(200)),
                              write("kernel", good_kernel())),
                          "--cmd needs a Linux kernel")


def test_compressed(write):
    assert_one_line_error(run(write("vmlinux.gz", b"\x1f\x8b\x08\x00" + bytes(100))), "compressed")


def test_x86_64_elf_crafted(write):
    line = assert_one_line_error(run(write("vmlinux64", elf64_header(EM_X86_64) + bytes(64))),
                                 "x86-64 ELF", "ring3 runs i386 kernels")
    assert "is an x86-64 ELF" in line


def test_x86_64_host_binary():
    true = Path("/bin/true")
    if not true.exists() or true.read_bytes()[:5] != b"\x7fELF\x02":
        pytest.skip("no 64-bit /bin/true here")
    assert_one_line_error(run(true), "x86-64 ELF")


@pytest.mark.parametrize("cls,machine,name", [
    (32, EM_ARM, "ARM"),
    (64, EM_AARCH64, "AArch64"),
    (64, EM_RISCV, "RISC-V"),
])
def test_other_machine(write, cls, machine, name):
    if cls == 32:
        data = elf32([(0x100000, 0x1000)], machine=machine)
    else:
        data = elf64_header(machine) + bytes(64)
    assert_one_line_error(run(write("kernel." + name, data)), f" {name} ELF", "i386")


def test_truncated_elf_header(write):
    assert_one_line_error(run(write("short", good_kernel()[:30])), "truncated")


def test_truncated_program_headers(write):
    data = bytearray(good_kernel()[:60])
    data[44:46] = struct.pack("<H", 4)       # e_phnum: four headers, file holds part of one
    assert_one_line_error(run(write("short-ph", bytes(data))), "truncated", "program headers")


def test_truncated_segment(write):
    data = good_kernel()
    # Keep the headers and the Multiboot header, drop the code the segment covers.
    assert_one_line_error(run(write("short-seg", data[:-3])), "truncated", "segment 0")


def test_segment_outside_guest_memory(write):
    kernel = write("high", elf32([(0x10000000, 0x1000)]))        # 256 MiB
    line = assert_one_line_error(run("-m", "64", kernel), "segment at 0x10000000", "-m ")
    assert "257 MiB" in line, line


def test_segment_beyond_largest_memory(write):
    kernel = write("very-high", elf32([(0xC0000000, 0x1000)]))   # 3 GiB physical
    assert_one_line_error(run(kernel), "segment at 0xc0000000", "link the kernel lower")


def test_segment_below_1mib(write):
    kernel = write("low", elf32([(0x20000, 0x1000)]))
    assert_one_line_error(run(kernel), "below 1 MiB", "link the kernel at 1 MiB or above")


def test_overlapping_segments(write):
    kernel = write("overlap", elf32([(0x100000, 0x2000), (0x101000, 0x1000)]))
    assert_one_line_error(run(kernel), "overlap")


def test_entry_outside_segments(write):
    kernel = write("noentry", elf32([(0x100000, 0x1000)], entry=0x900000))
    assert_one_line_error(run(kernel), "entry point")


def test_position_independent(write):
    assert_one_line_error(run(write("pie", elf32([(0x100000, 0x1000)], etype=ET_DYN))), "ET_DYN")


def test_dynamically_linked(write):
    kernel = write("dyn", elf32([(0x100000, 0x1000), (0, 0)], phtypes=[PT_LOAD, PT_INTERP]))
    assert_one_line_error(run(kernel), "dynamically linked")


def test_multiboot_unknown_required_flag(write):
    data = bytearray(good_kernel())
    off = 52 + 32
    flags = 0x3 | 0x8                        # bit 3: nothing defines it; a loader must refuse
    data[off:off + 12] = struct.pack("<III", MB_MAGIC, flags, (-(MB_MAGIC + flags)) & 0xFFFFFFFF)
    assert_one_line_error(run(write("mbflags", bytes(data))), "Multiboot", "0xb")


# ---- the initrd ----

def test_missing_initrd(write, tmp_path):
    missing = tmp_path / "no-such-initrd"
    assert_one_line_error(run("--initrd", missing, write("kernel", good_kernel())),
                          f"cannot open initrd '{missing}': No such file or directory")


def test_initrd_too_big_for_memory(write):
    kernel = write("kernel", good_kernel())
    initrd = write("initrd", b"")
    with open(initrd, "wb") as f:            # sparse: 40 MiB without writing them
        f.truncate(40 << 20)
    line = assert_one_line_error(run("-m", "32", "-initrd", initrd, kernel), "initrd", "-m ")
    assert "42 MiB" in line, line


# ---- options ----

@pytest.mark.parametrize("size,words", [
    ("8M", ("too small", "16M to 16G")),
    ("0", ("too small",)),
    ("15", ("too small",)),
    ("17G", ("too large", "16M to 16G")),
    ("16385", ("too large",)),
    ("lots", ("invalid memory size", "256M")),
    ("64Q", ("invalid memory size",)),
    ("1.5.5G", ("invalid memory size",)),
    ("-5", ("invalid memory size",)),
])
def test_bad_memory_size(write, size, words):
    assert_one_line_error(run("-m", size, write("kernel", good_kernel())), *words)


@pytest.mark.parametrize("size", ["16M", "64", "1G", "1.5G", "2G", "2048", "65536K", "256m", "4G",
                                  "16G"])
def test_good_memory_size_reaches_the_loader(tmp_path, size):
    # A valid -m moves on to the kernel, which is missing: the error is about it.
    assert_one_line_error(run("-m", size, tmp_path / "nokernel"), "cannot open kernel")


def test_all_options_accepted(tmp_path):
    p = run("-m", "128M", "--append", "console=ttyS0 quiet", "-append", "x", "--initrd",
            tmp_path / "i", "--serial", "file:" + str(tmp_path / "out"), "--trace",
            "--trace-file", tmp_path / "t", "-serial", "stdio", "--", tmp_path / "nokernel")
    assert_one_line_error(p, "cannot open kernel")


def test_options_after_kernel(tmp_path):
    assert_one_line_error(run(tmp_path / "nokernel", "-m", "1"), "too small")


def test_unknown_long_option(write):
    line = assert_one_line_error(run("--foo", write("kernel", good_kernel())))
    assert line == "ring3: unknown option '--foo'; try 'ring3 run --help'"


def test_unknown_option_with_value(write):
    line = assert_one_line_error(run("--foo=bar", write("kernel", good_kernel())))
    assert line == "ring3: unknown option '--foo'; try 'ring3 run --help'"


def test_unknown_short_option(write):
    assert_one_line_error(run("-x", write("kernel", good_kernel())), "unknown option '-x'")


def test_option_missing_argument():
    assert_one_line_error(run("-m"), "option '-m' needs an argument")
    assert_one_line_error(run("vmlinux", "--append"), "option '--append' needs an argument")


def test_flag_with_argument(write):
    assert_one_line_error(run("--trace=yes", write("kernel", good_kernel())),
                          "'--trace' takes no argument")


@pytest.mark.parametrize("option,value,words", [
    ("--isolation", "stub", ("--isolation", "process", "none")),
    ("--stubs", "0", ("--stubs", "1 to 256")),
    ("--stubs", "257", ("--stubs", "1 to 256")),
    ("--stubs", "4x", ("--stubs", "1 to 256")),
    ("--syscalls", "ptrace", ("--syscalls", "sud", "sysemu")),
    ("--placement", "both", ("--placement", "auto", "spread", "shared")),
])
def test_bad_isolation_options(write, option, value, words):
    assert_one_line_error(run(option, value, write("kernel", good_kernel())), *words)


def test_sysemu_needs_stub_processes(write):
    assert_one_line_error(run("--isolation", "none", "--syscalls", "sysemu", write("kernel", good_kernel())),
                          "--syscalls sysemu", "--isolation process")


def test_placement_needs_stub_processes(write):
    assert_one_line_error(run("--isolation", "none", "--placement", "shared", write("kernel", good_kernel())),
                          "--placement", "--isolation process")


def test_bad_serial(write):
    assert_one_line_error(run("--serial", "tcp:1234", write("kernel", good_kernel())),
                          "--serial", "stdio", "file:PATH")


def test_no_default_kernel(tmp_path):
    # A ring3 outside its build tree finds no default kernel next to it.
    exe = tmp_path / "bin" / "ring3"
    exe.parent.mkdir()
    exe.write_bytes(Path(RING3).read_bytes())
    exe.chmod(0o755)
    p = subprocess.run([str(exe), "run", "-m", "64"], capture_output=True, text=True, timeout=10)
    assert_one_line_error(p, "default kernel", "is not built", "make")


def test_two_kernels(write):
    kernel = write("kernel", good_kernel())
    assert_one_line_error(run(kernel, kernel), "unexpected argument", "--append")


def test_dash_dash_makes_a_dash_name_a_kernel(tmp_path):
    assert_one_line_error(run("--", "-m"), "cannot open kernel '-m'")


def test_help_and_version():
    p = run("--help")
    assert p.returncode == 0 and p.stderr == ""
    assert "usage: ring3 run" in p.stdout and "--initrd" in p.stdout
    p = run("--version")
    assert p.returncode == 0 and p.stderr == "" and p.stdout.startswith("ring3 ")


# ---- --disk ----

def test_disk_missing_file(write, tmp_path):
    path = tmp_path / "no-such.img"
    assert_one_line_error(run("--disk", path, write("kernel", good_kernel())),
                          f"--disk '{path}'", "No such file or directory", "raw disk image")


def test_disk_is_directory(write, tmp_path):
    assert_one_line_error(run("--disk", tmp_path, write("kernel", good_kernel())),
                          "directory", "raw disk image")


@pytest.mark.parametrize("size", [0, 1000, 512 * 3 + 1])
def test_disk_size_not_whole_sectors(write, size):
    img = write("disk.img", b"\0" * size)
    assert_one_line_error(run("--disk", img, write("kernel", good_kernel())),
                          f"{size} bytes", "multiple of 512")


@pytest.mark.parametrize("spec,words", [
    (",readonly=on", ("names no file",)),
    ("IMG,readonly=maybe", ("'readonly=maybe'", "readonly=on|off")),
    ("IMG,cache=none", ("'cache=none'", "snapshot=on|off")),
    ("IMG,snapshot", ("'snapshot'",)),
])
def test_disk_bad_flags(write, spec, words):
    img = write("disk.img", b"\0" * 4096)
    assert_one_line_error(run("--disk", spec.replace("IMG", str(img)),
                              write("kernel", good_kernel())), *words)


def test_too_many_disks(write):
    img = write("disk.img", b"\0" * 4096)
    args = []
    for _ in range(5):
        args += ["--disk", f"{img},snapshot=on"]
    assert_one_line_error(run(*args, write("kernel", good_kernel())), "too many --disk", "4")


def test_disk_options_accepted(write):
    # Good disks move on to the kernel, which is missing: the error is about it.
    img = write("disk.img", b"\0" * 4096)
    assert_one_line_error(run("--disk", f"{img},readonly=on", "-disk", f"{img},snapshot=on",
                              "--disk", f"{img},readonly=off,snapshot=on", "nokernel"),
                          "cannot open kernel")

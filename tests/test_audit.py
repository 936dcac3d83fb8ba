"""`ring3 audit`: planted sensitive instructions are each reported once at their symbol; bad inputs fail cleanly."""
import os
import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# RING3 in the environment points the test at another build of the monitor.
RING3 = Path(os.environ.get("RING3", ROOT / "build" / "bin" / "ring3"))
SRC = ROOT / "tests" / "audit"
OUT = ROOT / "build" / "tests" / "audit"
TEXT_ADDR = 0xC1000000  # where the kernel's .text starts

SUMMARY_RE = re.compile(r"^(\d+) unrewritten sensitive instructions(?: \((\d+) allowed by (.+)\))?$")
REPORT_RE = re.compile(r"^([0-9a-f]{8}) (\S+)\+0x([0-9a-f]+)  (\S.*)$")
PLANT_RE = re.compile(r'^\s*(plant|marked)\s+(\w+),\s*([PU]),\s*"([^"]*)"(?:,\s*(\d+))?\s*,', re.M)

# Reports planted.S makes outside its plant/marked lines: (symbol, offset, class, text).
PLANTED_EXTRA = [
    ("with_label", 1, "P", "sti"),
    ("bare_code", 2, "U", "pushfl"),
    ("code_region", 8, "P", "cli"),
]


def build(name):
    """Assemble tests/audit/NAME.S and link it at the kernel's address."""
    OUT.mkdir(parents=True, exist_ok=True)
    obj, exe = OUT / f"{name}.o", OUT / name
    subprocess.run(["gcc", "-m32", "-c", "-o", str(obj), str(SRC / f"{name}.S")], check=True)
    subprocess.run(["ld", "-m", "elf_i386", f"-Ttext=0x{TEXT_ADDR:x}", "-o", str(exe), str(obj)],
                   check=True)
    return exe


def audit(*args):
    proc = subprocess.run([str(RING3), "audit", *map(str, args)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode >= 0, f"ring3 audit killed by signal {-proc.returncode}"
    return proc


def parse(stdout):
    """Report lines as [(addr, symbol, offset, text)] and the summary match."""
    lines = stdout.splitlines()
    assert lines, "no output"
    summary = SUMMARY_RE.match(lines[-1])
    assert summary, f"bad summary line {lines[-1]!r}"
    reports = []
    for line in lines[:-1]:
        m = REPORT_RE.match(line)
        assert m, f"bad report line {line!r}"
        reports.append((int(m[1], 16), m[2], int(m[3], 16), m[4]))
    return reports, summary


def symbols(exe):
    out = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
    return {f[2]: int(f[0], 16) for f in (l.split() for l in out.splitlines()) if len(f) == 3}


def planted_expectations():
    """[(symbol, offset, class, text, marked)] from the plant/marked lines of planted.S."""
    rows = []
    for kind, name, cls, text, off in PLANT_RE.findall((SRC / "planted.S").read_text()):
        marked = kind == "marked"
        rows.append((name, 3 if marked else int(off), cls, text, marked))
    rows += [(s, o, c, t, False) for s, o, c, t in PLANTED_EXTRA]
    return rows


@pytest.fixture(scope="module")
def planted():
    return build("planted")


@pytest.fixture(scope="module")
def clean():
    return build("clean")


def check_reports(exe, proc, expected):
    """Every expected (symbol, offset, text) is reported exactly once, at the
    symbol's address plus offset, and nothing else is."""
    reports, summary = parse(proc.stdout)
    syms = symbols(exe)
    got = sorted((sym, off) for _, sym, off, _ in reports)
    want = sorted((sym, off) for sym, off, _ in expected)
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, f"missing {missing}, unexpected {extra}"
    assert got == want, "some instruction reported twice"
    texts = {(sym, off): text for sym, off, text in expected}
    for addr, sym, off, text in reports:
        assert addr == syms[sym] + off, f"{sym}+{off:#x} printed at {addr:#x}"
        assert text.startswith(texts[(sym, off)]), f"{sym}: {text!r}, expected {texts[(sym, off)]!r}"
    assert int(summary[1]) == len(expected)
    assert proc.returncode == (1 if expected else 0)
    return reports


def test_planted_each_reported_once_at_its_symbol(planted):
    expected = [(s, o, t) for s, o, _, t, _ in planted_expectations()]
    assert len(expected) > 130, "planted.S was not parsed"
    proc = audit(planted)
    check_reports(planted, proc, expected)
    assert proc.stderr == ""


def test_insert_mode_reports_only_unmarked_unprivileged(planted):
    rows = planted_expectations()
    expected = [(s, o, t) for s, o, c, t, marked in rows if c == "U" and not marked]
    assert any(marked for *_, marked in rows) and any(c == "P" for _, _, c, _, _ in rows)
    check_reports(planted, audit("--insert", planted), expected)


def test_clean_object(clean):
    for args in ([], ["--insert"]):
        proc = audit(*args, clean)
        assert proc.returncode == 0
        assert proc.stdout == "0 unrewritten sensitive instructions\n"
        assert proc.stderr == ""


def test_undecodable_bytes_warn_and_do_not_hide_code():
    exe = build("noise")
    proc = audit(exe)
    reports, summary = parse(proc.stdout)
    assert [(sym, off, text) for _, sym, off, text in reports] == [("after_noise", 0, "cli")]
    assert proc.returncode == 1
    warnings = proc.stderr.splitlines()
    assert len(warnings) == 1 and "40 bytes could not be decoded" in warnings[0]


# ---- the allow list ----

def write(path, text):
    path.write_text(text)
    return path


def write_bytes(path, data):
    path.write_bytes(data)
    return path


def test_allow_list(planted, tmp_path):
    allow = write(tmp_path / "allow", "# boot-only code\n\n"
                  "p_cli     runs only before the monitor takes over\n"
                  "  with_label\tan sti the guest never reaches  \n"
                  "no_such_function  left over from an older kernel\n")
    total = len(planted_expectations())
    proc = audit("--allow", allow, planted)
    reports, summary = parse(proc.stdout)
    assert proc.returncode == 1
    assert {"p_cli", "with_label"}.isdisjoint(sym for _, sym, _, _ in reports)
    assert len(reports) == total - 2
    assert summary[0] == f"{total - 2} unrewritten sensitive instructions (2 allowed by {allow})"
    err = proc.stderr.splitlines()
    allowed = [l for l in err if l.startswith("allowed: ")]
    assert len(allowed) == 2
    assert any("p_cli+0x0" in l and "runs only before the monitor takes over" in l for l in allowed)
    unused = [l for l in err if "no_such_function" in l]
    assert len(unused) == 1 and "warning" in unused[0]
    assert len(err) == 3


def test_allow_everything_passes(planted, tmp_path):
    names = sorted({s for s, *_ in planted_expectations()})
    allow = write(tmp_path / "allow", "".join(f"{n} planted on purpose by the test\n" for n in names))
    proc = audit(f"--allow={allow}", planted)
    total = len(planted_expectations())
    assert proc.stdout == f"0 unrewritten sensitive instructions ({total} allowed by {allow})\n"
    assert proc.returncode == 0


def test_allow_entry_without_reason_is_an_error(planted, tmp_path):
    allow = write(tmp_path / "allow", "# fine\np_cli boot only\np_sti   \n")
    proc = audit("--allow", allow, planted)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert f"{allow}:3" in proc.stderr and "p_sti" in proc.stderr and "reason" in proc.stderr


def test_allow_file_missing(planted, tmp_path):
    proc = audit("--allow", tmp_path / "nope", planted)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and proc.stdout == ""


# ---- bad inputs: one line on stderr, exit 2, never a crash ----

def elf32_header(machine, cls=1, shoff=0, shnum=0):
    ident = b"\x7fELF" + bytes([cls, 1, 1]) + bytes(9)
    return ident + struct.pack("<HHIIIIIHHHHHH", 2, machine, 1, 0x8000, 0, shoff, 0, 52, 0, 0,
                               40, shnum, 0)


def expect_error(path, *words):
    proc = audit(path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, lines
    for w in words:
        assert w in lines[0], lines[0]


def test_not_elf(tmp_path):
    expect_error(write(tmp_path / "text", "#!/bin/sh\necho not a kernel\n"), "not an ELF")
    expect_error(write(tmp_path / "empty", ""), "not an ELF")


def test_x86_64_elf(tmp_path):
    src = write(tmp_path / "x.S", ".text\n.globl f\nf: cli\nret\n")
    obj = tmp_path / "x.o"
    subprocess.run(["gcc", "-c", "-o", str(obj), str(src)], check=True)
    expect_error(obj, "64-bit")


def test_arm_elf(tmp_path):
    expect_error(write_bytes(tmp_path / "arm", elf32_header(40, shoff=52, shnum=1) + bytes(40)),
                 "ARM", "EM_386")


def test_truncated_elf(planted, tmp_path):
    data = planted.read_bytes()
    expect_error(write_bytes(tmp_path / "t40", data[:40]), "truncated")
    expect_error(write_bytes(tmp_path / "t100", data[:100]), "truncated")
    expect_error(write_bytes(tmp_path / "half", data[:len(data) // 2]), "truncated")


def test_section_past_end_of_file(planted, tmp_path):
    data = bytearray(planted.read_bytes())
    shoff, = struct.unpack_from("<I", data, 32)
    shnum, = struct.unpack_from("<H", data, 48)
    for i in range(shnum):
        sh = shoff + 40 * i
        flags, = struct.unpack_from("<I", data, sh + 8)
        if flags & 4:  # SHF_EXECINSTR: push its data beyond the end of the file
            struct.pack_into("<I", data, sh + 16, len(data) - 8)
    expect_error(write_bytes(tmp_path / "bad", bytes(data)), "truncated", ".text")


def test_no_section_headers(tmp_path):
    expect_error(write_bytes(tmp_path / "nosh", elf32_header(3) + bytes(64)), "section headers")


def test_missing_file_and_directory(tmp_path):
    expect_error(tmp_path / "no-such-kernel", "cannot open")
    expect_error(tmp_path, "not a regular file")


def test_usage_errors(planted):
    for args in ([], ["--bogus", planted], [planted, planted], ["--allow"]):
        proc = audit(*args)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, args


def test_corrupted_headers_never_crash(planted, tmp_path):
    """Random damage to the ELF and section headers and the symbol table:
    the audit may report or refuse, but always exits 0, 1 or 2."""
    data = planted.read_bytes()
    shoff, = struct.unpack_from("<I", data, 32)
    shnum, = struct.unpack_from("<H", data, 48)
    regions = [(0, 52), (shoff, len(data)), (0, len(data))]
    for i in range(shnum):
        sh_type, = struct.unpack_from("<I", data, shoff + 40 * i + 4)
        if sh_type in (2, 3):  # SHT_SYMTAB, SHT_STRTAB
            off, size = struct.unpack_from("<II", data, shoff + 40 * i + 16)
            regions.append((off, off + size))
    assert len(regions) >= 5
    rng = random.Random(3)
    bad = tmp_path / "bad"
    for n in range(200):
        mutated = bytearray(data)
        region = rng.choice(regions)
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(*region)
            mutated[pos] = rng.choice([0, 0xFF, rng.randrange(256)])
        if n % 5 == 0:
            del mutated[rng.randrange(len(mutated)):]
        bad.write_bytes(bytes(mutated))
        proc = audit(bad)
        assert proc.returncode in (0, 1, 2), f"mutation {n}: exit {proc.returncode}"
        if proc.returncode == 2:
            assert len(proc.stderr.splitlines()) == 1, proc.stderr


# ---- the FPU sites (include/ring3/abi.h, R3_E_FPU) ----

VECTOR_STATE = {"v_fninit": "fninit", "v_fxsave": "fxsave", "v_xrstor": "xrstor",
                "v_xsave_bytes": "xsave", "v_fwait": "wait", "v_fnstcw": "fnstcw", "v_fldl": "fld",
                "v_fistpll": "fistp", "v_movaps": "movaps", "v_ldmxcsr": "ldmxcsr", "v_emms": "emms",
                "v_xgetbv": "xgetbv", "v_vzeroupper": "vzeroupper"}


def test_vector_state_without_its_fpu_site_is_reported():
    """gas leaves no FPU site: each instruction that reaches the vector registers is reported
    at its own symbol; the fences, hints and cache-line ones of the SSE groups are not."""
    exe = build("vector")
    check_reports(exe, audit(exe), [(s, 0, t) for s, t in VECTOR_STATE.items()])
    assert audit("--insert", exe).returncode == 0       # insert mode has no FPU sites


def test_ring3_as_puts_an_fpu_site_before_each(tmp_path):
    """ring3-as (rewrite mode) puts the site before each one, after its label: the audit finds
    none left, and each symbol names the site's first byte, where the monitor reports a fault
    of the instruction after it."""
    asbin = ROOT / "build" / "asbin"
    obj, exe = tmp_path / "vector.o", tmp_path / "vector"
    subprocess.run(["gcc", "-m32", f"-B{asbin}/", "-c", "-o", str(obj), str(SRC / "vector.S")],
                   check=True, env=dict(os.environ, RING3_AS_MODE="rewrite"))
    subprocess.run(["ld", "-m", "elf_i386", f"-Ttext=0x{TEXT_ADDR:x}", "-o", str(exe), str(obj)],
                   check=True)
    proc = audit(exe)
    assert proc.stdout == "0 unrewritten sensitive instructions\n" and proc.returncode == 0
    text = subprocess.run(["objcopy", "-O", "binary", "--only-section=.text", str(exe), "/dev/stdout"],
                          capture_output=True, check=True).stdout
    sys.path.insert(0, str(ROOT / "rewriter"))
    from ring3as import abi
    site = b"\x2e\xff\x15" + struct.pack("<I", abi.slot_address("FPU"))
    syms = symbols(exe)
    for name in VECTOR_STATE:
        at = syms[name] - TEXT_ADDR
        assert text[at:at + 7] == site, name
    assert text.count(site) == len(VECTOR_STATE)

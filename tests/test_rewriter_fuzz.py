"""ring3-as under property-based fuzzing (Hypothesis): generated gas programs, and raw text.

The programs come from a grammar of GNU as AT&T i386 source: sections, labels, data
directives, ordinary instructions, the sensitive instructions ring3-as rewrites (in the operand
forms gas takes, prefixes and `.byte` spellings included), comments and odd whitespace. Each is
assembled three ways, by the plain `as --32` and by ring3-as in rewrite and insert mode, and:
  (a) ring3-as succeeds, or fails with one line "FILE:LINE: Error: ring3-as: ..." and a non-zero
      status; never a Python traceback;
  (b) what it writes is a valid i386 ELF object;
  (c) with the sites taken out, the code is the plain object's instruction for instruction; every
      sensitive instruction of the plain object became a site of its entry with the DESC and AUX
      words Capstone's reading of it gives (rewrite mode), or is marked when it is unprivileged
      and otherwise left to trap, and the monitor's decoder reads it as that entry (insert mode);
  (d) ring3-as promises neither idempotence nor a refusal of its own output, and the output is
      never fed back (gcc runs it once per file). What holds, and is checked: the rewritten text
      has nothing left to rewrite but the real pushfl each pushf site keeps (`.byte 0x9c`).
Random printable text is checked for (a) only.

RING3_FUZZ_EXAMPLES sets the number of examples of each property and draws new ones each run (`make
fuzz`); `make test` runs 200 of each, derandomized so that CI sees the same ones every time.
"""
import contextlib
import io
import os
import re
import struct
import subprocess
import sys
import tempfile
import traceback

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import BUILD, ROOT, make
from test_rewriter import CS, expected_site

sys.path.insert(0, str(ROOT / "rewriter"))
from ring3as import abi, rules  # noqa: E402
from ring3as import main as driver  # noqa: E402
from ring3as.main import rewrite_lines  # noqa: E402

DECODE = BUILD / "tests" / "insert" / "decode"     # tests/insert/decode.c: the monitor's decoder
# `make fuzz` (RING3_FUZZ_EXAMPLES set) searches afresh each run; `make test` repeats its few.
LONG = "RING3_FUZZ_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("RING3_FUZZ_EXAMPLES", "200"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module", autouse=True)
def built():
    make(DECODE)


# ---- the grammar ----

R32 = ["%eax", "%ecx", "%edx", "%ebx", "%esp", "%ebp", "%esi", "%edi"]
R16 = ["%ax", "%cx", "%dx", "%bx", "%sp", "%bp", "%si", "%di"]
R8 = ["%al", "%cl", "%dl", "%bl", "%ah", "%ch", "%dh", "%bh"]
SREGS = ["%es", "%cs", "%ss", "%ds", "%fs", "%gs"]
DATA_LABELS = ["gdt_descr", "idt_descr", "sel", "buf"]   # defined in .data, where offsets stay
CODE_LABELS = ["f", "g", "loop_top", ".Lout"]            # defined in code, branched to only

r32, r16, r8, sreg = (st.sampled_from(x) for x in (R32, R16, R8, SREGS))
r16_32 = st.one_of(r16, r32)
ws = st.sampled_from([" ", "\t", "  ", " \t"])
comma = st.sampled_from([",", ", ", " , ", ",\t"])
small = st.integers(-200, 200).map(str) | st.integers(0, 0xFFFF).map(hex)
imm8 = st.integers(0, 255).map(lambda n: st.sampled_from([str(n), hex(n)])).flatmap(lambda s: s)


@st.composite
def mem(draw):
    """An AT&T memory operand with 32-bit addressing: seg:disp(base,index,scale)."""
    seg = draw(st.sampled_from(["", "", "", "%fs:", "%gs:", "%es:", "%ds:", "%ss:", "%cs:"]))
    disp = draw(st.sampled_from(["", "", "num", "label", "label+k"]))
    disp = {"": "", "num": draw(small), "label": draw(st.sampled_from(DATA_LABELS)),
            "label+k": f"{draw(st.sampled_from(DATA_LABELS))}+{draw(st.integers(0, 64))}"}[disp]
    base = draw(st.sampled_from(R32 + ["", ""]))
    index = draw(st.sampled_from([r for r in R32 if r != "%esp"] + ["", "", ""]))
    c = draw(comma)
    if index:
        inner = f"{base}{c}{index}" + (f"{c}{draw(st.sampled_from('1248'))}" if draw(st.booleans()) else "")
    elif base:
        inner = base
    else:
        inner = None
    if inner is None and not disp:
        disp = draw(st.integers(0, 0xFFFFF).map(hex))
    return f"{seg}{disp}" + (f"({inner})" if inner is not None else "")


def ins(fmt, **parts):
    """An instruction from a format and strategies for its parts."""
    return st.fixed_dictionaries(parts).map(lambda d: fmt.format(**d))


ORDINARY = st.one_of(
    ins("movl{w}{a}{c}{b}", w=ws, a=r32, c=comma, b=r32),
    ins("movl{w}{m}{c}{r}", w=ws, m=mem(), c=comma, r=r32),
    ins("movl{w}{r}{c}{m}", w=ws, m=mem(), c=comma, r=r32),
    ins("movw{w}{r}{c}{m}", w=ws, m=mem(), c=comma, r=r16),
    ins("movb{w}{a}{c}{b}", w=ws, a=r8, c=comma, b=r8),
    ins("addl{w}${i}{c}{r}", w=ws, i=small, c=comma, r=r32),
    ins("xorl{w}{a}{c}{b}", w=ws, a=r32, c=comma, b=r32),
    ins("cmpb{w}${i}{c}{m}", w=ws, i=imm8, c=comma, m=mem()),
    ins("movzbl{w}{m}{c}{r}", w=ws, m=mem(), c=comma, r=r32),
    ins("leal{w}{m}{c}{r}", w=ws, m=mem(), c=comma, r=st.sampled_from(R32[:6])),
    ins("shll{w}${i}{c}{r}", w=ws, i=st.integers(1, 31), c=comma, r=r32),
    ins("pushl{w}{r}", w=ws, r=r32 | mem() | small.map(lambda s: "$" + s)),
    ins("popl{w}{r}", w=ws, r=r32),
    ins("incl{w}{m}", w=ws, m=mem()),
    ins("lock incl{w}{m}", w=ws, m=mem()),
    ins("rep movsb"), ins("rep; stosl"), ins("ret"), ins("cld"), ins("pause"), ins("rdtsc"),
    ins("lfence"), ins("int3"), ins("int $3"), ins("int $0x80"), ins("ud2"),
    ins("{j}{w}{l}", j=st.sampled_from(["jmp", "jne", "call", "jz"]), w=ws,
        l=st.sampled_from(CODE_LABELS)),
    ins("call{w}*{r}", w=ws, r=r32), ins("jmp{w}*{m}", w=ws, m=mem()),
    ins("mov{w}{m}{c}%eax", w=ws, m=mem(), c=comma),
    ins(".byte 0x31, 0xc0"),          # xor %eax,%eax spelled as bytes
)

SENSITIVE = st.one_of(
    st.sampled_from(["cli", "sti", "hlt", "pushf", "pushfl", "popf", "popfl", "iret", "iretl",
                     "clts", "invd", "wbinvd", "wbnoinvd", "rdmsr", "wrmsr", "rdpmc", "cpuid",
                     "into", "sysenter", "sysexit", "xsetbv", "stac", "clac", "monitor", "mwait",
                     "lret", "retf", "sti; hlt", "pushfd", "popfd", "iretd",
                     "insb", "insw", "insl", "outsb", "outsw", "outsl", "rep insb", "rep; insl",
                     "rep outsw", "inb %dx, %al", "inw (%dx), %ax", "inl %dx, %eax", "outb %al, %dx",
                     "outl %eax, (%dx)", "rep outsb %fs:(%esi), (%dx)", "insl (%dx), %es:(%edi)",
                     ".byte 0x0f, 0x01, 0xca", ".byte 0x0f,0x01,0xcb", ".byte 0x0f, 0xc7, 0x2f",
                     ".byte 0x0f, 0x01, 0xc8",
                     # a prefix as a statement of its own, on the line before
                     "rep\n\tinsl", "fs\n\tsgdt (%eax)", "lock\n\tsgdt (%ecx)", "data16\n\tsidt (%eax)"]),
    ins("{op}{w}${p}{c}{a}", op=st.sampled_from(["inb", "in"]), w=ws, p=imm8, c=comma, a=st.just("%al")),
    ins("outl{w}%eax{c}${p}", w=ws, p=imm8, c=comma),
    ins("{op}{w}{m}", op=st.sampled_from(["lgdt", "lidt", "sgdt", "sidt", "lgdtl", "sidtl", "invlpg",
                                          "xsaves", "xrstors"]), w=ws, m=mem()),
    ins("{op}{w}{rm}", op=st.sampled_from(["lldt", "ltr", "lmsw", "verr", "verw"]), w=ws,
        rm=r16 | mem()),
    ins("{op}{w}{rm}", op=st.sampled_from(["sldt", "str", "smsw"]), w=ws, rm=r16_32 | mem()),
    ins("{op}{w}{m}", op=st.sampled_from(["sldtw", "smsww", "strw"]), w=ws, m=mem()),
    ins("{op}{w}{rm}{c}{r}", op=st.sampled_from(["lar", "lsl"]), w=ws, rm=r32 | mem(), c=comma, r=r32),
    ins("{op}{w}{rm}{c}{r}", op=st.sampled_from(["lar", "lsl"]), w=ws, rm=r16 | mem(), c=comma, r=r16),
    ins("mov{s}{w}{r}{c}%cr{n}", s=st.sampled_from(["", "l"]), w=ws, r=r32, c=comma,
        n=st.sampled_from("0234")),
    ins("mov{s}{w}%cr{n}{c}{r}", s=st.sampled_from(["", "l"]), w=ws, r=r32, c=comma,
        n=st.sampled_from("0234")),
    ins("movl{w}{r}{c}%db{n}", w=ws, r=r32, c=comma, n=st.sampled_from("01267")),
    ins("mov{w}%dr{n}{c}{r}", w=ws, r=r32, c=comma, n=st.sampled_from("01267")),
    ins("mov{w}{rm}{c}{s}", w=ws, rm=r16 | r32 | mem(), c=comma, s=st.sampled_from(
        ["%es", "%ss", "%ds", "%fs", "%gs"])),
    ins("movw{w}{m}{c}{s}", w=ws, m=mem(), c=comma, s=st.sampled_from(["%ds", "%fs"])),
    ins("mov{w}{s}{c}{rm}", w=ws, rm=r16 | r32 | mem(), c=comma, s=sreg),
    ins("push{w}{s}", w=ws, s=sreg), ins("pushl{w}{s}", w=ws, s=sreg),
    ins("pop{w}{s}", w=ws, s=st.sampled_from(["%es", "%ss", "%ds", "%fs", "%gs"])),
    ins("{op}{w}{m}{c}{r}", op=st.sampled_from(["lds", "les", "lfs", "lgs", "lss"]), w=ws, m=mem(),
        c=comma, r=r16_32),
    ins("{op}{w}${s}{c}${o}", op=st.sampled_from(["ljmp", "lcall", "jmp", "call", "ljmpl"]), w=ws,
        s=st.integers(0, 0xFFFF).map(hex), c=comma, o=small | st.sampled_from(DATA_LABELS)),
    ins("{op}{w}*{m}", op=st.sampled_from(["ljmp", "lcall", "ljmpl", "lcalll"]), w=ws, m=mem()),
    ins("lret{w}${n}", w=ws, n=st.integers(0, 64)),
    ins("int{w}${n}", w=ws, n=st.integers(0, 255).filter(lambda n: n not in (3, 0x80)).map(hex)),
    ins("invpcid{w}{m}{c}{r}", w=ws, m=mem(), c=comma, r=r32),
)

# Forms ring3-as refuses (tests/test_rewriter.py test_unsupported_form_is_a_hard_error).
REFUSED = st.sampled_from(["lgdtw (%bx)", "pushfw", "lock; lar %ax, %bx", "movl %eax, %cr8",
                           "popfw", "iretw", "rep lgdt (%eax)", "data16 cli"])

COMMENT = st.sampled_from(["# cli; hlt", "/* lgdt (%eax) */", "/* sti */ ", "# 12", "#",
                           "/* a; b */"])


@st.composite
def statement(draw, code):
    """One statement of a code or data section."""
    if not code:
        return draw(st.one_of(
            ins(".byte {a}{c}{b}", a=imm8, c=comma, b=imm8),
            ins(".long {x}", x=small | st.sampled_from(DATA_LABELS)),     # code labels move
            st.just('.asciz "cli; hlt # not code"'), st.just(".p2align 2"),
            ins(".byte 0x0f, 0x01, 0xca")))     # clac's bytes as data: stay data
    kind = draw(st.sampled_from(["ord"] * 5 + ["sens"] * 4 + ["align", "refused"]))
    if kind == "ord":
        return draw(ORDINARY)
    if kind == "sens":
        return draw(SENSITIVE)
    if kind == "align":
        return ".p2align 4"
    return draw(REFUSED) if draw(st.integers(0, 9)) == 0 else draw(SENSITIVE)


SECTIONS = [(".text", True), (".data", False), ('.section .rodata, "a"', False),
            ('.section .text.unlikely,"ax",@progbits', True),
            ('.section .altinstr_replacement, "ax"', True)]


@st.composite
def program(draw):
    """A gas source: blocks of statements in sections, labels, comments and odd spacing."""
    lines = ["\t.text"]
    defined = set()
    for _ in range(draw(st.integers(1, 5))):
        head, code = draw(st.sampled_from(SECTIONS))
        push = draw(st.booleans()) and head.startswith(".section")
        lines.append("\t" + (head.replace(".section", ".pushsection") if push else head))
        if not code and "buf" not in defined:
            # Data labels first in their section, so that their offsets are those of the plain
            # object too whatever else is placed around them.
            for name in DATA_LABELS:
                lines.append(f"{name}:\t.long 0, 0")
                defined.add(name)
        for _ in range(draw(st.integers(0, 8))):
            text = draw(statement(code))
            if code and draw(st.integers(0, 5)) == 0:
                name = draw(st.sampled_from(CODE_LABELS + ["1", "2"]))
                if name not in defined or name.isdigit():
                    defined.add(name)
                    text = f"{name}:{draw(st.sampled_from(['', ' ', chr(9)]))}{text}"
            if draw(st.integers(0, 6)) == 0:
                text += draw(st.sampled_from([" ", "\t"])) + draw(COMMENT)
            if draw(st.integers(0, 6)) == 0 and code:
                text += "; " + draw(ORDINARY)
            lines.append(draw(st.sampled_from(["\t", " ", "", "  \t"])) + text +
                         draw(st.sampled_from(["", "", " ", "\t"])))
        if draw(st.integers(0, 5)) == 0:
            lines.append("/* a comment\n   over lines: cli */")
        if push:
            lines.append("\t.popsection")
        if draw(st.booleans()):
            lines.append(f"\t.globl {draw(st.sampled_from(CODE_LABELS[:3]))}")
    # Every branch target and data label is defined once, at the end of .text or in .data.
    lines.append("\t.text")
    lines += [f"{n}:" for n in CODE_LABELS if n not in defined]
    lines.append("\tret")
    if "buf" not in defined:
        lines.append("\t.data")
        lines += [f"{name}:\t.long 0, 0" for name in DATA_LABELS]
    return "\n".join(lines) + "\n"


# ---- running ring3-as in this process (a traceback is an exception here) ----

def ring3_as(text, mode, tmp):
    """(status, stderr lines of ring3-as itself, object bytes or None) for (text)."""
    src, obj = os.path.join(tmp, f"{mode}.s"), os.path.join(tmp, f"{mode}.o")
    with open(src, "w") as f:
        f.write(text)
    if os.path.exists(obj):
        os.unlink(obj)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            status = driver.main(["--32", f"--ring3-mode={mode}", "-o", obj, src])
    except SystemExit as e:            # split_args() on a bad mode: a message, status 1
        status = e.code
        if not isinstance(status, int):
            err.write(f"{status}\n")
            status = 1
    except Exception:                              # (a): never a traceback
        pytest.fail(f"ring3-as ({mode}) raised on:\n{text}\n{traceback.format_exc()}")
    data = open(obj, "rb").read() if status == 0 and os.path.exists(obj) else None
    return status, err.getvalue().splitlines(), data


def plain_as(text, tmp):
    src, obj = os.path.join(tmp, "plain.s"), os.path.join(tmp, "plain.o")
    with open(src, "w") as f:
        f.write(text)
    r = subprocess.run(["as", "--32", "-o", obj, src], capture_output=True, text=True)
    return open(obj, "rb").read() if r.returncode == 0 else None


def check_failure(status, err):
    """(a) for a failed run: a non-zero status, and ring3-as's own message one line of gas's
    form (gas's messages, for what ring3-as leaves to it, are gas's)."""
    assert status != 0
    assert len(err) <= 1, err
    if err:
        assert re.match(r"^.+:\d+: Error: ring3-as: \S", err[0]) or err[0].startswith("ring3-as: "), err


def sections(elf):
    """(b): the object is an i386 relocatable ELF; its allocated PROGBITS sections by name."""
    assert elf[:4] == b"\x7fELF" and elf[4] == 1 and elf[5] == 1, "not a 32-bit little-endian ELF"
    e_type, e_machine = struct.unpack_from("<HH", elf, 16)
    assert (e_type, e_machine) == (1, 3), "not an i386 relocatable object"
    shoff, = struct.unpack_from("<I", elf, 32)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 46)
    assert shoff + shnum * shentsize <= len(elf)
    hdrs = [struct.unpack_from("<IIIIIIIIII", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx]
    out = {}
    for name, typ, flags, _, off, size, *_ in hdrs:
        assert typ == 8 or off + size <= len(elf)
        if typ == 1 and flags & 2:          # SHT_PROGBITS, SHF_ALLOC
            n = elf[strtab[4] + name:elf.index(b"\0", strtab[4] + name)].decode()
            out[n] = (bool(flags & 4), elf[off:off + size])
    return out


# ---- reading the code back ----

SLOT = {abi.slot_address(name): name for name in abi.ENTRIES if abi.ENTRIES[name].path != "INLINE"}
MARKER = bytes.fromhex("0fb9ff")
SENS_MNEMONICS = {"cli", "sti", "hlt", "pushfd", "popfd", "iretd", "in", "out", "insb", "insw", "insd",
                  "outsb", "outsw", "outsd", "lgdt", "lidt", "sgdt", "sidt", "lldt", "ltr", "lmsw",
                  "sldt", "str", "smsw", "lar", "lsl", "verr", "verw", "clts", "invd", "wbinvd",
                  "invlpg", "rdmsr", "wrmsr", "rdpmc", "cpuid", "lds", "les", "lfs", "lgs", "lss",
                  "ljmp", "lcall", "retf", "into", "sysenter", "sysexit", "xsetbv", "stac", "clac",
                  "monitor", "mwait", "xsaves", "xrstors", "invpcid"}
SYSTEM_REGS = re.compile(r"\b(?:[c-gs]s|cr\d|dr\d)\b")


def is_sensitive(i):
    mn = i.mnemonic.split()[-1]
    if mn == "int":
        return i.op_str not in ("3", "0x80")
    if mn in ("mov", "push", "pop"):
        regs = [i.reg_name(o.reg) for o in i.operands if o.type == 1]
        return any(SYSTEM_REGS.fullmatch(r) for r in regs)
    return mn in SENS_MNEMONICS


def is_padding(i):
    """What .p2align puts in code: nops and gas's long no-op lea forms."""
    return i.mnemonic == "nop" or (i.mnemonic == "lea" and re.fullmatch(
        r"(esi|edi), \[(esi|edi)( \+ eiz(\*1)?)?( \+ 0)?\]", i.op_str) is not None)


def ordinary_key(i):
    """What must survive rewriting: the bytes, but of a relative branch only its kind, since
    gas sizes and aims it again around the sites."""
    if i.bytes[0] in (0xE8, 0xE9, 0xEB) or 0x70 <= i.bytes[0] <= 0x7F or \
            (i.bytes[0] == 0x0F and 0x80 <= i.bytes[1] <= 0x8F):
        return (i.mnemonic, "rel")
    return (i.mnemonic, i.op_str, bytes(i.bytes))


def linear(code):
    """Instructions in order; the insert-mode marker is its own item ("marker", offset)."""
    out, off = [], 0
    while off < len(code):
        if code[off:off + 3] == MARKER:
            out.append(("marker", off))
            off += 3
            continue
        i = next(CS.disasm(code[off:off + 16], off), None)
        # gas takes some invalid prefix uses (lock lar) that ring3-as must have refused.
        assert i is not None, f"undecodable code at {off:#x}: {code[off:off + 16].hex()}"
        out.append(i)
        off += i.size
    return out


def split_sites(insns):
    """(ordinary instructions, sites) of rewrite-mode code: a site is (entry, desc, aux)."""
    ordinary, sites = [], []
    for i in insns:
        if bytes(i.bytes) == bytes.fromhex("36c6050010ffff00"):       # movb $0, %ss:R3_VIF_ADDR
            sites.append(("CLI", None, None))
            continue
        if bytes(i.bytes[:3]) == b"\x2e\xff\x15":
            entry = SLOT[i.operands[0].mem.disp & 0xFFFFFFFF]
            if abi.ENTRIES[entry].words:
                desc_push, aux_push = ordinary.pop(), ordinary.pop()
                assert desc_push.bytes[0] == 0x68 and aux_push.bytes[0] == 0x68
                sites.append((entry, desc_push.operands[0].imm & 0xFFFFFFFF,
                              aux_push.operands[0].imm & 0xFFFFFFFF))
            else:
                if entry == "PUSHF":
                    assert ordinary.pop().mnemonic == "pushfd", "a pushf site keeps its pushfl"
                sites.append((entry, None, None))
            continue
        ordinary.append(i)
    return ordinary, sites


def expected(i):
    entry, desc, aux = expected_site(i)
    return entry, desc, None if aux is None else aux & 0xFFFFFFFF


def monitor_decode(traps):
    """The monitor's decoding of each (bytes, #UD?) trap: (entry, desc, aux) or None."""
    if not traps:
        return []
    text = "".join(f"{'ud' if ud else 'gp'} {code.hex()}\n" for code, ud in traps)
    r = subprocess.run([str(DECODE)], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    names = {e.number: e.name for e in abi.ENTRIES.values()}
    out = []
    for line in r.stdout.splitlines():
        f = line.split()
        out.append(None if f == ["none"] else (names[int(f[0], 16)], int(f[1], 16), int(f[2], 16)))
    return out


# ---- the properties ----

def check_program(text):
    with tempfile.TemporaryDirectory() as tmp:
        plain = plain_as(text, tmp)
        results = {mode: ring3_as(text, mode, tmp) for mode in ("rewrite", "insert")}
        for mode, (status, err, obj) in results.items():
            if status != 0:
                check_failure(status, err)
                continue
            assert not err, err
            assert obj is not None, f"ring3-as ({mode}) succeeded without writing the object"
            sections(obj)                                                       # (b)
        ok = {mode for mode, r in results.items() if r[0] == 0}
        if plain is None:
            return
        if "rewrite" in ok:
            assert "insert" in ok or results["insert"][1], "only insert mode failed"
        if not ok:
            return
        plain_secs = sections(plain)
        for mode in ok:
            got_secs = sections(results[mode][2])
            assert set(got_secs) == set(plain_secs)
            for name, (code, data) in plain_secs.items():
                if not code:
                    assert got_secs[name][1] == data, f"{mode}: data section {name} changed"
                    continue
                compare_code(text, mode, data, got_secs[name][1])
        if "rewrite" in ok:
            second_pass(text)


def compare_code(text, mode, plain, got):
    """(c) for one code section."""
    want = [i for i in linear(plain) if not is_padding(i)]
    assert not any(isinstance(i, tuple) for i in want), "the input has a marker of its own"
    want_ord = [ordinary_key(i) for i in want if not is_sensitive(i)]
    want_sens = [i for i in want if is_sensitive(i)]
    if mode == "rewrite":
        got_ord, sites = split_sites([i for i in linear(got) if not is_padding(i)])
        assert [ordinary_key(i) for i in got_ord] == want_ord, f"ordinary code changed:\n{text}"
        flat = [s for site in sites for s in
                ([("STI", None, None), ("HLT", None, None)] if site[0] == "STI_HLT" else [site])]
        assert [s[0] for s in flat] == [expected(i)[0] for i in want_sens], text
        for (entry, desc, aux), i in zip(flat, want_sens):
            e_entry, e_desc, e_aux = expected(i)
            if e_desc is not None:
                assert (desc, aux) == (e_desc, e_aux), \
                    f"{i.mnemonic} {i.op_str}: desc {desc:#x} aux {aux:#x}, want {e_desc:#x} {e_aux:#x}"
        return
    items = [i for i in linear(got) if isinstance(i, tuple) or not is_padding(i)]
    got_insns, marked = [], []
    for k, i in enumerate(items):
        if isinstance(i, tuple):
            assert k + 1 < len(items) and not isinstance(items[k + 1], tuple), "a marker before nothing"
            continue
        got_insns.append(i)
        marked.append(k > 0 and isinstance(items[k - 1], tuple))
    assert [ordinary_key(i) for i in got_insns] == [ordinary_key(i) for i in want], \
        f"insert mode changed the code:\n{text}"
    traps = []
    for i, m in zip(got_insns, marked):
        if not is_sensitive(i):
            assert not m, f"marker before {i.mnemonic} {i.op_str}"
            continue
        entry = expected(i)[0]
        assert m == (entry not in rules.PRIVILEGED), f"{i.mnemonic} {i.op_str}: marked {m}"
        traps.append(((MARKER if m else b"") + bytes(i.bytes), m))
    for (code, _), i, got_site in zip(traps, [i for i in got_insns if is_sensitive(i)],
                                      monitor_decode(traps)):
        e_entry, e_desc, e_aux = expected(i)
        assert got_site is not None and got_site[0] == e_entry, f"{code.hex()}: {got_site}, want {e_entry}"
        if e_desc is not None:
            assert got_site[1:] == (e_desc, e_aux), f"{code.hex()}: {got_site}"


def second_pass(text):
    """(d): the rewritten text, rewritten again, changes only at the pushfl a pushf site keeps."""
    once = rewrite_lines(text.split("\n"), "t.s", "rewrite", ["--32"])
    twice = rewrite_lines(list(once), "t.s", "rewrite", ["--32"])
    pushf = rules.emit_site(rules.Site("PUSHF"))
    for a, b in zip(once, twice):
        if a != b:
            assert b.replace(".byte 0x9c; " + pushf, ".byte 0x9c") == a, \
                f"second pass changed {a!r} into {b!r}"


@SETTINGS
@given(program())
@example("\tcli\n\tsti\n\thlt\n\tpushf\n\tlgdt gdt\n\t.data\ngdt: .long 0, 0\n")
# Found by this test: a labelled prefix statement was not carried (DESC without REP, the rep
# on the site's first push), nor a prefix alone on the line before (data16 made that push 2 bytes).
@example("1: rep; insb\n\tjmp 1b\n\t.Lout: lock; lar %ax, %bx\n")
@example("\tnop\n\tdata16\n\tsgdt (%eax)\n\trep\n\toutsb\n")
def test_generated_programs(text):
    check_program(text)


def test_prefix_statements_belong_to_the_instruction(tmp_path):
    """A prefix written as its own statement, labelled or on the line before, is the next
    instruction's (SDM vol. 2, 2.1.1): carried into its site, or refused; never left on a push."""
    tmp = str(tmp_path)
    status, err, obj = ring3_as("1: rep; insb\n\tjmp 1b\nfs\n\tsgdt (%eax)\n", "rewrite", tmp)
    assert status == 0, err
    _, sites = split_sites(linear(sections(obj)[".text"][1]))
    assert sites == [("INS", abi.desc(size=0, rep=1), 0), ("SGDT", abi.desc(kind=2, base=0, seg=5), 0)]
    for text, line in (("2: lock; lar %ax, %bx\n", 1), ("\tnop\n\tdata16\n\tsgdt (%eax)\n", 3),
                       ("lock\n\tlar %ax, %bx\n", 2)):
        status, err, _ = ring3_as(text, "rewrite", tmp)
        assert status != 0 and len(err) == 1 and f"rewrite.s:{line}: Error: ring3-as:" in err[0], err


LINE_CHARS = st.characters(min_codepoint=32, max_codepoint=126)


@SETTINGS
@given(st.lists(st.text(LINE_CHARS, max_size=60) | SENSITIVE | st.sampled_from(
    ["/*", "*/", '"', "'", "#", "# 5 \"x.S\"", ".code16", ".intel_syntax noprefix", ".byte 0x0f,",
     "alternative \"cli\"", ".section .debug_info", "\\", "rep;", "lock"]), max_size=12))
def test_raw_text(lines):
    """(a) on any printable text."""
    text = "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        status, err, _ = ring3_as(text, "rewrite", tmp)
        if status != 0:
            check_failure(status, err)


def test_driver_reports_one_line(tmp_path):
    """(a) through the installed build/bin/ring3-as, not in this process: a refused form is one
    line and a non-zero status, with no traceback."""
    make(BUILD / "bin" / "ring3-as")
    src = tmp_path / "bad.s"
    src.write_text("\tnop\n\tpushfw\n")
    r = subprocess.run([str(BUILD / "bin" / "ring3-as"), "--32", "-o", str(tmp_path / "o"), str(src)],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and ":2: Error: ring3-as:" in r.stderr, r.stderr

"""ring3-as: rewritten text, site bytes against Capstone, errors, labels, and use through gcc."""
import os
import subprocess
import sys

import capstone
import pytest

from conftest import BUILD, ROOT, make, run

sys.path.insert(0, str(ROOT / "rewriter"))
from ring3as import abi, rules  # noqa: E402
from ring3as.main import rewrite_lines  # noqa: E402

HERE = ROOT / "tests" / "rewriter"
AS = BUILD / "bin" / "ring3-as"
DECODE = BUILD / "tests" / "insert" / "decode"     # tests/insert/decode.c: the monitor's decoder
UPDATE = os.environ.get("RING3_UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module", autouse=True)
def built():
    make(AS, DECODE)


def rewrite_text(path, mode):
    lines = path.read_text().split("\n")
    return "\n".join(rewrite_lines(lines, path.name, mode, ["--32"]))


@pytest.mark.parametrize("mode", ["rewrite", "insert"])
def test_golden(mode):
    got = rewrite_text(HERE / "forms.s", mode)
    golden = HERE / f"forms.{mode}.golden"
    if UPDATE:
        golden.write_text(got)
    assert got == golden.read_text()


def test_lines_are_kept():
    """One output line per input line, so gas reports the original line numbers."""
    src = (HERE / "forms.s").read_text().split("\n")
    assert len(rewrite_text(HERE / "forms.s", "rewrite").split("\n")) == len(src)


def test_nonsensitive_untouched():
    path = HERE / "nonsensitive.s"
    for mode in ("rewrite", "insert"):
        assert rewrite_text(path, mode) == path.read_text()


def assemble(text, tmp_path, rewriter=True, mode="rewrite", name="t.s"):
    src = tmp_path / name
    src.write_text(text)
    obj = tmp_path / (name + ".o")
    cmd = [str(AS) if rewriter else "as", "--32", "-o", str(obj), str(src)]
    env = dict(os.environ, RING3_AS_MODE=mode)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return r, obj


def text_bytes(obj, section=".text"):
    dump = subprocess.run(["objcopy", "-O", "binary", f"--only-section={section}", str(obj),
                           str(obj) + ".bin"], capture_output=True)
    assert dump.returncode == 0
    return open(str(obj) + ".bin", "rb").read()


# ---- each site against Capstone's reading of the original instruction ----

CS = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_32)
CS.detail = True
GPR = {n: i for i, n in enumerate(["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"])}
GPR |= {n: i for i, n in enumerate(["ax", "cx", "dx", "bx", "sp", "bp", "si", "di"])}
GPR8 = {n: i for i, n in enumerate(["al", "cl", "dl", "bl", "ah", "ch", "dh", "bh"])}
SREG = {n: i for i, n in enumerate(["es", "cs", "ss", "ds", "fs", "gs"])}
SIZE_CODE = {1: 0, 2: 1, 4: 2}
X86_OP_REG, X86_OP_IMM, X86_OP_MEM = 1, 2, 3
PLAIN = {"cli": "CLI", "sti": "STI", "hlt": "HLT", "clts": "CLTS", "invd": "INVD",
         "wbinvd": "WBINVD", "rdmsr": "RDMSR", "wrmsr": "WRMSR", "rdpmc": "RDPMC", "cpuid": "CPUID",
         "sysenter": "SYSENTER", "sysexit": "SYSEXIT", "xsetbv": "XSETBV", "stac": "STAC",
         "clac": "CLAC", "monitor": "MONITOR", "mwait": "MWAIT", "into": "INTO", "int3": "INT3",
         "iretd": "IRET", "pushfd": "PUSHF", "popfd": "POPF"}
MEM_ONLY = {"lgdt": "LGDT", "lidt": "LIDT", "sgdt": "SGDT", "sidt": "SIDT", "invlpg": "INVLPG",
            "xsaves": "XSAVES", "xrstors": "XRSTORS"}
RM16 = {"lldt": "LLDT", "ltr": "LTR", "lmsw": "LMSW", "verr": "VERR", "verw": "VERW"}
STORE = {"sldt": "SLDT", "str": "STR", "smsw": "SMSW"}
LSEG = {"lds": "LDS", "les": "LES", "lfs": "LFS", "lgs": "LGS", "lss": "LSS"}


def reg_size(name):
    return 1 if name in GPR8 else 2 if len(name) == 2 else 4


def rm_fields(insn, op, size, reg=0):
    """DESC fields and AUX, derived from Capstone's operand."""
    if op.type == X86_OP_REG:
        name = insn.reg_name(op.reg)
        num = GPR8.get(name, GPR.get(name))
        return abi.desc(reg=reg, kind=1, size=SIZE_CODE[size], base=num), 0
    m = op.mem
    seg = insn.reg_name(m.segment) if m.segment else None
    base = GPR[insn.reg_name(m.base)] if m.base else None
    index = GPR[insn.reg_name(m.index)] if m.index else None
    scale = {1: 0, 2: 1, 4: 2, 8: 3}[m.scale] if index is not None else 0
    return abi.desc(reg=reg, kind=2, size=SIZE_CODE[size], base=base, index=index, scale=scale,
                    seg=0 if seg is None else SREG[seg] + 1), m.disp & 0xFFFFFFFF


def expected_site(insn):
    """(entry, desc, aux) that the original instruction must become, from Capstone alone."""
    mn = insn.mnemonic.split()[-1]
    ops = insn.operands
    opsize16 = 0x66 in insn.prefix
    rep = 0xF3 in insn.prefix or insn.bytes[0] == 0xF3
    if mn == "wbinvd" and rep:
        return "WBNOINVD", None, None     # f3 0f 09, which Capstone 4 does not name
    if mn in PLAIN:
        return PLAIN[mn], None, None
    if mn in ("in", "out"):
        acc, port = (ops[0], ops[1]) if mn == "in" else (ops[1], ops[0])
        size = reg_size(insn.reg_name(acc.reg))
        if port.type == X86_OP_IMM:
            return mn.upper(), abi.desc(kind=3, size=SIZE_CODE[size]), port.imm
        return mn.upper(), abi.desc(kind=1, size=SIZE_CODE[size], base=2), 0
    if mn[:-1] in ("ins", "outs"):
        # Capstone 4 names `66 f3 6d` (rep insw) "rep insd": take the size from the prefix.
        size = 1 if mn[-1] == "b" else 2 if opsize16 else 4
        seg = 0
        if mn.startswith("outs") and ops and ops[1].mem.segment:
            seg = SREG[insn.reg_name(ops[1].mem.segment)] + 1
        return mn[:-1].upper(), abi.desc(size=SIZE_CODE[size], rep=int(rep), seg=seg), 0
    if mn in MEM_ONLY:
        d, a = rm_fields(insn, ops[0], 2 if opsize16 else 4)
        return MEM_ONLY[mn], d, a
    if mn in RM16:
        d, a = rm_fields(insn, ops[0], 2)
        return RM16[mn], d, a
    if mn in STORE:
        op = ops[0]
        size = reg_size(insn.reg_name(op.reg)) if op.type == X86_OP_REG else 2
        d, a = rm_fields(insn, op, size)
        return STORE[mn], d, a
    if mn in ("lar", "lsl"):
        dst = insn.reg_name(ops[0].reg)
        d, a = rm_fields(insn, ops[1], reg_size(dst), reg=GPR[dst])
        return mn.upper(), d, a
    if mn in LSEG:
        dst = insn.reg_name(ops[0].reg)
        d, a = rm_fields(insn, ops[1], reg_size(dst), reg=GPR[dst])
        return LSEG[mn], d, a
    if mn == "mov":
        dst, src = ops
        dn = insn.reg_name(dst.reg) if dst.type == X86_OP_REG else None
        sn = insn.reg_name(src.reg) if src.type == X86_OP_REG else None
        if dn in SREG:
            d, a = rm_fields(insn, src, 2, reg=SREG[dn])
            return "MOV_TO_SREG", d, a
        if sn in SREG:
            size = reg_size(dn) if dn else 2
            d, a = rm_fields(insn, dst, size, reg=SREG[sn])
            return "MOV_FROM_SREG", d, a
        for prefix, to, frm in (("cr", "MOV_TO_CR", "MOV_FROM_CR"), ("dr", "MOV_TO_DR", "MOV_FROM_DR")):
            if dn and dn.startswith(prefix):
                return to, abi.desc(reg=int(dn[2:]), kind=1, size=2, base=GPR[sn]), 0
            if sn and sn.startswith(prefix):
                return frm, abi.desc(reg=int(sn[2:]), kind=1, size=2, base=GPR[dn]), 0
    if mn in ("push", "pop"):
        return f"{mn.upper()}_SREG", abi.desc(reg=SREG[insn.reg_name(ops[0].reg)],
                                              size=SIZE_CODE[2 if opsize16 else 4]), 0
    if mn in ("ljmp", "lcall"):
        size = 2 if opsize16 else 4
        if ops[0].type == X86_OP_IMM:
            return mn.upper(), abi.desc(kind=3, size=SIZE_CODE[size], imm16=ops[0].imm), ops[1].imm
        d, a = rm_fields(insn, ops[0], size)
        return mn.upper(), d, a
    if mn in ("retf", "lret"):
        size = SIZE_CODE[2 if opsize16 else 4]
        if ops:
            return "LRET", abi.desc(kind=3, size=size, imm16=ops[0].imm), 0
        return "LRET", abi.desc(size=size), 0
    if mn == "int":
        return "INT", abi.desc(kind=3), ops[0].imm
    if mn == "invpcid":
        d, a = rm_fields(insn, ops[1], 4, reg=GPR[insn.reg_name(ops[0].reg)])
        return "INVPCID", d, a
    raise AssertionError(f"no expectation for {insn.mnemonic} {insn.op_str}")


def decode_site(code):
    """(entry, desc, aux, inline) from the bytes of one rewritten site."""
    insns = list(CS.disasm(code, 0))
    if insns and insns[0].mnemonic == "mov" and insns[0].op_str.startswith("byte ptr ss:[0xffff1000]"):
        return "CLI", None, None, insns[0].op_str
    words = []
    for i in insns:
        if i.mnemonic == "pushfd" and not words:
            continue     # the inline half of a rewritten pushf
        if i.mnemonic == "push":
            assert i.size == 5, "pushes of a site are always imm32"
            words.append(i.operands[0].imm & 0xFFFFFFFF)
        elif i.mnemonic == "call":
            assert i.bytes[:3] == b"\x2e\xff\x15", "sites call through %cs"
            addr = i.operands[0].mem.disp & 0xFFFFFFFF
            n = (addr - abi.CONST["R3_TABLE"]) // 4
            entry = next(e.name for e in abi.ENTRIES.values() if e.number == n)
            assert len(words) == 2 * (abi.ENTRIES[entry].words > 0)
            aux, desc = (words[0], words[1]) if words else (None, None)
            return entry, desc, aux, None
        else:
            raise AssertionError(f"unexpected {i.mnemonic} {i.op_str} in a site")
    raise AssertionError("no call in site")


def form_lines():
    for line in (HERE / "forms.s").read_text().splitlines():
        if line.strip() and not line.startswith("#") and not line.strip().startswith(".byte"):
            yield line.strip()


@pytest.mark.parametrize("line", list(form_lines()))
def test_site_matches_capstone(line, tmp_path):
    r, obj = assemble(f"\t{line}\n", tmp_path, rewriter=False, name="orig.s")
    assert r.returncode == 0, r.stderr
    orig = list(CS.disasm(text_bytes(obj), 0))
    assert len(orig) == 1, [f"{i.mnemonic} {i.op_str}" for i in orig]
    entry, desc, aux = expected_site(orig[0])
    r, obj = assemble(f"\t{line}\n", tmp_path, name="new.s")
    assert r.returncode == 0, r.stderr
    got_entry, got_desc, got_aux, _ = decode_site(text_bytes(obj))
    assert got_entry == entry
    if desc is not None:
        assert (got_desc, got_aux) == (desc, aux & 0xFFFFFFFF), \
            f"desc {got_desc:#x} aux {got_aux:#x}, want {desc:#x} {aux:#x}"


def test_insert_mode_bytes(tmp_path):
    r, obj = assemble("\tcli\n\tpushfl\n\tmovl %eax, %cr3\n\tsgdt (%eax)\n\tint $0x81\n", tmp_path,
                      mode="insert")
    assert r.returncode == 0, r.stderr
    # Raw bytes: Capstone 4 decodes 0f b9 as a 2-byte "ud2b" and loses the marker's ModRM.
    marker = "0fb9ff"
    assert text_bytes(obj).hex() == "fa" + marker + "9c" + "0f22d8" + marker + "0f0100" + marker + "cd81"


# ---- insert mode: the monitor's decoder against the rewritten site ----

MARKER = bytes.fromhex("0fb9ff")    # R3_INSERT_MARKER*


def insert_decode(*traps):
    """The monitor's insert-mode decoding of each (bytes, #UD?) trap: (entry name, desc, aux, len,
    marked), or None."""
    text = "".join(f"{'ud' if ud else 'gp'} {code.hex()}\n" for code, ud in traps)
    r = subprocess.run([str(DECODE)], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        if line == "none":
            out.append(None)
            continue
        num, desc, aux, length, marked = (int(f, 16) for f in line.split())
        name = next(e.name for e in abi.ENTRIES.values() if e.number == num)
        out.append((name, desc, aux, length, bool(marked)))
    return out


@pytest.mark.parametrize("line", list(form_lines()))
def test_insert_decoder_matches_site(line, tmp_path):
    """Assembled in insert mode and decoded by the monitor, each form gives the entry and the
    DESC/AUX words its rewritten site pushes, and the length up to the next instruction."""
    r, obj = assemble(f"\t{line}\n", tmp_path, name="rewritten.s")
    assert r.returncode == 0, r.stderr
    entry, desc, aux, _ = decode_site(text_bytes(obj))
    r, obj = assemble(f"\t{line}\n", tmp_path, mode="insert", name="insert.s")
    assert r.returncode == 0, r.stderr
    code = text_bytes(obj)
    marked = code.startswith(MARKER)
    # A privileged instruction traps by itself; an unprivileged one only through its marker.
    assert marked == (entry not in rules.PRIVILEGED)
    [got] = insert_decode((code, marked))
    words = (desc, aux) if desc is not None else (0, 0)
    assert got == (entry, *words, len(code), marked), f"{got}, want {entry} {words[0]:#x} {words[1]:#x}"


def test_insert_decoder_edges():
    """sti; hlt is one STI_HLT step; a marker before an ordinary instruction, ud2 and a #GP on
    an ordinary instruction are not sites; bytes cut short are not decoded."""
    sti_hlt, not_sensitive, ud2, gp, cut = insert_decode(
        (bytes.fromhex("fbf4"), False), (MARKER + bytes.fromhex("89c8"), True),
        (bytes.fromhex("0f0b"), True), (bytes.fromhex("8b00"), False),
        (MARKER + bytes.fromhex("0f01"), True))
    assert sti_hlt == ("STI_HLT", 0, 0, 2, False)
    assert not_sensitive is None and ud2 is None and gp is None and cut is None


# ---- bad input ----

def test_unsupported_form_is_a_hard_error(tmp_path):
    for text, line in (("\tnop\n\tnop\n\tlgdtw (%bx)\n", 3), ("\tpushfw\n", 1),
                       ("\tlock; lar %ax, %bx\n", 1), ("\tmovl %eax, %cr8\n", 1),
                       ("\t.intel_syntax noprefix\n\tcli\n", 2)):
        r, _ = assemble(text, tmp_path, name="bad.s")
        assert r.returncode != 0
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{tmp_path / 'bad.s'}:{line}: Error: ring3-as:"), r.stderr


def test_malformed_goes_to_gas(tmp_path):
    r, _ = assemble("\tnop\n\tmovl %eax, %cr99\n\tfrobnicate %eax\n", tmp_path, name="m.s")
    assert r.returncode != 0
    assert f"{tmp_path / 'm.s'}:2: Error:" in r.stderr and "ring3-as" not in r.stderr
    assert f"{tmp_path / 'm.s'}:3: Error:" in r.stderr


def test_line_markers_name_the_source(tmp_path):
    r, _ = assemble('# 40 "arch/x86/kernel/foo.S"\n\tnop\n\tlgdtw (%bx)\n', tmp_path)
    assert r.stderr.startswith("arch/x86/kernel/foo.S:41: Error: ring3-as:"), r.stderr


def test_code16_passes_through(tmp_path):
    r, obj = assemble("\t.code16\n\tcli\n\t.code32\n\tcli\n", tmp_path)
    assert r.returncode == 0, r.stderr
    assert text_bytes(obj)[:2] == b"\xfa\x36"


# ---- labels, sections, exception tables ----

def symbols(obj):
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    return {p[2]: int(p[0], 16) for p in (ln.split() for ln in out.splitlines()) if len(p) == 3}


def test_labels_name_the_first_byte_of_the_site(tmp_path):
    text = """\t.text
\tnop
site1: rdmsr
2:\tnop
site2:\tmovl %eax, %cr3
\t.section __ex_table, "a"
\t.long site1, 2b, site2
\t.text
\t.pushsection .altinstr_replacement, "ax"
alt: cli
alt_end:
\t.popsection
\t.section .altinstructions, "a"
\t.byte alt_end - alt
\t.previous
"""
    r, obj = assemble(text, tmp_path)
    assert r.returncode == 0, r.stderr
    code, sym = text_bytes(obj), symbols(obj)
    assert code[sym["site1"]:sym["site1"] + 3] == b"\x2e\xff\x15"
    assert code[sym["site2"]] == 0x68 and sym["site2"] == sym["site1"] + 7 + 1
    rel = subprocess.run(["objdump", "-r", "-j", "__ex_table", str(obj)], capture_output=True,
                         text=True).stdout
    assert rel.count("R_386_32") == 3
    alt = text_bytes(obj, ".altinstr_replacement")
    assert alt == bytes.fromhex("36c60500" "10ffff" "00")
    assert text_bytes(obj, ".altinstructions") == bytes([len(alt)])


def test_through_gcc(tmp_path):
    src = tmp_path / "k.c"
    src.write_text("""
static inline unsigned long read_cr3(void) { unsigned long v; asm volatile("mov %%cr3,%0" : "=r"(v)); return v; }
static inline void outb(unsigned char v, unsigned short p) { asm volatile("outb %0,%1" : : "a"(v), "Nd"(p)); }
unsigned long f(unsigned short port) { asm volatile("cli" ::: "memory"); outb(1, port); outb(2, 0x80);
    asm volatile("sti; hlt" ::: "memory"); return read_cr3(); }
""")
    for extra in ([], ["-pipe"]):
        obj = tmp_path / "k.o"
        run(["gcc", "-m32", "-O2", f"-B{BUILD}/asbin/", *extra, "-c", str(src), "-o", str(obj)])
        dis = [i.mnemonic for i in CS.disasm(text_bytes(obj), 0)]
        assert not {"cli", "sti", "hlt", "out"} & set(dis), dis
        assert dis.count("call") == 4, dis    # out, out, sti+hlt, mov from %cr3; cli is inline


def test_byte_lists_in_code_are_rewritten(tmp_path):
    """Instructions spelled as .byte (stac, clac, xsaves in the kernel) are found and rewritten;
    the same bytes in a data section are data."""
    r, obj = assemble("\t.byte 0x0f, 0x01, 0xca\n\t.byte 0x0f,0xc7,0x2f\n"
                      "\t.section .rodata, \"a\"\n\t.byte 0x0f, 0x01, 0xca\n", tmp_path)
    assert r.returncode == 0, r.stderr
    assert [decode_site(text_bytes(obj)[i:i + 17])[0] for i in (0, 7)] == ["CLAC", "XSAVES"]
    assert text_bytes(obj, ".rodata") == b"\x0f\x01\xca"


def test_dwarf_sections_are_data(tmp_path):
    """What gcc -g writes into .debug_* sections is data, passed through unparsed; code after
    the way out of them (a .text, a .section, a .previous) is rewritten as ever."""
    r, obj = assemble("\t.section\t.debug_info,\"\",@progbits\n\t.byte 0x0f, 0x01, 0xca\n"
                      "\t.string \"cli; hlt\"\n\t.long 0xfa\n\t.text\n\t.byte 0x0f, 0x01, 0xca\n"
                      "\t.section\t.debug_line,\"\",@progbits\n\t.uleb128 0xfa\n"
                      "\t.section\t.text.unlikely,\"ax\",@progbits\n\tclac\n", tmp_path)
    assert r.returncode == 0, r.stderr
    dump = tmp_path / "debug_info.bin"      # not allocated: -O binary would leave it out
    subprocess.run(["objcopy", f"--dump-section=.debug_info={dump}", str(obj)], check=True)
    assert dump.read_bytes() == b"\x0f\x01\xcacli; hlt\x00\xfa\x00\x00\x00"
    assert decode_site(text_bytes(obj)[:17])[0] == "CLAC"
    assert decode_site(text_bytes(obj, ".text.unlikely")[:17])[0] == "CLAC"


def test_macro_built_and_string_instructions(tmp_path):
    """What gas itself builds (a macro's `\\op`, ALTERNATIVE string arguments) is rewritten too:
    the prelude defines the operand-less ones as macros, strings are rewritten as text."""
    text = """\t.macro op_safe op
1:\t\\op
\t.endm
\t.macro ALTERNATIVE old, new, feature
\t\\new
\t.endm
\top_safe rdmsr
\tALTERNATIVE "", "clac; verw %cs:sel", 1
\t.macro SWITCH scratch_reg:req
\tmovl %cr3, \\scratch_reg
\tmovl \\scratch_reg, %cr3
\t.endm
\tSWITCH scratch_reg=%edi
"""
    r, obj = assemble(text, tmp_path)
    assert r.returncode == 0, r.stderr
    code = text_bytes(obj)
    got, off = [], 0
    while off < len(code):
        entry, desc, aux, _ = decode_site(code[off:off + 17])
        got.append((entry, desc))
        off += abi.CONST["R3_CALL_LEN"] + (10 if desc is not None else 0)
    assert [e for e, _ in got] == ["RDMSR", "CLAC", "VERW", "MOV_FROM_CR", "MOV_TO_CR"]
    assert got[3][1] == abi.desc(reg=3, kind=1, size=2, base=7)
    assert got[4][1] == abi.desc(reg=3, kind=1, size=2, base=7)


def test_int3_stays(tmp_path):
    """int3 runs as it is (the host's SIGTRAP is the guest's #BP, EIP after its one byte):
    return-buffer stuffing inside an alternative, the static-call trampoline's 8 bytes and
    the kernel's int3 self-test all depend on it being one byte."""
    r, obj = assemble('\t.macro ALT a, b\n\t\\b\n\t.endm\n'
                      '\tALT "", ".rept 2; call 772f; int3; 772:; .endr"\n'
                      '\tcall 1f; int3; 1: int3\n'
                      '\tret; int3; nop; nop; nop\n\tint $3\n', tmp_path)
    assert r.returncode == 0, r.stderr
    code = text_bytes(obj)
    assert code == bytes.fromhex("e801000000cc") * 3 + bytes.fromhex("cc" "c3cc909090" "cc")


def test_pushf_is_one_site(tmp_path):
    """pushf becomes exactly pushfl and one call (the prelude must not rewrite it twice)."""
    r, obj = assemble("\tpushf\n\tpushfl\n", tmp_path)
    assert r.returncode == 0, r.stderr
    slot = abi.slot_address("PUSHF").to_bytes(4, "little")
    assert text_bytes(obj) == (b"\x9c\x2e\xff\x15" + slot) * 2

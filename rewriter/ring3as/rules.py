"""Which instructions are sensitive, and what each becomes in rewrite and insert mode.

Every rule turns one parsed statement into a Site: the ABI entry it calls,
its DESC word and its AUX word (both gas expressions), or into inline text
for the entries the ABI marks INLINE. The DESC layout and entry numbers come
from include/ring3/abi.h through abi.py.
"""
import re
from dataclasses import dataclass

from . import abi
from .operands import GPR32, Imm, Mem, OperandError, Reg, parse_operand, split_operands


class Unsupported(Exception):
    """A sensitive instruction in a form the rewriter does not handle."""


SIZES = {"b": 8, "w": 16, "l": 32, "d": 32}
SIZE_CODE = {8: 0, 16: 1, 32: 2}
SYSTEM_REG = re.compile(r"\*?%\s*(cr\d|dr\d|db\d|[c-gs]s)")
KIND = {"none": 0, "reg": 1, "mem": 2, "imm": 3}
EDX = GPR32.index("edx")

# Instructions that fault at CPL 3 by themselves (with IOPL 0). In insert mode
# they are left alone; the unprivileged sensitive ones get the marker.
PRIVILEGED = {"CLI", "STI", "STI_HLT", "HLT", "IN", "OUT", "INS", "OUTS", "LGDT", "LIDT", "LLDT",
              "LTR", "LMSW", "CLTS", "INVD", "WBINVD", "WBNOINVD", "INVLPG", "RDMSR", "WRMSR",
              "RDPMC", "MOV_TO_CR", "MOV_FROM_CR", "MOV_TO_DR", "MOV_FROM_DR", "SYSEXIT",
              "XSETBV", "STAC", "CLAC", "XSAVES", "XRSTORS", "MONITOR", "MWAIT", "INVPCID"}


@dataclass
class Site:
    entry: str
    desc: str = "0"
    aux: str = "0"


def emit_site(site):
    """The rewritten text of a site, as ';'-separated statements on one line."""
    e = abi.ENTRIES[site.entry]
    call = f"call *%cs:{abi.slot_address(site.entry):#x}"
    if e.words == 0:
        return call
    # pushl $imm32 spelled as bytes: gas would pick the 2-byte form for small
    # constants, and the monitor relies on every push being 5 bytes.
    return f".byte 0x68; .long {site.aux}; .byte 0x68; .long {site.desc}; {call}"


def _d(reg=0, kind="none", size=32, base=None, index=None, scale=0, seg=None, rep=False,
       imm16=None):
    """DESC as a gas expression: a number, or number | (expr << 16) for IMM16."""
    value = abi.desc(reg=reg, kind=KIND[kind], size=SIZE_CODE[size], base=base, index=index,
                     scale=scale, seg=0 if seg is None else seg + 1, rep=int(rep))
    if imm16 is None:
        return f"{value:#x}"
    return f"({value:#x} | ((({imm16}) & 0xffff) << {abi.CONST['R3_D_IMM16_SHIFT']}))"


def default_segment(mem):
    """SS for an %esp or %ebp base, else DS (SDM vol. 1, 3.7.4)."""
    return 2 if mem.base in (4, 5) else 3


def _rm(op, size, reg=0, seg_prefix=None):
    """DESC and AUX for an r/m operand (register or memory)."""
    v = op.value
    if isinstance(v, Reg):
        if v.cls != "gpr":
            raise Unsupported(f"{v.text} cannot be an r/m operand here")
        return _d(reg=reg, kind="reg", size=size, base=v.num), "0"
    if isinstance(v, Mem):
        seg = v.seg if v.seg is not None else seg_prefix
        if seg == default_segment(v):
            seg = None      # as gas does, an override naming the default segment is dropped
        aux = f"({v.disp})" if v.disp else "0"
        return _d(reg=reg, kind="mem", size=size, base=v.base, index=v.index, scale=v.scale,
                  seg=seg), aux
    raise Unsupported("an immediate is not allowed here")


class Stmt:
    """The parts of one instruction statement that rules look at."""

    def __init__(self, mnemonic, suffix, operands, prefixes):
        self.mnemonic = mnemonic
        self.suffix = suffix            # operand size from the mnemonic suffix, or None
        self.raw = operands
        self.prefixes = prefixes
        # gas writes the port of in/out/ins/outs as %dx or (%dx); both mean the register.
        texts = ["%dx" if _dx_text(t) else t for t in split_operands(operands)] if operands else []
        try:
            self.ops = [parse_operand(t) for t in texts]
        except OperandError as err:
            raise Unsupported(str(err)) from err
        self.seg_prefix = next((["es", "cs", "ss", "ds", "fs", "gs"].index(p)
                                for p in prefixes if p in ("es", "cs", "ss", "ds", "fs", "gs")),
                               None)

    def nops(self, *allowed):
        if len(self.ops) not in allowed:
            raise Unsupported(f"{len(self.ops)} operands")


def _gpr(op, what):
    v = op.value
    if not isinstance(v, Reg) or v.cls != "gpr":
        raise Unsupported(f"{what} must be a general register")
    return v


def _mem(op, what="operand"):
    if not isinstance(op.value, Mem):
        raise Unsupported(f"{what} must be a memory reference")
    return op


def _size_of(op, suffix, default=None):
    v = op.value
    if isinstance(v, Reg) and v.cls == "gpr":
        return v.size
    if suffix:
        return suffix
    if default:
        return default
    raise Unsupported("operand size is ambiguous; add a suffix")


# ---- the rules: each takes a Stmt and returns a Site or inline text ----

def r_noop(entry):
    def rule(s):
        s.nops(0)
        return Site(entry)
    return rule


def r_cli(s):
    if s is not None:
        s.nops(0)
    return f"movb $0, %ss:{abi.CONST['R3_VIF_ADDR']:#x}"


def r_pushf(s):
    s.nops(0)
    if s.suffix == 16:
        raise Unsupported("16-bit pushf")
    # The real pushfl as bytes: spelled `pushfl`, the prelude's macro would rewrite it again.
    return ".byte 0x9c; " + emit_site(Site("PUSHF"))


def r_popf(s):
    s.nops(0)
    if s.suffix == 16:
        raise Unsupported("16-bit popf")
    return Site("POPF")


def r_iret(s):
    s.nops(0)
    if s.suffix == 16:
        raise Unsupported("16-bit iret")
    return Site("IRET")


def _port(op):
    """DESC parts for a port operand: $imm or %dx / (%dx)."""
    t = op.value
    if isinstance(t, Imm):
        return dict(kind="imm"), f"({t.expr})"
    if isinstance(t, Reg) and t.cls == "gpr" and t.size == 16 and t.num == EDX:
        return dict(kind="reg", base=EDX), "0"
    raise Unsupported("the port must be $imm8 or %dx")


def _dx_text(text):
    return text.replace(" ", "").lower() == "(%dx)"


def _acc_size(op):
    v = op.value
    if isinstance(v, Reg) and v.cls == "gpr" and v.num == 0 and v.size in (8, 16, 32):
        if v.size == 8 and v.text != "%al":
            raise Unsupported("in/out use %al, %ax or %eax")
        return v.size
    raise Unsupported("in/out use %al, %ax or %eax")


def r_in(s):
    ops = s.ops
    if len(ops) not in (1, 2):
        raise Unsupported("in takes a port and a register")
    size = _acc_size(ops[1]) if len(ops) == 2 else s.suffix
    if size is None or (s.suffix and s.suffix != size):
        raise Unsupported("operand size is ambiguous")
    parts, aux = _port(ops[0])
    return Site("IN", _d(size=size, **parts), aux)


def r_out(s):
    ops = s.ops
    if len(ops) == 2:
        size, port = _acc_size(ops[0]), ops[1]
    elif len(ops) == 1:
        size, port = s.suffix, ops[0]
    else:
        raise Unsupported("out takes a register and a port")
    if size is None or (s.suffix and s.suffix != size):
        raise Unsupported("operand size is ambiguous")
    parts, aux = _port(port)
    return Site("OUT", _d(size=size, **parts), aux)


def _rep(s):
    reps = [p for p in s.prefixes if p.startswith("rep")]
    if any(p not in ("rep", "repe", "repz") for p in reps):
        raise Unsupported("repne on string I/O")
    return bool(reps)


def r_ins(s):
    if s.suffix is None:
        raise Unsupported("ins needs a size suffix")
    ops = s.ops
    if ops and (len(ops) != 2 or _port(ops[0])[0].get("base") != EDX):
        raise Unsupported("ins operands are (%dx),%es:(%edi)")
    if ops:
        dst = ops[1].value
        if not isinstance(dst, Mem) or dst.base != GPR32.index("edi") or dst.disp or \
                dst.index is not None or dst.seg not in (None, 0):
            raise Unsupported("ins writes %es:(%edi)")
    return Site("INS", _d(size=s.suffix, rep=_rep(s)))


def r_outs(s):
    if s.suffix is None:
        raise Unsupported("outs needs a size suffix")
    ops = s.ops
    seg = s.seg_prefix
    if ops:
        if len(ops) != 2 or _port(ops[1])[0].get("base") != EDX:
            raise Unsupported("outs operands are %seg:(%esi),(%dx)")
        src = ops[0].value
        if not isinstance(src, Mem) or src.base != GPR32.index("esi") or src.disp or \
                src.index is not None:
            raise Unsupported("outs reads (%esi)")
        seg = src.seg if src.seg is not None else seg
    return Site("OUTS", _d(size=s.suffix, rep=_rep(s), seg=seg))


def r_mem_only(entry, sizes=(16, 32)):
    def rule(s):
        s.nops(1)
        size = s.suffix or 32
        if size not in sizes:
            raise Unsupported(f"{size}-bit operand")
        desc, aux = _rm(_mem(s.ops[0]), size, seg_prefix=s.seg_prefix)
        return Site(entry, desc, aux)
    return rule


def r_rm16(entry):
    """lldt, ltr, lmsw, verr, verw: one 16-bit register or memory operand."""
    def rule(s):
        s.nops(1)
        if isinstance(s.ops[0].value, Imm):
            raise Unsupported("an immediate is not allowed here")
        desc, aux = _rm(s.ops[0], 16, seg_prefix=s.seg_prefix)
        return Site(entry, desc, aux)
    return rule


def r_store_rm(entry):
    """sldt, str, smsw: a 16/32-bit register, or 16 bits of memory."""
    def rule(s):
        s.nops(1)
        op = s.ops[0]
        if isinstance(op.value, Imm):
            raise Unsupported("an immediate is not allowed here")
        size = _size_of(op, s.suffix, 16)
        desc, aux = _rm(op, size if isinstance(op.value, Reg) else 16, seg_prefix=s.seg_prefix)
        return Site(entry, desc, aux)
    return rule


def r_lar_lsl(entry):
    def rule(s):
        s.nops(2)
        dst = _gpr(s.ops[1], "the destination")
        if dst.size == 8 or isinstance(s.ops[0].value, Imm):
            raise Unsupported("lar/lsl take r/m16 and a 16/32-bit register")
        desc, aux = _rm(s.ops[0], dst.size, reg=dst.num, seg_prefix=s.seg_prefix)
        return Site(entry, desc, aux)
    return rule


def r_mov(s):
    """mov with a segment, control or debug register; other movs are not sensitive."""
    s.nops(2)
    src, dst = s.ops
    sv, dv = src.value, dst.value
    if isinstance(dv, Reg) and dv.cls == "sreg":
        if dv.num == 1:
            raise Unsupported("mov to %cs")
        if isinstance(sv, Imm):
            raise Unsupported("mov of an immediate to a segment register")
        desc, aux = _rm(src, 16, reg=dv.num, seg_prefix=s.seg_prefix)
        return Site("MOV_TO_SREG", desc, aux)
    if isinstance(sv, Reg) and sv.cls == "sreg":
        if isinstance(dv, Imm):
            raise Unsupported("bad destination")
        size = dv.size if isinstance(dv, Reg) else 16
        if isinstance(dv, Reg) and dv.size == 8:
            raise Unsupported("8-bit destination")
        desc, aux = _rm(dst, size, reg=sv.num, seg_prefix=s.seg_prefix)
        return Site("MOV_FROM_SREG", desc, aux)
    for name, reg_side, gpr_side, entry in (("cr", dv, sv, "MOV_TO_CR"), ("dr", dv, sv, "MOV_TO_DR"),
                                            ("cr", sv, dv, "MOV_FROM_CR"),
                                            ("dr", sv, dv, "MOV_FROM_DR")):
        if isinstance(reg_side, Reg) and reg_side.cls == name:
            if not (isinstance(gpr_side, Reg) and gpr_side.cls == "gpr" and gpr_side.size == 32):
                raise Unsupported(f"%{name} moves take a 32-bit general register")
            return Site(entry, _d(reg=reg_side.num, kind="reg", base=gpr_side.num))
    return None


def r_push_pop_sreg(entry):
    def rule(s):
        if len(s.ops) != 1 or not isinstance(s.ops[0].value, Reg) or s.ops[0].value.cls != "sreg":
            return None
        sreg = s.ops[0].value.num
        if entry == "POP_SREG" and sreg == 1:
            raise Unsupported("pop %cs")
        return Site(entry, _d(reg=sreg, size=s.suffix or 32))
    return rule


def r_lseg(entry):
    def rule(s):
        s.nops(2)
        dst = _gpr(s.ops[1], "the destination")
        if dst.size == 8:
            raise Unsupported("8-bit destination")
        desc, aux = _rm(_mem(s.ops[0]), dst.size, reg=dst.num, seg_prefix=s.seg_prefix)
        return Site(entry, desc, aux)
    return rule


def r_far(entry, needs_two_imms=False):
    """ljmp/lcall: $sel,$off or *mem. Plain jmp/call are far only with two immediates."""
    def rule(s):
        size = s.suffix or 32
        if len(s.ops) == 2 and all(isinstance(o.value, Imm) for o in s.ops):
            sel, off = s.ops[0].value.expr, s.ops[1].value.expr
            return Site(entry, _d(kind="imm", size=size, imm16=sel), f"({off})")
        if needs_two_imms:
            return None
        s.nops(1)
        if not s.ops[0].indirect:
            raise Unsupported("a far jump or call takes $sel,$off or *mem")
        desc, aux = _rm(_mem(s.ops[0]), size, seg_prefix=s.seg_prefix)
        return Site(entry, desc, aux)
    return rule


def r_lret(s):
    s.nops(0, 1)
    size = s.suffix or 32
    if s.ops:
        if not isinstance(s.ops[0].value, Imm):
            raise Unsupported("lret takes $imm16")
        return Site("LRET", _d(kind="imm", size=size, imm16=s.ops[0].value.expr))
    return Site("LRET", _d(size=size))


def r_int(s):
    s.nops(1)
    if not isinstance(s.ops[0].value, Imm):
        raise Unsupported("int takes $vector")
    vector = s.ops[0].value.expr.strip().lower()
    if vector == "3":
        return None     # gas encodes `int $3` as int3 (0xcc), which runs as it is (see INT3)
    if vector in ("0x80", "128"):
        # The host's Syscall User Dispatch turns it into the guest's system call; it stays
        # two bytes, since a restarted system call returns to EIP - 2 (the vDSO's
        # int80_landing_pad follows it, and sysenter returns there too).
        return None
    return Site("INT", _d(kind="imm"), f"({s.ops[0].value.expr})")


def r_fixed_regs(entry):
    """monitor and mwait: their register operands, if written, are the fixed ones."""
    def rule(s):
        return Site(entry)
    return rule


def r_invpcid(s):
    s.nops(2)
    reg = _gpr(s.ops[1], "the type")
    desc, aux = _rm(_mem(s.ops[0]), 32, reg=reg.num, seg_prefix=s.seg_prefix)
    return Site("INVPCID", desc, aux)


# mnemonic base -> (rule, accepted suffixes)
RULES = {
    "cli": (r_cli, ""), "sti": (r_noop("STI"), ""),
    "pushf": (r_pushf, "wld"), "popf": (r_popf, "wld"), "iret": (r_iret, "wld"),
    "hlt": (r_noop("HLT"), ""),
    "in": (r_in, "bwl"), "out": (r_out, "bwl"), "ins": (r_ins, "bwld"), "outs": (r_outs, "bwld"),
    "lgdt": (r_mem_only("LGDT"), "wl"), "lidt": (r_mem_only("LIDT"), "wl"),
    "sgdt": (r_mem_only("SGDT"), "wl"), "sidt": (r_mem_only("SIDT"), "wl"),
    "lldt": (r_rm16("LLDT"), "w"), "ltr": (r_rm16("LTR"), "w"), "lmsw": (r_rm16("LMSW"), "w"),
    "verr": (r_rm16("VERR"), "w"), "verw": (r_rm16("VERW"), "w"),
    "sldt": (r_store_rm("SLDT"), "wl"), "str": (r_store_rm("STR"), "wl"),
    "smsw": (r_store_rm("SMSW"), "wl"),
    "lar": (r_lar_lsl("LAR"), "wl"), "lsl": (r_lar_lsl("LSL"), "wl"),
    "clts": (r_noop("CLTS"), ""), "invd": (r_noop("INVD"), ""), "wbinvd": (r_noop("WBINVD"), ""),
    "wbnoinvd": (r_noop("WBNOINVD"), ""),
    "invlpg": (r_mem_only("INVLPG", (32,)), ""),
    "rdmsr": (r_noop("RDMSR"), ""), "wrmsr": (r_noop("WRMSR"), ""), "rdpmc": (r_noop("RDPMC"), ""),
    "cpuid": (r_noop("CPUID"), ""),
    "mov": (r_mov, "wl"),
    "push": (r_push_pop_sreg("PUSH_SREG"), "wl"), "pop": (r_push_pop_sreg("POP_SREG"), "wl"),
    "lds": (r_lseg("LDS"), "wl"), "les": (r_lseg("LES"), "wl"), "lfs": (r_lseg("LFS"), "wl"),
    "lgs": (r_lseg("LGS"), "wl"), "lss": (r_lseg("LSS"), "wl"),
    "ljmp": (r_far("LJMP"), "wl"), "lcall": (r_far("LCALL"), "wl"),
    "jmp": (r_far("LJMP", True), "wl"), "call": (r_far("LCALL", True), "wl"),
    "lret": (r_lret, "wl"),
    # int3 is not here: it runs as it is, and the host's SIGTRAP becomes the guest's #BP
    # with EIP after its one byte, as the kernel's int3 users (text_poke_bp, static-call
    # trampolines, the int3 self-test) need; a 7-byte site would move both.
    "int": (r_int, ""), "into": (r_noop("INTO"), ""),
    "sysenter": (r_noop("SYSENTER"), ""), "sysexit": (r_noop("SYSEXIT"), ""),
    "xsetbv": (r_noop("XSETBV"), ""), "stac": (r_noop("STAC"), ""), "clac": (r_noop("CLAC"), ""),
    "monitor": (r_fixed_regs("MONITOR"), ""), "mwait": (r_fixed_regs("MWAIT"), ""),
    "xsaves": (r_mem_only("XSAVES", (32,)), ""), "xrstors": (r_mem_only("XRSTORS", (32,)), ""),
    "invpcid": (r_invpcid, ""),
}
# Spellings gas accepts that are not base + suffix.
ALIASES = {"iretd": ("iret", 32), "pushfd": ("pushf", 32), "popfd": ("popf", 32),
           "retf": ("lret", None), "lretq": None, "int1": None, "icebp": None,
           "sysexitq": None, "iretq": None, "swapgs": None, "sysret": None, "sysretl": None,
           "sysretq": None, "rsm": None, "xsaves64": None, "xrstors64": None}


# Instructions that read or write the x87, MMX, SSE or AVX state (SDM vol. 1, 8.1, 10.2, 13.1):
# in rewrite mode each keeps its place and gets a call to FPU before it, so that the monitor
# knows when the guest kernel reaches the vector registers (monitor/mmu/aspace.c loads a
# process's state into them only then). The kernel builds its C without them, so these are
# its FPU code: saving, restoring and initialising a task's state, and the boot-time checks.
X87 = re.compile(r"f(?:2xm1|abs|addp?|bld|bstp|chs|n?clex|cmovn?[a-z]+|comi?p?|compp|cos|decstp"
                 r"|divr?p?|freep?|iadd|icomp?|idivr?|ild|imul|incstp|n?init|istt?p?|isubr?"
                 r"|ld|ld1|ldcw|ldenv|ldl2[et]|ldlg2|ldln2|ldpi|ldz|mulp?|nop|n?save|n?stcw"
                 r"|n?stenv|n?stsw|patan|prem1?|ptan|rndint|rstor|scale|sin|sincos|sqrt|stp?"
                 r"|subr?p?|tst|ucomi?p?|ucompp|wait|xam|xch|xtract|yl2x|yl2xp1|xsave|xrstor)"
                 r"(?:s|l|t|ll|q)?")
VECTOR_STATE = {"xsave", "xsaveopt", "xsavec", "xrstor", "ldmxcsr", "stmxcsr", "vldmxcsr",
                "vstmxcsr", "emms", "femms", "vzeroupper", "vzeroall", "xgetbv", "wait"}
VECTOR_REG = re.compile(r"%\s*(?:[xyz]?mm\d|st\b|k[0-7]\b)", re.I)


def touches_vector_state(mnemonic, operands):
    """Whether the instruction reads or writes the x87/SSE/AVX state (the FPU entry's rule)."""
    m = mnemonic.lower()
    return m in VECTOR_STATE or X87.fullmatch(m) is not None or VECTOR_REG.search(operands) is not None


def lookup(mnemonic):
    """(base, rule, suffix size) for a sensitive mnemonic, else None.

    A rule of None means "sensitive but never rewritten": always an error."""
    if mnemonic in ALIASES:
        alias = ALIASES[mnemonic]
        if alias is None:
            return mnemonic, None, None
        base, size = alias
        return base, RULES[base][0], size
    if mnemonic in RULES:
        return mnemonic, RULES[mnemonic][0], None
    base, suf = mnemonic[:-1], mnemonic[-1:]
    if base in RULES and suf in RULES[base][1]:
        return base, RULES[base][0], SIZES[suf]
    return None


def rewrite(mnemonic, operands, prefixes):
    """A rewritten text for one instruction, or None when it is not sensitive.

    Raises Unsupported for a sensitive instruction in a form not handled."""
    found = lookup(mnemonic)
    if found is None:
        return None, None
    base, rule, size = found
    if rule is None:
        raise Unsupported(f"{mnemonic} is not supported in 32-bit guest code")
    if base == "mov":
        found = _mov_macro_register(operands)
        if found:
            return found
    if base in ("mov", "push", "pop", "jmp", "call"):
        # Only some forms are sensitive; parse leniently and let gas judge the rest.
        try:
            s = Stmt(mnemonic, size, operands, prefixes)
        except Unsupported:
            if not any(SYSTEM_REG.fullmatch(t.strip().lower()) for t in split_operands(operands)):
                return None, None
            raise
    else:
        s = Stmt(mnemonic, size, operands, prefixes)
    if any(p in ("lock", "data16", "addr16", "data32", "addr32") for p in prefixes):
        raise Unsupported(f"prefix {' '.join(prefixes)}")
    if any(p.startswith("rep") for p in prefixes) and base not in ("ins", "outs"):
        raise Unsupported("a rep prefix")
    result = rule(s)
    if result is None:
        return None, None
    if isinstance(result, Site):
        return emit_site(result), result.entry
    return result, entry_of_inline(base)


def _mov_macro_register(operands):
    """`mov %cr3, \\reg` inside a .macro body: the register is known only when gas
    expands it, so the site goes through the prelude's __r3_site_reg."""
    ops = split_operands(operands)
    if len(ops) != 2 or not any(o.startswith("\\") for o in ops):
        return None
    for i, o in enumerate(ops):
        m = re.fullmatch(r"%\s*(cr|dr|db)(\d)", o.strip().lower())
        other = ops[1 - i].strip()
        if m and other.startswith("\\"):
            kind = "CR" if m.group(1) == "cr" else "DR"
            entry = f"MOV_TO_{kind}" if i == 1 else f"MOV_FROM_{kind}"
            desc = _d(reg=int(m.group(2)), kind="reg", base=0)
            slot = f"{abi.slot_address(entry):#x}"
            return f"__r3_site_reg {slot}, {desc}, {other}", entry
    return None


def entry_of_inline(base):
    return {"cli": "CLI", "pushf": "PUSHF"}[base]

"""Parses AT&T operands (registers, immediates, memory references) of one instruction."""
from dataclasses import dataclass

GPR32 = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"]
GPR16 = ["ax", "cx", "dx", "bx", "sp", "bp", "si", "di"]
GPR8 = ["al", "cl", "dl", "bl", "ah", "ch", "dh", "bh"]
SREG = ["es", "cs", "ss", "ds", "fs", "gs"]


class OperandError(Exception):
    """The operand text is not something this parser understands."""


@dataclass
class Reg:
    cls: str        # "gpr", "sreg", "cr", "dr"
    num: int
    size: int       # in bits, for general registers; 16 for segment registers, 32 otherwise
    text: str


@dataclass
class Imm:
    expr: str       # the expression after '$', passed to gas unchanged


@dataclass
class Mem:
    disp: str       # expression, '' when absent
    base: int = None
    index: int = None
    scale: int = 0  # log2
    seg: int = None
    text: str = ""


@dataclass
class Operand:
    value: object   # Reg, Imm or Mem
    indirect: bool  # written with a leading '*'


def split_operands(text):
    """Splits an operand list at top-level commas (not inside parentheses or quotes)."""
    out, depth, cur, quote = [], 0, "", False
    for ch in text:
        if quote:
            cur += ch
            if ch == '"':
                quote = False
            continue
        if ch == '"':
            quote = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_register(text):
    """'%eax' -> Reg; raises OperandError for anything that is not one register."""
    t = text.strip().lower()
    if not t.startswith("%"):
        raise OperandError(f"not a register: {text}")
    name = t[1:].strip()
    if name in GPR32:
        return Reg("gpr", GPR32.index(name), 32, t)
    if name in GPR16:
        return Reg("gpr", GPR16.index(name), 16, t)
    if name in GPR8:
        return Reg("gpr", GPR8.index(name), 8, t)
    if name in SREG:
        return Reg("sreg", SREG.index(name), 16, t)
    for prefix, cls in (("cr", "cr"), ("db", "dr"), ("dr", "dr")):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            n = int(name[len(prefix):])
            if n <= 7:
                return Reg(cls, n, 32, t)
    raise OperandError(f"unknown register {text}")


def _split_segment(t):
    """'%fs:4(%eax)' -> ('fs', '4(%eax)'); no override -> (None, t)."""
    s = t.lstrip()
    if s.startswith("%") and ":" in s:
        head, rest = s.split(":", 1)
        name = head[1:].strip().lower()
        if name in SREG:
            return name, rest.strip()
    return None, t


def parse_memory(text):
    """'seg:disp(base,index,scale)' with any part optional -> Mem."""
    segname, t = _split_segment(text.strip())
    mem = Mem(disp="", seg=None if segname is None else SREG.index(segname), text=text.strip())
    t = t.strip()
    if t.endswith(")"):
        # The base/index group is the last top-level parenthesis, if it names registers.
        depth, start = 0, None
        for i in range(len(t) - 1, -1, -1):
            if t[i] == ")":
                depth += 1
            elif t[i] == "(":
                depth -= 1
                if depth == 0:
                    start = i
                    break
        inner = t[start + 1:-1].strip() if start is not None else ""
        if start is not None and (inner.startswith("%") or inner.startswith(",")):
            parts = [p.strip() for p in inner.split(",")]
            if len(parts) > 3:
                raise OperandError(f"bad memory operand {text}")
            if parts[0]:
                mem.base = _addr_reg(parts[0], text)
            if len(parts) > 1 and parts[1]:
                mem.index = _addr_reg(parts[1], text)
                if mem.index == 4:
                    raise OperandError(f"%esp cannot be an index: {text}")
            if len(parts) > 2 and parts[2]:
                scales = {"1": 0, "2": 1, "4": 2, "8": 3}
                if parts[2] not in scales:
                    raise OperandError(f"bad scale in {text}")
                mem.scale = scales[parts[2]]
            t = t[:start].strip()
    if t.startswith("%") or "%" in t:
        raise OperandError(f"bad memory operand {text}")
    mem.disp = t
    return mem


def _addr_reg(name, text):
    r = parse_register(name)
    if r.cls != "gpr" or r.size != 32:
        raise OperandError(f"only 32-bit addressing is rewritten: {text}")
    return r.num


def parse_operand(text):
    """One AT&T operand -> Operand(Reg | Imm | Mem)."""
    t = text.strip()
    if not t:
        raise OperandError("empty operand")
    if "\\" in t:
        raise OperandError(f"macro argument in operand {t}")
    indirect = t.startswith("*")
    if indirect:
        t = t[1:].strip()
    if t.startswith("$"):
        return Operand(Imm(t[1:].strip()), indirect)
    if t.startswith("%") and ":" not in t and "(" not in t:
        return Operand(parse_register(t), indirect)
    return Operand(parse_memory(t), indirect)

"""Instructions written as `.byte` lists, decoded with Capstone so they can be rewritten too.

The kernel spells some instructions as bytes for old assemblers (stac, clac,
xsaves, monitor, mwait); in executable sections each such list is one
instruction, which Capstone names in AT&T syntax for the rules to rewrite.
"""
import functools


@functools.cache
def _decoder():
    """Capstone, loaded on first use: most files have no `.byte` instruction, and Debian's
    capstone module spends about 0.25 s importing distutils (setuptools), once per file that
    gcc assembles."""
    import capstone
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_32)
    cs.syntax = capstone.CS_OPT_SYNTAX_ATT
    return cs


def _number(tok):
    t = tok.strip().lower()
    try:
        if t.startswith(("0x", "-0x")):
            return int(t, 16)
        if t.startswith("0b"):
            return int(t, 2)
        if len(t) > 1 and t.startswith("0") and t.isdigit():
            return int(t, 8)
        return int(t, 10)
    except ValueError:
        return None


def decode_single(operands):
    """(mnemonic, op_str) when the `.byte` operand list is exactly one instruction."""
    values = [_number(t) for t in operands.split(",")]
    if not values or any(v is None or not 0 <= (v & 0xFF) == v % 256 for v in values):
        return None
    code = bytes(v & 0xFF for v in values)
    insns = list(_decoder().disasm(code, 0))
    if len(insns) != 1 or insns[0].size != len(code):
        return None
    return insns[0].mnemonic, insns[0].op_str

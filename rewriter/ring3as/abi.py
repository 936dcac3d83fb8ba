"""Reads include/ring3/abi.h, the ABI header shared with the monitor.

The header is the single source of the entry numbers, addresses and the DESC
bit layout; this module parses its #defines and its R3_ENTRIES table so that
nothing is written down twice.
"""
import os
import re
from dataclasses import dataclass

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "include", "ring3", "abi.h")


@dataclass(frozen=True)
class Entry:
    number: int
    name: str
    words: int
    path: str      # INLINE, FAST or GATE
    contract: str


def _read(path):
    with open(path) as f:
        text = f.read()
    # Join continuation lines so the R3_ENTRIES table is one logical line per row.
    return text.replace("\\\n", "\n")


def _parse(path=HEADER):
    text = _read(path)
    consts = {}
    for m in re.finditer(r"^#define\s+(R3_\w+)\s+(0x[0-9A-Fa-f]+|\d+)u?\b", text, re.M):
        consts[m.group(1)] = int(m.group(2), 0)
    entries = {}
    row = re.compile(r'X\(\s*(0x[0-9A-Fa-f]+|\d+)\s*,\s*(\w+)\s*,\s*(\d)\s*,\s*(\w+)\s*,\s*"([^"]*)"\s*\)')
    for m in row.finditer(text):
        e = Entry(int(m.group(1), 0), m.group(2), int(m.group(3)), m.group(4), m.group(5))
        entries[e.name] = e
    if not entries or "R3_TABLE" not in consts:
        raise RuntimeError(f"ring3-as: cannot read the ABI from {path}")
    return consts, entries


CONST, ENTRIES = _parse()


def slot_address(name):
    """The address of the table slot that a site of entry `name` calls through."""
    return CONST["R3_TABLE"] + 4 * ENTRIES[name].number


def desc(reg=0, kind=0, size=2, base=None, index=None, scale=0, seg=0, rep=0, imm16=None):
    """Packs a DESC word as the header lays it out."""
    c = CONST
    noreg = c["R3_NOREG"]
    d = (reg << c["R3_D_REG_SHIFT"]) | (kind << c["R3_D_KIND_SHIFT"]) | (size << c["R3_D_SIZE_SHIFT"])
    d |= (noreg if base is None else base) << c["R3_D_BASE_SHIFT"]
    d |= (noreg if index is None else index) << c["R3_D_INDEX_SHIFT"]
    if imm16 is not None:
        return d | ((imm16 & 0xFFFF) << c["R3_D_IMM16_SHIFT"])
    d |= (scale << c["R3_D_SCALE_SHIFT"]) | (seg << c["R3_D_SEG_SHIFT"]) | (rep << c["R3_D_REP_SHIFT"])
    return d

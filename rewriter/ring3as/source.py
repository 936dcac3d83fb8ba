"""Splits GNU as input into statements, keeping every byte that is not rewritten.

A line holds statements separated by ';'. Each statement may start with
labels; the rest is a directive, an assignment or an instruction. Comments
('#' to the end of the line, '/* */' across lines), strings and character
constants are skipped when looking for separators. Line markers from cpp
('# 12 "file.S"') keep the original file and line for error messages.
"""
import re
from dataclasses import dataclass, field

LABEL = re.compile(r"\s*([A-Za-z_.$][\w.$]*|\d+)\s*:(?!:)")
LINEMARK = re.compile(r'^#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')
PREFIXES = {"rep", "repe", "repz", "repne", "repnz", "lock", "data16", "data32", "addr16",
            "addr32", "cs", "ds", "es", "fs", "gs", "ss", "notrack", "bnd", "xacquire",
            "xrelease", "wait"}


@dataclass
class Statement:
    line: int               # index into the list of lines
    start: int              # offset of the instruction text (after labels) in the line
    end: int                # offset just past the statement
    file: str               # original file, from line markers
    lineno: int             # original line number
    labels: list = field(default_factory=list)
    prefixes: list = field(default_factory=list)
    mnemonic: str = ""      # lower case; '' for an empty statement
    operands: str = ""      # the operand text, stripped
    directive: bool = False  # a '.xxx' directive or an assignment


def _spans(line, in_comment):
    """Yields (start, end) of each statement of a line and the /* */ state after it.

    Comment text is excluded from the spans (it stays in the line untouched).
    """
    spans, start, i, n = [], 0, 0, len(line)
    quote = None
    cut = []          # (start, end) of comment text inside the current statement
    while i < n:
        ch = line[i]
        if in_comment:
            j = line.find("*/", i)
            if j < 0:
                cut.append((i, n))
                i = n
                break
            cut.append((i, j + 2))
            i = j + 2
            in_comment = False
            continue
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                quote = None
            i += 1
            continue
        if ch == '"':
            quote = '"'
        elif ch == "'":
            # A character constant: ' then one (possibly escaped) char, then an optional '.
            i += 3 if i + 1 < n and line[i + 1] == "\\" else 2
            if i < n and line[i] == "'":
                i += 1
            continue
        elif ch == "/" and line.startswith("/*", i):
            j = line.find("*/", i + 2)
            if j < 0:
                cut.append((i, n))
                in_comment = True
                i = n
                break
            cut.append((i, j + 2))
            i = j + 2
            continue
        elif ch == "#":
            spans.append((start, i, cut))
            return spans, in_comment, i
        elif ch == ";":
            spans.append((start, i, cut))
            start, cut = i + 1, []
        i += 1
    spans.append((start, n, cut))
    return spans, in_comment, n


def _strip_cuts(line, start, end, cuts):
    """The statement's text with comment spans blanked out (same length)."""
    chars = list(line[start:end])
    for a, b in cuts:
        for k in range(max(a, start), min(b, end)):
            chars[k - start] = " "
    return "".join(chars)


@dataclass
class Parsed:
    statements: list
    file: str           # the current file after the last line
    lineno: int         # the current line number after the last line
    in_comment: bool    # inside /* */ after the last line


def parse(lines, filename, start_line=0, in_comment=False):
    """Parses `lines` (str without newlines); line numbers continue from start_line."""
    out = []
    cur_file, cur_line = filename, start_line
    for idx, line in enumerate(lines):
        cur_line += 1
        m = LINEMARK.match(line) if not in_comment else None
        if m:
            cur_file, cur_line = m.group(2), int(m.group(1)) - 1
            continue
        spans, in_comment, _ = _spans(line, in_comment)
        for start, end, cuts in spans:
            out.append(_statement(line, idx, start, end, cuts, cur_file, cur_line))
    return Parsed(out, cur_file, cur_line, in_comment)


def _statement(line, idx, start, end, cuts, cur_file, cur_line):
    text = _strip_cuts(line, start, end, cuts)
    st = Statement(idx, start, end, cur_file, cur_line)
    pos = 0
    while True:
        lm = LABEL.match(text, pos)
        if not lm:
            break
        st.labels.append(lm.group(1))
        pos = lm.end()
    body = text[pos:]
    st.start = start + pos + len(body) - len(body.lstrip())
    st.end = start + len(text.rstrip())
    body = body.strip()
    if not body:
        return st
    if body.startswith(".") or re.match(r"[A-Za-z_.$][\w.$]*\s*=(?!=)", body):
        st.directive = True
        st.mnemonic = body.split(None, 1)[0].lower()
        st.operands = body[len(st.mnemonic):].strip()
        return st
    words = body.split(None, 1)
    while words and words[0].lower() in PREFIXES:
        st.prefixes.append(words[0].lower())
        words = words[1].split(None, 1) if len(words) > 1 else []
    if words:
        st.mnemonic = words[0].lower()
        st.operands = words[1].strip() if len(words) > 1 else ""
    return st

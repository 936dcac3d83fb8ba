"""The ring3-as driver: reads gas input, rewrites it, and runs the real as.

Usage is exactly GNU as's (gcc passes --32, -o FILE and the input, or stdin).
The mode comes from --ring3-mode=rewrite|insert|off (removed before the real
as sees the arguments) or the RING3_AS_MODE environment variable; the default
is rewrite. RING3_REAL_AS names the real assembler (default: the first `as`
on PATH that is not this one).
"""
import os
import re
import shutil
import subprocess
import sys

from . import rules
from .bytecode import decode_single
from .prelude import OPERANDLESS, prelude
from .source import parse

MODES = ("rewrite", "insert", "off")
# gas options whose value is the next argument.
VALUE_OPTS = {"-o", "-I", "--defsym", "--MD", "-MD", "--debug-prefix-map", "--hash-size",
              "--gdwarf-cie-version", "-MF"}
# A cheap test for lines worth parsing: a sensitive mnemonic, a prefix (a prefix is part of
# the instruction that follows it, SDM vol. 2, 2.1.1, even written as a statement of its own on
# the line before: prefix_before() must see it, or it would land on the site's first push), a
# directive that changes how code is read, or a comment or line marker that changes state.
_WORDS = sorted(set(rules.RULES) | {a for a in rules.ALIASES}, key=len, reverse=True)
CANDIDATE = re.compile(r"(?<![\w.$%])(?:" + "|".join(map(re.escape, _WORDS)) +
                       r")[bwldq]?(?![\w.$])|/\*|\*/|\.code|syntax|^\s*#\s*\d|\brep|\.byte|alternative"
                       r"|(?<![\w.$%])(?:lock|data16|data32|addr16|addr32|[c-gs]s)(?![\w.$])"
                       r"|\.(?:push|pop)?section|\.previous|\.text\b|\.data\b|\.bss\b"
                       r"|(?<![\w.$%])(?:" + rules.X87.pattern + "|" + "|".join(rules.VECTOR_STATE) +
                       r")(?![\w.$])|%\s*(?:[xyz]?mm\d|st\b|k[0-7]\b)", re.I)


# A section directive (checked on candidate lines only), and one that enters a DWARF section.
SECTION_LINE = re.compile(r"\s*\.(?:(?:push|pop)?section|previous|text|data|bss)\b")
DEBUG_SECTION = re.compile(r"\s*\.(?:push)?section\s+\.debug_")
# What a line inside a DWARF section must hold to be looked at: a way out of the section, or
# what changes the comment state or line numbers (parse_candidates relies on seeing those).
DEBUG_EXIT = re.compile(r"section|\.previous|\.text|\.data|\.bss|/\*|\*/|^\s*#")


def candidate_lines(lines):
    """Indices of the lines worth parsing (CANDIDATE). Lines in a DWARF section (.debug_*) are
    data gcc wrote for -g, most of a file then, and never code: only a way out is looked for."""
    out = []
    in_debug = False
    search, leaves = CANDIDATE.search, DEBUG_EXIT.search
    for i, ln in enumerate(lines):
        if in_debug and not leaves(ln):
            continue
        if search(ln):
            out.append(i)
            if SECTION_LINE.match(ln):
                in_debug = DEBUG_SECTION.match(ln) is not None
    return out


PRELUDE_NAMES = {name for names in OPERANDLESS for name in names}
INSERT_MARKER = ".byte 0x0f, 0xb9, 0xff"   # ud1 %edi,%edi: R3_INSERT_MARKER* in abi.h


class RewriteError(Exception):
    def __init__(self, file, line, msg):
        super().__init__(f"{file}:{line}: Error: ring3-as: {msg}")


def real_as():
    env = os.environ.get("RING3_REAL_AS")
    if env:
        return env
    me = os.path.realpath(sys.argv[0])
    for d in os.environ.get("PATH", "").split(os.pathsep):
        cand = os.path.join(d, "as")
        if os.access(cand, os.X_OK) and os.path.realpath(cand) != me:
            return cand
    found = shutil.which("as")
    return found or "as"


def split_args(argv):
    """(as_args_without_inputs, inputs, mode)."""
    mode = os.environ.get("RING3_AS_MODE", "rewrite")
    out, inputs, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--ring3-mode="):
            mode = a.split("=", 1)[1]
        elif a in VALUE_OPTS and i + 1 < len(argv):
            out += [a, argv[i + 1]]
            i += 1
        elif a == "-" or not a.startswith("-"):
            inputs.append(a)
        else:
            out.append(a)
        i += 1
    if mode not in MODES:
        raise SystemExit(f"ring3-as: unknown mode '{mode}'; use one of {', '.join(MODES)}")
    return out, inputs, mode


def gas_accepts(line, args):
    """Whether the real as assembles this one line (in 32-bit mode) without error."""
    opts = [a for a in args if a in ("--32",)] or ["--32"]
    r = subprocess.run([real_as(), *opts, "-o", os.devnull, "-"], input=line + "\n",
                       capture_output=True, text=True)
    return r.returncode == 0


class Sections:
    """Which section the assembler is in, and whether it holds code (for `.byte` lists)."""

    def __init__(self):
        self.cur = self.prev = True
        self.stack = []

    @staticmethod
    def _executable(operands):
        parts = [p.strip() for p in operands.split(",")]
        name = parts[0].strip('"') if parts else ""
        if len(parts) > 1 and parts[1].startswith('"'):
            return "x" in parts[1]
        return name == ".text" or name.startswith(".text.") or name.endswith(".text")

    def directive(self, mnemonic, operands):
        if mnemonic == ".text":
            self.cur, self.prev = True, self.cur
        elif mnemonic in (".data", ".bss", ".rodata"):
            self.cur, self.prev = False, self.cur
        elif mnemonic == ".section":
            self.cur, self.prev = self._executable(operands), self.cur
        elif mnemonic == ".pushsection":
            self.stack.append((self.cur, self.prev))
            self.cur, self.prev = self._executable(operands), self.cur
        elif mnemonic == ".popsection" and self.stack:
            self.cur, self.prev = self.stack.pop()
        elif mnemonic == ".previous":
            self.cur, self.prev = self.prev, self.cur


STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def rewrite_strings(st, mode, args, stats):
    """The kernel's ALTERNATIVE macros take instructions as string arguments: rewrite inside."""
    def one(m):
        fragment = [m.group(1)]
        rewrite_lines(fragment, st.file, mode, args, stats, first_line=st.lineno - 1)
        return '"' + fragment[0] + '"'
    return STRING.sub(one, st.operands)


def rewrite_lines(lines, filename, mode, args, stats=None, first_line=0):
    """Rewrites a list of lines in place; returns them. Raises RewriteError."""
    if mode == "off":
        return lines
    candidates = candidate_lines(lines)
    if not candidates:
        return lines
    statements = parse_candidates(lines, candidates, filename, first_line)
    code = "code32"
    sections = Sections()
    edits = {}       # line index -> list of (start, end, text)
    skip = set()     # statements consumed by a combination (sti; hlt)
    for k, st in enumerate(statements):
        mnemonic, operands = st.mnemonic, st.operands
        if st.directive:
            if mnemonic in (".code16", ".code16gcc", ".code32", ".code64"):
                code = mnemonic[1:]
            elif mnemonic in (".intel_syntax", ".att_syntax"):
                code = "intel" if mnemonic == ".intel_syntax" else "code32"
            sections.directive(mnemonic, operands)
            if mnemonic != ".byte" or code != "code32" or not sections.cur:
                continue
            decoded = decode_single(operands)
            if decoded is None or (rules.lookup(decoded[0]) is None and
                                   not rules.touches_vector_state(*decoded)):
                continue
            mnemonic, operands = decoded
        if id(st) in skip or not mnemonic:
            continue
        if mnemonic.startswith("alternative") and '"' in operands and code == "code32":
            new = rewrite_strings(st, mode, args, stats)
            if new != operands:
                start = st.start + statement_text(lines, st).index(operands)
                edits.setdefault(st.line, []).append((start, start + len(operands), new))
            continue
        # A prefix on a statement of its own ("rep; insb") belongs to this instruction.
        carried = prefix_before(statements, k)
        prefixes = (carried.prefixes if carried else []) + st.prefixes
        found = rules.lookup(mnemonic)
        if found is None:
            if mode == "rewrite" and code == "code32" and rules.touches_vector_state(mnemonic, operands):
                # The instruction stays; the site goes before it, prefixes included, and after
                # its labels, which a jump may name. A fault in the instruction is reported at
                # the site (monitor/host/signals.c), where an exception-table label then is.
                first = carried or st
                edits.setdefault(first.line, []).append(
                    (first.start, first.start, rules.emit_site(rules.Site("FPU")) + "; "))
                if stats is not None:
                    stats["FPU"] = stats.get("FPU", 0) + 1
            continue
        if code != "code32":
            if code == "intel":
                raise RewriteError(st.file, st.lineno,
                                   f"'{mnemonic}' in Intel syntax is not rewritten; use AT&T")
            continue    # 16- and 64-bit code never runs in the guest's 32-bit kernel
        original = statement_text(lines, st)
        try:
            text, entry = rules.rewrite(mnemonic, operands, prefixes)
        except rules.Unsupported as err:
            if not gas_accepts(original, args):
                continue    # malformed: the real as reports it with its own file and line
            raise RewriteError(st.file, st.lineno, f"cannot rewrite '{original.strip()}': {err}")
        if text is None:
            continue
        if entry == "STI" and mode == "rewrite":
            nxt = next_instruction(statements, k)
            if nxt is not None and nxt.mnemonic == "hlt" and not nxt.labels and not nxt.prefixes:
                skip.add(id(nxt))
                edits.setdefault(nxt.line, []).append((nxt.start, nxt.end, ""))
                text, entry = rules.emit_site(rules.Site("STI_HLT")), "STI_HLT"
        if stats is not None:
            stats[entry] = stats.get(entry, 0) + 1
        if mode == "insert":
            if entry in rules.PRIVILEGED or (mnemonic in PRELUDE_NAMES and st.mnemonic == mnemonic):
                continue    # left to trap, or marked by the prelude's macro of the same name
            # The marker goes before the whole instruction, prefixes included.
            first = carried or st
            edits.setdefault(first.line, []).append(
                (first.start, first.start, INSERT_MARKER + "; "))
            continue
        if carried is not None:
            edits.setdefault(carried.line, []).append((carried.start, carried.end, ""))
        edits.setdefault(st.line, []).append((st.start, st.end, text))
    for idx, changes in edits.items():
        line = lines[idx]
        for start, end, text in sorted(changes, reverse=True):
            line = line[:start] + text + line[end:]
        lines[idx] = line
    return lines


def prefix_before(statements, k):
    """The prefix-only statement written right before statement k, if any."""
    if k == 0 or statements[k].labels:
        return None
    p, st = statements[k - 1], statements[k]
    # A label on the prefix (`1: rep; insb`) names the instruction's first byte, which the
    # prefix is (SDM vol. 2, 2.1.1): the prefix is still this instruction's, and the label,
    # outside the statement's text, stays to name the site.
    if p.mnemonic or p.directive or not p.prefixes:
        return None
    # Only candidate lines are parsed: the two must be on the same or adjacent lines.
    return p if st.line - p.line in (0, 1) else None


def statement_text(lines, st):
    return lines[st.line][st.start:st.end]


def next_instruction(statements, k):
    """The next statement after k that is an instruction (skipping empty ones)."""
    for st in statements[k + 1:]:
        if st.labels or st.directive:
            return None
        if st.mnemonic:
            return st
    return None


def parse_candidates(lines, candidates, filename, first_line=0):
    """Statements of the candidate lines, with file and line numbers kept right.

    Lines between candidates cannot change the comment state (they contain no
    '/*' or '*/') nor the line markers, so only line counts are carried over."""
    statements = []
    prev = -1
    cur_file, cur_line = filename, first_line
    in_comment = False
    for i in candidates:
        cur_line += i - prev - 1
        sub = parse([lines[i]], cur_file, start_line=cur_line, in_comment=in_comment)
        for st in sub.statements:
            st.line = i
        statements += sub.statements
        cur_file, cur_line, in_comment = sub.file, sub.lineno, sub.in_comment
        prev = i
    return statements


def main(argv):
    args, inputs, mode = split_args(argv)
    if "--64" in args:
        mode = "off"        # Kconfig's probes of 64-bit instructions: nothing here is guest code
    if any(a in ("--version", "-v", "--help") for a in args):
        # Kbuild reads the real assembler's version (scripts/as-version.sh): answer as it.
        return subprocess.call([real_as(), *[a for a in argv if not a.startswith("--ring3-mode=")]])
    sources = []
    try:
        for name in inputs or ["-"]:
            if name == "-":
                sources.append(("{standard input}", sys.stdin.read()))
            else:
                with open(name, errors="surrogateescape") as f:
                    sources.append((name, f.read()))
    except OSError as err:
        print(f"ring3-as: cannot read '{err.filename}': {err.strerror}", file=sys.stderr)
        return 1
    out = []
    stats = {} if os.environ.get("RING3_AS_STATS") else None
    for name, text in sources:
        lines = text.split("\n")
        try:
            rewrite_lines(lines, name, mode, args, stats)
        except RewriteError as err:
            print(str(err), file=sys.stderr)
            return 1
        if mode != "off" and "--64" not in args and not re.search(r"\.code(16|64)", text):
            out.append(prelude(mode))
        # The prelude takes a line: a line marker gives the input its own numbers back.
        out.append(f'# 1 "{name}"')
        out.append("\n".join(lines))
    if stats:
        with open(os.environ["RING3_AS_STATS"], "a") as f:
            for entry, n in sorted(stats.items()):
                f.write(f"{entry} {n}\n")
    data = "\n".join(out)
    if not data.endswith("\n"):
        data += "\n"
    r = subprocess.run([real_as(), *args], input=data.encode("utf-8", "surrogateescape"))
    return r.returncode

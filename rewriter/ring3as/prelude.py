"""gas macros named after the operand-less sensitive instructions, put before the input.

gas looks a statement's first word up among macros before instructions, so
these catch the instructions the text pass cannot see: those a macro builds
from its arguments (`1: \\op` in arch/x86/lib/msr-reg.S) and those inside the
string arguments of the kernel's ALTERNATIVE macros. Everything is on one
line so that the input's line numbers stay as they were.

int3 is left out: it is never rewritten. It runs as it is, and the host's
SIGTRAP becomes the guest's #BP (monitor/host/signals.c).
"""
from . import rules

# mnemonic spellings -> (entry, encoding of the original instruction for insert mode)
OPERANDLESS = {
    ("cli",): ("CLI", "0xfa"), ("sti",): ("STI", "0xfb"), ("hlt",): ("HLT", "0xf4"),
    ("clts",): ("CLTS", "0x0f,0x06"), ("invd",): ("INVD", "0x0f,0x08"),
    ("wbinvd",): ("WBINVD", "0x0f,0x09"), ("wbnoinvd",): ("WBNOINVD", "0xf3,0x0f,0x09"),
    ("rdmsr",): ("RDMSR", "0x0f,0x32"), ("wrmsr",): ("WRMSR", "0x0f,0x30"),
    ("rdpmc",): ("RDPMC", "0x0f,0x33"), ("cpuid",): ("CPUID", "0x0f,0xa2"),
    ("into",): ("INTO", "0xce"),
    ("sysenter",): ("SYSENTER", "0x0f,0x34"), ("sysexit",): ("SYSEXIT", "0x0f,0x35"),
    ("xsetbv",): ("XSETBV", "0x0f,0x01,0xd1"), ("stac",): ("STAC", "0x0f,0x01,0xcb"),
    ("clac",): ("CLAC", "0x0f,0x01,0xca"), ("monitor",): ("MONITOR", "0x0f,0x01,0xc8"),
    ("mwait",): ("MWAIT", "0x0f,0x01,0xc9"),
    ("iret", "iretl", "iretd"): ("IRET", "0xcf"),
    ("pushf", "pushfl", "pushfd"): ("PUSHF", "0x9c"),
    ("popf", "popfl", "popfd"): ("POPF", "0x9d"),
}

# Turns a register named by a macro argument into the BASE field of a DESC:
# __r3_site_reg SLOT, DESC, REG emits the site for REG = %eax ... %edi.
REG_SITE = (".macro __r3_site_reg slot:req, desc:req, reg:req; "
            + "; ".join(f".ifc \\reg,%{r}; .byte 0x68; .long 0; .byte 0x68; "
                        f".long (\\desc) | ({i} << 8); call *%cs:\\slot; .endif"
                        for i, r in enumerate(("eax", "ecx", "edx", "ebx", "esp", "ebp", "esi",
                                               "edi")))
            + "; .endm")


def _body(entry, encoding, mode):
    if mode == "insert":
        if entry in rules.PRIVILEGED:
            return None
        return f".byte 0x0f, 0xb9, 0xff, {encoding}"
    if entry == "CLI":
        return rules.r_cli(None)
    site = rules.emit_site(rules.Site(entry))
    return f".byte 0x9c; {site}" if entry == "PUSHF" else site


def prelude(mode):
    """The one-line prelude for (mode), or '' when there is nothing to define."""
    parts = []
    for names, (entry, encoding) in OPERANDLESS.items():
        body = _body(entry, encoding, mode)
        if body is None:
            continue
        for name in names:
            parts.append(f".macro {name} args:vararg; {body}; .endm")
    if mode == "rewrite":
        parts.append(REG_SITE)
    return "; ".join(parts)


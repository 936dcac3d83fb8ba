/* ring3: the sensitive-instruction classifier shared by `ring3 audit` and insert-mode emulation. */
#include <string.h>

#include "sensitive.h"

#include "ring3/abi.h"

static struct sens_info sens(enum sens_class cls, int entry)
{
    return (struct sens_info){ .cls = cls, .entry = entry };
}

static bool is_sreg(x86_reg r)
{
    return r == X86_REG_ES || r == X86_REG_CS || r == X86_REG_SS ||
           r == X86_REG_DS || r == X86_REG_FS || r == X86_REG_GS;
}

static bool has_sreg_operand(const cs_x86 *x)
{
    for (int i = 0; i < x->op_count; i++)
        if (x->operands[i].type == X86_OP_REG && is_sreg(x->operands[i].reg))
            return true;
    return false;
}

/* Legacy prefix bytes (SDM vol 2, 2.1.1); REX does not exist in 32-bit mode. */
static bool is_legacy_prefix(uint8_t b)
{
    switch (b) {
    case 0xF0: case 0xF2: case 0xF3:
    case 0x26: case 0x2E: case 0x36: case 0x3E: case 0x64: case 0x65:
    case 0x66: case 0x67:
        return true;
    }
    return false;
}

/* Capstone 4 decodes f3 0f 09 as wbinvd and drops the f3 from its prefix
 * list, so wbnoinvd (the F3 mandatory-prefix form) is told from the bytes. */
static bool has_rep_prefix(const cs_insn *insn)
{
    for (size_t i = 0; i < insn->size && is_legacy_prefix(insn->bytes[i]); i++)
        if (insn->bytes[i] == 0xF3)
            return true;
    return false;
}

/* mov with a control, debug or segment register: the direction is in the
 * opcode (SDM vol 2: 0f 20/22 mov from/to CRn, 0f 21/23 DRn, 8c/8e Sreg). */
static struct sens_info classify_mov(const cs_x86 *x)
{
    if (x->opcode[0] == 0x0F) {
        switch (x->opcode[1]) {
        case 0x20: return sens(SENS_PRIVILEGED, R3_E_MOV_FROM_CR);
        case 0x22: return sens(SENS_PRIVILEGED, R3_E_MOV_TO_CR);
        case 0x21: return sens(SENS_PRIVILEGED, R3_E_MOV_FROM_DR);
        case 0x23: return sens(SENS_PRIVILEGED, R3_E_MOV_TO_DR);
        }
        return sens(SENS_NONE, SENS_NO_ENTRY);
    }
    if (x->opcode[0] == 0x8C)
        return sens(SENS_UNPRIVILEGED, R3_E_MOV_FROM_SREG);
    if (x->opcode[0] == 0x8E)
        return sens(SENS_UNPRIVILEGED, R3_E_MOV_TO_SREG);
    return sens(SENS_NONE, SENS_NO_ENTRY);
}

/* The table: privileged = faults at CPL 3 on its own (with IOPL 0 for the
 * I/O instructions, CR4.PCE clear for rdpmc); unprivileged = Robin & Irvine's
 * sensitive instructions that run at CPL 3 with another effect (IF ignored by
 * popf, the host's GDTR/CS/CPL visible, far transfers checking host
 * descriptors, software interrupts going to the host). */
static struct sens_info classify_id(const cs_insn *insn)
{
    const enum sens_class P = SENS_PRIVILEGED, U = SENS_UNPRIVILEGED;
    const cs_x86 *x = &insn->detail->x86;

    switch (insn->id) {
    case X86_INS_CLI:      return sens(P, R3_E_CLI);
    case X86_INS_STI:      return sens(P, R3_E_STI);
    case X86_INS_HLT:      return sens(P, R3_E_HLT);
    case X86_INS_IN:       return sens(P, R3_E_IN);
    case X86_INS_OUT:      return sens(P, R3_E_OUT);
    case X86_INS_INSB: case X86_INS_INSW: case X86_INS_INSD:
        return sens(P, R3_E_INS);
    case X86_INS_OUTSB: case X86_INS_OUTSW: case X86_INS_OUTSD:
        return sens(P, R3_E_OUTS);
    case X86_INS_LGDT:     return sens(P, R3_E_LGDT);
    case X86_INS_LIDT:     return sens(P, R3_E_LIDT);
    case X86_INS_LLDT:     return sens(P, R3_E_LLDT);
    case X86_INS_LTR:      return sens(P, R3_E_LTR);
    case X86_INS_LMSW:     return sens(P, R3_E_LMSW);
    case X86_INS_CLTS:     return sens(P, R3_E_CLTS);
    case X86_INS_INVD:     return sens(P, R3_E_INVD);
    case X86_INS_WBINVD:
        return sens(P, has_rep_prefix(insn) ? R3_E_WBNOINVD : R3_E_WBINVD);
    case X86_INS_INVLPG:   return sens(P, R3_E_INVLPG);
    case X86_INS_RDMSR:    return sens(P, R3_E_RDMSR);
    case X86_INS_WRMSR:    return sens(P, R3_E_WRMSR);
    case X86_INS_RDPMC:    return sens(P, R3_E_RDPMC);
    case X86_INS_SYSEXIT:  return sens(P, R3_E_SYSEXIT);
    case X86_INS_XSETBV:   return sens(P, R3_E_XSETBV);
    case X86_INS_STAC:     return sens(P, R3_E_STAC);
    case X86_INS_CLAC:     return sens(P, R3_E_CLAC);
    case X86_INS_XSAVES:   return sens(P, R3_E_XSAVES);
    case X86_INS_XRSTORS:  return sens(P, R3_E_XRSTORS);
    case X86_INS_MONITOR:  return sens(P, R3_E_MONITOR);
    case X86_INS_MWAIT:    return sens(P, R3_E_MWAIT);
    case X86_INS_INVPCID:  return sens(P, R3_E_INVPCID);
    /* 64-bit-only or SMM instructions: #UD or #GP in a 32-bit guest kernel,
     * so they should never appear; ring3 has no entry for them. */
    case X86_INS_SWAPGS: case X86_INS_SYSRET: case X86_INS_RSM:
        return sens(P, SENS_NO_ENTRY);

    case X86_INS_PUSHF: case X86_INS_PUSHFD: return sens(U, R3_E_PUSHF);
    case X86_INS_POPF: case X86_INS_POPFD:   return sens(U, R3_E_POPF);
    case X86_INS_SGDT:     return sens(U, R3_E_SGDT);
    case X86_INS_SIDT:     return sens(U, R3_E_SIDT);
    case X86_INS_SLDT:     return sens(U, R3_E_SLDT);
    case X86_INS_STR:      return sens(U, R3_E_STR);
    case X86_INS_SMSW:     return sens(U, R3_E_SMSW);
    case X86_INS_LAR:      return sens(U, R3_E_LAR);
    case X86_INS_LSL:      return sens(U, R3_E_LSL);
    case X86_INS_VERR:     return sens(U, R3_E_VERR);
    case X86_INS_VERW:     return sens(U, R3_E_VERW);
    case X86_INS_LDS:      return sens(U, R3_E_LDS);
    case X86_INS_LES:      return sens(U, R3_E_LES);
    case X86_INS_LFS:      return sens(U, R3_E_LFS);
    case X86_INS_LGS:      return sens(U, R3_E_LGS);
    case X86_INS_LSS:      return sens(U, R3_E_LSS);
    case X86_INS_LCALL:    return sens(U, R3_E_LCALL);
    case X86_INS_LJMP:     return sens(U, R3_E_LJMP);
    case X86_INS_RETF:     return sens(U, R3_E_LRET);
    case X86_INS_IRET: case X86_INS_IRETD:   return sens(U, R3_E_IRET);
    /* int $0x80 runs as it is: Syscall User Dispatch makes it a SIGSYS, which
     * the monitor delivers through the guest IDT. It must stay two bytes: a
     * restarted system call goes back to EIP - 2 (the vDSO's int80 landing pad). */
    case X86_INS_INT:
        if (insn->detail && insn->detail->x86.op_count == 1 &&
            insn->detail->x86.operands[0].type == X86_OP_IMM &&
            insn->detail->x86.operands[0].imm == 0x80)
            return sens(SENS_NONE, SENS_NO_ENTRY);
        return sens(U, R3_E_INT);
    /* int3 runs as it is: the host's SIGTRAP is the guest's #BP, EIP after its one byte. */
    case X86_INS_INT3:     return sens(SENS_NONE, SENS_NO_ENTRY);
    case X86_INS_INTO:     return sens(U, R3_E_INTO);
    /* int1 (icebp, f1) raises #DB without the IDT DPL check of `int $1`. */
    case X86_INS_INT1:     return sens(U, SENS_NO_ENTRY);
    case X86_INS_SYSENTER: return sens(U, R3_E_SYSENTER);
    /* syscall is #UD in compatibility mode on Intel but enters the host
     * kernel on AMD; either way it must not run. */
    case X86_INS_SYSCALL:  return sens(U, SENS_NO_ENTRY);
    case X86_INS_CPUID:    return sens(U, R3_E_CPUID);

    case X86_INS_PUSH:
        return has_sreg_operand(x) ? sens(U, R3_E_PUSH_SREG) : sens(SENS_NONE, SENS_NO_ENTRY);
    case X86_INS_POP:
        return has_sreg_operand(x) ? sens(U, R3_E_POP_SREG) : sens(SENS_NONE, SENS_NO_ENTRY);
    case X86_INS_MOV:
        return classify_mov(x);
    }
    return sens(SENS_NONE, SENS_NO_ENTRY);
}

struct sens_info sens_classify(const cs_insn *insn)
{
    struct sens_info info = classify_id(insn);

    if (info.cls == SENS_PRIVILEGED && info.entry == R3_E_WBNOINVD)
        info.name = "wbnoinvd";
    return info;
}

/* Length of a ModRM operand (with its SIB and displacement) at (p, len),
 * SDM vol 2, tables 2-1 (16-bit addressing) and 2-2/2-3 (32-bit); 0 when
 * the bytes end first. */
static size_t modrm_len(const uint8_t *p, size_t len, bool addr16)
{
    if (len < 1)
        return 0;
    unsigned mod = p[0] >> 6, rm = p[0] & 7;
    size_t n = 1;

    if (mod == 3)
        return 1;
    if (addr16) {
        if (mod == 1)
            n += 1;
        else if (mod == 2 || (mod == 0 && rm == 6))
            n += 2;
    } else {
        if (rm == 4) {
            if (len < 2)
                return 0;
            n += 1;
            if (mod == 0 && (p[1] & 7) == 5)
                n += 4;
        }
        if (mod == 1)
            n += 1;
        else if (mod == 2 || (mod == 0 && rm == 5))
            n += 4;
    }
    return n <= len ? n : 0;
}

/* Two- and three-byte opcodes (after 0f) that Capstone 4.0 decodes wrongly
 * or not at all. Skipping such bytes one at a time would resynchronise on
 * their ModRM byte and could report, say, the f1 of `tpause %ecx`
 * (66 0f ae f1) as int1. */
enum extra_form { ANY_FORM, REG_FORM, MEM_FORM };
#define ANY_PREFIX 0x01  /* matches whatever mandatory prefix is present */
#define ANY_MODRM  (-1)

static const struct extra_op {
    uint8_t prefix;      /* mandatory prefix 66, f2 or f3; 0 = none; ANY_PREFIX */
    uint8_t op[2];       /* opcode bytes after 0f */
    uint8_t oplen;
    int16_t modrm;       /* the exact ModRM byte, or ANY_MODRM */
    int8_t reg;          /* required ModRM.reg (/digit), or -1 */
    enum extra_form form;
    const char *name;
    enum sens_class cls;
    int entry;
} extra_ops[] = {
    /* ud1 and ud0 take a ModRM operand (SDM vol 2, UD); Capstone stops after
     * the opcode. Linux encodes BUG and UBSAN traps and static-call
     * signatures with them. */
    { ANY_PREFIX, { 0xB9 }, 1, ANY_MODRM, -1, ANY_FORM, "ud1", SENS_NONE, SENS_NO_ENTRY },
    { ANY_PREFIX, { 0xFF }, 1, ANY_MODRM, -1, ANY_FORM, "ud0", SENS_NONE, SENS_NO_ENTRY },
    /* Group 7 register forms newer than Capstone 4.0. */
    { 0, { 0x01 }, 1, 0xC5, -1, REG_FORM, "pconfig",   SENS_PRIVILEGED, SENS_NO_ENTRY },
    /* wrmsrns has wrmsr's semantics minus serialisation. */
    { 0, { 0x01 }, 1, 0xC6, -1, REG_FORM, "wrmsrns",   SENS_PRIVILEGED, R3_E_WRMSR },
    { 0, { 0x01 }, 1, 0xE8, -1, REG_FORM, "serialize", SENS_NONE, SENS_NO_ENTRY },
    { 0, { 0x01 }, 1, 0xEE, -1, REG_FORM, "rdpkru",    SENS_NONE, SENS_NO_ENTRY },
    { 0, { 0x01 }, 1, 0xEF, -1, REG_FORM, "wrpkru",    SENS_NONE, SENS_NO_ENTRY },
    /* AMD APM vol 3: monitorx and mwaitx run at any CPL. */
    { 0, { 0x01 }, 1, 0xFA, -1, REG_FORM, "monitorx",  SENS_NONE, SENS_NO_ENTRY },
    { 0, { 0x01 }, 1, 0xFB, -1, REG_FORM, "mwaitx",    SENS_NONE, SENS_NO_ENTRY },
    { 0, { 0x01 }, 1, 0xFC, -1, REG_FORM, "clzero",    SENS_NONE, SENS_NO_ENTRY },
    { 0, { 0x01 }, 1, 0xFD, -1, REG_FORM, "rdpru",     SENS_NONE, SENS_NO_ENTRY },
    { 0, { 0x01 }, 1, 0xFE, -1, REG_FORM, "invlpgb",   SENS_PRIVILEGED, SENS_NO_ENTRY },
    { 0, { 0x01 }, 1, 0xFF, -1, REG_FORM, "tlbsync",   SENS_PRIVILEGED, SENS_NO_ENTRY },
    /* WAITPKG: user-level waits, allowed at any CPL. */
    { 0x66, { 0xAE }, 1, ANY_MODRM, 6, REG_FORM, "tpause", SENS_NONE, SENS_NO_ENTRY },
    { 0xF2, { 0xAE }, 1, ANY_MODRM, 6, REG_FORM, "umwait", SENS_NONE, SENS_NO_ENTRY },
    /* Direct stores; enqcmds is the supervisor form (#GP at CPL > 0). */
    { 0,    { 0x38, 0xF9 }, 2, ANY_MODRM, -1, MEM_FORM, "movdiri",   SENS_NONE, SENS_NO_ENTRY },
    { 0x66, { 0x38, 0xF8 }, 2, ANY_MODRM, -1, MEM_FORM, "movdir64b", SENS_NONE, SENS_NO_ENTRY },
    { 0xF2, { 0x38, 0xF8 }, 2, ANY_MODRM, -1, MEM_FORM, "enqcmd",    SENS_NONE, SENS_NO_ENTRY },
    { 0xF3, { 0x38, 0xF8 }, 2, ANY_MODRM, -1, MEM_FORM, "enqcmds",   SENS_PRIVILEGED, SENS_NO_ENTRY },
};

static bool extra_matches(const struct extra_op *x, uint8_t prefix, const uint8_t *op, size_t len)
{
    if (x->prefix != ANY_PREFIX && x->prefix != prefix)
        return false;
    if (len < x->oplen + 1u || memcmp(op, x->op, x->oplen))
        return false;
    uint8_t modrm = op[x->oplen];
    if (x->modrm != ANY_MODRM && modrm != x->modrm)
        return false;
    if (x->reg >= 0 && ((modrm >> 3) & 7) != (unsigned)x->reg)
        return false;
    if ((x->form == REG_FORM && modrm < 0xC0) || (x->form == MEM_FORM && modrm >= 0xC0))
        return false;
    return true;
}

size_t sens_decode_extra(const uint8_t *p, size_t len, struct sens_info *info)
{
    size_t i = 0;
    bool addr16 = false;
    uint8_t prefix = 0;

    /* An instruction is at most 15 bytes (SDM vol 2, 2.3.11). The last of
     * 66, f2 and f3 is the one that selects the opcode. */
    while (i < len && i < 14 && is_legacy_prefix(p[i])) {
        addr16 |= p[i] == 0x67;
        if (p[i] == 0x66 || p[i] == 0xF2 || p[i] == 0xF3)
            prefix = p[i];
        i++;
    }
    if (i >= len || p[i] != 0x0F)
        return 0;
    for (size_t k = 0; k < sizeof extra_ops / sizeof extra_ops[0]; k++) {
        const struct extra_op *x = &extra_ops[k];
        if (!extra_matches(x, prefix, p + i + 1, len - i - 1))
            continue;
        size_t head = i + 1 + x->oplen;
        size_t m = modrm_len(p + head, len - head, addr16);
        if (!m || head + m > 15)
            return 0;
        *info = sens(x->cls, x->entry);
        info->name = x->name;
        return head + m;
    }
    return 0;
}

bool sens_is_insert_marker(const uint8_t *p, size_t len)
{
    return len >= R3_INSERT_MARKER_LEN && p[0] == R3_INSERT_MARKER0 &&
           p[1] == R3_INSERT_MARKER1 && p[2] == R3_INSERT_MARKER2;
}

bool sens_is_rewritten_pushf(const uint8_t *p, size_t len)
{
    /* pushfl (9c), then call *%cs:R3_TABLE+4*R3_E_PUSHF (2e ff 15 abs32). */
    uint32_t slot = R3_TABLE + 4 * R3_E_PUSHF;
    return len >= 1 + R3_CALL_LEN && p[0] == 0x9C && p[1] == 0x2E && p[2] == 0xFF && p[3] == 0x15 &&
           p[4] == (uint8_t)slot && p[5] == (uint8_t)(slot >> 8) && p[6] == (uint8_t)(slot >> 16) &&
           p[7] == (uint8_t)(slot >> 24);
}

static bool is_vector_reg(unsigned r)
{
    return (r >= X86_REG_ST0 && r <= X86_REG_ST7) || (r >= X86_REG_MM0 && r <= X86_REG_MM7) ||
           (r >= X86_REG_XMM0 && r <= X86_REG_XMM31) || (r >= X86_REG_YMM0 && r <= X86_REG_YMM31) ||
           (r >= X86_REG_ZMM0 && r <= X86_REG_ZMM31) || (r >= X86_REG_K0 && r <= X86_REG_K7) ||
           r == X86_REG_FPSW;
}

bool sens_touches_vector_state(const cs_insn *insn)
{
    switch (insn->id) {
    case X86_INS_FXSAVE: case X86_INS_FXRSTOR: case X86_INS_XSAVE: case X86_INS_XSAVEOPT:
    case X86_INS_XSAVEC: case X86_INS_XRSTOR: case X86_INS_XGETBV: case X86_INS_WAIT:
    case X86_INS_EMMS: case X86_INS_FEMMS: case X86_INS_LDMXCSR: case X86_INS_STMXCSR:
    case X86_INS_VLDMXCSR: case X86_INS_VSTMXCSR: case X86_INS_VZEROUPPER: case X86_INS_VZEROALL:
        return true;
    /* In the SSE groups but touching no vector register: hints, fences, cache lines, and the
     * non-temporal store of a general register. */
    case X86_INS_PAUSE: case X86_INS_LFENCE: case X86_INS_MFENCE: case X86_INS_SFENCE:
    case X86_INS_PREFETCH: case X86_INS_PREFETCHW: case X86_INS_PREFETCHNTA: case X86_INS_PREFETCHT0:
    case X86_INS_PREFETCHT1: case X86_INS_PREFETCHT2: case X86_INS_CLFLUSH: case X86_INS_CLFLUSHOPT:
    case X86_INS_CLWB: case X86_INS_MOVNTI:
        return false;
    }
    const cs_detail *d = insn->detail;
    if (!d)
        return false;
    /* Every x87 instruction has an escape opcode D8-DF (SDM vol. 2, A.5), some of which
     * Capstone puts in no group and names no register of (fnstcw m16, fnstsw m16). */
    if (d->x86.opcode[0] >= 0xD8 && d->x86.opcode[0] <= 0xDF)
        return true;
    for (unsigned i = 0; i < d->groups_count; i++) {
        switch (d->groups[i]) {
        case X86_GRP_FPU: case X86_GRP_MMX: case X86_GRP_3DNOW: case X86_GRP_SSE1: case X86_GRP_SSE2:
        case X86_GRP_SSE3: case X86_GRP_SSSE3: case X86_GRP_SSE41: case X86_GRP_SSE42: case X86_GRP_SSE4A:
        case X86_GRP_AVX: case X86_GRP_AVX2: case X86_GRP_AVX512: case X86_GRP_FMA: case X86_GRP_FMA4:
        case X86_GRP_F16C: case X86_GRP_XOP:
            return true;
        }
    }
    for (unsigned i = 0; i < d->regs_read_count; i++)
        if (is_vector_reg(d->regs_read[i]))
            return true;
    for (unsigned i = 0; i < d->regs_write_count; i++)
        if (is_vector_reg(d->regs_write[i]))
            return true;
    for (int i = 0; i < d->x86.op_count; i++)
        if (d->x86.operands[i].type == X86_OP_REG && is_vector_reg(d->x86.operands[i].reg))
            return true;
    return false;
}

bool sens_is_fpu_site(const uint8_t *p, size_t len)
{
    uint32_t slot = R3_TABLE + 4u * R3_E_FPU;
    return len >= R3_CALL_LEN && p[0] == 0x2E && p[1] == 0xFF && p[2] == 0x15 &&
           p[3] == (slot & 0xFF) && p[4] == ((slot >> 8) & 0xFF) && p[5] == ((slot >> 16) & 0xFF) &&
           p[6] == slot >> 24;
}

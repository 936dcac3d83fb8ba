/* Insert mode's decoder: Capstone decodes the trapping instruction, sensitive.c names its
 * entry, and this file writes its operands as the DESC/AUX words ring3-as would have pushed
 * for it (rewriter/ring3as/rules.py), so that emulate_entry() runs it unchanged.
 *
 * No vcpu here: tests/insert/decode.c drives it with the bytes ring3-as assembles.
 */
#include "ring3/abi.h"

#include "x86/capstone_regs.h"
#include "x86/sensitive.h"

#include "insert.h"
#include "operand.h"

#define INSN_MAX 15u            /* SDM vol. 2, 2.3.11 */

/* The ModRM number of a general register of any width (8-bit: 4-7 are ah, ch, dh, bh),
 * or -1. */
static int gpr_number(x86_reg r)
{
    switch (r) {
    case X86_REG_EAX: case X86_REG_AX: case X86_REG_AL: return REG_EAX;
    case X86_REG_ECX: case X86_REG_CX: case X86_REG_CL: return REG_ECX;
    case X86_REG_EDX: case X86_REG_DX: case X86_REG_DL: return REG_EDX;
    case X86_REG_EBX: case X86_REG_BX: case X86_REG_BL: return REG_EBX;
    case X86_REG_ESP: case X86_REG_SP: case X86_REG_AH: return REG_ESP;
    case X86_REG_EBP: case X86_REG_BP: case X86_REG_CH: return REG_EBP;
    case X86_REG_ESI: case X86_REG_SI: case X86_REG_DH: return REG_ESI;
    case X86_REG_EDI: case X86_REG_DI: case X86_REG_BH: return REG_EDI;
    default: return -1;
    }
}

/* The number of a control, debug or segment register operand (the DESC REG field), or -1. */
static int system_reg_number(x86_reg r)
{
    if (r >= X86_REG_CR0 && r <= X86_REG_CR15)
        return (int)(r - X86_REG_CR0);
    if (r >= X86_REG_DR0 && r <= X86_REG_DR15)
        return (int)(r - X86_REG_DR0);
    return x86_sreg_number(r);
}

static bool is_system_reg(const cs_x86_op *op)
{
    return op->type == X86_OP_REG && system_reg_number(op->reg) >= 0;
}

static unsigned size_code(unsigned bytes)
{
    return bytes == 1 ? R3_SIZE_8 : bytes == 2 ? R3_SIZE_16 : R3_SIZE_32;
}

/* A DESC word with no base or index register; with_field() sets the others. */
static uint32_t desc_make(unsigned reg, unsigned kind, unsigned bytes)
{
    return (uint32_t)reg << R3_D_REG_SHIFT | kind << R3_D_KIND_SHIFT |
           size_code(bytes) << R3_D_SIZE_SHIFT | (uint32_t)R3_NOREG << R3_D_BASE_SHIFT |
           (uint32_t)R3_NOREG << R3_D_INDEX_SHIFT;
}

static uint32_t with_field(uint32_t desc, unsigned shift, uint32_t mask, uint32_t value)
{
    return (desc & ~(mask << shift)) | (value & mask) << shift;
}

/* DESC and AUX for an r/m operand (a general register or memory) of (bytes), with (reg) in
 * the REG field; false for any other operand. */
static bool rm_operand(const cs_x86_op *op, unsigned reg, unsigned bytes, uint32_t *desc, uint32_t *aux)
{
    *aux = 0;
    if (op->type == X86_OP_REG) {
        int base = gpr_number(op->reg);
        if (base < 0)
            return false;
        *desc = with_field(desc_make(reg, R3_KIND_REG, bytes), R3_D_BASE_SHIFT, 0xF, (unsigned)base);
        return true;
    }
    if (op->type != X86_OP_MEM)
        return false;
    const x86_op_mem *m = &op->mem;
    int base = m->base == X86_REG_INVALID ? R3_NOREG : gpr_number(m->base);
    int index = m->index == X86_REG_INVALID ? R3_NOREG : gpr_number(m->index);
    /* SEG is 0 for no override, else 1 + the segment register. */
    int seg = m->segment == X86_REG_INVALID ? -1 : x86_sreg_number(m->segment);
    unsigned scale = m->scale == 8 ? 3 : m->scale == 4 ? 2 : m->scale == 2 ? 1 : 0;
    if (base < 0 || index < 0 || (m->segment != X86_REG_INVALID && seg < 0))
        return false;
    *desc = desc_make(reg, R3_KIND_MEM, bytes);
    *desc = with_field(*desc, R3_D_BASE_SHIFT, 0xF, (unsigned)base);
    *desc = with_field(*desc, R3_D_INDEX_SHIFT, 0xF, (unsigned)index);
    *desc = with_field(*desc, R3_D_SCALE_SHIFT, 0x3, scale);
    *desc = with_field(*desc, R3_D_SEG_SHIFT, 0x7, (unsigned)(seg + 1));
    *aux = (uint32_t)m->disp;
    return true;
}

static const cs_x86_op *find_op(const cs_x86 *x, x86_op_type type)
{
    for (int i = 0; i < x->op_count; i++)
        if (x->operands[i].type == type)
            return &x->operands[i];
    return NULL;
}

/* The operand that is not a control, debug or segment register (mov, push, pop). */
static const cs_x86_op *find_other_op(const cs_x86 *x)
{
    for (int i = 0; i < x->op_count; i++)
        if (!is_system_reg(&x->operands[i]))
            return &x->operands[i];
    return NULL;
}

static const cs_x86_op *find_system_reg(const cs_x86 *x)
{
    for (int i = 0; i < x->op_count; i++)
        if (is_system_reg(&x->operands[i]))
            return &x->operands[i];
    return NULL;
}

/* DESC and AUX of the decoded instruction for (entry), as ring3-as would write them
 * (rewriter/ring3as/rules.py); false for a form the entries do not take. */
static bool operands_of(const cs_insn *insn, unsigned entry, uint32_t *desc, uint32_t *aux)
{
    const cs_x86 *x = &insn->detail->x86;
    unsigned opsize = x->prefix[2] == X86_PREFIX_OPSIZE ? 2 : 4;
    const cs_x86_op *mem = find_op(x, X86_OP_MEM), *imm = find_op(x, X86_OP_IMM);
    const cs_x86_op *sys = find_system_reg(x), *other = find_other_op(x);
    const cs_x86_op *op0 = x->op_count > 0 ? &x->operands[0] : NULL;
    const cs_x86_op *op1 = x->op_count > 1 ? &x->operands[1] : NULL;

    *desc = *aux = 0;
    /* Neither the entries nor operand_offset() know 16-bit addressing; lock is #UD. */
    if (x->prefix[3] == X86_PREFIX_ADDRSIZE || x->prefix[0] == X86_PREFIX_LOCK)
        return false;
    if (x->prefix[0] == X86_PREFIX_REP && entry != R3_E_INS && entry != R3_E_OUTS &&
        entry != R3_E_WBNOINVD)
        return false;
    switch (entry) {
    case R3_E_PUSHF: case R3_E_POPF: case R3_E_IRET:
        return opsize == 4;     /* the entries move 32-bit images only */
    case R3_E_IN: case R3_E_OUT: {
        /* in al, dx / out dx, al: the accumulator sets the size. */
        const cs_x86_op *acc = op0 && op0->type == X86_OP_REG && gpr_number(op0->reg) == REG_EAX ? op0 : op1;
        if (!acc || acc->type != X86_OP_REG)
            return false;
        *desc = imm ? desc_make(0, R3_KIND_IMM, acc->size)
                    : with_field(desc_make(0, R3_KIND_REG, acc->size), R3_D_BASE_SHIFT, 0xF, REG_EDX);
        *aux = imm ? (uint32_t)imm->imm & 0xFF : 0;
        return true;
    }
    case R3_E_INS: case R3_E_OUTS: {
        if (x->prefix[0] == X86_PREFIX_REPNE)
            return false;
        /* The opcode's low bit picks byte or word/dword (SDM vol. 2, INS/OUTS); Capstone 4
         * names 66 f3 6d insd, so the size comes from the prefixes. */
        *desc = desc_make(0, R3_KIND_NONE, x->opcode[0] & 1 ? opsize : 1);
        *desc = with_field(*desc, R3_D_REP_SHIFT, 0x1, x->prefix[0] == X86_PREFIX_REP);
        if (entry == R3_E_OUTS && x->prefix[1] && mem && x86_sreg_number(mem->mem.segment) >= 0)
            *desc = with_field(*desc, R3_D_SEG_SHIFT, 0x7, (unsigned)x86_sreg_number(mem->mem.segment) + 1);
        return true;
    }
    case R3_E_LGDT: case R3_E_LIDT: case R3_E_SGDT: case R3_E_SIDT:
        return mem && rm_operand(mem, 0, opsize, desc, aux);
    case R3_E_INVLPG: case R3_E_XSAVES: case R3_E_XRSTORS:
        return mem && rm_operand(mem, 0, 4, desc, aux);
    case R3_E_INVPCID: {
        const cs_x86_op *type = find_op(x, X86_OP_REG);
        return type && gpr_number(type->reg) >= 0 && mem &&
               rm_operand(mem, (unsigned)gpr_number(type->reg), 4, desc, aux);
    }
    case R3_E_LLDT: case R3_E_LTR: case R3_E_LMSW: case R3_E_VERR: case R3_E_VERW:
        return op0 && rm_operand(op0, 0, 2, desc, aux);
    case R3_E_SLDT: case R3_E_STR: case R3_E_SMSW:
        /* A register takes the operand size; memory is always written 16 bits. */
        return op0 && rm_operand(op0, 0, op0->type == X86_OP_REG ? op0->size : 2, desc, aux);
    case R3_E_LAR: case R3_E_LSL:
        return op0 && op1 && op0->type == X86_OP_REG && gpr_number(op0->reg) >= 0 &&
               rm_operand(op1, (unsigned)gpr_number(op0->reg), op0->size, desc, aux);
    case R3_E_MOV_TO_CR: case R3_E_MOV_FROM_CR: case R3_E_MOV_TO_DR: case R3_E_MOV_FROM_DR:
        return sys && other && other->type == X86_OP_REG &&
               rm_operand(other, (unsigned)system_reg_number(sys->reg), 4, desc, aux);
    case R3_E_MOV_TO_SREG:
        return sys && other && rm_operand(other, (unsigned)x86_sreg_number(sys->reg), 2, desc, aux);
    case R3_E_MOV_FROM_SREG:
        return sys && other &&
               rm_operand(other, (unsigned)x86_sreg_number(sys->reg),
                          other->type == X86_OP_REG ? other->size : 2, desc, aux);
    case R3_E_PUSH_SREG: case R3_E_POP_SREG:
        if (!sys)
            return false;
        *desc = desc_make((unsigned)x86_sreg_number(sys->reg), R3_KIND_NONE, opsize);
        return true;
    case R3_E_LDS: case R3_E_LES: case R3_E_LFS: case R3_E_LGS: case R3_E_LSS:
        return op0 && op0->type == X86_OP_REG && gpr_number(op0->reg) >= 0 && mem &&
               rm_operand(mem, (unsigned)gpr_number(op0->reg), op0->size, desc, aux);
    case R3_E_LJMP: case R3_E_LCALL:
        if (mem)
            return rm_operand(mem, 0, opsize, desc, aux);
        /* ptr16:32 (ea, 9a): Capstone gives the selector first, then the offset. */
        if (!op0 || !op1 || op0->type != X86_OP_IMM || op1->type != X86_OP_IMM)
            return false;
        *desc = with_field(desc_make(0, R3_KIND_IMM, opsize), R3_D_IMM16_SHIFT, 0xFFFF, (uint32_t)op0->imm);
        *aux = (uint32_t)op1->imm;
        return true;
    case R3_E_LRET:
        *desc = desc_make(0, imm ? R3_KIND_IMM : R3_KIND_NONE, opsize);
        if (imm)
            *desc = with_field(*desc, R3_D_IMM16_SHIFT, 0xFFFF, (uint32_t)imm->imm);
        return true;
    case R3_E_INT:
        if (!imm)
            return false;
        *desc = desc_make(0, R3_KIND_IMM, 4);
        *aux = (uint32_t)imm->imm & 0xFF;
        return true;
    default:
        /* Entries without operands, or whose registers are fixed (rdmsr, monitor, ...). */
        return true;
    }
}

/* The entry and operands of the sensitive instruction at (code, len), or INSERT_NONE. */
static enum insert_decoded decode_one(csh cs, cs_insn *insn, const uint8_t *code, size_t len,
                                      struct insert_site *site)
{
    struct sens_info info;
    size_t n = sens_decode_extra(code, len, &info);

    site->desc = site->aux = 0;
    if (n) {
        /* Newer than Capstone 4 (wrmsrns, emulated as wrmsr), or ud0/ud1: none has operands. */
        if (info.cls == SENS_NONE || info.entry == SENS_NO_ENTRY)
            return INSERT_NONE;
        site->entry = (unsigned)info.entry;
        site->len = (uint32_t)n;
        return INSERT_SITE;
    }
    uint64_t addr = 0;
    if (!cs_disasm_iter(cs, &code, &len, &addr, insn))
        return len < INSN_MAX ? INSERT_SHORT : INSERT_NONE;
    info = sens_classify(insn);
    if (info.cls == SENS_NONE || info.entry == SENS_NO_ENTRY)
        return INSERT_NONE;
    site->entry = (unsigned)info.entry;
    site->len = insn->size;
    return operands_of(insn, site->entry, &site->desc, &site->aux) ? INSERT_SITE : INSERT_NONE;
}

enum insert_decoded insert_decode(csh cs, cs_insn *insn, const uint8_t *code, size_t len,
                                  bool undefined_opcode, struct insert_site *site)
{
    size_t skip = 0;

    site->marked = false;
    if (undefined_opcode && len < R3_INSERT_MARKER_LEN && len && code[0] == R3_INSERT_MARKER0 &&
        (len < 2 || code[1] == R3_INSERT_MARKER1))
        return INSERT_SHORT;
    if (undefined_opcode && sens_is_insert_marker(code, len)) {
        skip = R3_INSERT_MARKER_LEN;
        site->marked = true;
    }
    enum insert_decoded r = decode_one(cs, insn, code + skip, len - skip, site);
    if (r != INSERT_SITE)
        return r;
    site->len += (uint32_t)skip;
    /* sti; hlt is taken as one step, as rewritten code does with STI_HLT: an interrupt
     * pending at the sti waits out its shadow and wakes the hlt (SDM vol. 3, 6.8.3). */
    struct insert_site next;
    if (site->entry == R3_E_STI &&
        decode_one(cs, insn, code + site->len, len - site->len, &next) == INSERT_SITE &&
        next.entry == R3_E_HLT) {
        site->entry = R3_E_STI_HLT;
        site->len += next.len;
    }
    return INSERT_SITE;
}

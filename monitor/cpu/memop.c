/* The memory operands of a guest instruction that faulted, decoded (Capstone) to find the access it made. */
#include "memop.h"

#include "ring3/abi.h"

#include "monitor/mmu/mmu.h"
#include "x86/capstone_regs.h"

#include "fetch.h"
#include "operand.h"

/* The general register (REG_EAX..) of a Capstone 32-bit register, or -1. */
static int gpr(x86_reg r)
{
    switch (r) {
    case X86_REG_EAX: return REG_EAX;
    case X86_REG_ECX: return REG_ECX;
    case X86_REG_EDX: return REG_EDX;
    case X86_REG_EBX: return REG_EBX;
    case X86_REG_ESP: return REG_ESP;
    case X86_REG_EBP: return REG_EBP;
    case X86_REG_ESI: return REG_ESI;
    case X86_REG_EDI: return REG_EDI;
    default: return -1;
    }
}

/* The segment register (SREG_ES..) an operand is addressed through: its
 * override, else SS for an ESP or EBP base, else DS (SDM vol. 1, 3.7.4). */
static int segment_of(const x86_op_mem *m)
{
    if (m->segment == X86_REG_INVALID)
        return m->base == X86_REG_ESP || m->base == X86_REG_EBP ? SREG_SS : SREG_DS;
    return x86_sreg_number(m->segment);
}

bool memop_runtime_access(struct vcpu *v)
{
    uint8_t code[FETCH_INSN_MAX];
    csh cs;
    cs_insn *insn;
    const uint32_t *r = v->sh->regs;

    fetch_capstone(v, &cs, &insn);
    size_t len = fetch_code(v, v->sh->eip, code, sizeof code);
    const uint8_t *p = code;
    uint64_t at = v->sh->eip;
    if (!cs_disasm_iter(cs, &p, &len, &at, insn) || insn->detail->x86.addr_size != 4)
        return false;
    const cs_x86 *x = &insn->detail->x86;
    for (unsigned i = 0; i < x->op_count; i++) {
        const cs_x86_op *op = &x->operands[i];
        if (op->type != X86_OP_MEM)
            continue;
        int seg = segment_of(&op->mem), base = gpr(op->mem.base), index = gpr(op->mem.index);
        if (seg < 0 || (op->mem.base != X86_REG_INVALID && base < 0) ||
            (op->mem.index != X86_REG_INVALID && index < 0))
            continue;
        uint32_t offset = (uint32_t)op->mem.disp + (base >= 0 ? r[base] : 0) +
                          (index >= 0 ? r[index] * (uint32_t)op->mem.scale : 0);
        uint32_t size = op->size ? op->size : 1;
        uint64_t linear = (uint64_t)v->sreg[seg].base + offset;
        if (offset + (uint64_t)size - 1 > v->sreg[seg].limit || linear + size <= R3_RUNTIME_BASE ||
            linear >= (1ull << 32))
            continue;
        /* The first byte of the operand inside the area is where the walk stops. */
        uint32_t addr = linear < R3_RUNTIME_BASE ? R3_RUNTIME_BASE : (uint32_t)linear;
        enum mmu_access a = op->access & CS_AC_WRITE ? MMU_WRITE : MMU_READ;
        int err = mmu_fault_error(v, addr, a, false);
        if (!err)
            return false;
        v->cr2 = addr;
        vcpu_raise(v, VEC_PF, err);
    }
    return false;
}

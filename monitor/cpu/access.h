/* The operands of an emulated instruction, read and written as the instruction would: its
 * register or memory operand (the DESC and AUX words of include/ring3/abi.h), the stack and
 * the flags. Every fault goes through vcpu_raise, at the instruction's first byte. */
#ifndef RING3_ACCESS_H
#define RING3_ACCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "monitor/mmu/mmu.h"

#include "operand.h"
#include "segment.h"
#include "vcpu.h"

/* Privileged instructions at CPL > 0 raise #GP(0) (SDM vol. 3, 5.9). */
static inline void need_cpl0(struct vcpu *v)
{
    if (v->cpl != 0)
        vcpu_raise(v, VEC_GP, 0);
}

/* The guest general registers, in ModRM order (REG_EAX..). */
static inline uint32_t *regs(struct vcpu *v) { return v->sh->regs; }

/* A 16-bit read of guest linear memory with CPL 0 rights (a TSS field, say). */
static inline uint16_t mmu_read16_sup(struct vcpu *v, uint32_t linear)
{
    uint16_t x;
    mmu_read(v, linear, &x, 2, true);
    return x;
}

/* The linear address of the memory operand of (desc, aux), (len) bytes checked
 * against its segment's limit. */
static inline uint32_t mem_linear(struct vcpu *v, uint32_t desc, uint32_t aux, uint32_t len)
{
    return seg_linear(v, operand_segment(desc), operand_offset(desc, aux, regs(v), 0), len);
}

/* The register or memory operand of (desc, aux), (bytes) wide, read and written
 * with the current CPL's rights. */
static inline uint32_t rm_read(struct vcpu *v, uint32_t desc, uint32_t aux, unsigned bytes)
{
    if (R3_D_KIND(desc) == R3_KIND_REG)
        return reg_read(regs(v), R3_D_BASE(desc), bytes);
    uint32_t x = 0;
    mmu_read(v, mem_linear(v, desc, aux, bytes), &x, bytes, false);
    return x;
}

static inline void rm_write(struct vcpu *v, uint32_t desc, uint32_t aux, unsigned bytes, uint32_t value)
{
    if (R3_D_KIND(desc) == R3_KIND_REG) {
        reg_write(regs(v), R3_D_BASE(desc), bytes, value);
        return;
    }
    mmu_write(v, mem_linear(v, desc, aux, bytes), &value, bytes, false);
}

/* Push (value) of (bytes) on the guest stack (SS:ESP); ESP moves only once the
 * write succeeded. */
static inline void stack_push(struct vcpu *v, uint32_t value, unsigned bytes)
{
    uint32_t esp = regs(v)[REG_ESP] - bytes;
    mmu_write(v, seg_linear(v, SREG_SS, esp, bytes), &value, bytes, false);
    regs(v)[REG_ESP] = esp;
}

/* Read (bytes) at SS:ESP + (offset) without popping. */
static inline uint32_t stack_peek(struct vcpu *v, uint32_t offset, unsigned bytes)
{
    uint32_t x = 0;
    mmu_read(v, seg_linear(v, SREG_SS, regs(v)[REG_ESP] + offset, bytes), &x, bytes, false);
    return x;
}

/* Set or clear EFLAGS.ZF, the result flag of lar, lsl, verr and verw. */
static inline void set_zf(struct vcpu *v, bool on)
{
    v->sh->eflags = (v->sh->eflags & ~FL_ZF) | (on ? FL_ZF : 0);
}

#endif

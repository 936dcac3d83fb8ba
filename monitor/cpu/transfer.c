/* Control transfers between code segments and privilege levels: far jmp and call (direct and
 * through call gates), lret, sysenter and sysexit (SDM vol. 3, 5.8). */
#include <setjmp.h>

#include "monitor/mmu/mmu.h"

#include "access.h"
#include "emulate.h"
#include "segment.h"
#include "vcpu.h"

/* Reads the descriptor of a far-transfer target that must be a code segment. */
static void code_target(struct vcpu *v, uint16_t sel, struct seg *s)
{
    uint64_t raw;
    if ((sel & ~3u) == 0)
        vcpu_raise(v, VEC_GP, 0);
    if (!seg_read_descriptor(v, sel, &raw))
        vcpu_raise(v, VEC_GP, sel & ~3u);
    seg_decode(raw, sel, s);
    if ((s->attr & 0x18) != 0x18)
        vcpu_raise(v, VEC_GP, sel & ~3u);
}

/* Guest code segments must be flat, since the host's own CS is. */
static void enter_code(struct vcpu *v, struct seg *s, uint16_t sel, uint32_t eip, unsigned cpl)
{
    if (!(s->attr & 0x80))
        vcpu_raise(v, VEC_NP, sel & ~3u);
    if (s->base != 0 || s->limit != 0xFFFFFFFFu)
        vcpu_triple_fault(v, "code segments with a base or limit are not emulated");
    s->sel = (uint16_t)((sel & ~3u) | cpl);
    v->sreg[SREG_CS] = *s;
    v->sh->eip = eip;
    mmu_set_cpl(v, cpl);
}

/* A far call or jump through a 32-bit call gate (SDM vol. 3, 5.8.4-5.8.5):
 * a call to a more privileged non-conforming segment switches to the stack
 * the TSS names for that level and copies the gate's parameter count. */
static void through_call_gate(struct vcpu *v, uint64_t gate, uint16_t gate_sel, bool call,
                              uint32_t ret_eip)
{
    unsigned gdpl = (unsigned)(gate >> 45) & 3, params = (unsigned)(gate >> 32) & 0x1F;
    if (gdpl < v->cpl || gdpl < (gate_sel & 3u))
        vcpu_raise(v, VEC_GP, gate_sel & ~3u);
    if (!(gate >> 47 & 1))
        vcpu_raise(v, VEC_NP, gate_sel & ~3u);
    uint16_t sel = (uint16_t)(gate >> 16);
    uint32_t offset = (uint32_t)(gate & 0xFFFF) | (uint32_t)((gate >> 32) & 0xFFFF0000u);
    struct seg s;
    code_target(v, sel, &s);
    unsigned dpl = (s.attr >> 5) & 3;
    bool conforming = s.attr & 4;
    if (dpl > v->cpl)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    uint32_t *r = regs(v);
    uint16_t old_cs = v->sreg[SREG_CS].sel;
    if (!conforming && dpl < v->cpl) {
        if (!call)
            vcpu_raise(v, VEC_GP, sel & ~3u);
        uint16_t old_ss = v->sreg[SREG_SS].sel;
        uint32_t old_esp = r[REG_ESP], args[31];
        for (unsigned i = 0; i < params; i++)
            args[i] = stack_peek(v, 4 * i, 4);
        uint32_t new_esp = mmu_read32(v, v->tr.base + 4 + 8 * dpl, true);
        unsigned old_cpl = v->cpl;
        seg_load_at_cpl(v, SREG_SS, (uint16_t)mmu_read32(v, v->tr.base + 8 + 8 * dpl, true), dpl);
        v->cpl = dpl;
        r[REG_ESP] = new_esp;
        stack_push(v, old_ss, 4);
        stack_push(v, old_esp, 4);
        for (unsigned i = params; i-- > 0;)
            stack_push(v, args[i], 4);
        stack_push(v, old_cs, 4);
        stack_push(v, ret_eip, 4);
        v->cpl = old_cpl;
        enter_code(v, &s, sel, offset, dpl);
        return;
    }
    if (call) {
        stack_push(v, old_cs, 4);
        stack_push(v, ret_eip, 4);
    }
    enter_code(v, &s, sel, offset, v->cpl);
}

/* A far jump or call (SDM vol. 3, 5.8.1-5.8.2): to a code segment at the
 * same privilege, or through a call gate. */
static void far_jump_or_call(struct vcpu *v, uint16_t sel, uint32_t eip, bool call, unsigned bytes)
{
    if (!(v->cr0 & CR0_PE))
        vcpu_triple_fault(v, "far transfers in real mode are not emulated");
    uint64_t raw;
    if ((sel & ~3u) == 0)
        vcpu_raise(v, VEC_GP, 0);
    if (!seg_read_descriptor(v, sel, &raw))
        vcpu_raise(v, VEC_GP, sel & ~3u);
    struct seg s;
    seg_decode(raw, sel, &s);
    unsigned type = s.attr & 0x1F, dpl = (s.attr >> 5) & 3, rpl = sel & 3;
    uint32_t ret = v->sh->eip;
    uint32_t esp = regs(v)[REG_ESP];
    if (type == 0x0C) {
        through_call_gate(v, raw, sel, call, ret);
        return;
    }
    if (type == 0x05 || type == 0x09 || type == 0x0B)
        vcpu_triple_fault(v, "task switches are not emulated");
    if ((type & 0x18) != 0x18)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    if ((type & 4) ? dpl > v->cpl : (rpl > v->cpl || dpl != v->cpl))
        vcpu_raise(v, VEC_GP, sel & ~3u);
    if (call) {
        stack_push(v, v->sreg[SREG_CS].sel, bytes);
        stack_push(v, ret, bytes);
    }
    jmp_buf jb, *outer = v->fault_jmp;
    v->fault_jmp = &jb;
    if (setjmp(jb)) {
        regs(v)[REG_ESP] = esp;
        v->fault_jmp = outer;
        vcpu_raise(v, (unsigned)v->pending_vector, v->pending_error);
    }
    enter_code(v, &s, sel, eip, v->cpl);
    v->fault_jmp = outer;
}

static void far_pointer(struct vcpu *v, uint32_t desc, uint32_t aux, uint16_t *sel, uint32_t *off)
{
    unsigned bytes = operand_bytes(desc);
    if (R3_D_KIND(desc) == R3_KIND_IMM) {
        *sel = (uint16_t)R3_D_IMM16(desc);
        *off = aux;
        return;
    }
    uint32_t at = mem_linear(v, desc, aux, bytes + 2);
    *off = 0;
    mmu_read(v, at, off, bytes, false);
    *sel = mmu_read16(v, at + bytes);
}

void transfer_lret(struct vcpu *v, uint32_t desc)
{
    unsigned bytes = operand_bytes(desc);
    uint32_t eip = stack_peek(v, 0, bytes);
    uint16_t sel = (uint16_t)stack_peek(v, bytes, bytes);
    uint32_t extra = R3_D_KIND(desc) == R3_KIND_IMM ? R3_D_IMM16(desc) : 0;
    unsigned rpl = sel & 3;
    struct seg s;
    if (rpl < v->cpl)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    code_target(v, sel, &s);
    unsigned dpl = (s.attr >> 5) & 3;
    if ((s.attr & 4) ? dpl > rpl : dpl != rpl)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    if (rpl == v->cpl) {
        regs(v)[REG_ESP] += 2 * bytes + extra;
        enter_code(v, &s, sel, eip, rpl);
        return;
    }
    uint32_t new_esp = stack_peek(v, 2 * bytes + extra, bytes);
    seg_load_at_cpl(v, SREG_SS, (uint16_t)stack_peek(v, 3 * bytes + extra, bytes), rpl);
    regs(v)[REG_ESP] = new_esp + extra;
    seg_null_inaccessible(v, rpl);
    enter_code(v, &s, sel, eip, rpl);
}

void transfer_sysenter(struct vcpu *v)
{
    if (!(v->cr0 & CR0_PE) || (v->sysenter_cs & ~3u) == 0)
        vcpu_raise(v, VEC_GP, 0);
    /* SYSENTER (SDM vol. 2): flat CS and SS from IA32_SYSENTER_CS, CPL 0, IF cleared. */
    struct seg cs = {(uint16_t)(v->sysenter_cs & ~3u), 0, 0xFFFFFFFFu, 0xC09B};
    struct seg ss = {(uint16_t)((v->sysenter_cs & ~3u) + 8), 0, 0xFFFFFFFFu, 0xC093};
    v->sreg[SREG_CS] = cs;
    seg_set(v, SREG_SS, ss.sel, &ss);
    v->sh->vif = 0;
    v->sh->eflags &= ~FL_RF;
    v->sh->eip = v->sysenter_eip;
    regs(v)[REG_ESP] = v->sysenter_esp;
    mmu_set_cpl(v, 0);
}

void transfer_sysexit(struct vcpu *v)
{
    need_cpl0(v);
    if ((v->sysenter_cs & ~3u) == 0)
        vcpu_raise(v, VEC_GP, 0);
    struct seg cs = {(uint16_t)((v->sysenter_cs + 16) | 3), 0, 0xFFFFFFFFu, 0xC0FB};
    struct seg ss = {(uint16_t)((v->sysenter_cs + 24) | 3), 0, 0xFFFFFFFFu, 0xC0F3};
    v->sreg[SREG_CS] = cs;
    mmu_set_cpl(v, 3);
    seg_set(v, SREG_SS, ss.sel, &ss);
    v->sh->eip = regs(v)[REG_EDX];
    regs(v)[REG_ESP] = regs(v)[REG_ECX];
}

void transfer_far(struct vcpu *v, uint32_t desc, uint32_t aux, bool call)
{
    uint16_t sel;
    uint32_t eip;
    far_pointer(v, desc, aux, &sel, &eip);
    far_jump_or_call(v, sel, eip, call, operand_bytes(desc));
}

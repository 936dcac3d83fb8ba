/* Exceptions and interrupts as the CPU delivers them: IDT gates, stack switch, frames, iret. */
#include <stdlib.h>
#include <string.h>

#include "hw/pic.h"
#include "lib/fail.h"
#include "machine/platform.h"
#include "monitor/gdb/gdbstub.h"
#include "monitor/host/console.h"
#include "monitor/host/run.h"
#include "monitor/host/stats.h"
#include "monitor/mmu/mmu.h"

#include "runtime.h"
#include "segment.h"
#include "vcpu.h"

enum delivery { DELIVER_EXC, DELIVER_EXT, DELIVER_SOFT };

#define GATE_TASK   0x5
#define GATE_INT32  0xE
#define GATE_TRAP32 0xF

_Noreturn void vcpu_raise(struct vcpu *v, unsigned vector, int error)
{
    TRACE(v, "fault %u error %d at eip %08x", vector, error, v->fault_eip);
    v->pending_vector = (int)vector;
    v->pending_error = error;
    longjmp(*v->fault_jmp, 1);
}

_Noreturn void vcpu_raise_trap(struct vcpu *v, unsigned vector)
{
    memcpy(v->fault_regs, v->sh->regs, sizeof v->fault_regs);
    v->fault_eip = v->sh->eip;
    v->fault_esp = v->sh->regs[REG_ESP];
    vcpu_raise(v, vector, NO_ERROR_CODE);
}

_Noreturn void vcpu_single_step(struct vcpu *v)
{
    v->dr[6] |= DR6_BS;
    vcpu_raise_trap(v, VEC_DB);
}

static uint32_t eflags_image(const struct vcpu *v)
{
    return (v->sh->eflags & FL_USER) | (v->sh->vif ? FL_IF : 0) | v->iopl | 0x2;
}

/* Loads EFLAGS from an image popped by iret, with the privilege rules of
 * SDM vol. 2, IRET: IOPL changes only at CPL 0, IF only at CPL <= IOPL. */
static void load_eflags(struct vcpu *v, uint32_t image, unsigned cpl)
{
    v->sh->eflags = (v->sh->eflags & ~FL_USER) | (image & FL_USER) | 0x2;
    if (cpl == 0)
        v->iopl = image & FL_IOPL;
    if (cpl <= (v->iopl >> 12))
        v->sh->vif = !!(image & FL_IF);
}

static void push32(struct vcpu *v, uint32_t *esp, uint32_t value)
{
    *esp -= 4;
    mmu_write32(v, v->sreg[SREG_SS].base + *esp, value, true);
}

/* Reads a code-segment descriptor for a gate target or a far transfer. */
static void code_descriptor(struct vcpu *v, uint16_t sel, struct seg *out, int ext)
{
    uint64_t raw;
    if ((sel & ~3u) == 0)
        vcpu_raise(v, VEC_GP, ext);
    if (!seg_read_descriptor(v, sel, &raw))
        vcpu_raise(v, VEC_GP, (sel & ~3u) | ext);
    seg_decode(raw, sel, out);
    unsigned type = out->attr & 0x1F;       /* S bit and type */
    if ((type & 0x18) != 0x18)               /* not a code segment */
        vcpu_raise(v, VEC_GP, (sel & ~3u) | ext);
    if (!(out->attr & 0x80))
        vcpu_raise(v, VEC_NP, (sel & ~3u) | ext);
}

/* Delivery through the IDT (SDM vol. 3, 6.12.1): gate checks, a stack switch
 * to the TSS's SS0:ESP0 on a privilege change, the frame, the new CS:EIP. */
static void deliver(struct vcpu *v, unsigned vector, int error, enum delivery how)
{
    struct r3_shared *sh = v->sh;
    int ext = how == DELIVER_EXT ? 1 : 0;
    if (how == DELIVER_EXC)
        stats_exception(vector);
    else if (how == DELIVER_EXT)
        stats_interrupt(vector);
    uint32_t gate_err = vector * 8 + 2 + (uint32_t)ext;
    if (vector * 8 + 7 > v->idtr.limit)
        vcpu_raise(v, VEC_GP, (int)gate_err);
    uint32_t lo = mmu_read32(v, v->idtr.base + vector * 8, true);
    uint32_t hi = mmu_read32(v, v->idtr.base + vector * 8 + 4, true);
    unsigned type = (hi >> 8) & 0x1F, dpl = (hi >> 13) & 3;
    if (type == GATE_TASK)
        vcpu_triple_fault(v, "task gates are not emulated");
    if (type != GATE_INT32 && type != GATE_TRAP32)
        vcpu_raise(v, VEC_GP, (int)gate_err);
    if (how == DELIVER_SOFT && dpl < v->cpl)
        vcpu_raise(v, VEC_GP, (int)gate_err);
    if (!(hi & 0x8000))
        vcpu_raise(v, VEC_NP, (int)gate_err);

    uint16_t sel = (uint16_t)(lo >> 16);
    uint32_t offset = (hi & 0xFFFF0000u) | (lo & 0xFFFF);
    struct seg cs;
    code_descriptor(v, sel, &cs, ext);
    unsigned new_cpl = (cs.attr >> 5) & 3;
    if (cs.attr & 0x4)                       /* conforming: stay at CPL */
        new_cpl = v->cpl;
    if (new_cpl > v->cpl)
        vcpu_raise(v, VEC_GP, (sel & ~3u) | (unsigned)ext);

    uint32_t old_esp = sh->regs[REG_ESP], old_flags = eflags_image(v);
    uint16_t old_ss = v->sreg[SREG_SS].sel, old_cs = v->sreg[SREG_CS].sel;
    uint32_t esp = old_esp;
    if (new_cpl < v->cpl) {
        /* Inner level: SS0 and ESP0 from the 32-bit TSS (SDM vol. 3, 7.7). */
        if (v->tr.limit < 9)
            vcpu_raise(v, VEC_TS, (v->tr.sel & ~3u) | (unsigned)ext);
        esp = mmu_read32(v, v->tr.base + 4, true);
        seg_load_at_cpl(v, SREG_SS, (uint16_t)mmu_read32(v, v->tr.base + 8, true), new_cpl);
        push32(v, &esp, old_ss);
        push32(v, &esp, old_esp);
    }
    push32(v, &esp, old_flags);
    push32(v, &esp, old_cs);
    push32(v, &esp, sh->eip);
    if (error != NO_ERROR_CODE)
        push32(v, &esp, (uint32_t)error);

    cs.sel = (uint16_t)((sel & ~3u) | new_cpl);
    v->sreg[SREG_CS] = cs;
    sh->regs[REG_ESP] = esp;
    sh->eip = offset;
    sh->eflags &= ~(FL_TF | FL_NT | FL_RF);
    if (type == GATE_INT32)
        sh->vif = 0;
    mmu_set_cpl(v, new_cpl);
    TRACE(v, "deliver vector %u error %d -> %04x:%08x cpl %u", vector, error, cs.sel, offset, v->cpl);
}

/* Which exceptions make a double fault when one occurs while delivering
 * another (SDM vol. 3, 6.15, Table 6-5). */
static bool contributory(unsigned vector)
{
    return vector == VEC_DE || (vector >= VEC_TS && vector <= VEC_GP);
}

static bool makes_double_fault(unsigned first, unsigned second)
{
    if (first == VEC_PF)
        return contributory(second) || second == VEC_PF;
    return contributory(first) && contributory(second);
}

static void restore_fault_state(struct vcpu *v)
{
    memcpy(v->sh->regs, v->fault_regs, sizeof v->fault_regs);
    v->sh->eip = v->fault_eip;
    v->sh->regs[REG_ESP] = v->fault_esp;
}

/* Delivers an exception, escalating to #DF and to a triple fault when the
 * delivery itself faults. Runs at the top of a monitor entry. */
static void deliver_escalating(struct vcpu *v, unsigned vector, int error, enum delivery how)
{
    jmp_buf jb, *outer = v->fault_jmp;
    volatile unsigned vec = vector;
    volatile int err = error;
    volatile enum delivery kind = how;
    v->fault_jmp = &jb;
    if (setjmp(jb)) {
        unsigned second = (unsigned)v->pending_vector;
        if (vec == VEC_DF)
            vcpu_triple_fault(v, "a fault while delivering a double fault");
        restore_fault_state(v);
        if (makes_double_fault(vec, second)) {
            vec = VEC_DF;
            err = 0;
        } else {
            vec = second;
            err = v->pending_error;
        }
        kind = DELIVER_EXC;
    }
    deliver(v, vec, err, kind);
    v->fault_jmp = outer;
}

void vcpu_take_exception(struct vcpu *v)
{
    restore_fault_state(v);
    /* the single step gdb asked for: its stop, not the guest's #DB */
    if (v->pending_vector == VEC_DB && (v->dr[6] & DR6_BS) && gdb_step_done(v))
        return;
    deliver_escalating(v, (unsigned)v->pending_vector, v->pending_error, DELIVER_EXC);
}

void vcpu_interrupt(struct vcpu *v, unsigned vector)
{
    memcpy(v->fault_regs, v->sh->regs, sizeof v->fault_regs);
    v->fault_eip = v->sh->eip;
    v->fault_esp = v->sh->regs[REG_ESP];
    deliver_escalating(v, vector, NO_ERROR_CODE, DELIVER_EXT);
}

void vcpu_soft_int(struct vcpu *v, unsigned vector)
{
    deliver(v, vector, NO_ERROR_CODE, DELIVER_SOFT);
}

void vcpu_iret(struct vcpu *v)
{
    struct r3_shared *sh = v->sh;
    if (sh->eflags & FL_NT)
        vcpu_triple_fault(v, "iret with NT set (task return) is not emulated");
    uint32_t esp = sh->regs[REG_ESP], ss_base = v->sreg[SREG_SS].base;
    uint32_t eip = mmu_read32(v, ss_base + esp, v->cpl == 0);
    uint16_t sel = (uint16_t)mmu_read32(v, ss_base + esp + 4, v->cpl == 0);
    uint32_t flags = mmu_read32(v, ss_base + esp + 8, v->cpl == 0);
    if (flags & FL_VM && v->cpl == 0)
        vcpu_triple_fault(v, "iret to virtual-8086 mode is not emulated");
    unsigned rpl = sel & 3;
    if (rpl < v->cpl)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    struct seg cs;
    code_descriptor(v, sel, &cs, 0);
    unsigned dpl = (cs.attr >> 5) & 3;
    if (!(cs.attr & 0x4) ? dpl != rpl : dpl > rpl)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    if (rpl == v->cpl) {
        sh->regs[REG_ESP] = esp + 12;
    } else {
        /* Return to an outer level: ESP and SS follow (SDM vol. 2, IRET). */
        uint32_t new_esp = mmu_read32(v, ss_base + esp + 12, v->cpl == 0);
        uint16_t new_ss = (uint16_t)mmu_read32(v, ss_base + esp + 16, v->cpl == 0);
        seg_load_at_cpl(v, SREG_SS, new_ss, rpl);
        sh->regs[REG_ESP] = new_esp;
        seg_null_inaccessible(v, rpl);
    }
    load_eflags(v, flags, v->cpl);
    cs.sel = sel;
    v->sreg[SREG_CS] = cs;
    sh->eip = eip;
    mmu_set_cpl(v, rpl);
    if (v->pf_retry_valid) {
        /* Most likely the return from the page-fault handler to the access
         * it fixed: map the page now rather than take the host fault again. */
        v->pf_retry_valid = false;
        mmu_prefill(v, v->pf_retry);
    }
    TRACE(v, "iret -> %04x:%08x cpl %u", sel, eip, v->cpl);
}

void vcpu_check_interrupts(struct vcpu *v)
{
    struct r3_shared *sh = v->sh;
    if (gdb_holds_interrupts())
        return;                 /* gdb is stepping: the interrupt waits for its continue */
    if (!v->plat || !pic_intr_pending(v->plat->pic)) {
        sh->pending = 0;
        return;
    }
    if (!sh->vif) {
        sh->pending = 1;       /* sti and popf will come to the monitor */
        return;
    }
    sh->pending = 0;
    int vector = pic_acknowledge(v->plat->pic);
    if (vector >= 0)
        vcpu_interrupt(v, (unsigned)vector);
}

void vcpu_dump(const struct vcpu *v, FILE *f)
{
    const struct r3_shared *sh = v->sh;
    static const char *names[8] = {"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"};
    for (unsigned i = 0; i < 8; i++)
        fprintf(f, "%s=%08x%s", names[i], sh->regs[i], i % 4 == 3 ? "\n" : " ");
    fprintf(f, "eip=%08x eflags=%08x cpl=%u\n", sh->eip, (sh->eflags & FL_USER) |
            (sh->vif ? FL_IF : 0) | v->iopl | 2, v->cpl);
    static const char *sn[6] = {"es", "cs", "ss", "ds", "fs", "gs"};
    for (unsigned i = 0; i < 6; i++)
        fprintf(f, "%s=%04x%s", sn[i], v->sreg[i].sel, i == 5 ? "\n" : " ");
    fprintf(f, "cr0=%08x cr2=%08x cr3=%08x cr4=%08x\n", v->cr0, v->cr2, v->cr3, v->cr4);
    fprintf(f, "gdtr=%08x/%04x idtr=%08x/%04x ldtr=%04x tr=%04x\n", v->gdtr.base, v->gdtr.limit,
            v->idtr.base, v->idtr.limit, v->ldtr.sel, v->tr.sel);
}

_Noreturn void vcpu_triple_fault(struct vcpu *v, const char *why)
{
    fflush(stdout);
    console_restore();
    fprintf(stderr, "ring3: guest triple fault (%s); registers:\n", why);
    vcpu_dump(v, stderr);
    monitor_exit(v, EXIT_TRIPLE_FAULT);
}

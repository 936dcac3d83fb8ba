/* The virtual CPU: every piece of IA-32 system state the monitor emulates, in one struct.
 *
 * The general registers, EIP, the arithmetic flags and the virtual IF live in
 * the shared page (monitor/cpu/shared.h) while monitor code runs: the gate saved
 * them there, and signal handlers copy the interrupted context there first.
 */
#ifndef RING3_VCPU_H
#define RING3_VCPU_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hw/irq.h"
#include "monitor/host/breakpoints.h"

#include "operand.h"
#include "shared.h"

struct guestmem;
struct platform;
struct aspace;
struct tlb;

/* --isolation: where guest user code runs (monitor/mmu/aspace.c). */
enum isolation {
    ISOLATION_PROCESS,      /* in a stub process per guest address space (the default) */
    ISOLATION_NONE,         /* in the monitor's own process, as the paper did */
};

/* EFLAGS bits (SDM vol. 1, 3.4.3). */
#define FL_CF   0x00000001u
#define FL_PF   0x00000004u
#define FL_AF   0x00000010u
#define FL_ZF   0x00000040u
#define FL_SF   0x00000080u
#define FL_TF   0x00000100u
#define FL_IF   0x00000200u
#define FL_DF   0x00000400u
#define FL_OF   0x00000800u
#define FL_IOPL 0x00003000u
#define FL_NT   0x00004000u
#define FL_RF   0x00010000u
#define FL_VM   0x00020000u
#define FL_AC   0x00040000u
#define FL_ID   0x00200000u
/* What a guest may change with popf/iret and the CPU keeps for real at CPL 3. */
#define FL_USER (FL_CF | FL_PF | FL_AF | FL_ZF | FL_SF | FL_TF | FL_DF | FL_OF | FL_NT | FL_AC | FL_ID)

#define CR0_PE 0x00000001u
#define CR0_MP 0x00000002u
#define CR0_EM 0x00000004u
#define CR0_TS 0x00000008u
#define CR0_ET 0x00000010u
#define CR0_NE 0x00000020u
#define CR0_WP 0x00010000u
#define CR0_AM 0x00040000u
#define CR0_PG 0x80000000u
#define CR4_DE  0x00000008u
#define CR4_PSE 0x00000010u
#define CR4_PAE 0x00000020u
#define CR4_PGE 0x00000080u
#define CR4_OSXSAVE 0x00040000u

#define WALK_CACHE_ENTRIES 64     /* the monitor's own translations (walk_cache below) */

/* IA32_EFER (SDM vol. 4, 2.1): only NXE, which PAE paging's execute-disable bit needs. */
#define EFER_NXE     0x00000800u

/* DR6 (SDM vol. 3, 17.2.3): BS, the single-step condition; the bits that
 * always read as 1; DR7 bit 10 reads as 1 too. */
#define DR6_BS       0x00004000u
#define DR6_FIXED1   0xFFFF0FF0u
#define DR7_FIXED1   0x00000400u

/* Exception vectors (SDM vol. 3, 6.3.1). */
enum {
    VEC_DE = 0, VEC_DB = 1, VEC_NMI = 2, VEC_BP = 3, VEC_OF = 4, VEC_BR = 5, VEC_UD = 6,
    VEC_NM = 7, VEC_DF = 8, VEC_TS = 10, VEC_NP = 11, VEC_SS = 12, VEC_GP = 13, VEC_PF = 14,
    VEC_MF = 16, VEC_AC = 17, VEC_MC = 18, VEC_XM = 19,
};
#define NO_ERROR_CODE (-1)

/* A segment register: the visible selector and its descriptor cache. */
struct seg {
    uint16_t sel;
    uint32_t base, limit;   /* limit in bytes - 1, granularity applied */
    uint16_t attr;          /* descriptor bits 40-55: type, S, DPL, P, AVL, L, D/B, G */
};

/* The host's own segment selectors (x86-64 Linux GDT). */
#define HOST_CS32 0x23
#define HOST_DS   0x2b
#define HOST_CS64 0x33

struct vcpu {
    struct r3_shared *sh;           /* registers, EIP, EFLAGS image, virtual IF */
    uint32_t cr0, cr2, cr3, cr4;
    uint64_t efer;
    /* PAE paging: the four PDPTE registers CR3's table was loaded into (SDM vol. 3,
     * 4.4.1), and the bits of a PDE or PTE that are reserved: MAXPHYADDR to 62
     * (4.4.2, the guest's CPUID 0x80000008). */
    uint64_t pdpte[4];
    uint64_t pae_reserved;
    uint32_t dr[8];
    struct bp_task bp;              /* --isolation=none: DR0-DR3 as this thread's host breakpoints */
    struct { uint32_t base; uint16_t limit; } gdtr, idtr;
    struct seg sreg[6];             /* es cs ss ds fs gs */
    uint16_t host_sel[6];           /* the host selector each was last loaded with */
    struct seg ldtr, tr;
    unsigned cpl;                   /* virtual CPL: 0 kernel, 3 user */
    uint32_t user_limit;            /* at CPL 3: user DS/ES/SS end below this (0: flat); mmu.c */
    uint32_t pf_retry;              /* a guest #PF's address, to map at the iret back (if valid) */
    bool pf_retry_valid;
    /* An instruction of guest code at CPL 0 that took #AC (EFLAGS.AC set, an
     * unaligned access) runs again with AC clear and a single step of the
     * monitor's own; the guest's TF as it was (signals.c). */
    bool ac_step;
    bool ac_step_tf;
    bool user_unlimited;            /* a user access passed the limit: flat until a CR3 write */
    enum isolation isolation;
    struct aspace *as;              /* the stub user code of this CR3 last ran in; NULL after a CR3 write */
    uint64_t tlb_epoch;             /* counts CR3 writes and flushes: a stub's TLB older than this is checked */
    /* The translations of the monitor's own reads and writes of guest memory, as a CPU's TLB
     * keeps them (monitor/mmu/paging.c); an entry of an older walk_epoch is gone. */
    struct walk_cache {
        uint64_t epoch, frame;      /* frame: the page's physical address */
        uint32_t page, rights;      /* page: linear >> 12; rights: PG_US, PG_RW, PG_D as walked */
    } walk_cache[WALK_CACHE_ENTRIES];
    uint64_t walk_epoch;            /* counts CR3 writes, flushes and invlpg; from 1 */
    uint32_t iopl;                  /* virtual EFLAGS.IOPL bits */
    uint32_t sysenter_cs, sysenter_esp, sysenter_eip;
    uint64_t msr_misc[4];           /* PAT, MISC_ENABLE, APIC_BASE, TSC_AUX */
    uint64_t xcr0;                  /* as the guest's xsetbv set it; the host's stays (cpu_model.c) */
    /* While monitor code runs, the guest's x87 and SSE state is in an XSAVE image whose first
     * 512 bytes are FXSAVE's (SDM vol. 1, 10.5.1), for gdb: the gate's (run.c; the guest's
     * first instruction starts from it too), or while a signal or a stub's event is handled,
     * the signal frame's or the one the event filled. */
    uint8_t *fpu_image;

    /* The instruction being emulated: where a fault puts the guest back. */
    uint32_t fault_eip, fault_esp, fault_regs[8];
    jmp_buf *fault_jmp;             /* where vcpu_raise unwinds to */
    int pending_vector, pending_error;
    int delivering;                 /* nesting of exception delivery, for #DF and triple fault */

    struct guestmem *gm;
    struct platform *plat;
    struct irq_line intr;           /* the INTR pin: its level is the PIC's pic_intr_pending */
    bool fast_syscalls;             /* --isolation=none without gdb: fast_syscall.h */
    FILE *trace;                    /* --trace log, or NULL */
    bool exit_requested;
    int exit_status;
    uint64_t host_sysenter_pad;     /* RIP the host returns a compat-mode sysenter to; 0: #UD */
    bool booting_linux;             /* Linux boot protocol: hlt with IF clear is its power-off */
    bool report_time;               /* --time */
    uint64_t start_ns, first_user_ns;   /* monitor start; first entry to CPL 3 */
};

extern struct vcpu the_vcpu;

/* Log one emulated event when --trace is on. */
#define TRACE(v, ...) do { if ((v)->trace) { fprintf((v)->trace, __VA_ARGS__); fputc('\n', (v)->trace); } } while (0)

/* ---- trap.c: the one way faults are raised, and interrupt delivery ---- */

/* Raise exception (vector) with (error) (NO_ERROR_CODE for none) for the
 * instruction being emulated: the guest state goes back to that instruction
 * (fault_eip, fault_esp, fault_regs) and the exception is delivered through
 * the guest IDT. Does not return: unwinds to the current monitor entry. */
_Noreturn void vcpu_raise(struct vcpu *v, unsigned vector, int error);

/* Raise trap-class exception (vector) after the instruction just emulated:
 * the guest state stays as the instruction left it, EIP at the next one
 * (SDM vol. 3, 6.5). Does not return. */
_Noreturn void vcpu_raise_trap(struct vcpu *v, unsigned vector);

/* The single-step trap after an instruction that began with TF set: DR6.BS
 * set, then #DB as a trap (SDM vol. 3, 17.3.1.4). Does not return. */
_Noreturn void vcpu_single_step(struct vcpu *v);

/* Deliver the exception vcpu_raise recorded, from the top of a monitor entry
 * (after the longjmp), escalating to #DF or a triple fault as the CPU does. */
void vcpu_take_exception(struct vcpu *v);

/* Deliver an external interrupt (vector) now, through the guest IDT, with
 * the current shared-page state as the interrupted context. */
void vcpu_interrupt(struct vcpu *v, unsigned vector);

/* Deliver a software interrupt `int n` (or int3/into): the pushed EIP is
 * the current sh->eip, the gate's DPL is checked against CPL (SDM vol. 3, 6.12.1.1). */
void vcpu_soft_int(struct vcpu *v, unsigned vector);

/* iret (SDM vol. 2, IRET): pop EIP, CS, EFLAGS and, on a return to an outer
 * level, ESP and SS, from the current stack. */
void vcpu_iret(struct vcpu *v);

/* Report a triple fault with a register dump and end the run (status 3). */
_Noreturn void vcpu_triple_fault(struct vcpu *v, const char *why);

/* Print the guest registers to (f). */
void vcpu_dump(const struct vcpu *v, FILE *f);

/* Whether the guest can take an interrupt now, and the hook that delivers
 * one from the PIC when it can (otherwise marks it pending for sti/popf). */
void vcpu_check_interrupts(struct vcpu *v);

#endif

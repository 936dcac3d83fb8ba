/* The virtual CPU: every piece of IA-32 system state the monitor emulates, in one struct.
 *
 * The general registers, EIP, the arithmetic flags and the virtual IF live in
 * the shared page (monitor/shared.h) while monitor code runs: the gate saved
 * them there, and signal handlers copy the interrupted context there first.
 */
#ifndef RING3_VCPU_H
#define RING3_VCPU_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "operand.h"
#include "shared.h"

struct guestmem;
struct platform;
struct aspace;
struct tlb;

/* --isolation: where guest user code runs (monitor/aspace.c). */
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
#define CR4_PSE 0x00000010u
#define CR4_PGE 0x00000080u

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
    uint32_t dr[8];
    struct { uint32_t base; uint16_t limit; } gdtr, idtr;
    struct seg sreg[6];             /* es cs ss ds fs gs */
    uint16_t host_sel[6];           /* the host selector each was last loaded with */
    struct seg ldtr, tr;
    unsigned cpl;                   /* virtual CPL: 0 kernel, 3 user */
    uint32_t user_limit;            /* at CPL 3: user DS/ES/SS end below this (0: flat); mmu.c */
    uint32_t pf_retry;              /* a guest #PF's address, to map at the iret back (if valid) */
    bool pf_retry_valid;
    bool user_unlimited;            /* a user access passed the limit: flat until a CR3 write */
    enum isolation isolation;
    struct aspace *as;              /* the stub user code of this CR3 last ran in; NULL after a CR3 write */
    uint64_t tlb_epoch;             /* counts CR3 writes and flushes: a stub's TLB older than this is checked */
    uint32_t iopl;                  /* virtual EFLAGS.IOPL bits */
    uint32_t sysenter_cs, sysenter_esp, sysenter_eip;
    uint64_t msr_misc[4];           /* PAT, MISC_ENABLE, APIC_BASE, TSC_AUX */

    /* The instruction being emulated: where a fault puts the guest back. */
    uint32_t fault_eip, fault_esp, fault_regs[8];
    jmp_buf *fault_jmp;             /* where vcpu_raise unwinds to */
    int pending_vector, pending_error;
    int delivering;                 /* nesting of exception delivery, for #DF and triple fault */

    struct guestmem *gm;
    struct platform *plat;
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

/* ---- segment.c: descriptors and segment registers ---- */

/* Load segment register (sreg) with (selector) following the protected-mode
 * checks of MOV to a segment register (SDM vol. 2, MOV; vol. 3, 5.10):
 * raises #GP, #SS or #NP as the hardware would. */
void seg_load(struct vcpu *v, unsigned sreg, uint16_t selector);

/* seg_load with the checks made for privilege level (cpl), as a far return
 * or an interrupt does for the stack of the level it moves to. */
void seg_load_at_cpl(struct vcpu *v, unsigned sreg, uint16_t selector, unsigned cpl);

/* On a return to outer level (cpl), data segment registers that level may
 * not use become null (SDM vol. 3, 5.8.6; vol. 2, IRET and RET). */
void seg_null_inaccessible(struct vcpu *v, unsigned cpl);

/* Set segment register (sreg) without checks, e.g. from a loader or iret. */
void seg_set(struct vcpu *v, unsigned sreg, uint16_t selector, const struct seg *cache);

/* Read the 8-byte descriptor for (selector) from the GDT or LDT into
 * (cache); returns false when the selector is outside the table limit. */
bool seg_read_descriptor(struct vcpu *v, uint16_t selector, uint64_t *raw);
void seg_decode(uint64_t raw, uint16_t selector, struct seg *out);

/* Linear address of (offset) in segment (sreg) for an access of (len)
 * bytes, checking the limit: #GP(0) or #SS(0) outside it. */
uint32_t seg_linear(struct vcpu *v, unsigned sreg, uint32_t offset, uint32_t len);

/* Copy the guest's TLS descriptors (GDT entries 12-14) into the host's, so
 * that guest user code can load their selectors itself. On every way out
 * to CPL 3: the guest kernel writes them with plain stores (load_TLS). */
void seg_sync_tls(struct vcpu *v);

/* The set_thread_area descriptor of guest TLS entry (i) (0-2; GDT entry
 * 12 + i) as it is now, an empty one when set_thread_area would not take it:
 * what a stub's host GDT needs (monitor/aspace.c). */
struct user_desc;
void seg_tls_descriptor(struct vcpu *v, unsigned i, struct user_desc *d);

/* After an entry from CPL 3: the real selectors (real, sreg order) and
 * FS/GS bases of the interrupted guest code. A data segment register whose
 * selector differs from what the monitor loaded was loaded by the guest
 * process itself; take it into the virtual state. */
void seg_sync_user(struct vcpu *v, const uint16_t real[6], uint64_t fsbase, uint64_t gsbase);

/* Point the host LDT's user data entry at [0, top): the segment user mode's
 * flat DS and ES run on while supervisor pages at and above (top) stay
 * mapped. Returns false when the host refuses (the caller unmaps instead). */
bool seg_set_user_limit(struct vcpu *v, uint32_t top);

/* After a change of CPL or of v->user_limit: put flat DS, ES and SS on the
 * limited user entry at CPL 3 with a limit, on the host's flat segment otherwise. */
void seg_user_data(struct vcpu *v);

/* The fast segment-register paths of the runtime stubs (SH_SEGC, SH_VSEL):
 * publish the virtual selectors and CPL before going back to the guest;
 * adopt the loads the stubs made, first thing on every monitor entry; forget
 * every remembered load when the GDT moves (lgdt). */
void seg_publish(struct vcpu *v);
void seg_take_fast_loads(struct vcpu *v);
void seg_forget_fast_loads(struct vcpu *v);

/* Reset all segment registers to flat 4 GiB segments with the given
 * selectors (the Multiboot entry state). */
void seg_reset_flat(struct vcpu *v, uint16_t cs, uint16_t ds);

/* ---- mmu.c: guest virtual memory ---- */

enum mmu_access { MMU_READ = 0, MMU_WRITE = 1, MMU_FETCH = 2 };

/* Copy between the monitor and guest linear memory, walking the guest page
 * tables with the permission of (supervisor ? CPL 0 : the current CPL);
 * raises #PF (with CR2) like the CPU. Accessed and dirty bits are set. */
void mmu_read(struct vcpu *v, uint32_t linear, void *buf, uint32_t len, bool supervisor);
void mmu_write(struct vcpu *v, uint32_t linear, const void *buf, uint32_t len, bool supervisor);
uint32_t mmu_read32(struct vcpu *v, uint32_t linear, bool supervisor);
uint16_t mmu_read16(struct vcpu *v, uint32_t linear);
void mmu_write32(struct vcpu *v, uint32_t linear, uint32_t value, bool supervisor);
void mmu_write16(struct vcpu *v, uint32_t linear, uint16_t value);

/* Map the page holding (linear) into the host after a host fault of kind
 * (access) by guest code at the current CPL. Returns true when mapped; false
 * when the guest itself would fault (the caller raises #PF with
 * mmu_fault_error()). */
bool mmu_fill(struct vcpu *v, uint32_t linear, enum mmu_access access);
int mmu_fault_error(struct vcpu *v, uint32_t linear, enum mmu_access access, bool supervisor);

/* Whether the current CPL may read (linear) now; changes no flag. */
bool mmu_readable(struct vcpu *v, uint32_t linear);

/* Map the page holding (linear) for a read at the current CPL if the guest's
 * page tables now allow it, without a host fault first; nothing if not. For
 * the access a guest page-fault handler is about to retry. Sets only the
 * accessed flag, as a CPU caching a translation ahead of use may (SDM
 * vol. 3, 4.10.2.3); a page not yet dirty is mapped read-only, as ever. */
void mmu_prefill(struct vcpu *v, uint32_t linear);

/* Drop host mappings: one page (invlpg), all but global ones (a CR3 write),
 * or every one (paging mode or CPL changes). */
void mmu_flush_page(struct vcpu *v, uint32_t linear);
void mmu_flush(struct vcpu *v, bool keep_global);

/* After a CR3 write: drop the host mappings that are not global and that
 * the new page tables would not fill the same way (the TLB flush of SDM
 * vol. 3, 4.10.4.1, without refaulting what would come back unchanged). */
void mmu_new_cr3(struct vcpu *v);

/* Change the virtual CPL. Going out to CPL 3 either limits user DS and ES
 * below the host mappings that grant more than user mode may have
 * (supervisor pages, writes allowed only by CR0.WP = 0) or drops those
 * mappings, and copies the guest's TLS descriptors into the host GDT
 * (seg_sync_tls); user-accessible mappings serve both levels. */
void mmu_set_cpl(struct vcpu *v, unsigned cpl);
void mmu_init(struct vcpu *v);

/* A stub's TLB (monitor/aspace.c): new and empty, checked against the page
 * tables now in force (what a CR3 write would have dropped is dropped), or
 * forgotten after its stub was emptied or replaced. Address spaces live as
 * long as the run, so their TLBs are never freed. */
struct tlb *mmu_tlb_new(struct aspace *as);
void mmu_tlb_validate(struct vcpu *v, struct tlb *t);
void mmu_tlb_forget(struct tlb *t);

/* A #GP or #SS at CPL 3 with error code 0: if user DS/ES/SS ran limited, drop the
 * supervisor mappings, make them flat and return true (retry the access);
 * false when the #GP is the guest's own. */
bool mmu_user_unlimit(struct vcpu *v);

/* ---- cpu_model.c: cpuid and MSRs ---- */
void cpu_cpuid(struct vcpu *v, uint32_t leaf, uint32_t sub, uint32_t out[4]);
bool cpu_rdmsr(struct vcpu *v, uint32_t msr, uint64_t *value);
bool cpu_wrmsr(struct vcpu *v, uint32_t msr, uint64_t value);
void cpu_reset_msrs(struct vcpu *v);
/* Make guest processes' cpuid trap (#GP) where the host allows it; returns whether it does. */
bool cpu_cpuid_faulting_on(void);
/* The host's TSC frequency in kHz, measured over 10 ms on the first call. */
uint32_t cpu_tsc_khz(void);

/* ---- emulate.c: the ABI entries ---- */

/* The gate handler (runtime_install): emulates sh->entry at the site the
 * guest called from, then checks for interrupts before returning. */
void emulate_gate(void);

/* Emulate entry (entry) with operands (desc, aux): sh->eip is already past
 * the instruction, fault_eip at its first byte. Used by the gate and, for
 * insert mode, by insert_emulate after decoding. */
void emulate_entry(struct vcpu *v, unsigned entry, uint32_t desc, uint32_t aux);

/* The ABI name of (entry), e.g. "SYSENTER". */
const char *emulate_entry_name(unsigned entry);

/* ---- decode.c ---- */

/* If the instruction at sh->eip is cli, sti, in, out, ins or outs, run it
 * through its entry (which checks IOPL) and return true. */
bool decode_io_instruction(struct vcpu *v);

/* ---- insert.c: insert-mode kernels ---- */

/* A trap of guest code at sh->eip: (undefined_opcode) for #UD, else #GP. If it is the
 * insert-mode marker followed by a sensitive instruction (at any CPL), or a sensitive
 * instruction that faulted at virtual CPL 0, emulate that instruction through its entry,
 * leave EIP after it and return true; faults it raises are reported at sh->eip. Otherwise
 * return false and change nothing. */
bool insert_emulate(struct vcpu *v, bool undefined_opcode);

/* ---- events.c: time, input and waiting ---- */
uint64_t events_now(void);
void events_poll(struct vcpu *v);          /* advance the devices to now; never blocks */
void events_input(struct vcpu *v);         /* move waiting host input into the UART */
void events_wait(struct vcpu *v);          /* hlt: sleep until an interrupt can be taken */
void events_arm(struct vcpu *v);           /* arm the host timer for the next device deadline */
void events_arm_soon(struct vcpu *v);      /* arm it for a moment from now */
void events_alarm(void);                   /* the host timer fired (signal context) */
int events_init(struct vcpu *v);

/* ---- signals.c ---- */
int signals_init(struct vcpu *v);

/* ---- host_probe.c: what the host CPU and kernel do that differs by vendor ---- */

/* Run one compatibility-mode sysenter in a child process under Syscall User
 * Dispatch, before guest memory takes the low 4 GiB. Returns the RIP of the
 * SIGSYS the host kernel raised (its 32-bit vDSO landing pad, on Intel), or
 * 0 when sysenter raised #UD (AMD) or the probe could not tell in time; 0 is
 * the safe answer. Costs one fork; never fails the run. */
uint64_t host_probe_sysenter(void);

/* ---- console.c: the host terminal ---- */
void console_raw(void);        /* raw mode on stdin if it is a terminal */
void console_restore(void);    /* restore it; safe to call from any exit path, twice */

/* End the run: restore the terminal, flush the serial output, exit. */
_Noreturn void monitor_exit(struct vcpu *v, int status);

#endif

/* Host signals: guest faults become guest exceptions, the timer becomes interrupts.
 *
 * Every handler runs on its own alternate stack (sized from AT_MINSIGSTKSZ,
 * since this CPU's signal frames are large) and enters through
 * r3_signal_entry (monitor/cpu/runtime.S), which reinstates the monitor's FS
 * base before any C runs.
 */
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1
#endif
#define SA_RESTORER_FLAG 0x04000000

#include "signals.h"

#include "lib/fail.h"
#include "monitor/cpu/cpu_model.h"
#include "monitor/cpu/emulate.h"
#include "monitor/cpu/insert.h"
#include "monitor/cpu/memop.h"
#include "monitor/cpu/runtime.h"
#include "monitor/cpu/segment.h"
#include "monitor/cpu/vcpu.h"
#include "monitor/gdb/gdbstub.h"
#include "monitor/mmu/aspace.h"
#include "x86/xstate.h"
#include "monitor/mmu/mmu.h"

#include "console.h"
#include "events.h"
#include "host_probe.h"
#include "run.h"
#include "stats.h"

#define TRAP_DE 0
#define TRAP_DB 1
#define TRAP_BP 3
#define TRAP_OF 4
#define TRAP_NP 11
#define TRAP_SS 12
#define TRAP_GP 13
#define TRAP_PF 14
#define TRAP_MF 16
#define TRAP_AC 17
#define TRAP_XM 19
#define PF_ERR_WRITE 0x2
#define PF_ERR_FETCH 0x10

extern void r3_signal_entry(int, siginfo_t *, void *);

/* r3_signal_entry (runtime.S, UC_EFLAGS) reads the frame's EFLAGS here. */
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs) + REG_EFL * sizeof(greg_t) == 40 + 8 * 17,
               "UC_EFLAGS in monitor/cpu/runtime.S");

/* A fault of the monitor's own, in a handler or not: the handler leaves the synchronous fault
 * signals open (signals_init), so that one in monitor code the handler runs comes here too. A
 * fault while this reports one (the state it dumps may be what is broken) ends it at once. */
static _Noreturn void internal_error(struct vcpu *v, int sig, const ucontext_t *uc, const siginfo_t *si)
{
    static volatile sig_atomic_t reporting;
    if (reporting) {
        static const char again[] = "ring3: internal error: another fault while reporting one\n";
        if (write(STDERR_FILENO, again, sizeof again - 1) < 0) {
            /* nothing more to say */
        }
        _exit(EXIT_INTERNAL);
    }
    reporting = 1;
    fflush(stdout);
    console_restore();
    fprintf(stderr, "ring3: internal error: signal %d at %016llx (address %p) in the monitor; guest state:\n",
            sig, (unsigned long long)uc->uc_mcontext.gregs[REG_RIP], si->si_addr);
    vcpu_dump(v, stderr);
    monitor_exit(v, EXIT_INTERNAL);
}

static void context_to_shared(struct vcpu *v, const ucontext_t *uc)
{
    static const int order[8] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI};
    for (unsigned i = 0; i < 8; i++)
        v->sh->regs[i] = (uint32_t)uc->uc_mcontext.gregs[order[i]];
    v->sh->eip = (uint32_t)uc->uc_mcontext.gregs[REG_RIP];
    v->sh->eflags = (uint32_t)uc->uc_mcontext.gregs[REG_EFL];
}

static void shared_to_context(struct vcpu *v, ucontext_t *uc)
{
    static const int order[8] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI};
    for (unsigned i = 0; i < 8; i++)
        uc->uc_mcontext.gregs[order[i]] = v->sh->regs[i];
    uc->uc_mcontext.gregs[REG_RIP] = v->sh->eip;
    uc->uc_mcontext.gregs[REG_EFL] = (v->sh->eflags & FL_USER) | FL_IF | 2;
    /* CS, GS, FS and SS share one field: cs | gs << 16 | fs << 32 | ss << 48. */
    uint64_t csgsfs = (v->sh->sel[SREG_CS] & 0xFFFF) | (uint64_t)(v->sh->sel[SREG_GS] & 0xFFFF) << 16 |
                      (uint64_t)(v->sh->sel[SREG_FS] & 0xFFFF) << 32 |
                      (uint64_t)(v->sh->sel[SREG_SS] & 0xFFFF) << 48;
    uc->uc_mcontext.gregs[REG_CSGSFS] = (greg_t)csgsfs;
    /* DS and ES are not in the signal frame: load them now; 64-bit code does not use them. */
    __asm__ volatile("mov %0, %%ds; mov %1, %%es" : : "r"(v->sh->sel[SREG_DS]), "r"(v->sh->sel[SREG_ES]));
}

/* Guest user code may have loaded DS, ES, FS or GS itself. The host's signal
 * delivery leaves all four selectors and the GS base as the guest had them;
 * r3_signal_entry handed over the FS base. */
static void sync_user_segments(struct vcpu *v, uint64_t fsbase, uint16_t cs)
{
    uint16_t real[6] = {0};
    real[SREG_CS] = cs;
    uint64_t gsbase;
    __asm__ volatile("mov %%es, %0" : "=r"(real[SREG_ES]));
    __asm__ volatile("mov %%ds, %0" : "=r"(real[SREG_DS]));
    __asm__ volatile("mov %%fs, %0" : "=r"(real[SREG_FS]));
    __asm__ volatile("mov %%gs, %0" : "=r"(real[SREG_GS]));
    __asm__ volatile("rdgsbase %0" : "=r"(gsbase));
    seg_sync_user(v, real, fsbase, gsbase);
}

/* The guest's sysenter, as the host left it: the stack pointer is the
 * guest's %ebp, %ebp holds the word at [%ebp], and the guest's %esp and EIP
 * are lost. Linux's vDSO enters with %esp == %ebp and the guest kernel's
 * entry takes the user stack from %ebp, so both get the stack pointer; the
 * other registers are the guest's. After -EFAULT the system call number in
 * %eax is lost too: the guest kernel sees -EFAULT as the number and fails
 * the call (-ENOSYS). */
static void host_took_sysenter(struct vcpu *v)
{
    uint32_t *r = v->sh->regs;

    r[REG_EBP] = v->fault_regs[REG_EBP] = r[REG_ESP];
    TRACE(v, "sysenter taken by the host: eax %08x, esp and ebp %08x", r[REG_EAX], r[REG_ESP]);
    emulate_entry(v, R3_E_SYSENTER, 0, 0);
}

/* What the signal being handled turned out to be, for --stats. */
static enum stat_signal signal_kind;

/* A #DB the host reported in guest code (SIGTRAP, vector 1). A single step
 * (TF; the host's si_code TRAP_TRACE) into the runtime code a site calls
 * emulates the site as one instruction; one that lands inside a site goes
 * on to the site's end; any other is the guest's own, with DR6.BS. icebp
 * (INT1) is #DB without it (SDM vol. 3, 17.3.1.4; 17.2.3). No guest TF
 * reaches runtime or monitor code beyond the first instruction of a stub.
 * A host breakpoint standing for the guest's DRn (breakpoints.h) hit by
 * guest user code is #DB with DR6.Bn set, after the access for a data
 * breakpoint and at the instruction for an instruction breakpoint, as the
 * host reports them (17.2.3, 17.3.1.1-2); hit by the runtime code of a
 * rewritten site, it is not reported. */
static void debug_trap(struct vcpu *v, const struct host_fault *f)
{
    unsigned entry;
    bool inside;

    if (f->code == R3_TRAP_PERF) {
        if (bp_is_gdb(f->perf_data)) {
            gdb_watch_hit(v, f->perf_data);
            return;
        }
        if (v->cpl != 3 || v->sh->eip >= R3_RUNTIME_BASE)
            return;
        v->dr[6] |= 1u << (f->perf_data % BP_SLOTS);
        vcpu_raise_trap(v, VEC_DB);
    }
    if (f->code != TRAP_TRACE)
        vcpu_raise_trap(v, VEC_DB);
    if (v->sh->eip >= R3_RUNTIME_BASE) {
        if (emulate_stepped_site(v, true))
            return;
    } else if (emulate_site_entry_at(v, v->sh->eip, &entry, &inside) && inside) {
        return;                 /* the CPU goes on through the site, TF still set */
    }
    vcpu_single_step(v);
}

/* #AC is for CPL 3 only (SDM vol. 3, 6.15, "Interrupt 17"), but guest
 * kernel code runs at the host's CPL 3: an unaligned access there with the
 * guest's EFLAGS.AC set (a process's AC, which the kernel keeps until its
 * entry code clears it) faults where the CPU would not. It runs again with
 * AC clear and TF set, and the trap after it puts both back (ac_step_end). */
static void alignment_check(struct vcpu *v)
{
    if (v->cpl == 3)
        vcpu_raise(v, VEC_AC, 0);
    v->ac_step = true;
    v->ac_step_tf = v->sh->eflags & FL_TF;
    v->sh->eflags = (v->sh->eflags & ~FL_AC) | FL_TF;
}

/* The first event after alignment_check: AC and the guest's TF back as they
 * were. Returns true when the event is only the monitor's own single step,
 * after an instruction that did not begin with the guest's TF set. */
static bool ac_step_end(struct vcpu *v, const struct host_fault *f)
{
    bool own = f->sig == SIGTRAP && f->trapno == TRAP_DB && f->code == TRAP_TRACE;
    v->ac_step = false;
    v->sh->eflags = (v->sh->eflags & ~FL_TF) | FL_AC | (v->ac_step_tf ? FL_TF : 0);
    if (!own || v->ac_step_tf)
        return false;
    /* The instruction was a site's call: the site is one instruction. */
    if (v->sh->eip >= R3_RUNTIME_BASE)
        emulate_stepped_site(v, false);
    return true;
}

/* After an instruction emulated here that began with TF set (tf): the
 * single-step trap that follows it on the CPU. */
static void step_after(struct vcpu *v, bool tf)
{
    if (tf)
        vcpu_single_step(v);
}

/* A guest process's own sysenter at (eip), which reaches here as #UD (AMD:
 * refused in compatibility mode) or as a system call the stub's seccomp
 * filter or the dispatch stopped: the guest's fast system call all the same.
 * False when the instruction at (eip) is no sysenter. */
static bool sysenter_at(struct vcpu *v, uint32_t eip, bool tf)
{
    uint8_t insn[2];
    mmu_read(v, v->sreg[SREG_CS].base + eip, insn, 2, false);
    if (insn[0] != 0x0F || insn[1] != 0x34)
        return false;
    emulate_entry(v, R3_E_SYSENTER, 0, 0);
    step_after(v, tf);
    return true;
}

/* The exception a host fault in guest code stands for (SDM vol. 3, 6.3.1).
 * An instruction emulated in its place is followed by the single-step trap
 * when TF was set as it began. */
static void guest_fault(struct vcpu *v, const struct host_fault *f)
{
    int sig = f->sig;
    unsigned trapno = f->trapno, err = f->err;
    bool tf = v->sh->eflags & FL_TF;
    if (sig == SIGILL || (sig == SIGSEGV && trapno == TRAP_GP)) {
        signal_kind = STAT_INSERT;
        if (insert_emulate(v, sig == SIGILL)) {
            step_after(v, tf);
            return;
        }
    }
    switch (sig) {
    case SIGSEGV:
    case SIGBUS:
        if (trapno == TRAP_PF) {
            uint32_t addr = (uint32_t)f->addr;
            /* ring3's runtime area, which a stub does not map: the rewritten
             * cli run at CPL 3 is a cli there as well (decode_io_instruction). */
            if (addr >= R3_RUNTIME_BASE && v->cpl == 3 && decode_io_instruction(v)) {
                step_after(v, tf);
                return;
            }
            enum mmu_access a = err & PF_ERR_FETCH ? MMU_FETCH : err & PF_ERR_WRITE ? MMU_WRITE : MMU_READ;
            signal_kind = v->cpl == 3 ? STAT_FILL_USER : STAT_FILL_KERNEL;
            if (f->addr < (1ull << 32) && mmu_fill(v, addr, a))
                return;         /* the host TLB is filled: retry the instruction */
            signal_kind = STAT_GUEST_PF;
            v->cr2 = addr;
            v->pf_retry = addr;
            v->pf_retry_valid = true;
            vcpu_raise(v, VEC_PF, mmu_fault_error(v, addr, a, false));
        }
        if (trapno == TRAP_AC) {
            alignment_check(v);
            return;
        }
        /* An I/O instruction or cpuid (with CPUID faulting) first: emulated,
         * they need no retry, which would drop every supervisor mapping.
         * In-process, a process's SS ends where ring3's runtime begins (segment.c), so what
         * reaches past it through SS is #SS(0) here, which the guest's flat SS would not give:
         * the rewritten cli (`movb $0, %ss:R3_VIF_ADDR`), which is a cli, or an access to the
         * runtime's pages, which is the guest's #PF (below). */
        bool limit = err == 0 && (trapno == TRAP_GP || (trapno == TRAP_SS && v->cpl == 3));
        signal_kind = STAT_GP;
        if (limit && decode_io_instruction(v)) {
            step_after(v, tf);
            return;
        }
        signal_kind = STAT_LIMIT_RETRY;
        if ((trapno == TRAP_GP || trapno == TRAP_SS) && err == 0 && mmu_user_unlimit(v))
            return;             /* past the user segment limit: retry as paging alone says */
        signal_kind = STAT_GP;
        if (limit && v->cpl == 3 && v->isolation == ISOLATION_NONE)
            memop_runtime_access(v);    /* raises the guest's #PF where ring3's runtime is */
        /* A segment the guest gave its own base, limit or presence (its LDT's, mirrored by
         * monitor/cpu/ldt.c) faults as the CPU says: #NP, #SS or #GP with the selector. */
        if (trapno == TRAP_NP || trapno == TRAP_SS)
            vcpu_raise(v, trapno == TRAP_NP ? VEC_NP : VEC_SS, (int)(err & 0xFFFF));
        vcpu_raise(v, VEC_GP, trapno == TRAP_GP ? (int)(err & 0xFFFF) : 0);
    case SIGILL:
        signal_kind = STAT_ILLEGAL;
        if (sysenter_at(v, v->sh->eip, tf))
            return;
        vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
    case SIGFPE:
        signal_kind = STAT_MATH;
        vcpu_raise(v, trapno == TRAP_MF ? VEC_MF : trapno == TRAP_XM ? VEC_XM : VEC_DE, NO_ERROR_CODE);
    case SIGSYS: {
        signal_kind = STAT_SYSCALL;
        /* Syscall User Dispatch stopped a system call instruction of guest
         * code, which runs unrewritten in guest processes: int $n is the
         * guest's software interrupt, sysenter the guest's fast call. The
         * host reports the address after the instruction. */
        uint8_t insn[2];
        v->fault_eip = v->sh->eip - 2;
        mmu_read(v, v->sreg[SREG_CS].base + v->fault_eip, insn, 2, false);
        if (insn[0] == 0xCD) {
            vcpu_soft_int(v, insn[1]);      /* clears TF: no step follows (SDM vol. 3, 17.3.1.4) */
            return;
        }
        if (sysenter_at(v, v->fault_eip, tf))
            return;
        vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
    }
    case SIGTRAP:
        signal_kind = STAT_TRAP;
        /* int3 and into are traps: the host already points after them. A breakpoint's
         * SIGTRAP (TRAP_PERF) comes from the host's task work, with the thread's last trap
         * number in the frame, whatever it was. */
        if (f->code != R3_TRAP_PERF && trapno == TRAP_BP && gdb_breakpoint_hit(v))
            return;             /* gdb's int3: it had the guest stopped there */
        if (f->code != R3_TRAP_PERF && (trapno == TRAP_BP || trapno == TRAP_OF)) {
            vcpu_soft_int(v, trapno);
            return;
        }
        debug_trap(v, f);
        return;
    default:
        break;
    }
}

/* An emulated iret to user code in a signal handler (insert mode): user code
 * runs in its stub from here. The guest's vector registers are in the signal
 * frame (its XSAVE image, SDM vol. 1, 13.4), not in the gate's image: they go
 * to the stub and come back into the frame, whose software-reserved bytes
 * (464-511, the kernel's fpstate magic) stay as the host wrote them. */
static void run_user_from_signal(struct vcpu *v, ucontext_t *uc)
{
    static uint8_t image[STUB_FPU_MAX] __attribute__((aligned(64)));
    size_t size;
    uint8_t *frame = (uint8_t *)uc->uc_mcontext.fpregs;

    runtime_xsave(&size);
    if (size > sizeof image)
        size = sizeof image;
    memcpy(image, frame, size);
    aspace_run_user(v, image);
    xstate_copy(frame, image, size);    /* the frame keeps its software bytes (its magic) */
}

/* A host signal (f) in guest code, with the interrupted state in the shared
 * page: the exception it stands for, or the interrupt a timer makes due. */
static void guest_event(struct vcpu *v, const struct host_fault *f)
{
    signal_kind = f->sig == SIGALRM || f->sig == STUB_PREEMPT_SIG ? STAT_TIMER : STAT_OTHER;
    if (signal_kind != STAT_TIMER)
        TRACE(v, "host signal %d code %d trap %u error %u addr %llx at %04x:%llx", f->sig, f->code,
              f->trapno, f->err, (unsigned long long)f->addr, f->cs, (unsigned long long)f->rip);
    memcpy(v->fault_regs, v->sh->regs, sizeof v->fault_regs);
    v->fault_eip = v->sh->eip;
    if (v->cpl == 0 && (f->sig == SIGSEGV || f->sig == SIGBUS || f->sig == SIGFPE || f->sig == SIGILL))
        v->fault_eip = emulate_fault_eip(v, v->fault_eip);      /* a fault, not a trap: EIP at the instruction */
    v->fault_esp = v->sh->regs[REG_ESP];
    jmp_buf jb;
    v->fault_jmp = &jb;
    if (setjmp(jb)) {
        vcpu_take_exception(v);
    } else if (signal_kind == STAT_TIMER) {
        events_poll(v);
        events_tick(v);
    } else if (v->ac_step && ac_step_end(v, f)) {
        /* the access that took #AC at CPL 0 is done */
    } else if (host_probe_sysenter_returned(f->sysenter_pad, f->sig, f->rip, f->addr,
                                            v->sh->regs[REG_EAX])) {
        /* Intel: the host took a guest sysenter (host_probe.c); its pad may lie above 4 GiB */
        signal_kind = STAT_SYSCALL;
        bool tf = v->sh->eflags & FL_TF;
        host_took_sysenter(v);
        step_after(v, tf);
    } else if (f->sig == SIGKILL || f->rip >= (1ull << 32) || !seg_user_code(v, f->cs)) {
        /* Guest code got into 64-bit mode (a far jump to the host's selector
         * 0x33, which the guest's GDT makes a 32-bit code segment: on the
         * guest's CPU the code there would run as 32-bit code, which ring3
         * cannot give it); or it broke its stub (SIGKILL: aspace.c). Either
         * way the process gets a #GP. */
        vcpu_raise(v, VEC_GP, 0);
    } else {
        guest_fault(v, f);
    }
    vcpu_check_interrupts(v);
    events_arm(v);
    seg_publish(v);
}

uint64_t r3_signal_c(int sig, siginfo_t *si, void *ucv, uint64_t interrupted_fsbase)
{
    struct vcpu *v = &the_vcpu;
    ucontext_t *uc = ucv;
    uint64_t rip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    uint16_t cs = (uint16_t)uc->uc_mcontext.gregs[REG_CSGSFS];
    fast_take_sysenter(v);          /* before anything reads the CPL (fast_syscall.h) */
    /* Guest code: compatibility mode outside the runtime stubs, or a guest
     * process that far-jumped into 64-bit mode (selector 0x33) and runs
     * below the runtime area, where no monitor code is. */
    bool in_guest = (cs == HOST_CS32 && !runtime_in_stubs(rip)) ||
                    (cs == HOST_CS64 && rip < R3_RUNTIME_BASE && v->cpl == 3) ||
                    ((cs & 7) == 7 && v->cpl == 3);     /* a code segment of the guest's LDT */
    /* A single step in the runtime's 32-bit stubs: guest code called a site
     * with TF set (debug_trap); the stub has not run an instruction yet. */
    if (sig == SIGTRAP && cs == HOST_CS32 && runtime_in_stubs(rip))
        in_guest = true;

    /* A host breakpoint standing for a guest DRn (breakpoints.h, --isolation=none) hit by
     * other code than guest user code: the guest kernel's, the runtime's or the monitor's
     * access to user memory. The guest's #DB is for its user code only; a data access is
     * done, and the host set RF for an instruction breakpoint. */
    if (sig == SIGTRAP && si->si_code == R3_TRAP_PERF &&
        !(cs == HOST_CS32 && !runtime_in_stubs(rip) && v->cpl == 3) &&
        !(bp_is_gdb(bp_siginfo_data(si)) && in_guest))
        return interrupted_fsbase;      /* gdb's watchpoints are for guest code, the kernel's too */
    if (sig == SIGTERM || sig == SIGHUP || sig == SIGINT || sig == SIGQUIT) {
        /* Asked to stop from outside: leave the terminal as it was found. */
        fflush(stdout);
        console_restore();
        fprintf(stderr, "ring3: stopped by signal %d\n", sig);
        monitor_exit(v, 128 + sig);
    }
    if (sig == SIGALRM) {
        events_alarm();
        if (!in_guest) {
            /* In the monitor or a stub: mark what waits; the stubs and the gate look at it. */
            if (cs == HOST_CS32) {
                events_poll(v);
                v->sh->pending = 1;
            }
            /* The stub may have looked already, and the monitor may have armed
             * the timer before this expiry: look again shortly either way. */
            events_arm_soon(v);
            return interrupted_fsbase;
        }
    } else if (!in_guest) {
        unsigned trapno = (unsigned)uc->uc_mcontext.gregs[REG_TRAPNO];
        if (cs == HOST_CS32 && (sig == SIGSEGV || sig == SIGBUS) &&
            (trapno == TRAP_GP || trapno == TRAP_SS) && uc->uc_mcontext.gregs[REG_ERR] == 0 &&
            mmu_user_unlimit(v)) {
            /* A stub called at CPL 3 (a fast one, from rewritten user code)
             * reached the shared page past the user segment limit: go flat. */
            uint16_t ds = (uint16_t)v->sh->sel[SREG_DS], es = (uint16_t)v->sh->sel[SREG_ES];
            __asm__ volatile("mov %0, %%ds; mov %1, %%es" : : "r"(ds), "r"(es));
            uc->uc_mcontext.gregs[REG_CSGSFS] = (greg_t)(((uint64_t)uc->uc_mcontext.gregs[REG_CSGSFS] &
                                                          0x0000FFFFFFFFFFFFull) |
                                                         (uint64_t)(v->sh->sel[SREG_SS] & 0xFFFF) << 48);
            return interrupted_fsbase;
        }
        uint64_t r = rip, sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
        if (cs == HOST_CS32 && (sig == SIGSEGV || sig == SIGBUS) && runtime_sysenter_fault(&r, &sp)) {
            uc->uc_mcontext.gregs[REG_RIP] = (greg_t)r;
            uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
            return interrupted_fsbase;
        }
        if (cs == HOST_CS32 && sig == SIGSEGV && (uint64_t)(uintptr_t)si->si_addr < (1ull << 32)) {
            /* A stub touching a guest stack page not yet in the host TLB. */
            uint32_t addr = (uint32_t)(uintptr_t)si->si_addr;
            unsigned err = (unsigned)uc->uc_mcontext.gregs[REG_ERR];
            if (mmu_fill(v, addr, err & PF_ERR_WRITE ? MMU_WRITE : MMU_READ))
                return interrupted_fsbase;
        }
        internal_error(v, sig, uc, si);
    }

    /* Back to guest code by rt_sigreturn, which restores PKRU from the frame: never a value
     * guest code wrote (x86/xstate.h). A frame without the XSAVE part has no PKRU. */
    uint8_t *frame = (uint8_t *)uc->uc_mcontext.fpregs;
    uint32_t magic;
    memcpy(&magic, frame + XSTATE_MAGIC_OFF, sizeof magic);
    if (magic == XSTATE_MAGIC1)
        xstate_forget_pkru(frame);

    struct host_fault f = {
        .sig = sig,
        .code = si->si_code,
        .sysenter_pad = v->host_sysenter_pad,
        .cs = cs,
        .trapno = (unsigned)uc->uc_mcontext.gregs[REG_TRAPNO],
        .err = (unsigned)uc->uc_mcontext.gregs[REG_ERR],
        .addr = (uint64_t)(uintptr_t)si->si_addr,
        .rip = rip,
        .perf_data = sig == SIGTRAP && si->si_code == R3_TRAP_PERF ? bp_siginfo_data(si) : 0,
    };
    uint64_t t0 = stats_start();
    uint8_t *outer_fpu = v->fpu_image;
    v->fpu_image = frame;
    v->sh->fsbase = interrupted_fsbase;
    context_to_shared(v, uc);
    seg_take_fast_loads(v);
    if (v->cpl == 3)
        sync_user_segments(v, interrupted_fsbase, cs);
    guest_event(v, &f);
    if (v->cpl == 3 && v->isolation == ISOLATION_PROCESS)
        run_user_from_signal(v, uc);
    shared_to_context(v, uc);
    v->fpu_image = outer_fpu;
    stats_signal(signal_kind, t0);
    return v->sh->fsbase;
}

void signals_stub_event(struct vcpu *v, const struct host_fault *f, const struct stub_regs *r,
                        uint64_t fsbase, uint64_t gsbase)
{
    uint16_t real[6];
    uint64_t t0 = stats_start();

    memcpy(v->sh->regs, r->regs, sizeof v->sh->regs);
    v->sh->eip = r->eip;
    v->sh->eflags = r->eflags;
    v->sh->fsbase = fsbase;
    v->sh->gsbase = gsbase;
    for (unsigned i = 0; i < 6; i++)
        real[i] = (uint16_t)r->sel[i];
    seg_sync_user(v, real, fsbase, gsbase);
    guest_event(v, f);
    stats_signal(signal_kind, t0);
}

/* The kernel's struct sigaction: glibc's sigaction() always installs its own
 * restorer, which lies outside the range Syscall User Dispatch allows. */
struct kernel_sigaction {
    void (*handler)(int, siginfo_t *, void *);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};

int signals_init(struct vcpu *v)
{
    if (v->host_sysenter_pad)
        TRACE(v, "host: sysenter in compatibility mode returns at %016llx (vDSO at %016llx)",
              (unsigned long long)v->host_sysenter_pad, (unsigned long long)getauxval(AT_SYSINFO_EHDR));
    else
        TRACE(v, "host: sysenter in compatibility mode raises #UD");
    size_t size = getauxval(AT_MINSIGSTKSZ);
    size = (size < (size_t)SIGSTKSZ ? (size_t)SIGSTKSZ : size) * 4 + (256u << 10);
    /* Mapped, not malloc'd: it is in use for the whole run, but only the kernel holds its
     * address, which a leak checker (make test SANITIZE=1) cannot see. */
    stack_t ss = {.ss_sp = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                -1, 0), .ss_size = size};
    if (ss.ss_sp == MAP_FAILED || sigaltstack(&ss, NULL))
        return -1;
    /* Every signal waits while a handler runs, but for the faults: the kernel cannot hold a
     * synchronous SIGSEGV, SIGBUS, SIGILL or SIGFPE back. If one is blocked when monitor code in
     * the handler raises it, the host kills the process at once (force_sig_fault: the signal's
     * default action), with no word said. Left open, it nests on the alternate stack and reaches
     * internal_error like any other fault of the monitor. SA_NODEFER: else the signal being
     * handled would be blocked too, and most are a SIGSEGV. */
    uint64_t faults = 1ull << (SIGSEGV - 1) | 1ull << (SIGBUS - 1) |
                      1ull << (SIGILL - 1) | 1ull << (SIGFPE - 1);
    struct kernel_sigaction sa = {
        .handler = r3_signal_entry,
        .flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTORER_FLAG,
        .restorer = (void (*)(void))(uintptr_t)r3_sigreturn,
        .mask = ~faults,
    };
    int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGALRM, SIGSYS,
                  SIGTERM, SIGHUP, SIGINT, SIGQUIT};
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (syscall(SYS_rt_sigaction, sigs[i], &sa, NULL, sizeof sa.mask))
            return -1;
    cpu_cpuid_faulting_on();
    /* Every system call outside r3_sigreturn raises SIGSYS while the selector says block. */
    return prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, (unsigned long)r3_sigreturn,
                 (unsigned long)(r3_sigreturn_end - r3_sigreturn), &r3_sud_selector);
}

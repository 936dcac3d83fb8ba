/* The stub process (protocol.h): start-up, the seccomp filter, signal events, gate events and the commands. */
#include <stddef.h>
#include <stdint.h>
#include <asm/unistd.h>
#include <linux/audit.h>
#include <linux/errno.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/mman.h>
#include <linux/prctl.h>
#include <linux/seccomp.h>

#include "ring3/abi.h"
#include "protocol.h"
#include "asm.h"

#define ctl ((struct stub_ctl *)STUB_CTL_ADDR)
#define ALTSTACK_ADDR (STUB_CTL_ADDR + 0x100000)   /* above 4 GiB, next to the control area */

_Static_assert(offsetof(struct stub_ctl, state) == CTL_STATE, "asm.h");
_Static_assert(offsetof(struct stub_ctl, kind) == CTL_KIND, "asm.h");
_Static_assert(offsetof(struct stub_ctl, entry) == CTL_ENTRY, "asm.h");
_Static_assert(offsetof(struct stub_ctl, sig) == CTL_SIG, "asm.h");
_Static_assert(offsetof(struct stub_ctl, si_code) == CTL_SI_CODE, "asm.h");
_Static_assert(offsetof(struct stub_ctl, addr) == CTL_ADDR, "asm.h");
_Static_assert(offsetof(struct stub_ctl, trap_site) == CTL_TRAP_SITE, "asm.h");
_Static_assert(offsetof(struct stub_ctl, trap_handoff) == CTL_TRAP_HANDOFF, "asm.h");
_Static_assert(offsetof(struct stub_ctl, fsbase) == CTL_FSBASE, "asm.h");
_Static_assert(offsetof(struct stub_ctl, gsbase) == CTL_GSBASE, "asm.h");
_Static_assert(offsetof(struct stub_ctl, rip64) == CTL_RIP64, "asm.h");
_Static_assert(offsetof(struct stub_ctl, r) == CTL_R, "asm.h");
_Static_assert(offsetof(struct stub_ctl, r.eip) == CTL_R_EIP, "asm.h");
_Static_assert(offsetof(struct stub_ctl, r.eflags) == CTL_R_EFLAGS, "asm.h");
_Static_assert(offsetof(struct stub_ctl, r.sel) == CTL_R_SEL(0), "asm.h");
_Static_assert(offsetof(struct stub_ctl, nmap) == CTL_NMAP, "asm.h");
_Static_assert(offsetof(struct stub_ctl, map) == CTL_MAP, "asm.h");
_Static_assert(offsetof(struct stub_ctl, nunmap) == CTL_NUNMAP, "asm.h");
_Static_assert(offsetof(struct stub_ctl, unmap) == CTL_UNMAP, "asm.h");
_Static_assert(sizeof(struct stub_range) == RANGE_SIZE, "asm.h");
_Static_assert(offsetof(struct stub_range, offset) == RANGE_OFFSET, "asm.h");
_Static_assert(offsetof(struct stub_range, prot) == RANGE_PROT, "asm.h");

/* entry.S */
extern char rt_blob[], rt_blob_end[], rt_pushf[], rt_popf[], rt_gate32[], rt_gate64[];
extern char stub_sig_entry[], stub_restorer[], stub_map_syscall[], stub_exit_restart[], stub_exit_end[];
extern char stub_trap_site[], stub_cmd_entry[];
void stub_trap(void);
extern char __stub_start[], __stub_end[];
long stub_map(void);
int stub_set_thread_area(uint32_t desc);
__attribute__((noreturn)) void stub_exit64(void);

volatile uint8_t stub_preempt_pending;
/* Set when a TLS or LDT entry changed: the next way back to guest code loads every data
 * segment register (entry.S LOADSELS); until then one that holds its selector keeps it. */
volatile uint8_t stub_desc_changed = 1;

/* ---- raw system calls (x86-64: rax nr; rdi rsi rdx r10 r8 r9; rcx and r11 clobbered) ---- */
static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#define sys3(n, a, b, c) sys6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys5(n, a, b, c, d, e) sys6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

__attribute__((noreturn)) static void die(int code)
{
    for (;;)
        sys3(__NR_exit_group, code, 0, 0);
}

/* rep movsb, fast for the kilobytes of an XSAVE image where the CPU has ERMS (SDM vol. 1,
 * 7.3.9.3); a byte loop cost about 4 us a signal hand-off here, each way (perf, AMD EPYC). */
static void copy(void *d, const void *s, size_t n)
{
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

/* ---- the hand-off (protocol.h) ---- */
static void futex(volatile uint32_t *w, int op, uint32_t val)
{
    sys6(__NR_futex, (long)w, op, val, 0, 0, 0);   /* not FUTEX_PRIVATE: the word is shared with the monitor */
}

static void handoff(void)
{
    __atomic_store_n(&ctl->state, STUB_EVENT, __ATOMIC_SEQ_CST);
    if (ctl->trap_handoff)
        stub_trap();                /* a ptrace stop: the monitor sets STUB_RUN before it continues us */
    else if (ctl->monitor_sleeps)
        futex(&ctl->state, FUTEX_WAKE, 1);
}

/* The map site's call until the monitor answers it (protocol.h, "Parking"): a refusal, e.g. of
 * a call that stub_wait found before it saw the event, is no answer, whatever state says by
 * then. A monitor that found the stub parked, or that sent STUB_CMD_MAP, waits for the call. */
static void map_handoff(void)
{
    while (stub_map() != 0)
        ;
}

/* Waits for STUB_RUN (protocol.h, "Parking"): spins as long as the monitor says pays, then parks
 * at the map site, whose call the monitor answers at the resume, after it set STUB_RUN. Returns
 * 1 when parked: the call was then this resume's map hand-off, which run_commands does not make
 * again. */
static int wait_run(void)
{
    for (uint64_t end = __builtin_ia32_rdtsc() + ctl->spin_ticks; __builtin_ia32_rdtsc() < end;) {
        if (__atomic_load_n(&ctl->state, __ATOMIC_ACQUIRE) == STUB_RUN)
            return 0;
        __asm__ volatile("pause");
    }
    uint32_t was = STUB_EVENT;
    if (!__atomic_compare_exchange_n(&ctl->state, &was, STUB_PARKED, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return 0;                                   /* STUB_RUN came first */
    map_handoff();
    return 1;
}

/* ---- commands ---- */
static void set_tls(void)
{
    /* The i386 set_thread_area takes a 32-bit pointer, and the stub's only low page of its own
     * is STUB_SCRATCH, inaccessible (as on hardware) but while this writes it. */
    uint32_t n = ctl->ntls < 3 ? ctl->ntls : 3;
    if (sys3(__NR_mprotect, STUB_SCRATCH, 4096, PROT_READ | PROT_WRITE))
        return;
    for (uint32_t i = 0; i < n; i++) {
        copy((void *)(uintptr_t)STUB_SCRATCH, &ctl->tls[i], sizeof ctl->tls[i]);
        stub_set_thread_area(STUB_SCRATCH);
    }
    sys3(__NR_mprotect, STUB_SCRATCH, 4096, PROT_NONE);
}

/* The guest's LDT entries the monitor found changed, at their own indices here (monitor/cpu/ldt.h). */
static void set_ldt(void)
{
    uint32_t n = ctl->nldt < STUB_LDT_MAX ? ctl->nldt : STUB_LDT_MAX;
    for (uint32_t i = 0; i < n; i++)
        sys3(__NR_modify_ldt, 0x11, &STUB_CTL_LDT(ctl)[i], sizeof(struct stub_tls));
}

/* The unmaps of a map hand-off whose code a signal interrupted after the monitor's answer. */
static void unmaps(void)
{
    uint32_t n = ctl->nunmap < STUB_MAX_RANGES ? ctl->nunmap : STUB_MAX_RANGES;
    for (uint32_t i = 0; i < n; i++)
        sys3(__NR_munmap, ctl->unmap[i].linear, (uint64_t)ctl->unmap[i].pages << 12, 0);
}

/* The checked map hand-off (unmaps, then maps) unless (parked) made it, TLS, LDT, exit: in that
 * order. Returns the commands. Those after the map hand-off are read once it is done: a monitor
 * that held the stub there (host.h, stub_hold) writes them before its answer. */
static uint32_t run_commands(int parked)
{
    if (!parked && (ctl->cmd & STUB_CMD_MAP))
        map_handoff();
    uint32_t cmd = ctl->cmd;
    if (cmd & (STUB_CMD_TLS | STUB_CMD_LDT))
        stub_desc_changed = 1;
    if (cmd & STUB_CMD_TLS)
        set_tls();
    if (cmd & STUB_CMD_LDT)
        set_ldt();
    if (cmd & STUB_CMD_EXIT)
        die(0);
    return cmd;
}

/* XSAVE/XRSTOR of every user component of XCR0 (SDM vol. 1, 13.7, 13.8); standard format. */
static void xsave_ctl(void)
{
    uint8_t *hdr = STUB_CTL_FPU(ctl) + 512;
    for (int i = 8; i < 64; i++)            /* XCOMP_BV and the reserved header bytes: XSAVE leaves them */
        hdr[i] = 0;
    __asm__ volatile("xsave64 %0" : "+m"(*(uint8_t(*)[STUB_FPU_MAX])STUB_CTL_FPU(ctl)) : "a"(-1), "d"(-1));
}

static void xrstor_ctl(void)
{
    __asm__ volatile("xrstor64 %0" : : "m"(*(uint8_t(*)[STUB_FPU_MAX])STUB_CTL_FPU(ctl)), "a"(-1), "d"(-1));
}

static void clear_event(uint32_t kind)
{
    ctl->kind = kind;
    ctl->entry = 0;
    ctl->sig = ctl->si_code = 0;
    ctl->addr = ctl->trapno = ctl->err = 0;
}

/* ---- the gate (entry.S stub_gate64 saved the registers) ---- */
void stub_gate_c(void)
{
    uint32_t n = ctl->entry;
    clear_event(STUB_EV_GATE);
    ctl->entry = n;
    ctl->r.eip = n < R3_ENTRY_COUNT ? (uint32_t)(R3_CODE + (rt_gate32 - rt_blob) + 8 * n) : 0;
    ctl->rip64 = ctl->r.eip;
    xsave_ctl();            /* the vector registers are still the guest's: stub code never touches them */
    handoff();
    if (run_commands(wait_run()) & STUB_CMD_FPU)
        xrstor_ctl();
}

/* --syscalls=sysemu: the monitor stopped us in guest code (a system call, a preemption) and
 * pointed us here (entry.S stub_cmd_entry) to run commands; guest code follows from ctl->r. The
 * vector registers are the guest's: the monitor set them through ptrace. */
void stub_cmd_c(void)
{
    run_commands(0);
}

/* A preemption that arrived in stub code: reported as if it had hit the state about to resume. */
void stub_preempt_c(void)
{
    clear_event(STUB_EV_SIGNAL);
    ctl->sig = STUB_PREEMPT_SIG;
    ctl->fsbase = ctl->gsbase = 0;
    ctl->rip64 = ctl->r.eip;
    xsave_ctl();
    handoff();
    if (run_commands(wait_run()) & STUB_CMD_FPU)
        xrstor_ctl();
}

/* ---- signals: the x86-64 signal frame (arch/x86/include/uapi/asm/sigcontext.h, ucontext.h) ---- */
struct k_sigcontext {
    uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
    uint64_t rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags;
    uint16_t cs, gs, fs, ss;
    uint64_t err, trapno, oldmask, cr2;
    uint64_t fpstate;
    uint64_t reserved1[8];
};
struct k_ucontext {
    uint64_t uc_flags, uc_link;
    uint64_t ss_sp;
    int32_t ss_flags, pad;
    uint64_t ss_size;
    struct k_sigcontext mc;
    uint64_t uc_sigmask;
};
struct k_siginfo {
    int32_t signo, errno_, code, pad;
    uint64_t addr;                          /* _sigfault.si_addr, _sigsys._call_addr */
    uint64_t perf_data;                     /* _sigfault._perf._data (TRAP_PERF) */
};
#define UC_STRICT_RESTORE_SS 4
#define FP_XSTATE_MAGIC1 0x46505853u        /* struct _fpx_sw_bytes at byte 464 of the fpstate */
#define FPX_SW_OFF 464
#define FPX_SW_END 512

static int in_stub_code(const struct k_sigcontext *mc)
{
    if (mc->rip >= STUB_TEXT_ADDR && mc->rip < STUB_TEXT_END)
        return 1;
    /* the 64-bit landing code of the runtime blob, between the far jump and stub_gate64 */
    uint64_t lo = R3_CODE + (rt_gate64 - rt_blob), hi = R3_CODE + (rt_blob_end - rt_blob);
    return mc->cs == HOST_CS64 && mc->rip >= lo && mc->rip < hi;
}

/* The size of the frame's XSAVE image (from its software-reserved bytes), 512 if legacy only. */
static uint32_t frame_fpu_size(const uint8_t *fp)
{
    uint32_t magic, size;
    copy(&magic, fp + FPX_SW_OFF, 4);
    copy(&size, fp + FPX_SW_OFF + 16, 4);
    return magic == FP_XSTATE_MAGIC1 && size >= 576 && size <= STUB_FPU_MAX ? size : 512;
}

/* A guest cpuid that CPUID faulting turned into #GP(0), answered here when the monitor has given
 * that answer before (protocol.h, "CPUID"): the registers it writes, and the instruction passed.
 * The frame goes back as it came otherwise: DS, ES, FS, GS and EFLAGS are as the cpuid found them.
 * Returns 0 when the monitor is to answer. The two bytes read are those the CPU just decoded. */
static int cpuid_here(struct k_sigcontext *mc)
{
    const struct stub_cpuid_page *page = (const struct stub_cpuid_page *)STUB_CPUID_ADDR;
    if (mc->trapno != 13 || mc->err != 0 || mc->cs != HOST_CS32 || (mc->eflags & EFLAGS_TF) ||
        mc->rip > 0xFFFFFFFDu)
        return 0;
    const volatile uint8_t *ip = (const volatile uint8_t *)mc->rip;
    if (ip[0] != 0x0F || ip[1] != 0xA2)
        return 0;
    uint32_t leaf = (uint32_t)mc->rax, sub = (uint32_t)mc->rcx;
    uint32_t n = __atomic_load_n(&page->count, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n && i < STUB_CPUID_MAX; i++) {
        const struct stub_cpuid_answer *a = &page->a[i];
        if (a->leaf != leaf || (!a->any_sub && a->sub != sub))
            continue;
        mc->rax = a->out[0];
        mc->rbx = a->out[1];
        mc->rcx = a->out[2];
        mc->rdx = a->out[3];
        mc->rip += 2;
        ctl->cpuids_here++;
        return 1;
    }
    return 0;
}

/* Returns 1 to go back to guest code from ctl->r (entry.S then loads DS ES FS GS), 0 to just return. */
int stub_signal(int sig, struct k_siginfo *si, struct k_ucontext *uc)
{
    struct k_sigcontext *mc = &uc->mc;
    if (sig == 11 /* SIGSEGV */ && cpuid_here(mc))
        return 0;
    if (sig == STUB_PREEMPT_SIG && in_stub_code(mc)) {
        stub_preempt_pending = 1;
        if (mc->rip >= (uint64_t)stub_exit_restart && mc->rip < (uint64_t)stub_exit_end)
            mc->rip = (uint64_t)stub_exit_restart;
        return 0;
    }
    if (in_stub_code(mc)) {
        /* Guest code may enter the map site with TF set (SDM vol. 3, 18.3.1.4: the single-step
         * trap follows the instruction that began with it), so that the trap comes after the
         * call installed STUB_MEMFD: this handler goes back to guest code, the descriptor must
         * not. Nor may the pages the monitor answered to unmap: it took them for gone. */
        if (sys3(__NR_close, STUB_MEMFD, 0, 0) == 0)
            unmaps();
    }
    clear_event(STUB_EV_SIGNAL);
    ctl->sig = sig;
    ctl->si_code = si->code;
    ctl->addr = si->addr;
    ctl->perf_data = si->perf_data;
    ctl->trapno = mc->trapno;
    ctl->err = mc->err;
    struct stub_regs *r = &ctl->r;
    r->regs[0] = (uint32_t)mc->rax;
    r->regs[1] = (uint32_t)mc->rcx;
    r->regs[2] = (uint32_t)mc->rdx;
    r->regs[3] = (uint32_t)mc->rbx;
    r->regs[4] = (uint32_t)mc->rsp;
    r->regs[5] = (uint32_t)mc->rbp;
    r->regs[6] = (uint32_t)mc->rsi;
    r->regs[7] = (uint32_t)mc->rdi;
    r->eip = (uint32_t)mc->rip;
    r->eflags = (uint32_t)mc->eflags;
    uint32_t s;
    __asm__ volatile("movl %%es, %0" : "=r"(s)); r->sel[0] = s & 0xFFFF;
    r->sel[1] = mc->cs;
    r->sel[2] = mc->ss;
    __asm__ volatile("movl %%ds, %0" : "=r"(s)); r->sel[3] = s & 0xFFFF;
    __asm__ volatile("movl %%fs, %0" : "=r"(s)); r->sel[4] = s & 0xFFFF;
    __asm__ volatile("movl %%gs, %0" : "=r"(s)); r->sel[5] = s & 0xFFFF;
    uint64_t b;
    __asm__ volatile("rdfsbase %0" : "=r"(b)); ctl->fsbase = b;
    __asm__ volatile("rdgsbase %0" : "=r"(b)); ctl->gsbase = b;
    ctl->rip64 = mc->rip;
    /* The kernel saved the interrupted vector state in the frame (XSAVE standard format) and
     * gave the handler a fresh one; rt_sigreturn reloads it from the frame. */
    uint8_t *fp = (uint8_t *)mc->fpstate;
    uint32_t fsize = 0;
    if (fp) {
        fsize = frame_fpu_size(fp);
        uint32_t n = ctl->fpu_size < fsize ? ctl->fpu_size : fsize;
        copy(STUB_CTL_FPU(ctl), fp, n);
    }
    handoff();
    uint32_t cmd = run_commands(wait_run());

    mc->rax = r->regs[0];
    mc->rcx = r->regs[1];
    mc->rdx = r->regs[2];
    mc->rbx = r->regs[3];
    mc->rsp = r->regs[4];
    mc->rbp = r->regs[5];
    mc->rsi = r->regs[6];
    mc->rdi = r->regs[7];
    mc->r8 = mc->r9 = mc->r10 = mc->r11 = mc->r12 = mc->r13 = mc->r14 = mc->r15 = 0;
    mc->rip = r->eip;
    mc->cs = (r->sel[1] & 7) == 7 ? (uint16_t)r->sel[1] : HOST_CS32;   /* protocol.h */
    mc->ss = (uint16_t)r->sel[2];
    /* rt_sigreturn takes only FIX_EFLAGS from the frame and keeps IF set (signal.c) */
    mc->eflags = (r->eflags & EFLAGS_USER) | EFLAGS_IF | 2;
    uc->uc_flags |= UC_STRICT_RESTORE_SS;
    uc->uc_sigmask = 0;
    if ((cmd & STUB_CMD_FPU) && fp) {
        /* keep the kernel's software-reserved bytes and the FP_XSTATE_MAGIC2 after the image */
        uint32_t n = ctl->fpu_size < fsize ? ctl->fpu_size : fsize;
        copy(fp, STUB_CTL_FPU(ctl), n < FPX_SW_OFF ? n : FPX_SW_OFF);
        if (n > FPX_SW_END)
            copy(fp + FPX_SW_END, STUB_CTL_FPU(ctl) + FPX_SW_END, n - FPX_SW_END);
    }
    return 1;
}

/* ---- the seccomp filter (seccomp(2), classic BPF over struct seccomp_data) ---- */
enum { L_NEXT, L_X64, L_SEND, L_LDT, L_SCRATCH, L_RANGE, L_ALLOW, L_KILL, L_TRAP, L_NOTIF, L_N };
struct ins { uint16_t code; uint8_t jt, jf; uint32_t k; int label; };
#define LD(off)           { BPF_LD | BPF_W | BPF_ABS, 0, 0, (off), -1 }
#define JEQ(k, t, f)      { BPF_JMP | BPF_JEQ | BPF_K, t, f, (k), -1 }
#define JGE(k, t, f)      { BPF_JMP | BPF_JGE | BPF_K, t, f, (k), -1 }
#define JGT(k, t, f)      { BPF_JMP | BPF_JGT | BPF_K, t, f, (k), -1 }
#define JSET(k, t, f)     { BPF_JMP | BPF_JSET | BPF_K, t, f, (k), -1 }
#define AND(k)            { BPF_ALU | BPF_AND | BPF_K, 0, 0, (k), -1 }
#define RET(k, l)         { BPF_RET | BPF_K, 0, 0, (k), l }
#define LABEL(l)          { 0xFFFF, 0, 0, 0, l }
#define D_NR    offsetof(struct seccomp_data, nr)
#define D_ARCH  offsetof(struct seccomp_data, arch)
#define D_IP_LO offsetof(struct seccomp_data, instruction_pointer)
#define D_IP_HI (D_IP_LO + 4)
#define D_ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define D_ARG_HI(i) (D_ARG_LO(i) + 4)
#define TEXT_HI ((uint32_t)(STUB_TEXT_ADDR >> 32))
#define TEXT_LO_END ((uint32_t)STUB_TEXT_END)
_Static_assert((STUB_TEXT_ADDR >> 32) == (STUB_TEXT_END >> 32) && (uint32_t)STUB_TEXT_ADDR == 0,
               "the filter's test of the stub's text range");

static const struct ins filter_src[] = {
    LD(D_ARCH),
    JEQ(AUDIT_ARCH_X86_64, L_X64, L_NEXT),
    JEQ(AUDIT_ARCH_I386, L_NEXT, L_KILL),
    /* i386 (int $0x80, syscall/sysenter from compatibility mode): only set_thread_area from stub
     * text; everything else, i.e. guest system calls, raises SIGSYS. */
    LD(D_IP_HI), JEQ(TEXT_HI, L_NEXT, L_TRAP),
    LD(D_IP_LO), JGE(TEXT_LO_END, L_TRAP, L_NEXT),
    LD(D_NR), JEQ(243, L_ALLOW, L_TRAP),
    LABEL(L_X64),
    LD(D_IP_HI), JEQ(TEXT_HI, L_NEXT, L_TRAP),
    LD(D_IP_LO), JGE(TEXT_LO_END, L_TRAP, L_NEXT),
    LD(D_NR),
    JSET(__X32_SYSCALL_BIT, L_KILL, L_NEXT),
    JEQ(__NR_futex, L_ALLOW, L_NEXT),
    JEQ(__NR_rt_sigreturn, L_ALLOW, L_NEXT),
    JEQ(__NR_exit, L_ALLOW, L_NEXT),
    JEQ(__NR_exit_group, L_ALLOW, L_NEXT),
    JEQ(__NR_close, L_ALLOW, L_NEXT),
    JEQ(STUB_NR_MAP, L_NOTIF, L_NEXT),
    JEQ(__NR_sendmsg, L_SEND, L_NEXT),
    JEQ(__NR_modify_ldt, L_LDT, L_NEXT),
    JEQ(__NR_munmap, L_RANGE, L_NEXT),
    JEQ(__NR_mprotect, L_SCRATCH, L_NEXT),
    JEQ(__NR_mmap, L_NEXT, L_KILL),
    /* mmap only of guest memory's descriptor, shared and fixed, populated or not (stub_map): it
     * exists only in a map hand-off, so guest code that jumps here maps nothing, and no page the
     * guest kernel does not know of can stay for the next process of this page directory */
    LD(D_ARG_HI(3)), JEQ(0, L_NEXT, L_KILL),
    LD(D_ARG_LO(3)), AND(~(uint32_t)MAP_POPULATE), JEQ(MAP_SHARED | MAP_FIXED, L_NEXT, L_KILL),
    LD(D_ARG_HI(4)), JEQ(0, L_NEXT, L_KILL),
    LD(D_ARG_LO(4)), JEQ(STUB_MEMFD, L_RANGE, L_KILL),
    /* sendmsg only on STUB_FD_SOCK, which exists only until start-up closes it */
    LABEL(L_SEND),
    LD(D_ARG_HI(0)), JEQ(0, L_NEXT, L_KILL),
    LD(D_ARG_LO(0)), JEQ(STUB_FD_SOCK, L_ALLOW, L_KILL),
    /* modify_ldt only to write one entry: what guest code could make of it, a code or data
     * segment of DPL 3, it reaches through the host's own selectors anyway */
    LABEL(L_LDT),
    LD(D_ARG_LO(0)), JEQ(0x11, L_ALLOW, L_KILL),
    /* mprotect only of STUB_SCRATCH, to no rights or to read and write (set_tls) */
    LABEL(L_SCRATCH),
    LD(D_ARG_HI(0)), JEQ(0, L_NEXT, L_KILL),
    LD(D_ARG_LO(0)), JEQ(STUB_SCRATCH, L_NEXT, L_KILL),
    LD(D_ARG_HI(1)), JEQ(0, L_NEXT, L_KILL),
    LD(D_ARG_LO(1)), JEQ(4096, L_NEXT, L_KILL),
    LD(D_ARG_LO(2)), JSET(~(uint32_t)(PROT_READ | PROT_WRITE), L_KILL, L_ALLOW),
    /* addr and len below the runtime area (the stub's table and code, STUB_SCRATCH):
     * len <= R3_RUNTIME_BASE and addr <= R3_RUNTIME_BASE - len */
    LABEL(L_RANGE),
    LD(D_ARG_HI(0)), JEQ(0, L_NEXT, L_KILL),
    LD(D_ARG_HI(1)), JEQ(0, L_NEXT, L_KILL),
    LD(D_ARG_LO(1)), JGT(R3_RUNTIME_BASE, L_KILL, L_NEXT),
    { BPF_ALU | BPF_NEG, 0, 0, 0, -1 },
    { BPF_ALU | BPF_ADD | BPF_K, 0, 0, R3_RUNTIME_BASE, -1 },
    { BPF_MISC | BPF_TAX, 0, 0, 0, -1 },
    LD(D_ARG_LO(0)),
    { BPF_JMP | BPF_JGT | BPF_X, L_KILL, L_ALLOW, 0, -1 },
    RET(SECCOMP_RET_ALLOW, L_ALLOW),
    RET(SECCOMP_RET_KILL_PROCESS, L_KILL),
    RET(SECCOMP_RET_TRAP, L_TRAP),
    RET(SECCOMP_RET_USER_NOTIF, L_NOTIF),
};
#define FILTER_MAX (sizeof filter_src / sizeof filter_src[0])

/* Lays out filter_src: drops LABELs, turns label jumps into offsets. Returns the length. */
static unsigned build_filter(struct sock_filter *out)
{
    int at[L_N];
    unsigned n = 0;
    for (unsigned i = 0; i < FILTER_MAX; i++) {
        if (filter_src[i].label >= 0)
            at[filter_src[i].label] = (int)n;
        if (filter_src[i].code != 0xFFFF)
            n++;
    }
    n = 0;
    for (unsigned i = 0; i < FILTER_MAX; i++) {
        const struct ins *s = &filter_src[i];
        if (s->code == 0xFFFF)
            continue;
        struct sock_filter f = { s->code, 0, 0, s->k };
        if (BPF_CLASS(s->code) == BPF_JMP) {
            f.jt = s->jt == L_NEXT ? 0 : (uint8_t)(at[s->jt] - (int)n - 1);
            f.jf = s->jf == L_NEXT ? 0 : (uint8_t)(at[s->jf] - (int)n - 1);
        }
        out[n++] = f;
    }
    return n;
}

/* ---- start-up (trusted: no guest code has run) ---- */
struct k_sigaction { uint64_t handler, flags, restorer, mask; };
#define SA_SIGINFO 4
#define SA_ONSTACK 0x08000000
#define SA_RESTORER 0x04000000
#define SA_RESTART 0x10000000
#define AT_MINSIGSTKSZ 51
#define AT_SYSINFO_EHDR 33
#define ARCH_SET_CPUID 0x1012
#define SIGKILL 9

static int send_fd(int sock, int fd)
{
    struct { uint64_t len; int32_t level, type; int32_t fd, pad; } cm = { 20, 1 /* SOL_SOCKET */, 1 /* SCM_RIGHTS */, fd, 0 };
    char byte = 'R';
    struct { void *base; uint64_t len; } iov = { &byte, 1 };
    struct { void *name; uint32_t namelen, pad; void *iov; uint64_t iovlen; void *control; uint64_t controllen; int32_t flags, pad2; }
        msg = { 0, 0, 0, &iov, 1, &cm, 24, 0, 0 };
    return (int)sys3(__NR_sendmsg, sock, &msg, 0);
}

__attribute__((noreturn)) void stub_main(uint64_t *sp)
{
    sys3(__NR_setsid, 0, 0, 0);
    sys5(__NR_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (sys6(__NR_mmap, STUB_CTL_ADDR, STUB_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, STUB_FD_CTL, 0)
        != (long)STUB_CTL_ADDR)
        die(2);
    sys3(__NR_close, STUB_FD_CTL, 0, 0);
    if (sys6(__NR_mmap, STUB_CPUID_ADDR, 4096, PROT_READ, MAP_SHARED | MAP_FIXED, STUB_FD_CPUID, 0)
        != (long)STUB_CPUID_ADDR)
        die(2);
    sys3(__NR_close, STUB_FD_CPUID, 0, 0);

    /* auxv after argv and envp (x86-64 psABI 3.4.1) */
    uint64_t *p = sp + 1 + sp[0] + 1;
    while (*p)
        p++;
    uint64_t minsig = 2048;
    for (p++; p[0]; p += 2) {
        if (p[0] == AT_MINSIGSTKSZ && p[1] > minsig)
            minsig = p[1];
        if (p[0] == AT_SYSINFO_EHDR)
            ctl->vdso = p[1];
    }
    uint64_t alt = 4 * minsig > 0x10000 ? 4 * minsig : 0x10000;
    alt = (alt + 0xFFF) & ~0xFFFull;
    if (sys6(__NR_mmap, ALTSTACK_ADDR, alt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
        != (long)ALTSTACK_ADDR)
        die(3);
    struct { uint64_t sp; int32_t flags, pad; uint64_t size; } ss = { ALTSTACK_ADDR, 0, 0, alt };
    if (sys3(__NR_sigaltstack, &ss, 0, 0))
        die(4);
    static const int sigs[] = { 11, 7, 4, 8, 5, 31, STUB_PREEMPT_SIG };   /* SEGV BUS ILL FPE TRAP SYS */
    /* The preemption alone with SA_RESTART: it can reach stub code that runs outside the handler
     * (commands after a gate event) while it waits in the map site's call. The call is then made
     * again, not failed (signal(7), "Interruption of system calls and library functions by
     * signal handlers"), and the monitor answers the new notification: a failed call would map
     * nothing that the monitor took for mapped. Not the others: they come from guest code,
     * whose SIGSYS would otherwise restart a guest system call numbered -ERESTARTSYS. */
    struct k_sigaction sa = { (uint64_t)stub_sig_entry, 0, (uint64_t)stub_restorer, ~0ull };
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        sa.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTORER | (sigs[i] == STUB_PREEMPT_SIG ? SA_RESTART : 0);
        if (sys5(__NR_rt_sigaction, sigs[i], &sa, 0, 8, 0))
            die(5);
    }

    /* The runtime area: the table read-only, the code read+exec, nothing at R3_SHARED, and
     * STUB_SCRATCH without rights (set_tls). */
    if (sys6(__NR_mmap, R3_TABLE, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
        != (long)R3_TABLE)
        die(6);
    uint32_t *table = (uint32_t *)(uintptr_t)R3_TABLE;
    for (unsigned i = 0; i < R3_ENTRY_COUNT; i++)
        table[i] = (uint32_t)(R3_CODE + (rt_gate32 - rt_blob) + 8 * i);
    table[R3_E_PUSHF] = (uint32_t)(R3_CODE + (rt_pushf - rt_blob));
    table[R3_E_POPF] = (uint32_t)(R3_CODE + (rt_popf - rt_blob));
    uint64_t code_len = ((uint64_t)(rt_blob_end - rt_blob) + 0xFFF) & ~0xFFFull;
    if (sys6(__NR_mmap, R3_CODE, code_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
        != (long)R3_CODE)
        die(6);
    copy((void *)(uintptr_t)R3_CODE, rt_blob, (size_t)(rt_blob_end - rt_blob));
    if (sys3(__NR_mprotect, R3_TABLE, 4096, PROT_READ) || sys3(__NR_mprotect, R3_CODE, code_len, PROT_READ | PROT_EXEC))
        die(6);
    if (R3_CODE + code_len > STUB_SCRATCH ||
        sys6(__NR_mmap, STUB_SCRATCH, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != (long)STUB_SCRATCH)
        die(6);

    /* XSAVE size of the features enabled in XCR0 (CPUID.(EAX=0DH,ECX=0):EBX) */
    uint32_t a = 0xD, b, c = 0, d;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    ctl->fpu_size = b < STUB_FPU_MAX ? b : STUB_FPU_MAX;
    /* CPUID faulting where the host has it (arch_prctl ARCH_SET_CPUID): a guest process's
     * cpuid raises #GP and gets the guest kernel's filtered view, as in-process. Where the
     * host has none, the call fails and cpuid shows the host's. */
    sys3(__NR_arch_prctl, ARCH_SET_CPUID, 0, 0);

    struct sock_filter prog[FILTER_MAX];
    struct sock_fprog fprog = { (unsigned short)build_filter(prog), prog };
    if (sys5(__NR_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        die(7);
    /* Once the monitor has read the notification of a call, the call waits for its answer
     * killably only (WAIT_KILLABLE_RECV, Linux 5.19). Else a preemption that wakes the stub
     * just as the monitor answers restarts the call and loses the answer, which the monitor
     * took as given (seccomp_do_user_notification): the stub then waits in a map call the
     * monitor thinks done (protocol.h, "Mapping"). Older kernels refuse the flag. */
    long listener = sys3(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
                         SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &fprog);
    if (listener == -EINVAL)
        listener = sys3(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog);
    if (listener < 0)
        die(8);
    if (send_fd(STUB_FD_SOCK, (int)listener) != 1)
        die(9);
    sys3(__NR_close, listener, 0, 0);
    sys3(__NR_close, STUB_FD_SOCK, 0, 0);

    ctl->map_site = (uint64_t)stub_map_syscall;
    ctl->trap_site = (uint64_t)stub_trap_site;
    ctl->cmd_entry = (uint64_t)stub_cmd_entry;
    clear_event(STUB_EV_READY);
    handoff();
    if (run_commands(wait_run()) & STUB_CMD_FPU)
        xrstor_ctl();
    stub_exit64();
}

/* SYSENTER and SYSEXIT without the vector registers saved (fast_syscall.h). Each function
 * below does what emulate_gate, emulate_site and transfer_sysenter or transfer_sysexit (with
 * mmu_set_cpl, seg_set, seg_user_data, seg_sync_tls, vcpu_check_interrupts and seg_publish)
 * do in the one case it accepts, in the same order (seg_take_fast_loads and seg_user_data
 * themselves, inline); it checks first, and changes nothing when it declines. Built with
 * general registers only and calling nothing (mk/monitor.mk). */
#include "fast_syscall.h"

#include "ring3/abi.h"

#include "monitor/host/stats.h"
#include "monitor/mmu/mmu.h"

#include "ldt.h"
#include "runtime.h"
#include "segment.h"

/* SDM vol. 2, SYSENTER and SYSEXIT: the flat segments they load, as transfer.c makes them. */
#define SYS_CS0 0xC09B
#define SYS_SS0 0xC093
#define SYS_CS3 0xC0FB
#define SYS_SS3 0xC0F3

static bool enabled(const struct vcpu *v)
{
    return v->fast_syscalls && !v->trace && !v->ac_step && !(v->sh->eflags & FL_TF) &&
           (v->cr0 & CR0_PE) && (v->sysenter_cs & ~3u) && v->sreg[SREG_SS].base == 0;
}

/* Whether emulate_site's read of the return address at ESP would succeed without a fault:
 * its bytes are on pages ring3's own process maps now, which code at the current CPL may
 * read (the monitor's TLB says so as a CPU's would). A process can enter the gate without
 * a call, with any ESP; the host read below must not fault in the monitor. */
static bool site_readable(const struct vcpu *v, uint32_t esp)
{
    uint32_t pages[2] = {esp >> 12, (esp + 3) >> 12};
    for (unsigned i = 0; i < 2; i++) {
        uint64_t bit = 1ull << (pages[i] % 64);
        if (!(mmu_own_mapped[pages[i] / 64] & bit) ||
            (v->cpl == 3 && (mmu_own_privileged[pages[i] / 64] & bit)))
            return false;
    }
    return true;
}

/* emulate_site for a site of no words: the return address the site's call pushed at ESP
 * (through the host mapping the call wrote it by: guest linear addresses are the monitor's
 * own with --isolation=none), popped; faults reported at the site. */
static void pop_site(struct vcpu *v, struct r3_shared *sh)
{
    uint32_t esp = sh->regs[REG_ESP];
    uint32_t ret = *(const volatile uint32_t *)(uintptr_t)esp;
    sh->regs[REG_ESP] = esp + R3_FRAME_LEN(0);
    sh->eip = ret;
    for (unsigned i = 0; i < 8; i++)
        v->fault_regs[i] = sh->regs[i];
    v->fault_eip = ret - R3_SITE_LEN(0);
    v->fault_esp = sh->regs[REG_ESP];
}

/* seg_publish, for a GDT code segment. */
static void publish(struct vcpu *v, struct r3_shared *sh)
{
    for (unsigned i = 0; i < 6; i++)
        sh->vsel[i] = v->sreg[i].sel;
    sh->cpl = v->cpl;
    sh->sel[SREG_CS] = HOST_CS32;
    fast_arm_sysenter(v);
}

/* SYSENTER's CS, SS and CPL 0 in the vcpu (SDM vol. 2, SYSENTER: flat segments from
 * IA32_SYSENTER_CS), and the host's flat data segment for SS, and for DS and ES where
 * seg_user_data puts it: what sysenter() does, and fast_take_sysenter for sysenter_lazy. */
static void enter_cpl0(struct vcpu *v, struct r3_shared *sh)
{
    uint16_t cs = (uint16_t)(v->sysenter_cs & ~3u);
    v->sreg[SREG_CS] = (struct seg){.sel = cs, .base = 0, .limit = 0xFFFFFFFFu, .attr = SYS_CS0};
    v->sreg[SREG_SS] = (struct seg){.sel = (uint16_t)(cs + 8), .base = 0, .limit = 0xFFFFFFFFu, .attr = SYS_SS0};
    v->host_sel[SREG_SS] = (uint16_t)(sh->sel[SREG_SS] = HOST_DS);   /* flat at CPL 0 */
    v->user_limit = 0;
    v->cpl = 0;
    seg_user_data(v);
}

/* SYSENTER from CPL 3 when the process loaded no segment register itself since it last left
 * the kernel (seg_sync_user would find nothing to take in). */
static int sysenter(struct vcpu *v, struct r3_shared *sh)
{
    static const unsigned data[] = {SREG_ES, SREG_DS, SREG_FS, SREG_GS};
    if (v->cpl != 3 || sh->fastload || sh->sel[SREG_CS] != HOST_CS32 || (v->sreg[SREG_CS].sel & 4) ||
        !site_readable(v, sh->regs[REG_ESP]))
        return 0;
    for (unsigned i = 0; i < 4; i++)
        if (sh->sel[data[i]] != v->host_sel[data[i]])
            return 0;

    pop_site(v, sh);
    sh->vif = 0;
    sh->eflags &= ~FL_RF;
    sh->eip = v->sysenter_eip;
    sh->regs[REG_ESP] = v->sysenter_esp;
    enter_cpl0(v, sh);
    publish(v, sh);
    return 1;
}

/* SYSEXIT to CPL 3 when the user data entry already ends where mmu_set_cpl would put it, the
 * TLS entries are unchanged and no interrupt is pending. */
static int sysexit(struct vcpu *v, struct r3_shared *sh)
{
    uint16_t cs = (uint16_t)((v->sysenter_cs + 16) | 3), ss = (uint16_t)((v->sysenter_cs + 24) | 3);
    uint32_t top = *mmu_own_lowest_privileged < R3_RUNTIME_BASE ? *mmu_own_lowest_privileged : R3_RUNTIME_BASE;
    if (v->cpl != 0 || (cs & 4) || v->user_unlimited || !v->first_user_ns || top < 0x1000 ||
        top != fast_facts.user_top || fast_facts.user_gen != ldt_generation || !seg_tls_unchanged(v) ||
        (v->plat && v->intr.level) || !site_readable(v, sh->regs[REG_ESP]))
        return 0;

    seg_take_fast_loads(v);
    pop_site(v, sh);
    v->sreg[SREG_CS] = (struct seg){.sel = cs, .base = 0, .limit = 0xFFFFFFFFu, .attr = SYS_CS3};
    v->user_limit = top;
    v->cpl = 3;
    seg_user_data(v);                   /* with a limit at CPL 3: USER_SEL */
    v->sreg[SREG_SS] = (struct seg){.sel = ss, .base = 0, .limit = 0xFFFFFFFFu, .attr = SYS_SS3};
    v->host_sel[SREG_SS] = (uint16_t)(sh->sel[SREG_SS] = USER_SEL);  /* flat at CPL 3 with a limit */
    sh->eip = sh->regs[REG_EDX];
    sh->regs[REG_ESP] = sh->regs[REG_ECX];
    sh->pending = 0;
    publish(v, sh);
    return 1;
}

/* The host selector seg_user_data gives data segment register (r) at CPL 0. */
static uint16_t kernel_data_sel(const struct vcpu *v, unsigned r)
{
    return seg_on_flat_entry(v, r) ? HOST_DS : v->host_sel[r];
}

void fast_arm_sysenter(struct vcpu *v)
{
    static const unsigned data[] = {SREG_ES, SREG_SS, SREG_DS, SREG_FS, SREG_GS};
    struct r3_shared *sh = v->sh;
    sh->sysenter_to = runtime_sysenter_gate;
    if (!runtime_sysenter_lazy || !enabled(v) || v->cpl != 3 || sh->fastload || sh->sel[SREG_CS] != HOST_CS32 ||
        (v->sreg[SREG_CS].sel & 4))
        return;
    for (unsigned i = 0; i < 5; i++)
        if (sh->sel[data[i]] != v->host_sel[data[i]])
            return;
    uint16_t cs = (uint16_t)(v->sysenter_cs & ~3u);
    sh->lazy_eip = v->sysenter_eip;
    sh->lazy_esp = v->sysenter_esp;
    sh->lazy_es = kernel_data_sel(v, SREG_ES);
    sh->lazy_ds = kernel_data_sel(v, SREG_DS);
    sh->lazy_ss = HOST_DS;
    sh->lazy_vcs = cs;
    sh->lazy_vss = cs + 8u;
    sh->sysenter_to = runtime_sysenter_lazy;
}

/* What sysenter() does to the vcpu, for the one sysenter_lazy did; the shared page has the
 * rest (the selectors, the CPL, IF). It armed only from CPL 3 with the MSRs as they are still:
 * WRMSR takes the gate, which comes here first. */
void fast_take_sysenter(struct vcpu *v)
{
    struct r3_shared *sh = v->sh;
    if (!sh->lazy_entered)
        return;
    sh->lazy_entered = 0;
    enter_cpl0(v, sh);
    fast_facts.lazy_sysenters += stats_enabled;
}

int fast_syscall(void)
{
    struct vcpu *v = &the_vcpu;
    struct r3_shared *sh = v->sh;
    fast_take_sysenter(v);
    if (!enabled(v))
        return 0;
    if (sh->entry == R3_E_SYSENTER && sysenter(v, sh)) {
        fast_facts.sysenters += stats_enabled;
        return 1;
    }
    if (sh->entry == R3_E_SYSEXIT && sysexit(v, sh)) {
        fast_facts.sysexits += stats_enabled;
        return 1;
    }
    return 0;
}

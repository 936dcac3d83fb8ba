/* Guest address spaces in stub processes (--isolation=process): the address-space cache, and user code run there.
 *
 * Each guest page directory that user code ran under keeps a stub process
 * (stub/host.h) and a TLB record of what that stub has mapped (mmu.c). This
 * is the address-space cache the paper proposed: switching back to a process
 * whose stub is alive refaults nothing. Its TLB is checked against the page
 * tables before its code runs again after any CR3 write or flush, since a
 * real TLB would have been flushed then (SDM vol. 3, 4.10.4.1); what the
 * tables still say the same way stays mapped. A page directory freed and
 * reused for another process finds the old stub, and the check empties it of
 * what the new tables do not map. The cache is bounded (--stubs): the stub
 * run least recently is emptied and reused.
 *
 * Mapping changes are queued here and handed to the stub when its code next
 * runs, unmaps first. A map queued after an unmap of the same page stays; an
 * unmap drops maps queued before it; so the order of the two lists is enough.
 *
 * The guest's vector registers wait in the stub. After each event its control area holds the
 * process's x87, SSE and AVX state (stub.c saves it there), and the guest kernel needs it only
 * where it saves, restores or uses that state: a context switch, a signal frame, fork, exec.
 * A kernel assembled by ring3-as has an FPU site before each such instruction (the rewriter's
 * touches_vector_state; `ring3 audit` checks that none lacks it), and says so the first time
 * one runs (SH_FPU_SITES). With such a kernel, and the stub reached through the control area
 * (not ptrace, --syscalls=sysemu), the state stays where it is (vec_stub): the gate neither
 * saves nor restores the registers (SH_VEC_LAZY), nor is the image sent back when the same
 * stub runs next. The FPU site, gdb, and the end of that stub load it first (aspace_vec_load).
 * A system call thus moves no vector state at all.
 */
#include <asm/ldt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "aspace.h"

#include "hw/pic.h"
#include "lib/fail.h"
#include "machine/platform.h"
#include "memory/guestmem.h"
#include "monitor/cpu/cpu_model.h"
#include "monitor/cpu/emulate.h"
#include "monitor/cpu/ldt.h"
#include "monitor/cpu/runtime.h"
#include "monitor/cpu/segment.h"
#include "monitor/cpu/vcpu.h"
#include "monitor/host/breakpoints.h"
#include "monitor/host/console.h"
#include "monitor/host/events.h"
#include "monitor/host/host_probe.h"
#include "monitor/host/run.h"
#include "monitor/host/signals.h"
#include "monitor/host/stats.h"

#include "mmu.h"
#include "paging.h"

#define MAX_PENDING_MAPS 64
#define INPUT_POLL_NS 10000000ull   /* look at host input at least this often while user code computes */

_Static_assert(sizeof(struct user_desc) == sizeof(struct stub_tls), "struct stub_tls is a user_desc");

struct pending_map {
    uint32_t linear;
    uint64_t phys;
    int prot;
};

struct aspace {
    uint32_t pd;                    /* the top-level table it runs (paging_root: CR3 without flags) */
    struct stub *stub;
    struct bp_task bp;              /* the guest's DR0-DR3 as its stub has them */
    struct tlb *tlb;
    uint64_t epoch;                 /* v->tlb_epoch when its TLB was last checked */
    uint64_t last_run;
    bool tls_known;
    struct user_desc tls[3];        /* what its host GDT TLS entries hold */
    bool tls_from_known;            /* ... made from these guest descriptors (fast_facts.tls_raw) */
    uint64_t tls_from[3];
    struct ldt_mirror *ldt;         /* what its host LDT holds of the guest's (NULL: nothing yet) */
    uint64_t ldt_gen;               /* ldt_gen() when that was last brought up to date */
    bool lost_at_hold;              /* its stub was given up at a hold (aspace_hold) ... */
    uint64_t lost_switches;         /* ... when `switches` was this */
    unsigned nmap, nunmap;
    struct pending_map map[MAX_PENDING_MAPS];
    struct page_run { uint32_t first, end; } unmap[STUB_MAX_RANGES];
};

static struct aspace *spaces;       /* [0, nspaces) are in use */
static unsigned nspaces, max_spaces;
static uint64_t run_clock;
static uint64_t switches;           /* how often user code has run under another page directory */
static uint32_t last_pd;
static bool running_user;
static bool traced;                 /* --syscalls=sysemu: events come through ptrace */
static struct stub *vec_stub;       /* its control area holds the guest's vector state (above) */

int aspace_init(struct vcpu *v, unsigned max, enum stub_syscalls how, enum stub_placement where)
{
    size_t xsave_size;
    runtime_xsave(&xsave_size);
    if (stubs_init(v->gm->fd, xsave_size, how, where))
        return -1;
    traced = how == STUB_SYSEMU;
    spaces = calloc(max, sizeof *spaces);
    if (!spaces) {
        fprintf(stderr, "ring3: out of memory for %u address spaces\n", max);
        return -1;
    }
    max_spaces = max;
    return 0;
}

static _Noreturn void no_stub(struct vcpu *v)
{
    fflush(stdout);
    console_restore();
    fprintf(stderr, "ring3: cannot start a stub process for a guest process (try --isolation=none)\n");
    monitor_exit(v, EXIT_HOST);
}

/* An address space for page directory (pd): a new one while the cache has
 * room, else the one run least recently, emptied. */
static struct aspace *take(struct vcpu *v, uint32_t pd)
{
    struct aspace *as;
    if (nspaces < max_spaces) {
        as = &spaces[nspaces++];
        as->stub = stub_create();
        as->bp = (struct bp_task){0};
        as->tlb = as->stub ? mmu_tlb_new(as) : NULL;
        if (!as->tlb)
            no_stub(v);
    } else {
        as = &spaces[0];
        for (unsigned i = 1; i < nspaces; i++)
            if (spaces[i].last_run < as->last_run)
                as = &spaces[i];
        as->nmap = as->nunmap = 0;
        aspace_unmap(as, (uint32_t)(v->gm->low_base >> 12), R3_RUNTIME_BASE >> 12);
        mmu_tlb_forget(as->tlb);
        as->tls_known = false;
        TRACE(v, "address space %08x takes the stub of %08x", pd, as->pd);
    }
    as->pd = pd;
    as->epoch = v->tlb_epoch;
    return as;
}

struct aspace *aspace_current(struct vcpu *v)
{
    uint32_t pd = paging_root(v);
    struct aspace *as = v->as;
    if (!as || as->pd != pd) {
        as = NULL;
        for (unsigned i = 0; i < nspaces && !as; i++)
            if (spaces[i].pd == pd)
                as = &spaces[i];
        if (!as)
            as = take(v, pd);
        v->as = as;
    }
    if (as->epoch != v->tlb_epoch) {
        mmu_tlb_validate(v, as->tlb);
        as->epoch = v->tlb_epoch;
    }
    as->last_run = ++run_clock;
    if (pd != last_pd) {
        switches++;
        last_pd = pd;
    }
    return as;
}

struct tlb *aspace_tlb(struct aspace *as)
{
    return as->tlb;
}

bool aspace_map(struct aspace *as, uint32_t linear, uint64_t phys, int prot)
{
    for (unsigned i = 0; i < as->nmap; i++) {
        if (as->map[i].linear == linear) {
            as->map[i].phys = phys;
            as->map[i].prot = prot;
            return true;
        }
    }
    if (as->nmap == MAX_PENDING_MAPS)
        return false;
    as->map[as->nmap++] = (struct pending_map){linear, phys, prot};
    return true;
}

void aspace_unmap(struct aspace *as, uint32_t first, uint32_t end)
{
    for (unsigned i = 0; i < as->nmap;) {
        uint32_t page = as->map[i].linear >> 12;
        if (page >= first && page < end)
            as->map[i] = as->map[--as->nmap];
        else
            i++;
    }
    if (as->nunmap) {
        /* Touching the last range, or no room: widen it. Unmapping more
         * than asked is safe: a page gone from the stub but still in its TLB
         * record faults and is filled again. */
        struct page_run *last = &as->unmap[as->nunmap - 1];
        if ((last->end >= first && last->first <= end) || as->nunmap == STUB_MAX_RANGES) {
            if (first < last->first)
                last->first = first;
            if (end > last->end)
                last->end = end;
            return;
        }
    }
    as->unmap[as->nunmap].first = first;
    as->unmap[as->nunmap].end = end;
    as->nunmap++;
}

/* A stub given up here is replaced when its address space next runs user code (stub_lost).
 * Whose #GP that is depends on what ran since: a process that exits (its pages dropped
 * at exit_mmap, or at its last CR3 write) never runs again, and its page directory may go
 * to a new process, which must not pay for it. That takes a switch to another page
 * directory first: the new process is made while another runs, and a uniprocessor guest
 * runs one process at a time. So the #GP goes to the next user code of this page directory
 * only when no other ran in between: the process that was running, e.g. one whose forged
 * event a munmap's hold found (guest/programs/hostile.c). */
void aspace_hold(struct vcpu *v)
{
    if (!v->as || !v->as->stub || stub_hold(v->as->stub) == 0)
        return;
    TRACE(v, "stub %d of address space %08x given up: not held (%s)", stub_pid(v->as->stub), v->as->pd,
          stub_loss_name(stub_loss(v->as->stub)));
    v->as->lost_at_hold = true;
    v->as->lost_switches = switches;
}

static int by_linear(const void *a, const void *b)
{
    uint32_t x = ((const struct pending_map *)a)->linear, y = ((const struct pending_map *)b)->linear;
    return x < y ? -1 : x > y;
}

static void queue_ldt(void *stub, const struct user_desc *d)
{
    stub_queue_ldt(stub, (const struct stub_tls *)d);
}

/* A new, empty stub in place of the one (as) had, which is gone: nothing of
 * the process is mapped in it yet, and its TLS and LDT entries are empty. */
static void fresh_stub(struct vcpu *v, struct aspace *as)
{
    bp_task_close(&as->bp);
    as->stub = stub_create();
    if (!as->stub)
        no_stub(v);
    as->nmap = as->nunmap = 0;
    mmu_tlb_forget(as->tlb);
    as->tls_known = false;
    if (as->ldt)
        as->ldt->n = 0;
    as->ldt_gen = 0;
}

/* Clearing this many entries of a stub's host LDT costs more than a fresh stub from the
 * pool (which starts the next in its place) and the faults that map the process into it
 * again. Each host modify_ldt copies the whole table (ldt.h): clearing 8192 entries of a
 * full one took 130 ms of CPU on one core of an AMD EPYC VM and 300 ms when the process had
 * run on both (an IPI to the other for each, arch/x86/kernel/ldt.c, install_ldt). With the
 * fresh stub, ldt_gdt_32 and 8 processes after it took 2.2-2.4 s, not 2.8-3.2 s. */
#define LDT_STALE_RENEW 256

/* The stub's host LDT as the guest's is now, after an lldt since it was last
 * brought up to date. Its mirror is made once a guest LDT is loaded. A stub
 * whose LDT holds many entries the guest's no longer has (the page directory of
 * a process with a large LDT, now another's) is replaced, not cleared. */
static void push_ldt(struct vcpu *v, struct aspace *as)
{
    if (as->ldt_gen == ldt_gen())
        return;
    if (as->ldt && ldt_stale(v, as->ldt) >= LDT_STALE_RENEW) {
        TRACE(v, "address space %08x: a fresh stub, not %u LDT entries cleared", as->pd,
              ldt_stale(v, as->ldt));
        if (vec_stub == as->stub)
            aspace_vec_load(v);
        stub_destroy(as->stub);
        fresh_stub(v, as);
        stats_stub_renewed();
    }
    if (!as->ldt && (v->ldtr.sel & ~3u) && !(as->ldt = calloc(1, sizeof *as->ldt)))
        TRACE(v, "no memory for the LDT of address space %08x", as->pd);
    if (as->ldt)
        ldt_update(v, as->ldt, STUB_LDT_MAX, queue_ldt, as->stub);
    as->ldt_gen = ldt_gen();
}

/* The stub's host TLS entries as the guest's TLS descriptors are now. Those are read from
 * the guest's GDT only when they may differ from the ones its entries were last made from:
 * seg_sync_tls, on the way out to CPL 3 just before, read them, and fast_facts says whether
 * they are still those bytes. A system call would otherwise read all three twice. */
static void push_tls(struct vcpu *v, struct aspace *as)
{
    const uint64_t *now = fast_facts.tls_raw;
    bool known = seg_tls_unchanged(v);
    if (known && as->tls_known && as->tls_from_known && !memcmp(as->tls_from, now, sizeof as->tls_from))
        return;
    for (unsigned i = 0; i < 3; i++) {
        struct user_desc d;
        seg_tls_descriptor(v, i, &d);
        if (!as->tls_known || memcmp(&d, &as->tls[i], sizeof d)) {
            stub_queue_tls(as->stub, (const struct stub_tls *)&d);
            as->tls[i] = d;
        }
    }
    as->tls_known = true;
    as->tls_from_known = known;
    memcpy(as->tls_from, now, sizeof as->tls_from);
}

/* Hand the queued changes and the TLS and LDT entries to the stub. Maps of
 * neighbouring pages on neighbouring frames with the same rights go as one. */
static void push_changes(struct vcpu *v, struct aspace *as)
{
    push_ldt(v, as);                /* first: it may replace the stub */
    for (unsigned i = 0; i < as->nunmap; i++)
        stub_queue_unmap(as->stub, as->unmap[i].first << 12, as->unmap[i].end - as->unmap[i].first);
    qsort(as->map, as->nmap, sizeof as->map[0], by_linear);
    unsigned pages = 0;
    for (unsigned i = 0; i < as->nmap;) {
        unsigned n = 1;
        while (i + n < as->nmap && as->map[i + n].linear == as->map[i].linear + n * 0x1000 &&
               as->map[i + n].phys == as->map[i].phys + n * 0x1000 && as->map[i + n].prot == as->map[i].prot)
            n++;
        if (stub_queue_map(as->stub, as->map[i].linear, as->map[i].phys, n, as->map[i].prot))
            pages += n;
        i += n;
    }
    if (pages)
        stats_map_request(pages);
    as->nmap = as->nunmap = 0;
    push_tls(v, as);
}

/* The user state in the shared page, as the stub resumes it. */
static void regs_from_shared(const struct vcpu *v, struct stub_regs *r)
{
    memcpy(r->regs, v->sh->regs, sizeof r->regs);
    r->eip = v->sh->eip;
    r->eflags = (v->sh->eflags & FL_USER) | FL_IF | 2;
    for (unsigned i = 0; i < 6; i++)
        r->sel[i] = v->sh->sel[i];
    r->sel[SREG_CS] = HOST_CS32;
    /* Segments of the guest's LDT are the stub's own (push_ldt), code included
     * (protocol.h); ring3's own process has them in entries of its own. */
    for (unsigned i = 0; i < 6; i++)
        if ((v->sreg[i].sel & 4) && (v->sreg[i].attr & 0x80))
            r->sel[i] = v->sreg[i].sel;
}

/* Wait for the stub's next event. While its code computes, the devices are
 * looked at by their deadlines and host input at least every INPUT_POLL_NS;
 * an interrupt due takes the CPU back (SDM vol. 3, 6.8.1: at CPL 3 IF is set).
 * False when the stub died. */
static bool wait_event(struct vcpu *v, struct aspace *as, struct stub_event *ev, void *xsave)
{
    bool preempted = false;
    for (;;) {
        uint64_t now = events_now(), deadline = events_next_deadline(v, now);
        if (deadline > now + INPUT_POLL_NS)
            deadline = now + INPUT_POLL_NS;
        switch (stub_wait(as->stub, deadline, ev, xsave)) {
        case STUB_WAIT_EVENT:
            return true;
        case STUB_WAIT_DIED:
            return false;
        case STUB_WAIT_TIMEOUT:
            break;
        }
        events_poll(v);
        events_input(v);
        if (!preempted && pic_intr_pending(v->plat->pic)) {
            stub_preempt(as->stub);
            preempted = true;
        }
    }
}

/* The stub died, or broke the protocol (guest code took it over): a new,
 * empty one takes its place, and the guest process gets the #GP that its
 * kernel turns into SIGSEGV; not when it was given up at a hold and user
 * code of another page directory has run since (aspace_hold). */
static void stub_lost(struct vcpu *v, struct aspace *as)
{
    bool charged = !as->lost_at_hold || as->lost_switches == switches;
    as->lost_at_hold = false;
    if (vec_stub == as->stub)
        aspace_vec_load(v);         /* what it last reported, before its control area goes */
    enum stub_loss loss = stub_loss(as->stub);
    int pid = stub_pid(as->stub), status = stub_destroy(as->stub);
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    stats_stub_lost(loss, sig);
    TRACE(v, "stub %d of address space %08x lost at eip %08x: %s (signal %d, exit status %d)%s", pid, as->pd,
          v->sh->eip, stub_loss_name(loss), sig, sig ? 0 : WEXITSTATUS(status),
          charged ? "" : "; given up at a hold, and another page directory ran since: no #GP");
    fresh_stub(v, as);
    if (!charged)
        return;
    struct stub_regs r;
    regs_from_shared(v, &r);
    struct host_fault f = {.sig = SIGKILL, .cs = HOST_CS32, .rip = r.eip};
    signals_stub_event(v, &f, &r, v->sh->fsbase, v->sh->gsbase);
}

static void handle_event(struct vcpu *v, struct aspace *as, const struct stub_event *ev)
{
    struct r3_shared *sh = v->sh;
    if (ev->kind == STUB_EV_GATE && ev->r.sel[SREG_CS] == HOST_CS32) {
        /* A gate call of the vDSO's rewritten code: as the in-process gate does. */
        memcpy(sh->regs, ev->r.regs, sizeof sh->regs);
        sh->eip = ev->r.eip;
        sh->eflags = ev->r.eflags;
        for (unsigned i = 0; i < 6; i++)
            sh->sel[i] = ev->r.sel[i];
        sh->fsbase = ev->fsbase;
        sh->gsbase = ev->gsbase;
        sh->entry = ev->entry;
        emulate_gate();
        return;
    }
    struct host_fault f = {
        .sig = ev->kind == STUB_EV_SIGNAL ? ev->sig : SIGKILL,
        .code = ev->kind == STUB_EV_SIGNAL ? ev->si_code : 0,
        .sysenter_pad = host_probe_pad_for(v->host_sysenter_pad, stub_vdso(as->stub)),
        .cs = (uint16_t)ev->r.sel[SREG_CS],
        .trapno = (unsigned)ev->trapno,
        .err = (unsigned)ev->err,
        .addr = ev->addr,
        .rip = ev->rip64,
        .perf_data = ev->perf_data,
    };
    signals_stub_event(v, &f, &ev->r, ev->fsbase, ev->gsbase);
}

void aspace_cpuid_answered(const struct vcpu *v, uint32_t leaf, uint32_t sub, const uint32_t out[4])
{
    if (v->isolation == ISOLATION_PROCESS)
        stubs_cpuid_answered(leaf, sub, cpu_cpuid_without_subleaves(leaf), out);
}

void aspace_cpuid_changed(const struct vcpu *v)
{
    if (v->isolation == ISOLATION_PROCESS)
        stubs_cpuid_forget();
}

void aspace_vec_load(struct vcpu *v)
{
    if (!vec_stub)
        return;
    stub_take_vector_state(vec_stub, v->fpu_image);
    vec_stub = NULL;
    v->sh->vec_lazy = 0;
}

void aspace_run_user(struct vcpu *v, void *xsave)
{
    if (running_user)
        return;
    running_user = true;
    uint8_t *outer_fpu = v->fpu_image;
    v->fpu_image = xsave;               /* the stub's state after each event */
    while (v->cpl == 3) {
        struct aspace *as = aspace_current(v);
        struct stub_regs r;
        struct stub_event ev;
        regs_from_shared(v, &r);
        push_changes(v, as);
        bp_sync(&as->bp, stub_pid(as->stub), v->dr);
        /* Another stub's state goes to this one as the CPU would carry it over; this one's
         * own stays in it. The next event leaves it there when the kernel marks its uses. */
        bool own = vec_stub == as->stub, lazy = v->sh->fpu_sites && !traced;
        if (!own)
            aspace_vec_load(v);
        uint64_t t0 = stats_start();
        bool ok = stub_resume(as->stub, &r, own ? NULL : xsave) == 0 &&
                  wait_event(v, as, &ev, lazy ? NULL : xsave);
        stats_handoff(t0);
        if (ok && lazy) {
            vec_stub = as->stub;
            v->sh->vec_lazy = 1;
        }
        if (!ok)
            stub_lost(v, as);
        else
            handle_event(v, as, &ev);
    }
    v->fpu_image = outer_fpu;
    running_user = false;
}

/* `ring3 run --stats`: the event counters and the table printed at exit.
 *
 * Times are TSC ticks spent in the monitor's C code for the event, converted
 * with the measured TSC rate. They leave out what the host kernel spends
 * delivering a signal and returning from it, and the gate trampoline's own
 * register save and restore; the counts are exact.
 */
#include <signal.h>

#include "stats.h"

#include "ring3/abi.h"
#include "lib/tsc.h"

#include "monitor/cpu/emulate.h"
#include "monitor/cpu/fast_syscall.h"
#include "monitor/cpu/vcpu.h"

bool stats_enabled;

struct counter {
    uint64_t count, ticks;
};

static struct counter gates[R3_ENTRY_COUNT], signals[STAT_SIGNAL_KINDS], cr3_writes, handoffs;
static uint64_t reopened, released, releases;
static uint64_t evictions, evicted;
static uint64_t ldt_written;
static uint64_t host_cpuids;
static uint64_t map_requests, pages_mapped, stubs_renewed, stubs_lost[STUB_LOSS_KINDS][NSIG];  /* by the signal that ended it */
static uint64_t inserts[R3_ENTRY_COUNT], exceptions[32], interrupts[256];
static double ns_per_tick;

static const char *const signal_names[STAT_SIGNAL_KINDS] = {
    [STAT_FILL_KERNEL] = "host mapping filled, kernel (SIGSEGV)",
    [STAT_FILL_USER] = "host mapping filled, process (SIGSEGV)",
    [STAT_GUEST_PF] = "guest page fault (SIGSEGV)",
    [STAT_LIMIT_RETRY] = "user segment limit retried (SIGSEGV)",
    [STAT_GP] = "#GP: in/out, cpuid or guest #GP (SIGSEGV)",
    [STAT_SYSCALL] = "int $n or sysenter of a process (SIGSYS)",
    [STAT_ILLEGAL] = "sysenter (AMD) or #UD (SIGILL)",
    [STAT_INSERT] = "insert-mode instruction (SIGILL, SIGSEGV)",
    [STAT_TRAP] = "int3, into, single step (SIGTRAP)",
    [STAT_MATH] = "math fault (SIGFPE)",
    [STAT_TIMER] = "device deadline (SIGALRM)",
    [STAT_OTHER] = "other signal",
};

void stats_init(void)
{
    ns_per_tick = 1e6 / tsc_khz();
    stats_enabled = true;
}

static void add(struct counter *c, uint64_t t0)
{
    c->count++;
    c->ticks += __rdtsc() - t0;
}

void stats_add_gate(unsigned entry, uint64_t t0) { add(&gates[entry % R3_ENTRY_COUNT], t0); }
void stats_add_signal(enum stat_signal kind, uint64_t t0) { add(&signals[kind], t0); }
void stats_add_cr3(uint64_t t0) { add(&cr3_writes, t0); }
void stats_add_handoff(uint64_t t0) { add(&handoffs, t0); }

void stats_add_map_request(unsigned pages)
{
    map_requests++;
    pages_mapped += pages;
}
void stats_add_stub_lost(enum stub_loss why, int sig) { stubs_lost[why % STUB_LOSS_KINDS][(unsigned)sig % NSIG]++; }
void stats_add_stub_renewed(void) { stubs_renewed++; }
void stats_add_closed(bool reopen, unsigned pages)
{
    reopened += reopen;
    released += pages;
    releases += !reopen;
}
void stats_add_evicted(unsigned pages)
{
    evictions++;
    evicted += pages;
}
void stats_add_ldt_written(void) { ldt_written++; }
void stats_add_host_cpuid(void) { host_cpuids++; }
void stats_add_insert(unsigned entry) { inserts[entry % R3_ENTRY_COUNT]++; }
void stats_add_exception(unsigned vector) { exceptions[vector % 32]++; }
void stats_add_interrupt(unsigned vector) { interrupts[vector % 256]++; }

static void row(FILE *f, const char *what, const char *name, uint64_t count, const uint64_t *ticks)
{
    if (!count)
        return;
    if (ticks)
        fprintf(f, "  %-9s %-42s %10llu %10.3f %9.3f\n", what, name, (unsigned long long)count,
                *ticks * ns_per_tick / 1e6, *ticks * ns_per_tick / 1e3 / count);
    else
        fprintf(f, "  %-9s %-42s %10llu %10s %9s\n", what, name, (unsigned long long)count, "", "");
}

void stats_report(FILE *f, double seconds_in_all)
{
    uint64_t total = 0;
    char name[64];

    for (unsigned i = 0; i < R3_ENTRY_COUNT; i++)
        total += gates[i].ticks;
    for (unsigned i = 0; i < STAT_SIGNAL_KINDS; i++)
        total += signals[i].ticks;
    fprintf(f, "ring3 stats: %.3f s in all, %.3f s of it in monitor code for these events "
            "(host signal delivery not included), %.3f s waiting for stub processes\n",
            seconds_in_all, total * ns_per_tick / 1e9, handoffs.ticks * ns_per_tick / 1e9);
    fprintf(f, "  %-9s %-42s %10s %10s %9s\n", "kind", "event", "count", "total ms", "mean us");
    for (unsigned i = 0; i < R3_ENTRY_COUNT; i++)
        row(f, "gate", emulate_entry_name(i), gates[i].count, &gates[i].ticks);
    /* --isolation=none: done with the vector registers left as they were (fast_syscall.h) */
    row(f, "gate", "SYSENTER, vector registers left live", fast_facts.sysenters, NULL);
    row(f, "gate", "SYSEXIT, vector registers left live", fast_facts.sysexits, NULL);
    row(f, "gate", "SYSENTER, in the runtime without the monitor", fast_facts.lazy_sysenters, NULL);
    for (unsigned i = 0; i < R3_ENTRY_COUNT; i++)
        row(f, "insert", emulate_entry_name(i), inserts[i], NULL);
    for (unsigned i = 0; i < STAT_SIGNAL_KINDS; i++)
        row(f, "signal", signal_names[i], signals[i].count, &signals[i].ticks);
    row(f, "mmu", "cr3 write (host mappings dropped)", cr3_writes.count, &cr3_writes.ticks);
    /* ring3's own host mappings: dropped pages are closed (PROT_NONE) where they are */
    row(f, "mmu", "page filled on the frame it was closed on", reopened, NULL);
    if (releases) {
        snprintf(name, sizeof name, "closed pages given back (%.0f a time)", (double)released / releases);
        row(f, "mmu", name, released, NULL);
    }
    if (evictions) {
        snprintf(name, sizeof name, "TLB emptied at map limit (%.0f pages a time)",
                 (double)evicted / evictions);
        row(f, "mmu", name, evictions, NULL);
    }
    /* the host's CPUID, asked for a leaf the guest's CPUID had not asked before (cpu_model.c) */
    row(f, "cpu", "host CPUID executed", host_cpuids, NULL);
    /* --isolation=process with CPUID faulting: a cpuid the monitor answered before, answered
     * again by the stub's handler without a hand-off (stub/protocol.h, "CPUID") */
    row(f, "cpu", "cpuid answered in a stub", stubs_cpuids_here(), NULL);
    /* the guest's LDT copied into the host LDT of ring3's own process or of a stub */
    row(f, "ldt", "host LDT entries written", ldt_written, NULL);
    /* --isolation=process: each run of a stub, counted from the hand-off to its event, holds
     * guest code, the host's process switches and the stub's signal handling */
    row(f, "stub", "hand-off, guest code, event (waited)", handoffs.count, &handoffs.ticks);
    row(f, "stub", "hand-offs carrying a checked map", map_requests, NULL);
    if (map_requests) {
        snprintf(name, sizeof name, "pages mapped by them (%.1f a request)", (double)pages_mapped / map_requests);
        row(f, "stub", name, pages_mapped, NULL);
    }
    row(f, "stub", "map calls interrupted, answered again", stubs_map_calls_restarted(), NULL);
    /* --syscalls=sud: answered in one wake-up, and held already */
    row(f, "stub", "resumes and holds that found it parked", stubs_parked_found(), NULL);
    row(f, "stub", "waits past 10 s for a stub the host did not run", stubs_starved(), NULL);
    row(f, "stub", "replaced, not its large LDT cleared", stubs_renewed, NULL);
    /* --syscalls=sud: before the guest kernel drops a translation or leaves the address space */
    uint64_t hold_ns, holds = stubs_holds(&hold_ns), hold_ticks = (uint64_t)(hold_ns / ns_per_tick);
    row(f, "stub", "held at its map site (waited)", holds, &hold_ticks);
    /* --placement auto: windows run on the other placement, those it kept, and the moves */
    struct placement_stats pl;
    placement_stats(&pl);
    row(f, "stub", "placement tried the other way", pl.trials, NULL);
    row(f, "stub", "... and kept it", pl.won, NULL);
    row(f, "stub", "placement moves (time on one core)", pl.switches, &pl.shared_ticks);
    for (unsigned i = 0; i < STUB_LOSS_KINDS; i++) {
        for (unsigned sig = 0; sig < NSIG; sig++) {
            snprintf(name, sizeof name, "stub lost: %s, signal %u", stub_loss_name(i), sig);
            row(f, "stub", name, stubs_lost[i][sig], NULL);
        }
    }
    for (unsigned i = 0; i < 32; i++) {
        snprintf(name, sizeof name, "vector %u", i);
        row(f, "exception", name, exceptions[i], NULL);
    }
    for (unsigned i = 0; i < 256; i++) {
        snprintf(name, sizeof name, "vector %u", i);
        row(f, "interrupt", name, interrupts[i], NULL);
    }
}

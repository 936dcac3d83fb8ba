/* Where the monitor and the stub it runs sit on the host's CPUs, chosen by measurement.
 *
 * A hand-off between the monitor and a stub (protocol.h) is cheap while the other side spins
 * on the control area, and dear when it sleeps on another core: its wake-up is an
 * inter-processor interrupt, and in a virtual machine the vCPU it lands on may be halted.
 * Measured on a 2-core AMD EPYC VM (family 25, haltpoll with no guest polling):
 *   - an event and its answer while both spin, on two cores: 0.3 us each way;
 *   - a futex round trip between two processes pinned to one core: about 8 us;
 *   - a seccomp notification answered with SECCOMP_IOCTL_NOTIF_ADDFD (each map hand-off, and
 *     each resume of a parked stub): 18-25 us across cores, against 6 us on one core, since
 *     the answer waits for the stub to install the descriptor, two wake-ups in all.
 * So a guest that mostly makes system calls wants the two sides spinning on two cores
 * (PLACE_SPREAD: getpid 1.8 us against 9.5 us on one core), and one that mostly forks, execs
 * and faults in pages wants them on one core, each sleeping at once so that the other runs in
 * its place (PLACE_SHARED: fork 0.51 ms against 0.82, fork+execve 1.95 against 2.5). Neither
 * constant holds on every host, nor every guest for all of its run.
 *
 * PLACE_AUTO measures. Hand-offs are counted in windows of WINDOW_EVENTS (or WINDOW_MAX_NS,
 * whichever ends first; a window with fewer than QUIET_EVENTS, a guest that mostly computes,
 * teaches nothing). A window's cost is its wall time per hand-off. Every so many windows
 * (the interval), one window runs in the other placement; it is kept when it cost at least
 * MARGIN_PCT less than the recent windows, and left otherwise, the interval then doubling up
 * to MAX_INTERVAL, so that a placement that keeps losing is tried ever more rarely (gVisor's
 * systrap turns its spinning on and off in the same way, by measured latency). Only the
 * monitor's own thread and the stubs are moved; ring3's other threads keep their CPUs.
 */
#include <sched.h>
#include <stdbool.h>
#include <x86intrin.h>

#include "placement.h"

#define SPREAD_SPIN_NS 30000ull     /* both sides' spin in PLACE_SPREAD (stub/host.c: SPIN_NS before) */
#define WINDOW_EVENTS  256u
#define WINDOW_MAX_NS  50000000ull
#define QUIET_EVENTS   32u
#define MARGIN_PCT     10u
#define FIRST_INTERVAL 4u
#define MAX_INTERVAL   256u

static struct {
    enum stub_placement fixed;      /* PLACE_AUTO, or the one that stays */
    enum stub_placement now;        /* PLACE_SPREAD or PLACE_SHARED */
    uint64_t gen;                   /* counts the moves, for placement_stub */
    cpu_set_t all, one;             /* the CPUs this process was given; the one PLACE_SHARED uses */
    uint32_t spread_ticks;
    uint64_t ticks_per_ms;
    /* PLACE_AUTO */
    uint64_t window_start;          /* TSC; 0: none open */
    unsigned window_events;
    bool trial;                     /* the open window runs in the other placement */
    uint64_t cost;                  /* ticks per hand-off in the placement kept, recent windows */
    unsigned interval, until_trial;
    struct placement_stats st;
    uint64_t shared_since;          /* TSC, while PLACE_SHARED */
} p;

static void move_to(enum stub_placement to)
{
    uint64_t t = __rdtsc();
    if (p.now == PLACE_SHARED)
        p.st.shared_ns += (t - p.shared_since) * 1000000 / p.ticks_per_ms;
    if (to == PLACE_SHARED) {
        int cpu = sched_getcpu();
        CPU_ZERO(&p.one);
        CPU_SET(cpu < 0 ? 0 : cpu, &p.one);
        p.shared_since = t;
    }
    p.now = to;
    p.gen++;
    p.st.switches++;
    /* The monitor's thread only (pid 0 is the caller); a failure leaves it where it was,
     * which costs speed, not correctness. */
    sched_setaffinity(0, sizeof(cpu_set_t), to == PLACE_SHARED ? &p.one : &p.all);
}

void placement_init(enum stub_placement how, uint32_t tsc_khz)
{
    p.ticks_per_ms = tsc_khz ? tsc_khz : 1000000;
    p.spread_ticks = (uint32_t)(SPREAD_SPIN_NS * p.ticks_per_ms / 1000000);
    p.now = PLACE_SPREAD;
    p.gen = 1;
    p.interval = p.until_trial = FIRST_INTERVAL;
    if (sched_getaffinity(0, sizeof p.all, &p.all) != 0) {
        CPU_ZERO(&p.all);
        CPU_SET(0, &p.all);
    }
    p.fixed = how;
    if (CPU_COUNT(&p.all) < 2) {
        p.fixed = PLACE_SHARED;     /* nothing to move: one CPU is already shared */
        p.now = PLACE_SHARED;
        p.one = p.all;
        p.shared_since = __rdtsc();
        return;
    }
    if (how == PLACE_SHARED)
        move_to(PLACE_SHARED);
}

uint64_t placement_spin_ns(void)
{
    return p.now == PLACE_SHARED ? 0 : SPREAD_SPIN_NS;
}

uint32_t placement_spin_ticks(void)
{
    return p.now == PLACE_SHARED ? 0 : p.spread_ticks;
}

void placement_stub(pid_t pid, uint64_t *gen)
{
    if (*gen == p.gen)
        return;
    *gen = p.gen;
    sched_setaffinity(pid, sizeof(cpu_set_t), p.now == PLACE_SHARED ? &p.one : &p.all);
}

void placement_spawned(pid_t pid)
{
    if (p.now == PLACE_SHARED && CPU_COUNT(&p.all) > 1)
        sched_setaffinity(pid, sizeof(cpu_set_t), &p.all);
}

static enum stub_placement other(void)
{
    return p.now == PLACE_SHARED ? PLACE_SPREAD : PLACE_SHARED;
}

/* A window ended with (cost) ticks a hand-off: keep or leave a trial, or open one when due. */
static void window_done(uint64_t cost)
{
    if (p.trial) {
        p.trial = false;
        p.st.trials++;
        if (cost * 100 < p.cost * (100 - MARGIN_PCT)) {
            p.st.won++;
            p.cost = cost;
            p.interval = FIRST_INTERVAL;
        } else {
            move_to(other());
            p.interval = p.interval * 2 < MAX_INTERVAL ? p.interval * 2 : MAX_INTERVAL;
        }
        p.until_trial = p.interval;
        return;
    }
    if (p.cost && (2 * cost > 3 * p.cost || 3 * cost < 2 * p.cost)) {
        /* the guest's work changed: what lost before may win now */
        p.cost = cost;
        p.interval = FIRST_INTERVAL;
        if (p.until_trial > FIRST_INTERVAL)
            p.until_trial = FIRST_INTERVAL;
    }
    p.cost = p.cost ? (3 * p.cost + cost) / 4 : cost;
    if (--p.until_trial == 0) {
        p.trial = true;
        move_to(other());
    }
}

void placement_handoff(void)
{
    if (p.fixed != PLACE_AUTO)
        return;
    uint64_t t = __rdtsc();
    if (!p.window_start) {
        p.window_start = t;
        p.window_events = 0;
        return;
    }
    uint64_t elapsed = t - p.window_start;
    ++p.window_events;
    /* a trial that costs twice what it is to beat has lost: no need to pay for a whole window */
    bool lost = p.trial && p.window_events >= QUIET_EVENTS && elapsed / p.window_events > 2 * p.cost;
    if (!lost && p.window_events < WINDOW_EVENTS && elapsed < WINDOW_MAX_NS / 1000000 * p.ticks_per_ms)
        return;
    unsigned n = p.window_events;
    p.window_start = t;
    p.window_events = 0;
    if (n >= QUIET_EVENTS)
        window_done(elapsed / n);
}

void placement_stats(struct placement_stats *st)
{
    *st = p.st;
    if (p.now == PLACE_SHARED)
        st->shared_ns += (__rdtsc() - p.shared_since) * 1000000 / p.ticks_per_ms;
}

/* Where the monitor and the stub it runs sit on the host's CPUs, chosen by measurement.
 *
 * A hand-off between the monitor and a stub (protocol.h) is cheap while the other side spins
 * on the control area, and dear when it sleeps on another core: its wake-up is an
 * inter-processor interrupt, and in a virtual machine the vCPU it lands on may be halted.
 * Measured on a 2-core AMD EPYC VM (family 25, haltpoll with no guest polling):
 *   - an event and its answer while both spin, on two cores: 0.3 us each way;
 *   - SECCOMP_IOCTL_NOTIF_SEND to a stub asleep on the other core: 7 us in the ioctl alone;
 *   - a seccomp notification answered with SECCOMP_IOCTL_NOTIF_ADDFD (each map hand-off, and
 *     each resume of a parked stub): 18-25 us across cores, against 6 us on one core, since
 *     the answer waits for the stub to install the descriptor, two wake-ups in all.
 * So a guest that mostly makes system calls wants the two sides spinning on two cores
 * (PLACE_SPREAD: getpid 1.8 us against 9.5 us on one core), and one that mostly forks, execs
 * and faults in pages wants them on one core, each sleeping at once so that the other runs in
 * its place (PLACE_SHARED: fork 0.51 ms against 0.82, fork+execve 1.95 against 2.5). Neither
 * constant holds on every host, nor every guest for all of its run.
 *
 * PLACE_AUTO measures. Hand-offs are counted in windows of at least WINDOW_NS and
 * QUIET_EVENTS hand-offs (one that reaches WINDOW_MAX_NS with fewer, a guest that mostly
 * computes, teaches nothing). A window's cost is its wall time per hand-off.
 *   - Every so many windows (the interval), TRIAL_WINDOWS windows run in the other placement.
 *     It is kept when each cost at least MARGIN_PCT less than the cheapest of the last RECENT
 *     windows, and left otherwise, the interval then doubling up to MAX_INTERVAL: a placement
 *     that keeps losing is tried ever more rarely (gVisor's systrap turns its spinning on and
 *     off in the same way, by measured latency).
 *   - A trial that costs twice the recent windows ends after QUIET_EVENTS.
 *   - DRIFT_WINDOWS windows in a row that cost a third less than the recent ones (in shared),
 *     or half again as much (in spread), say the guest's work changed the way that may turn
 *     the other placement's loss into a win: hand-offs that come faster are what spinning
 *     pays for. The next window is then a trial, and the interval halves.
 *   - Those three rules are measured on GNU patch's ./configure (Table 2) on a 2-core Intel
 *     Xeon VM, where a hand-off costs 55 us spread against 19 shared. With one trial window
 *     and a new interval at any window a third off either way, auto placement made 5600 and
 *     6000 trials, won 1200 and 1300 of them by chance, and took 105 and 115 s; with these,
 *     780 and 910 trials, 17 and 39 won, 87 and 100 s (interleaved runs). --placement shared
 *     took 77 to 91 s that evening, and auto placement that tries nothing once it is shared
 *     80 s: trials still cost more than the 1.5 to 2 s they spend spread, for a reason not
 *     found yet (a hand-off in shared, long after a move, took 33.5 us in a run with trials
 *     against 27.8 without, both as SCHED_BATCH: below).
 *   - The first SETTLE_EVENTS hand-offs after a move count in no window: they carry the move
 *     itself (a stub woken on a core that had gone idle). Counted, they made trials of spread
 *     lose to shared on a guest of int $0x80 calls, which take 9 us spread and 16 shared.
 *   - Windows of a fixed count of hand-offs (256) were tried first: of a guest making system
 *     calls they lasted 0.5 ms, and their noise alone kept restarting the interval (getpid
 *     2.4 us against 1.8 spread, in one run of Table 1).
 * Only the monitor's own thread and the stubs are moved (a new stub starts up on any CPU);
 * ring3's other threads, if any, keep theirs.
 *
 * SCHED_BATCH for the monitor and the stubs was tried and taken out again. A task of that
 * policy preempts nothing when it wakes (check_preempt_wakeup_fair in the host's
 * kernel/sched/fair.c), which on one core saved the extra context switches of a hand-off:
 * the stub's futex wake of the monitor and the completion of the monitor's ADDFD ioctl each
 * let the monitor preempt the stub before the stub went to sleep (forkexec 500 and fork 2000
 * under --placement shared on a 2-core Intel Xeon VM: 167-173 thousand switches for 50
 * thousand hand-offs, 100 thousand as batch; forkexec 2.2-2.4 against 2.0-2.2 ms). But the
 * monitor woken by the guest's timer must preempt a stub that runs guest code on its core,
 * and as batch it waited for the host's tick: tests/test_leaks.py's timer storm of 50000
 * interrupts at 10 kHz took 51 s against 5.9.
 */
#include <sched.h>
#include <stdbool.h>
#include <x86intrin.h>

#include "placement.h"

/* Both sides' spin in PLACE_SPREAD: the monitor's for a stub's event, a stub's for the
 * monitor's answer before it parks (protocol.h), counted in TSC ticks, not pause loops: a
 * pause takes about 10 cycles on older Intel cores and 140 from Skylake (Intel's optimization
 * manual), 64 here. In pause loops of 25 ns (AMD EPYC, family 25), medians of 3 to 8 runs: 500
 * loops (12 us) and 2000 (49 us) gave fork 0.65-0.83 and 0.62-0.68 ms, fork+execve 2.3-2.75
 * and 2.16-2.59 ms, getpid alike; 8000 (200 us) no better; none (parking at once, on any
 * cores) made getpid 16 us against 1.85. 30 us gave fork 0.63 and fork+execve 2.19 against
 * 0.65 and 2.29 for 500 loops in one run of 8. */
#define SPREAD_SPIN_NS 30000ull
#define WINDOW_NS      5000000ull
#define WINDOW_MAX_NS  50000000ull
#define QUIET_EVENTS   32u
#define SETTLE_EVENTS  16u
#define MARGIN_PCT     10u
#define RECENT         4u
#define FIRST_INTERVAL 2u
#define MAX_INTERVAL   256u
#define TRIAL_WINDOWS  2u
#define DRIFT_WINDOWS  2u

static struct {
    enum stub_placement fixed;      /* PLACE_AUTO, or the one that stays */
    enum stub_placement now;        /* PLACE_SPREAD or PLACE_SHARED */
    uint64_t gen;                   /* counts the moves, for placement_stub */
    cpu_set_t all, one;             /* the CPUs this process was given; the one PLACE_SHARED uses */
    uint32_t spread_ticks;          /* SPREAD_SPIN_NS, WINDOW_NS and WINDOW_MAX_NS in TSC ticks */
    uint64_t window_ticks, window_max_ticks;
    /* PLACE_AUTO */
    uint64_t window_start;          /* TSC; 0: none open */
    unsigned window_events;
    unsigned settle;                /* hand-offs left to pass before the next window opens */
    bool trial;                     /* the open window runs in the other placement */
    unsigned trial_won;             /* windows of this trial that won so far */
    unsigned drifted;               /* windows in a row that cost far from p.cost */
    uint64_t cost;                  /* ticks per hand-off in the placement kept, recent windows */
    uint64_t recent[RECENT];        /* the last windows' costs there, for best() */
    unsigned nrecent;
    unsigned interval, until_trial;
    struct placement_stats st;
    uint64_t shared_since;          /* TSC, while PLACE_SHARED */
} p;

static void move_to(enum stub_placement to)
{
    uint64_t t = __rdtsc();
    if (p.now == PLACE_SHARED)
        p.st.shared_ticks += t - p.shared_since;
    if (to == PLACE_SHARED) {
        int cpu = sched_getcpu();
        CPU_ZERO(&p.one);
        CPU_SET(cpu < 0 ? 0 : cpu, &p.one);
        p.shared_since = t;
    }
    p.now = to;
    p.gen++;
    p.st.switches++;
    p.window_start = 0;
    p.settle = SETTLE_EVENTS;
    /* The monitor's thread only (pid 0 is the caller); a failure leaves it where it was,
     * which costs speed, not correctness. */
    sched_setaffinity(0, sizeof(cpu_set_t), to == PLACE_SHARED ? &p.one : &p.all);
}

void placement_init(enum stub_placement how, uint32_t tsc_khz)
{
    uint64_t ticks_per_ms = tsc_khz ? tsc_khz : 1000000;
    p.spread_ticks = (uint32_t)(SPREAD_SPIN_NS * ticks_per_ms / 1000000);
    p.window_ticks = WINDOW_NS / 1000000 * ticks_per_ms;
    p.window_max_ticks = WINDOW_MAX_NS / 1000000 * ticks_per_ms;
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

/* The cheapest of the last windows in the placement kept: what a trial must beat. The
 * cheapest, not their mean, so that a window some other load on the host made dear does not
 * hand the trial a win it would not have. */
static uint64_t best(void)
{
    uint64_t b = UINT64_MAX;
    for (unsigned i = 0; i < p.nrecent && i < RECENT; i++)
        b = p.recent[i] < b ? p.recent[i] : b;
    return b;
}

/* A window ended with (cost) ticks a hand-off: keep or leave a trial, or open one when due. */
static void window_done(uint64_t cost)
{
    if (p.trial) {
        bool won = cost * 100 < best() * (100 - MARGIN_PCT);
        if (won && ++p.trial_won < TRIAL_WINDOWS)
            return;                 /* the next window is the trial's too */
        p.trial = false;
        p.trial_won = 0;
        p.st.trials++;
        if (won) {
            p.st.won++;
            p.cost = p.recent[0] = cost;
            p.nrecent = 1;
            p.interval = FIRST_INTERVAL;
        } else {
            move_to(other());
            p.interval = p.interval * 2 < MAX_INTERVAL ? p.interval * 2 : MAX_INTERVAL;
        }
        p.until_trial = p.interval;
        return;
    }
    bool far = p.cost && (p.now == PLACE_SHARED ? 3 * cost < 2 * p.cost : 2 * cost > 3 * p.cost);
    p.drifted = far ? p.drifted + 1 : 0;
    if (p.drifted >= DRIFT_WINDOWS) {
        /* the guest's work changed: what lost before may win now, so try it next */
        p.drifted = 0;
        p.cost = cost;
        p.nrecent = 0;
        p.interval = p.interval / 2 > FIRST_INTERVAL ? p.interval / 2 : FIRST_INTERVAL;
        p.until_trial = 1;
    }
    p.cost = p.cost ? (3 * p.cost + cost) / 4 : cost;
    p.recent[p.nrecent++ % RECENT] = cost;
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
    if (p.settle) {
        p.settle--;
        return;
    }
    if (!p.window_start) {
        p.window_start = t;
        p.window_events = 0;
        return;
    }
    uint64_t elapsed = t - p.window_start;
    unsigned n = ++p.window_events;
    bool enough = n >= QUIET_EVENTS;
    /* a trial that costs twice what it is to beat has lost: no need to pay for a whole window */
    bool lost = p.trial && enough && elapsed / n > 2 * best();
    if (!lost && !(enough && elapsed >= p.window_ticks) && elapsed < p.window_max_ticks)
        return;
    p.window_start = t;
    p.window_events = 0;
    if (enough)
        window_done(elapsed / n);
}

void placement_stats(struct placement_stats *st)
{
    *st = p.st;
    if (p.now == PLACE_SHARED)
        st->shared_ticks += __rdtsc() - p.shared_since;
}

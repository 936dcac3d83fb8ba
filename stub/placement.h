/* Where the monitor and the stub it runs sit on the host's CPUs, and how each waits for the other (stub/placement.c). */
#ifndef RING3_STUB_PLACEMENT_H
#define RING3_STUB_PLACEMENT_H

#include <stdint.h>
#include <sys/types.h>

/* --placement */
enum stub_placement {
    PLACE_AUTO,                 /* chosen by measurement while the guest runs, and chosen again (the default) */
    PLACE_SPREAD,               /* any cores: each side spins for the other's answer, then sleeps */
    PLACE_SHARED,               /* one core for both: each side sleeps at once, and the other runs there */
};

/* Once, before the first stub. On a host that gives this process one CPU only, every
 * placement is PLACE_SHARED (a spin there only keeps the other side off the CPU). */
void placement_init(enum stub_placement how, uint32_t tsc_khz);

/* How long the monitor spins for a stub's event before it sleeps, and a stub for the
 * monitor's answer (TSC ticks, for its control area) before it parks. */
uint64_t placement_spin_ns(void);
uint32_t placement_spin_ticks(void);

/* Before stub (pid) runs: moves it where the placement now puts it, unless it is there
 * already (*gen, 0 for a stub never placed, is kept up to date here). */
void placement_stub(pid_t pid, uint64_t *gen);

/* A stub just started: it starts up on any CPU, beside the monitor, whatever the placement
 * (a stub inherits the CPUs of the thread that started it); placement_stub places it once it
 * runs guest code. */
void placement_spawned(pid_t pid);

/* One event of a stub taken (a hand-off round trip ended): the measurement. */
void placement_handoff(void);

/* For --stats: trials of the other placement, those kept, the moves, and the time on one core. */
struct placement_stats {
    uint64_t trials, won, switches, shared_ticks;   /* shared_ticks: of the TSC */
};
void placement_stats(struct placement_stats *st);

#endif

/* `ring3 run --stats`: counts and host time of each kind of monitor event, printed at exit (like kvm_stat). */
#ifndef RING3_STATS_H
#define RING3_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <x86intrin.h>

#include "stub/host.h"

/* What a host signal taken from guest code turned out to be. */
enum stat_signal {
    STAT_FILL_KERNEL,       /* SIGSEGV: a host mapping filled for the guest kernel (CPL 0) */
    STAT_FILL_USER,         /* ... for a guest process (CPL 3) */
    STAT_GUEST_PF,          /* SIGSEGV: the guest's own page fault */
    STAT_LIMIT_RETRY,       /* #GP at the user segment limit: supervisor pages dropped */
    STAT_GP,                /* #GP: an I/O instruction, cpuid, or the guest's #GP */
    STAT_SYSCALL,           /* SIGSYS: int $n or sysenter by a guest process */
    STAT_ILLEGAL,           /* SIGILL: sysenter on AMD, or the guest's #UD */
    STAT_INSERT,            /* SIGILL or #GP: an instruction of an insert-mode kernel */
    STAT_TRAP,              /* SIGTRAP: int3, into, single step */
    STAT_MATH,              /* SIGFPE */
    STAT_TIMER,             /* SIGALRM: a device deadline */
    STAT_OTHER,
    STAT_SIGNAL_KINDS
};

extern bool stats_enabled;

void stats_init(void);
void stats_add_gate(unsigned entry, uint64_t t0);
void stats_add_insert(unsigned entry);
void stats_add_signal(enum stat_signal kind, uint64_t t0);
void stats_add_exception(unsigned vector);
void stats_add_interrupt(unsigned vector);
void stats_add_cr3(uint64_t t0);
void stats_add_handoff(uint64_t t0);
void stats_add_map_request(unsigned pages);
void stats_add_stub_lost(enum stub_loss why, int sig);
void stats_add_stub_renewed(void);
void stats_add_closed(bool reopened, unsigned released);
void stats_add_evicted(unsigned pages);
void stats_add_ldt_written(void);
void stats_add_host_cpuid(void);

/* The start of a timed event: the TSC when --stats is on, else 0 (nothing else is paid). */
static inline uint64_t stats_start(void) { return stats_enabled ? __rdtsc() : 0; }

/* Each records one event ended now, when --stats is on. */
static inline void stats_gate(unsigned entry, uint64_t t0) { if (stats_enabled) stats_add_gate(entry, t0); }
/* An entry emulated for an insert-mode trap; its time counts under STAT_INSERT. */
static inline void stats_insert(unsigned entry) { if (stats_enabled) stats_add_insert(entry); }
static inline void stats_signal(enum stat_signal k, uint64_t t0) { if (stats_enabled) stats_add_signal(k, t0); }
static inline void stats_exception(unsigned vector) { if (stats_enabled) stats_add_exception(vector); }
static inline void stats_interrupt(unsigned vector) { if (stats_enabled) stats_add_interrupt(vector); }
static inline void stats_cr3(uint64_t t0) { if (stats_enabled) stats_add_cr3(t0); }
/* One run of a stub's guest code, from the hand-off to its event: the wait for another process. */
static inline void stats_handoff(uint64_t t0) { if (stats_enabled) stats_add_handoff(t0); }
/* A hand-off that carries a checked map of (pages) pages. */
static inline void stats_map_request(unsigned pages) { if (stats_enabled) stats_add_map_request(pages); }
/* A stub given up (aspace.c), ended by signal (sig) (0: it exited): its process got a #GP that no
 * instruction of its own caused, unless it broke the stub itself. A process that means no harm
 * never loses one. */
static inline void stats_stub_lost(enum stub_loss why, int sig) { if (stats_enabled) stats_add_stub_lost(why, sig); }
/* A stub replaced by a fresh one, cheaper than clearing its host LDT (aspace.c, push_ldt). */
static inline void stats_stub_renewed(void) { if (stats_enabled) stats_add_stub_renewed(); }
/* A page of ring3's own host address space filled again on the frame it was closed on (mmu.c,
 * close_page): an mprotect, not a new host mapping. */
static inline void stats_reopened(void) { if (stats_enabled) stats_add_closed(true, 0); }
/* (pages) closed pages given back to the reservation at once, past mmu.c's bound. */
static inline void stats_released(unsigned pages) { if (stats_enabled) stats_add_closed(false, pages); }
/* A TLB of (pages) pages emptied: the host would give it no more mappings (mmu.c, evict_own). */
static inline void stats_evicted(unsigned pages) { if (stats_enabled) stats_add_evicted(pages); }
/* One entry of a host LDT written, a host modify_ldt that copies the whole table (ldt.c). */
static inline void stats_ldt_written(void) { if (stats_enabled) stats_add_ldt_written(); }
/* One CPUID run on the host for the guest's: a leaf not asked before (cpu_model.c, host_answer). */
static inline void stats_host_cpuid(void) { if (stats_enabled) stats_add_host_cpuid(); }

/* Print the table to (f): one row per kind seen, with count, total and mean host time. */
void stats_report(FILE *f, double seconds_in_all);

#endif

/* The guest's breakpoint registers (DR0-DR3 under DR7) as the host's: one perf event of type
 * PERF_TYPE_BREAKPOINT per enabled slot, on the host task that runs guest user code (the
 * stub of the address space, or the monitor's own thread with --isolation=none). A hit
 * sends that task SIGTRAP with si_code TRAP_PERF and the slot number as si_perf_data. */
#ifndef RING3_BREAKPOINTS_H
#define RING3_BREAKPOINTS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* si_code of a perf event's SIGTRAP (include/uapi/asm-generic/siginfo.h), which Debian 12's
 * glibc headers do not name yet. */
#define R3_TRAP_PERF 6

#define BP_SLOTS 4

/* A TRAP_PERF SIGTRAP's si_perf_data: the word after si_addr (the _perf member of _sigfault's
 * union, x86-64 layout), here the slot number. */
static inline uint64_t bp_siginfo_data(const siginfo_t *si)
{
    uint64_t data;
    __builtin_memcpy(&data, (const char *)&si->si_addr + sizeof(void *), sizeof data);
    return data;
}

/* What one host task has installed; all zero, nothing. */
struct bp_task {
    uint64_t want[BP_SLOTS];    /* what slot n stands for (breakpoints.c: slot_want); 0: nothing */
    int fd[BP_SLOTS];           /* if want[n]: its perf event, or -1 where the host refused it */
};

/* Make host task (tid) (0: the calling thread) break where (dr), the guest's DR0-DR7, asks:
 * a slot enabled in DR7 (L or G) for instruction execution, data writes or data reads and
 * writes (SDM vol. 3, 17.2.4; I/O breakpoints, RW 10b, are not modelled). Cheap when DR7
 * enables nothing and nothing is installed. The first time the host refuses, one line on
 * stderr says so; the guest's breakpoints then have no effect. */
void bp_sync(struct bp_task *t, int tid, const uint32_t dr[8]);

/* gdb's watchpoints (monitor/gdb/) are perf events of the same kind on the monitor's own thread,
 * where the guest kernel runs: their si_perf_data is BP_GDB_TAG + their number. */
#define BP_GDB_TAG 0x6764000u
static inline bool bp_is_gdb(uint64_t perf_data) { return (perf_data & ~0xFFull) == BP_GDB_TAG; }

/* A data breakpoint for the calling thread: after each write (or, with (reads), each read or
 * write) of host user code to [addr, addr + len), len 1, 2, 4 or 8 and aligned to it, a
 * SIGTRAP with si_perf_data (tag). Returns its descriptor (close it to remove it), or -1. */
int bp_open_data(uint32_t addr, unsigned len, bool reads, uint64_t tag);

/* Close what (t) has installed (its task is gone, or is going). */
void bp_task_close(struct bp_task *t);

#endif

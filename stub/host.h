/* The monitor's side of the stub processes: start, feed, wait for and end them (stub/host.c).
 *
 * Knows nothing of the guest: what to map and what an event means is the
 * monitor's business (monitor/mmu/aspace.c). Everything read back from a stub is
 * treated as hostile: a stub may be run by guest code.
 */
#ifndef RING3_STUB_HOST_H
#define RING3_STUB_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "placement.h"
#include "protocol.h"

struct stub;

/* What a stub reported, copied out of its control area once. */
struct stub_event {
    unsigned kind;              /* STUB_EV_SIGNAL or STUB_EV_GATE */
    unsigned entry;             /* STUB_EV_GATE: the ABI entry number (unchecked) */
    int sig, si_code;
    uint64_t addr, perf_data, trapno, err;
    uint64_t fsbase, gsbase;
    uint64_t rip64;
    struct stub_regs r;
};

/* How a guest process's system calls reach the monitor (--syscalls). */
enum stub_syscalls {
    STUB_SUD,                   /* seccomp traps them: SIGSYS in the stub, its handler hands off (the default) */
    STUB_SYSEMU,                /* the monitor traces each stub: a PTRACE_SYSEMU stop (trace.h) */
};

/* Once, before the first stub: (guest_memfd) is guest physical memory, which
 * a stub maps from; (xsave_size) the size of the XSAVE images exchanged
 * (CPUID.(EAX=0DH,ECX=0):ECX), at most STUB_FPU_MAX; (how) the redirection;
 * (where) the placement of the monitor and the stubs (placement.h). Returns
 * 0, or -1 after printing one line that says why (e.g. no seccomp user
 * notification). */
int stubs_init(int guest_memfd, size_t xsave_size, enum stub_syscalls how, enum stub_placement where);

/* A stub ready to run guest code, with nothing in its low 4 GiB but the
 * runtime table. Taken from a pool of stubs started ahead of need; refills
 * the pool without waiting. NULL (after a message) if none can be started. */
struct stub *stub_create(void);

/* The CPUID answers every stub gives its guest code itself (protocol.h, "CPUID"): the monitor
 * answered (leaf, sub) with (out), for every sub-leaf when (any_sub). Forgotten all at once when
 * an answer changes, before any stub runs guest code again. */
void stubs_cpuid_answered(uint32_t leaf, uint32_t sub, bool any_sub, const uint32_t out[4]);
void stubs_cpuid_forget(void);

/* Kill (s), reap it and free what it held. Returns its wait status (waitpid(2)), for messages. */
int stub_destroy(struct stub *s);

/* Why a stub that stub_resume or stub_wait gave up on is gone. */
enum stub_loss {
    STUB_LOSS_DIED,             /* it ended of itself: a signal it could not take, seccomp's kill */
    STUB_LOSS_SILENT,           /* killed: it owed an answer (to a preemption, at its map site) too long */
    STUB_LOSS_PROTOCOL,         /* killed: it broke the protocol, or ptrace failed */
    STUB_LOSS_KINDS
};
enum stub_loss stub_loss(const struct stub *s);
/* (why) in a few words, for messages and --stats. */
const char *stub_loss_name(enum stub_loss why);

/* Changes carried out before guest code next runs in (s), unmaps first.
 * Return false when the queue is full: stub_resume first, or unmap all. */
bool stub_queue_unmap(struct stub *s, uint32_t linear, uint32_t pages);
bool stub_queue_map(struct stub *s, uint32_t linear, uint64_t gpa, uint32_t pages, int prot);
/* set_thread_area (i386 ABI) of (d) in the stub, for host GDT TLS entries 12-14. */
void stub_queue_tls(struct stub *s, const struct stub_tls *d);
/* modify_ldt (func 0x11) of (d) in the stub: one entry of its host LDT.
 * False when STUB_LDT_MAX entries are queued already. */
bool stub_queue_ldt(struct stub *s, const struct stub_tls *d);

/* Run guest code in (s) from (r) (cs 0x23), with the vector state (xsave,
 * XSAVE standard format; NULL: keep the stub's own). Carries out the queued
 * changes first; a map goes through the checked hand-off of protocol.h.
 * Returns 0, or -1 when the stub did not follow the protocol or died (it is
 * then killed; stub_destroy it). */
int stub_resume(struct stub *s, const struct stub_regs *r, const void *xsave);

/* (s), which handed off an event and has not been resumed since, is made to stop where it
 * provably runs no guest code until stub_resume: in its map site's call (protocol.h,
 * "Holding"). Guest code may forge an event and run on, and the guest kernel may free a page
 * the stub maps once it has dropped the page's translation: the monitor holds the stub before
 * it lets the guest kernel go on from a TLB flush or a switch to another address space. 0 (or
 * nothing to do: --syscalls=sysemu stops a stub at each event already), or -1 when the stub
 * did not come: it is given up, and has ended. */
int stub_hold(struct stub *s);

enum stub_wait_result { STUB_WAIT_EVENT, STUB_WAIT_TIMEOUT, STUB_WAIT_DIED };

/* Wait for the next event of (s), at most until (deadline_ns) on
 * CLOCK_MONOTONIC (0: no limit); a host signal to the monitor ends the wait
 * early as a timeout. Spins a little first, then sleeps: the monitor does not
 * burn a core while guest code computes. On STUB_WAIT_EVENT fills (ev) and,
 * when (xsave) is not NULL, copies the stub's vector state there. */
enum stub_wait_result stub_wait(struct stub *s, uint64_t deadline_ns, struct stub_event *ev, void *xsave);

/* Copy the vector state (s) reported with its last event into (xsave), an XSAVE image in
 * standard format of the size stubs_init was given, as stub_wait would have: PKRU left
 * out, and bytes 464-511 of the destination (software's, SDM vol. 1, 10.5.1; a signal
 * frame's magic) kept. */
void stub_take_vector_state(const struct stub *s, void *xsave);

/* Ask (s) for the CPU back: its guest code is interrupted and reported as a
 * STUB_EV_SIGNAL with sig STUB_PREEMPT_SIG (unless another event came first). */
void stub_preempt(struct stub *s);

/* How many map calls a preemption interrupted, which were answered when made again
 * (protocol.h, "Mapping"), for --stats. */
uint64_t stubs_map_calls_restarted(void);

/* How many resumes and holds found the stub parked at its map site (protocol.h, "Parking"),
 * for --stats. */
uint64_t stubs_parked_found(void);

/* How many times a stub owed an answer for longer than the wall-time limit while runnable and
 * without a CPU from the host, and was waited for longer (host.c, SILENT_STARVED_NS), for --stats. */
uint64_t stubs_starved(void);

/* How many guest cpuids the stubs answered themselves from the monitor's answers (protocol.h,
 * "CPUID"), by their own count in the control area, for --stats. */
uint64_t stubs_cpuids_here(void);

/* How many times stub_hold made a stub come to its map site, and the time it waited for them
 * in all (*wait_ns), for --stats. */
uint64_t stubs_holds(uint64_t *wait_ns);

/* The host process id of (s), for messages. */
int stub_pid(const struct stub *s);

/* The address of (s)'s map site (reported at READY), for tests and messages. */
uint64_t stub_map_site(const struct stub *s);
/* The address after the int3 of (s)'s traced hand-off (reported at READY; sysemu), for tests. */
uint64_t stub_trap_site(const struct stub *s);

/* (s)'s vDSO base, reported at READY before any guest code ran: where the
 * host kernel sends a compat-mode sysenter back to (monitor/host/host_probe.h). */
uint64_t stub_vdso(const struct stub *s);

#endif

/* --syscalls=sysemu: the monitor as the ptrace tracer of its stubs (stub/trace.c).
 *
 * The paper's redirection: a guest process's system call stops its host
 * process at entry (PTRACE_SYSEMU), the host kernel never runs it, and the
 * tracer reads and writes the registers. Here it replaces, for system calls
 * and preemptions, the stub's own signal handler and futex hand-off (the
 * default, --syscalls=sud); every other event still goes through the stub's
 * handler, which then stops at its trap site instead of waking a futex
 * (protocol.h). These functions only speak ptrace; stub/host.c decides.
 */
#ifndef RING3_STUB_TRACE_H
#define RING3_STUB_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* Once, before the first stub: blocks SIGCHLD in the monitor (trace_wait
 * waits for it) and opens trace_stop_fd's signalfd for it. 0, or -1 after one
 * line that says why. */
int trace_init(void);

/* A descriptor that polls readable once a traced stub stops (or ends): a signalfd of the
 * SIGCHLD a stop sends its tracer. For a wait on other descriptors too; trace_wait then says
 * which stop it was. trace_stops_seen reads it empty, to be called before that trace_wait, so
 * that a stop after it makes the descriptor readable again. */
int trace_stop_fd(void);
void trace_stops_seen(void);

/* Trace (pid), a child of this process that is not stopped. 0, or -1 after
 * one line that says why (e.g. ptrace forbidden by kernel.yama.ptrace_scope). */
int trace_attach(pid_t pid);

/* What a stop of a traced stub was. */
enum trace_stop {
    TRACE_NONE,                 /* nothing yet (the wait timed out) */
    TRACE_SYSCALL,              /* PTRACE_SYSEMU's stop at a system call's entry: regs.orig_rax is the number */
    TRACE_SIGNAL,               /* a signal about to be delivered: sig */
    TRACE_GONE,                 /* the stub exited or was killed */
};

struct trace_event {
    enum trace_stop stop;
    int sig;                    /* TRACE_SIGNAL */
    struct user_regs_struct regs;   /* TRACE_SYSCALL, TRACE_SIGNAL */
};

/* The next stop of (pid), waiting at most until (deadline_ns) on
 * CLOCK_MONOTONIC (0: no limit); spins (spin_ns) first. A group stop is
 * continued and not reported. A host signal to the monitor ends the wait
 * early as TRACE_NONE, as the deadline does. */
void trace_wait(pid_t pid, uint64_t deadline_ns, uint64_t spin_ns, struct trace_event *ev);

/* Continue a stopped (pid): in guest code with (regs) and, when (xsave) is
 * not NULL, the vector state (XSAVE standard format, (xsave_size) bytes),
 * stopping at its next system call; or with PTRACE_CONT and (sig) delivered
 * (0: none), its registers as they are (regs NULL) or as given. 0 or -1. */
int trace_sysemu(pid_t pid, const struct user_regs_struct *regs, const void *xsave, size_t xsave_size);
int trace_cont(pid_t pid, const struct user_regs_struct *regs, const void *xsave, size_t xsave_size, int sig);

/* The vector state of a stopped (pid), (xsave_size) bytes of it. 0 or -1. */
int trace_get_xstate(pid_t pid, void *xsave, size_t xsave_size);

#endif

/* The runtime page: entry table, shared page and gate code at the top of the guest's 4 GiB. */
#ifndef RING3_RUNTIME_H
#define RING3_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared.h"

/* Called on the monitor's gate stack, with the guest registers in the shared
 * page and sh->entry naming the entry taken. When it returns, the guest
 * resumes with the shared page's registers, EIP, EFLAGS and selectors. */
typedef void (*runtime_gate_fn)(void);

/* Called the same way, before the vector registers are saved, for SYSENTER and
 * SYSEXIT: nonzero when it did all the gate's work (fast_syscall.h). */
typedef int (*runtime_fast_fn)(void);

/* Maps R3_RUNTIME_BASE..+R3_RUNTIME_SIZE (which must lie inside the caller's
 * low-4-GiB reservation or be free), copies the blob, fills the entry table
 * and makes table and code read-only; (fast) may be NULL. Returns 0, or -1
 * with errno set. */
int runtime_install(runtime_gate_fn gate, runtime_fast_fn fast);

/* Enters the guest with the state in the shared page; does not return. */
_Noreturn void runtime_enter_guest(void);

/* Whether a host RIP lies in the blob's 32-bit stubs. */
int runtime_in_stubs(uint64_t rip);

/* SYSENTER in the runtime (fast_syscall.h): its entry's gate stub, which the monitor
 * points SH_SYSENTER_TO at, or the stub that does it without the monitor. */
extern uint32_t runtime_sysenter_gate, runtime_sysenter_lazy;

/* A fault at host (rip) on one of the two pushes with which sysenter_lazy begins (a
 * stack page not mapped): points (rip) and (rsp) at the gate instead, as if that had been
 * taken, and returns true; false for any other address. */
bool runtime_sysenter_fault(uint64_t *rip, uint64_t *rsp);

/* The XSAVE image (standard format) the gate keeps the guest's vector state
 * in while monitor code runs, and its size in (size). */
void *runtime_xsave(size_t *size);

/* The monitor's own FS base (glibc TLS), reinstated on every entry. */
extern uint64_t r3_monitor_fsbase;

/* Syscall User Dispatch: the selector byte the gate and signal entries set
 * to allow while monitor code runs and to block while guest code runs, and
 * the restorer, the one place allowed to make a system call regardless. */
extern volatile uint8_t r3_sud_selector;
extern const char r3_sigreturn[], r3_sigreturn_end[];

/* Set by a signal handler that may have changed guest state the host's
 * sigreturn does not restore from the signal frame (FS and GS selectors, the
 * GS base): the signal entry loads them from the shared page on its way out,
 * and clears it. EFLAGS.NT and ID it always takes from the frame. */
extern volatile uint8_t r3_signal_reload_state;

#endif

/* What the host CPU and kernel do that differs by vendor, probed once at start-up. */
#ifndef RING3_HOST_PROBE_H
#define RING3_HOST_PROBE_H

#include <stdbool.h>
#include <stdint.h>

/* Run one compatibility-mode sysenter in a child process under Syscall User
 * Dispatch, before guest memory takes the low 4 GiB. Returns the RIP of the
 * SIGSYS the host kernel raised (its 32-bit vDSO landing pad, on Intel), or
 * 0 when sysenter raised #UD (AMD) or the probe could not tell in time; 0 is
 * the safe answer. Costs one fork; never fails the run. */
uint64_t host_probe_sysenter(void);

/* The landing pad in another process of this host (a stub) whose vDSO is at
 * (vdso): the kernel computes it as that process's vDSO base plus an offset
 * of its own build, which this process's (pad), found by the probe, shows.
 * 0 when (pad) is 0 (sysenter raises #UD here). */
uint64_t host_probe_pad_for(uint64_t pad, uint64_t vdso);

/* Whether a host signal (sig) at (rip) (faulting address (addr), guest %eax
 * (eax)) is the trace of a guest sysenter the host kernel took and sent back
 * to its landing pad (pad) (Intel): a SIGSYS there; or, when the kernel could
 * not read [%ebp], -EFAULT in %eax and a fault on arriving there, at the pad
 * or, should the return to compatibility mode keep only the low 32 bits of
 * RIP, a fetch fault at that address. Never true when (pad) is 0. */
bool host_probe_sysenter_returned(uint64_t pad, int sig, uint64_t rip, uint64_t addr, uint32_t eax);

#endif

/* What the host CPU and kernel do that differs by vendor, probed once at start-up. */
#ifndef RING3_HOST_PROBE_H
#define RING3_HOST_PROBE_H

#include <stdint.h>

/* Run one compatibility-mode sysenter in a child process under Syscall User
 * Dispatch, before guest memory takes the low 4 GiB. Returns the RIP of the
 * SIGSYS the host kernel raised (its 32-bit vDSO landing pad, on Intel), or
 * 0 when sysenter raised #UD (AMD) or the probe could not tell in time; 0 is
 * the safe answer. Costs one fork; never fails the run. */
uint64_t host_probe_sysenter(void);

#endif

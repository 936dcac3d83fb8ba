/* Facts about the host CPU that differ by vendor, found by experiment at start-up. */
#ifndef RING3_HOST_PROBE_H
#define RING3_HOST_PROBE_H

#include <stdint.h>

/* Run a compatibility-mode sysenter in a child process under Syscall User
 * Dispatch. Returns the 32-bit address the host kernel returns to (its
 * 32-bit vDSO landing pad, as on Intel CPUs), or 0 when sysenter raises #UD
 * (AMD CPUs) or the probe could not tell; 0 is the safe answer: sysenter is
 * then only recognised by its #UD. (*signal) is the signal the child got
 * (SIGSYS, SIGILL), 0 if it reported nothing. Costs one fork. */
uint32_t host_probe_sysenter(int *signal);

#endif

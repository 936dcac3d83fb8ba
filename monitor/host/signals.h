/* Host signals taken in guest code: each becomes the guest event the CPU would have raised. */
#ifndef RING3_SIGNALS_H
#define RING3_SIGNALS_H

#include <stdint.h>

#include "monitor/cpu/vcpu.h"
#include "monitor/mmu/aspace.h"
#include "stub/host.h"

/* Install the handlers (on a sigaltstack) and Syscall User Dispatch. Returns
 * 0, or -1 with errno set. */
int signals_init(struct vcpu *v);

/* One event of a stub's guest code, (r) its registers, handled as a host
 * signal in guest code is in-process. */
void signals_stub_event(struct vcpu *v, const struct host_fault *f, const struct stub_regs *r,
                        uint64_t fsbase, uint64_t gsbase);

#endif

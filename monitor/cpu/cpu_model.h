/* The CPU the guest sees: cpuid and MSRs. */
#ifndef RING3_CPU_MODEL_H
#define RING3_CPU_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "vcpu.h"

void cpu_cpuid(struct vcpu *v, uint32_t leaf, uint32_t sub, uint32_t out[4]);
/* Whether cpu_cpuid's answer for (leaf) is the same for every sub-leaf (ECX). */
bool cpu_cpuid_without_subleaves(uint32_t leaf);
bool cpu_rdmsr(struct vcpu *v, uint32_t msr, uint64_t *value);
bool cpu_wrmsr(struct vcpu *v, uint32_t msr, uint64_t value);
/* XCR0 and the MSRs as at power-up. */
void cpu_reset(struct vcpu *v);
/* xsetbv: XCR(index) := value; false if the CPU would raise #GP. */
bool cpu_xsetbv(struct vcpu *v, uint32_t index, uint64_t value);
/* Make guest processes' cpuid trap (#GP) where the host allows it; returns whether it does. */
bool cpu_cpuid_faulting_on(void);

#endif

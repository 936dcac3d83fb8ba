/* Guest instruction bytes for the monitor's decoders, fetched as the CPU would, and Capstone. */
#ifndef RING3_FETCH_H
#define RING3_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include <capstone/capstone.h>

#include "vcpu.h"

/* The longest IA-32 instruction (SDM vol. 2, 2.3.11). */
#define FETCH_INSN_MAX 15u

/* Copy the bytes of guest code at (eip) into (code), at most (max): those up
 * to the end of its page, and those after it only if the next page is
 * readable at the current CPL, so that a short instruction at the end of a
 * page never raises a #PF for the page after (the CPU fetched the whole
 * instruction before it faulted). Returns how many were copied. */
size_t fetch_code(struct vcpu *v, uint32_t eip, uint8_t *code, size_t max);

/* The monitor's Capstone handle (x86-32, details on, Intel syntax) and its
 * instruction buffer, opened on first use. Ends the run (EXIT_HOST) when
 * Capstone cannot be opened. */
void fetch_capstone(struct vcpu *v, csh *cs, cs_insn **insn);

#endif

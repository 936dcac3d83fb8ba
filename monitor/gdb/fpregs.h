/* gdb's i386 x87 and SSE registers, from and to the guest's FXSAVE image (fpregs.c).
 *
 * gdb's order after the 16 general and segment registers (its i386 "core" and "sse" features):
 * st0-st7 (10 bytes each, in stack order), fctrl, fstat, ftag, fiseg, fioff, foseg, fooff, fop
 * (4 bytes each; ftag is the full tag word), xmm0-xmm7 (16 bytes each), mxcsr (4 bytes).
 */
#ifndef RING3_GDB_FPREGS_H
#define RING3_GDB_FPREGS_H

#include <stdint.h>

#define FPREGS_GDB_BYTES (8 * 10 + 8 * 4 + 8 * 16 + 4)

/* The registers in gdb's order, from the legacy region of an XSAVE image, as XRSTOR would load
 * them: a component its XSTATE_BV marks initial reads as its initial state. */
void fpregs_to_gdb(const uint8_t *image, uint8_t out[FPREGS_GDB_BYTES]);

/* gdb's registers (in) into the XSAVE image (fx), standard format, as every image the monitor
 * keeps is; the instruction and operand pointers stay. */
void fpregs_from_gdb(uint8_t *fx, const uint8_t in[FPREGS_GDB_BYTES]);

#endif

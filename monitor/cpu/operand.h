/* Decodes the DESC/AUX words of a rewritten site (include/ring3/abi.h) against the guest registers. */
#ifndef RING3_OPERAND_H
#define RING3_OPERAND_H

#include <stdint.h>

#include "ring3/abi.h"

enum { SREG_ES, SREG_CS, SREG_SS, SREG_DS, SREG_FS, SREG_GS };
enum { REG_EAX, REG_ECX, REG_EDX, REG_EBX, REG_ESP, REG_EBP, REG_ESI, REG_EDI };

/* The operand size of (desc) in bytes: 1, 2 or 4. */
unsigned operand_bytes(uint32_t desc);

/* The offset (before the segment base) of the memory operand of (desc, aux).
 * (regs) are the guest registers at the gate, where %esp is (frame) bytes
 * below its value at the first byte of the site; that difference is added
 * back when %esp is the base register. */
uint32_t operand_offset(uint32_t desc, uint32_t aux, const uint32_t regs[8], uint32_t frame);

/* The segment register the memory operand of (desc) is addressed through:
 * the override, else SS for an %esp or %ebp base, else DS (SDM vol. 1, 3.7.4). */
unsigned operand_segment(uint32_t desc);

/* Reads/writes general register (num) at (bytes) width; 1-byte numbers 4-7 are ah, ch, dh, bh.
 * A 4-byte write replaces the register; narrower writes keep the other bits. */
uint32_t reg_read(const uint32_t regs[8], unsigned num, unsigned bytes);
void reg_write(uint32_t regs[8], unsigned num, unsigned bytes, uint32_t value);

#endif

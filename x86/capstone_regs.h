/* Capstone's x86 register names as the instruction encoding numbers them. */
#ifndef RING3_X86_CAPSTONE_REGS_H
#define RING3_X86_CAPSTONE_REGS_H

#include <capstone/capstone.h>

/* The segment register (sreg field order: 0 es, 1 cs, 2 ss, 3 ds, 4 fs, 5 gs;
 * SDM vol. 2, 3.1.1.3) of Capstone register (r), or -1 for any other. */
static inline int x86_sreg_number(x86_reg r)
{
    switch (r) {
    case X86_REG_ES: return 0;
    case X86_REG_CS: return 1;
    case X86_REG_SS: return 2;
    case X86_REG_DS: return 3;
    case X86_REG_FS: return 4;
    case X86_REG_GS: return 5;
    default: return -1;
    }
}

#endif

/* Decodes the DESC/AUX words of a rewritten site against the guest registers. */
#include "operand.h"

unsigned operand_bytes(uint32_t desc)
{
    return 1u << R3_D_SIZE(desc);
}

uint32_t operand_offset(uint32_t desc, uint32_t aux, const uint32_t regs[8], uint32_t frame)
{
    uint32_t off = aux;
    unsigned base = R3_D_BASE(desc), index = R3_D_INDEX(desc);
    if (base != R3_NOREG)
        off += regs[base] + (base == REG_ESP ? frame : 0);
    if (index != R3_NOREG)
        off += regs[index] << R3_D_SCALE(desc);
    return off;
}

unsigned operand_segment(uint32_t desc)
{
    if (R3_D_SEG(desc))
        return R3_D_SEG(desc) - 1;
    unsigned base = R3_D_BASE(desc);
    return base == REG_ESP || base == REG_EBP ? SREG_SS : SREG_DS;
}

uint32_t reg_read(const uint32_t regs[8], unsigned num, unsigned bytes)
{
    if (bytes == 1)
        return num < 4 ? regs[num] & 0xff : (regs[num - 4] >> 8) & 0xff;
    if (bytes == 2)
        return regs[num] & 0xffff;
    return regs[num];
}

void reg_write(uint32_t regs[8], unsigned num, unsigned bytes, uint32_t value)
{
    if (bytes == 1) {
        if (num < 4)
            regs[num] = (regs[num] & ~0xffu) | (value & 0xff);
        else
            regs[num - 4] = (regs[num - 4] & ~0xff00u) | ((value & 0xff) << 8);
    } else if (bytes == 2) {
        regs[num] = (regs[num] & ~0xffffu) | (value & 0xffff);
    } else {
        regs[num] = value;
    }
}

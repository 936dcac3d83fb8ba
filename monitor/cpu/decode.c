/* Decodes the sensitive instructions unrewritten guest code may run that arrive as #GP: cli, sti, in, out, ins, outs, cpuid;
 * and the rewritten cli when code assembled for CPL 0 runs at CPL 3.
 *
 * Guest processes are not rewritten. With IOPL 3 (SDM vol. 1, 18.2; vol. 3,
 * 6.8.1) the I/O instructions are legal at CPL 3, but the host keeps the
 * real IOPL at 0, so they fault and arrive here as #GP; with CPUID faulting
 * on, so does cpuid. The monitor then runs them through the same ABI entries
 * rewritten code calls.
 */
#include "ring3/abi.h"

#include "monitor/mmu/mmu.h"

#include "emulate.h"
#include "fetch.h"
#include "vcpu.h"

static uint32_t desc_of(unsigned kind, unsigned bytes, unsigned base, bool rep, unsigned seg)
{
    unsigned size = bytes == 1 ? R3_SIZE_8 : bytes == 2 ? R3_SIZE_16 : R3_SIZE_32;
    return (kind << R3_D_KIND_SHIFT) | (size << R3_D_SIZE_SHIFT) | (base << R3_D_BASE_SHIFT) |
           (R3_NOREG << R3_D_INDEX_SHIFT) | ((uint32_t)rep << R3_D_REP_SHIFT) |
           (seg << R3_D_SEG_SHIFT);
}

bool decode_io_instruction(struct vcpu *v)
{
    uint8_t code[FETCH_INSN_MAX + 1] = {0};
    fetch_code(v, v->sh->eip, code, sizeof code);
    unsigned i = 0, opsize = 4, seg = 0;
    bool rep = false;
    for (; i < 15; i++) {
        switch (code[i]) {
        case 0x66: opsize = 2; continue;
        case 0xF3: rep = true; continue;
        case 0x26: seg = 1 + SREG_ES; continue;
        case 0x2E: seg = 1 + SREG_CS; continue;
        case 0x36: seg = 1 + SREG_SS; continue;
        case 0x3E: seg = 1 + SREG_DS; continue;
        case 0x64: seg = 1 + SREG_FS; continue;
        case 0x65: seg = 1 + SREG_GS; continue;
        }
        break;
    }
    uint8_t op = code[i++];
    unsigned entry, bytes = op & 1 ? opsize : 1;
    uint32_t desc, aux = 0;
    switch (op) {
    case 0x0F:
        if (code[i++] != 0xA2)
            return false;
        entry = R3_E_CPUID;     /* faulting (CPUID faulting), not IOPL-sensitive */
        desc = 0;
        break;
    case 0xFA: entry = R3_E_CLI; desc = 0; break;
    case 0xC6:
        /* The rewritten cli, `movb $0, %ss:R3_VIF_ADDR` (ABI: CLI is INLINE),
         * run outside CPL 0: a cli all the same (IOPL decides, SDM vol. 3,
         * 6.8.1), not a store to ring3's shared page. */
        if (seg != 1 + SREG_SS || code[i] != 0x05 || code[i + 5] != 0 ||
            (code[i + 1] | code[i + 2] << 8 | code[i + 3] << 16 | (uint32_t)code[i + 4] << 24) !=
                R3_VIF_ADDR)
            return false;
        i += 6;
        entry = R3_E_CLI;
        desc = 0;
        break;
    case 0xFB: entry = R3_E_STI; desc = 0; break;
    case 0xE4: case 0xE5: case 0xE6: case 0xE7:
        entry = op < 0xE6 ? R3_E_IN : R3_E_OUT;
        aux = code[i++];
        desc = desc_of(R3_KIND_IMM, bytes, R3_NOREG, false, 0);
        break;
    case 0xEC: case 0xED: case 0xEE: case 0xEF:
        entry = op < 0xEE ? R3_E_IN : R3_E_OUT;
        desc = desc_of(R3_KIND_REG, bytes, REG_EDX, false, 0);
        break;
    case 0x6C: case 0x6D: case 0x6E: case 0x6F:
        entry = op < 0x6E ? R3_E_INS : R3_E_OUTS;
        desc = desc_of(R3_KIND_NONE, bytes, R3_NOREG, rep, entry == R3_E_OUTS ? seg : 0);
        break;
    default:
        return false;
    }
    v->sh->eip += i;       /* the entries act as from after the instruction */
    emulate_entry(v, entry, desc, aux);
    return true;
}

/* gdb's i386 x87 and SSE registers and the FXSAVE image (fpregs.h).
 *
 * The FXSAVE layout (SDM vol. 1, 10.5.1, table 10-2): FCW at 0, FSW at 2, the abridged tag
 * byte at 4, FOP at 6, FPU IP at 8 and CS at 12, data pointer at 16 and DS at 20 (in the
 * 64-bit format, 12 and 20 are the high halves of the pointers, zero for a 32-bit guest),
 * MXCSR at 24, ST0-ST7 at 32 in 16-byte slots, XMM0-XMM7 at 160.
 */
#include <string.h>

#include "fpregs.h"

#define FX_FCW   0
#define FX_FSW   2
#define FX_FTW   4
#define FX_FOP   6
#define FX_FIP   8
#define FX_FCS   12
#define FX_FDP   16
#define FX_FDS   20
#define FX_MXCSR 24
#define FX_ST    32
#define FX_XMM   160
#define XSTATE_BV 512       /* the XSAVE header's first field (SDM vol. 1, 13.4.2) */

enum { TAG_VALID = 0, TAG_ZERO = 1, TAG_SPECIAL = 2, TAG_EMPTY = 3 };

static uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const uint8_t *p) { uint32_t x; memcpy(&x, p, 4); return x; }

/* The tag of an 80-bit register that is not empty, from its value (SDM vol. 1, 8.1.7 and
 * table 8-3): zero, a valid normal number, or special (NaN, infinity, denormal, unsupported). */
static unsigned tag_of(const uint8_t *st)
{
    uint64_t mantissa;
    memcpy(&mantissa, st, 8);
    unsigned exponent = get16(st + 8) & 0x7FFF;
    if (exponent == 0x7FFF)
        return TAG_SPECIAL;
    if (exponent == 0)
        return mantissa ? TAG_SPECIAL : TAG_ZERO;
    return mantissa >> 63 ? TAG_VALID : TAG_SPECIAL;
}

/* The full tag word from the abridged one: physical register R(i) is ST((i - TOP) mod 8). */
static uint32_t full_tag(const uint8_t *fx)
{
    unsigned top = (get16(fx + FX_FSW) >> 11) & 7, abridged = fx[FX_FTW];
    uint32_t tag = 0;
    for (unsigned i = 0; i < 8; i++) {
        unsigned t = abridged >> i & 1 ? tag_of(fx + FX_ST + 16 * ((i - top) & 7)) : TAG_EMPTY;
        tag |= t << (2 * i);
    }
    return tag;
}

/* An image's x87 (bit 0) and SSE (bit 1) state where its XSTATE_BV says the component is in
 * its initial configuration: XSAVEOPT need not have written it, and XRSTOR would load this
 * (SDM vol. 1, 13.6: FCW 037FH, everything else zero, every register empty). */
static void initial_state(const uint8_t *fx, uint8_t *copy)
{
    memcpy(copy, fx, 512);
    if (!(fx[XSTATE_BV] & 1)) {
        memset(copy, 0, FX_MXCSR);
        memset(copy + FX_ST, 0, 8 * 16);
        copy[FX_FCW] = 0x7F;
        copy[FX_FCW + 1] = 0x03;
    }
    if (!(fx[XSTATE_BV] & 2))
        memset(copy + FX_XMM, 0, 8 * 16);
}

void fpregs_to_gdb(const uint8_t *image, uint8_t out[FPREGS_GDB_BYTES])
{
    uint8_t fx[512];
    initial_state(image, fx);
    for (unsigned i = 0; i < 8; i++)
        memcpy(out + 10 * i, fx + FX_ST + 16 * i, 10);
    uint32_t ctl[8] = {
        get16(fx + FX_FCW), get16(fx + FX_FSW), full_tag(fx), get16(fx + FX_FCS),
        get32(fx + FX_FIP), get16(fx + FX_FDS), get32(fx + FX_FDP), get16(fx + FX_FOP) & 0x7FF,
    };
    memcpy(out + 80, ctl, sizeof ctl);
    memcpy(out + 112, fx + FX_XMM, 8 * 16);
    memcpy(out + 240, fx + FX_MXCSR, 4);
}

void fpregs_from_gdb(uint8_t *fx, const uint8_t in[FPREGS_GDB_BYTES])
{
    uint32_t ctl[8];
    memcpy(ctl, in + 80, sizeof ctl);
    for (unsigned i = 0; i < 8; i++)
        memcpy(fx + FX_ST + 16 * i, in + 10 * i, 10);
    memcpy(fx + FX_FCW, &ctl[0], 2);
    memcpy(fx + FX_FSW, &ctl[1], 2);
    /* the abridged tag: a register is in use unless its full tag says empty */
    uint8_t abridged = 0;
    for (unsigned i = 0; i < 8; i++)
        if ((ctl[2] >> (2 * i) & 3) != TAG_EMPTY)
            abridged |= (uint8_t)(1u << i);
    fx[FX_FTW] = abridged;
    uint16_t fop = (uint16_t)(ctl[7] & 0x7FF);
    memcpy(fx + FX_FOP, &fop, 2);
    memcpy(fx + FX_XMM, in + 112, 8 * 16);
    /* MXCSR: a reserved bit set would make the host's restore fault (SDM vol. 1, 10.5.1.2) */
    uint32_t mxcsr, mask = get32(fx + FX_MXCSR + 4) ? get32(fx + FX_MXCSR + 4) : 0xFFBF;
    memcpy(&mxcsr, in + 240, 4);
    mxcsr &= mask;
    memcpy(fx + FX_MXCSR, &mxcsr, 4);
    /* XRSTOR loads x87 (bit 0) and SSE (bit 1) state from the image only where XSTATE_BV says
     * so, and puts the rest in its initial state (13.8.1) */
    fx[XSTATE_BV] |= 3;
}

/* Copies of XSAVE images that carry only what the image holds (xstate.h). */
#include <cpuid.h>

#include "xstate.h"

#define XSTATE_LEGACY_AND_HEADER 576    /* x87 and SSE (512 bytes), then the 64-byte header */

/* Each user component's place in the standard format: CPUID.(EAX=0DH,ECX=i), EBX its
 * offset and EAX its size (SDM vol. 1, 13.4.3); 0 for components the CPU lacks. */
static uint32_t comp_off[64], comp_size[64];

void xstate_layout_init(void)
{
    for (unsigned i = 2; i < 64; i++) {
        unsigned size, off, ecx, edx;
        __cpuid_count(0xD, i, size, off, ecx, edx);
        (void)edx;
        if (ecx & 1)        /* a supervisor component: never in a standard-format image */
            size = off = 0;
        comp_off[i] = off;
        comp_size[i] = size;
    }
}

bool xstate_same(const uint8_t *a, const uint8_t *b, size_t full)
{
    uint64_t bv_a, bv_b;
    memcpy(&bv_a, a + XSTATE_BV_OFF, sizeof bv_a);
    memcpy(&bv_b, b + XSTATE_BV_OFF, sizeof bv_b);
    if (bv_a != bv_b || memcmp(a, b, XSTATE_SW_OFF))
        return false;
    for (uint64_t bv = bv_a >> 2; bv; bv &= bv - 1) {
        unsigned i = (unsigned)__builtin_ctzll(bv) + 2;
        if (comp_size[i] && comp_off[i] + comp_size[i] <= full &&
            memcmp(a + comp_off[i], b + comp_off[i], comp_size[i]))
            return false;
    }
    return true;
}

void xstate_copy(uint8_t *dst, const uint8_t *src, size_t full)
{
    uint64_t bv;
    memcpy(dst, src, XSTATE_SW_OFF);
    memcpy(dst + XSTATE_SW_END, src + XSTATE_SW_END, XSTATE_LEGACY_AND_HEADER - XSTATE_SW_END);
    memcpy(&bv, src + XSTATE_BV_OFF, sizeof bv);
    for (bv >>= 2; bv; bv &= bv - 1) {
        unsigned i = (unsigned)__builtin_ctzll(bv) + 2;
        if (comp_size[i] && comp_off[i] + comp_size[i] <= full)
            memcpy(dst + comp_off[i], src + comp_off[i], comp_size[i]);
    }
}

#define XSTATE_MXCSR_OFF 24
#define XSTATE_MXCSR_MASK_OFF 28

void xstate_make_loadable(uint8_t *image, uint64_t xcr0, uint32_t mxcsr_mask)
{
    uint64_t bv;
    uint32_t mxcsr;
    memcpy(&bv, image + XSTATE_BV_OFF, sizeof bv);
    bv &= xcr0 & ~XSTATE_PKRU;
    memcpy(image + XSTATE_BV_OFF, &bv, sizeof bv);
    memset(image + XSTATE_BV_OFF + sizeof bv, 0, XSTATE_LEGACY_AND_HEADER - XSTATE_BV_OFF - sizeof bv);
    memcpy(&mxcsr, image + XSTATE_MXCSR_OFF, sizeof mxcsr);
    mxcsr &= mxcsr_mask;
    memcpy(image + XSTATE_MXCSR_OFF, &mxcsr, sizeof mxcsr);
}

uint64_t xstate_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

uint32_t xstate_mxcsr_mask(void)
{
    uint8_t area[512] __attribute__((aligned(16)));
    uint32_t mask;
    memset(area, 0, sizeof area);
    __asm__ volatile("fxsave64 %0" : "=m"(area));
    memcpy(&mask, area + XSTATE_MXCSR_MASK_OFF, sizeof mask);
    return mask ? mask : 0xFFBF;
}

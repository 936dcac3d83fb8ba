/* x86/xstate.c: an XSAVE image of any bytes, made loadable, goes through XRSTOR without a fault
 * (SDM vol. 1, 13.8.1), as the vector state a stub reports must (guest code can write any bytes
 * there, stub/protocol.h); an image the CPU saved comes out of it as it went in. */
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "x86/xstate.h"

#define AREA 16384
static uint8_t area[AREA] __attribute__((aligned(64))), saved[AREA] __attribute__((aligned(64)));

static void xsave_to(uint8_t *image, uint64_t rfbm)
{
    __asm__ volatile("xsave64 %0" : "+m"(*(uint8_t(*)[AREA])image) : "a"((uint32_t)rfbm),
                     "d"((uint32_t)(rfbm >> 32)));
}

static void xrstor_from(const uint8_t *image, uint64_t rfbm)
{
    __asm__ volatile("xrstor64 %0" : : "m"(*(const uint8_t(*)[AREA])image), "a"((uint32_t)rfbm),
                     "d"((uint32_t)(rfbm >> 32)));
}

int main(void)
{
    unsigned a, b, size, d;
    __cpuid_count(0xD, 0, a, b, size, d);
    CHECK(size <= AREA);
    xstate_layout_init();
    uint64_t xcr0 = xstate_xcr0(), rfbm = xcr0 & ~XSTATE_PKRU;
    uint32_t mxcsr_mask = xstate_mxcsr_mask();
    CHECK((mxcsr_mask & 0xFFBF) == 0xFFBF);

    xsave_to(saved, rfbm);
    memcpy(area, saved, size);
    xstate_make_loadable(area, xcr0, mxcsr_mask);
    CHECK(memcmp(area, saved, size) == 0);

    srand(20);
    for (int i = 0; i < 2000; i++) {
        for (unsigned k = 0; k < size; k++)
            area[k] = (uint8_t)rand();
        xstate_make_loadable(area, xcr0, mxcsr_mask);
        xrstor_from(area, rfbm);        /* a fault here ends the test with a signal */
    }
    xrstor_from(saved, rfbm);
    return check_done();
}

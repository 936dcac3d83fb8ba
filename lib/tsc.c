/* The host's time-stamp counter (lib/tsc.h). */
#include <time.h>
#include <x86intrin.h>

#include "tsc.h"

uint32_t tsc_khz(void)
{
    /* The TSC against CLOCK_MONOTONIC_RAW over 10 ms. The host's TSC is the
     * guest's (rdtsc runs natively), and the guest cannot calibrate it
     * against an emulated PIT whose reads take microseconds with jitter;
     * stubs count their spin in it (stub/host.c). */
    static uint32_t khz;
    struct timespec t0, t1;
    uint64_t c0, c1;
    if (khz)
        return khz;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t0);
    c0 = __rdtsc();
    do {
        clock_gettime(CLOCK_MONOTONIC_RAW, &t1);
    } while ((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec) < 10000000);
    c1 = __rdtsc();
    int64_t ns = (t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec);
    khz = (uint32_t)((c1 - c0) * 1000000ull / (uint64_t)ns);
    return khz;
}

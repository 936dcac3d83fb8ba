/* The host clocks behind struct hw_clock. */
#include <time.h>

#include "clock.h"

static uint64_t clock_monotonic_ns(void *opaque)
{
    (void)opaque;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

const struct hw_clock hw_clock_monotonic = { clock_monotonic_ns, NULL };

int64_t hw_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * (int64_t)NS_PER_SEC + ts.tv_nsec;
}

/* Time sources for device models: injectable, so unit tests drive the devices with a fake clock. */
#ifndef RING3_HW_CLOCK_H
#define RING3_HW_CLOCK_H

#include <stdint.h>

#define NS_PER_SEC 1000000000ull

/* A clock: (now_ns)(opaque) returns nanoseconds that never go backwards. */
struct hw_clock {
    uint64_t (*now_ns)(void *opaque);
    void *opaque;
};

static inline uint64_t hw_clock_now(const struct hw_clock *c)
{
    return c->now_ns(c->opaque);
}

/* The host's CLOCK_MONOTONIC, in ns. */
extern const struct hw_clock hw_clock_monotonic;

/* The host's wall-clock time (CLOCK_REALTIME), ns since the Unix epoch. */
int64_t hw_wall_ns(void);

#endif

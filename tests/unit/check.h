/* Unit-test helpers for the device models: CHECK macros, a fake clock and an IRQ line recorder. */
#ifndef RING3_TEST_CHECK_H
#define RING3_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "hw/clock.h"
#include "hw/irq.h"

static int check_failures;

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                      \
            check_failures++;                                              \
        }                                                                  \
    } while (0)

#define CHECK_EQ(actual, expected)                                         \
    do {                                                                   \
        unsigned long long check_a_ = (unsigned long long)(actual);        \
        unsigned long long check_e_ = (unsigned long long)(expected);      \
        if (check_a_ != check_e_) {                                        \
            fprintf(stderr, "%s:%d: %s is 0x%llx (%llu), expected %s = 0x%llx\n", \
                    __FILE__, __LINE__, #actual, check_a_, check_a_,       \
                    #expected, check_e_);                                  \
            check_failures++;                                              \
        }                                                                  \
    } while (0)

/* End of main(): SUCCESS and 0, or the failure count and 1. */
static inline int check_done(void)
{
    if (check_failures) {
        printf("FAILED: %d check(s)\n", check_failures);
        return 1;
    }
    printf("SUCCESS\n");
    return 0;
}

/* A clock the test moves by hand. */
struct fake_clock {
    struct hw_clock clock;
    uint64_t ns;
};

static inline uint64_t fake_clock_now(void *opaque)
{
    return ((struct fake_clock *)opaque)->ns;
}

static inline void fake_clock_init(struct fake_clock *fc, uint64_t ns)
{
    fc->clock.now_ns = fake_clock_now;
    fc->clock.opaque = fc;
    fc->ns = ns;
}

/* The receiving end of a line: its level and how often it rose. */
struct irq_probe {
    struct irq_line line;
    int level;
    int rises;
    int changes;
};

static inline void irq_probe_set(void *opaque, int irq_num, int level)
{
    (void)irq_num;
    struct irq_probe *p = opaque;
    if (level && !p->level)
        p->rises++;
    p->level = level;
    p->changes++;
}

static inline void irq_probe_init(struct irq_probe *p)
{
    *p = (struct irq_probe){ 0 };
    irq_line_init(&p->line, irq_probe_set, p, 0);
}

#endif

/* 8254 programmable interval timer (0x40-0x43) and the channel 2 bits of PC port B (0x61). */
#ifndef RING3_HW_PIT_H
#define RING3_HW_PIT_H

#include <stdint.h>

#include "clock.h"
#include "io.h"
#include "irq.h"

#define PIT_BASE        0x40
#define PIT_PORT_B      0x61
#define PIT_HZ          1193182ull
#define PIT_NO_DEADLINE UINT64_MAX

struct pit;

/* Create the PIT and register ports 0x40-0x43 and 0x61 on (bus). Counts are
 * derived from (clock) (ns, monotonic; the PIT keeps the pointer). Channel 0
 * drives (irq0) (may be NULL). The channels start as a PC BIOS leaves them:
 * channel 0 in mode 3 with count 65536 (18.2 Hz), channel 1 in mode 2 with
 * count 18 (DRAM refresh), channel 2 in mode 3 with its gate low.
 * Returns NULL if out of memory or the ports are taken. */
struct pit *pit_init(struct io_bus *bus, struct irq_line *irq0,
                     const struct hw_clock *clock);

void pit_free(struct pit *pit);

/* Bring IRQ0 up to time (now): if channel 0's OUT had one or more rising
 * edges since the last update, the line gets one rising edge. Missed ticks
 * are coalesced into that one edge, as a late timer interrupt would be; a
 * guest keeping time by counting ticks falls behind, Linux (which rereads
 * its clocksource) does not. Port accesses call this themselves. */
void pit_update(struct pit *pit, uint64_t now);

/* The absolute time (clock ns) of channel 0's next rising edge not yet
 * delivered by pit_update(), or PIT_NO_DEADLINE if none will come (one-shot
 * mode done, no count loaded). Never earlier than (now): an overdue edge
 * returns (now), meaning "call pit_update() right away". */
uint64_t pit_next_deadline(struct pit *pit, uint64_t now);

#endif

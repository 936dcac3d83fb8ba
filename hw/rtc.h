/* MC146818 CMOS RTC and CMOS RAM (index 0x70 with the NMI mask bit, data 0x71) as a PC BIOS leaves it. */
#ifndef RING3_HW_RTC_H
#define RING3_HW_RTC_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "io.h"
#include "irq.h"

#define RTC_BASE        0x70
#define RTC_IRQ         8
#define RTC_NO_DEADLINE UINT64_MAX

struct rtc;

/* Create the RTC and register ports 0x70-0x71 on (bus). The time of day
 * starts at (wall_ns) (ns since the Unix epoch, UTC) at the instant
 * hw_clock_now(clock) is first read here, and then advances with (clock)
 * (ns, monotonic; the RTC keeps the pointer). Registers start as a PC BIOS
 * leaves them: BCD, 24-hour, 32.768 kHz time base, interrupts off. (irq)
 * carries IRQF (update-ended, alarm and periodic interrupts; may be NULL).
 * Returns NULL if out of memory or the ports are taken. */
struct rtc *rtc_init(struct io_bus *bus, struct irq_line *irq,
                     const struct hw_clock *clock, int64_t wall_ns);

void rtc_free(struct rtc *rtc);

/* Write the guest RAM size (mem_bytes) into the CMOS bytes a BIOS fills in
 * and guests read (0x15-0x18, 0x30-0x31, 0x34-0x35) and fix the checksum. */
void rtc_set_memory(struct rtc *rtc, uint64_t mem_bytes);

/* True while the guest has set bit 7 of port 0x70 (NMI disabled). */
bool rtc_nmi_disabled(const struct rtc *rtc);

/* Bring the interrupt flags and IRQ8 up to time (now). Flags that would be
 * set several times before the guest reads register C are set once, as the
 * chip itself does. Port accesses call this themselves. */
void rtc_update(struct rtc *rtc, uint64_t now);

/* The absolute time (clock ns) at which rtc_update() may next raise IRQ8,
 * or RTC_NO_DEADLINE when no enabled interrupt can come (none enabled, or
 * IRQF already set and waiting for a read of register C). Never earlier than
 * (now). */
uint64_t rtc_next_deadline(struct rtc *rtc, uint64_t now);

#endif

/* Unit test of the CMOS RTC with a fake clock: BCD and binary time, 12-hour mode, UIP, setting the clock, interrupts, CMOS memory bytes. */
#include "check.h"
#include "hw/rtc.h"

static struct io_bus *bus;
static struct rtc *rtc;
static struct fake_clock fc;
static struct irq_probe irq;

#define SEC 1000000000ull
#define T0  (5 * SEC)
/* 2024-02-29 23:59:58.5 UTC, a Thursday */
#define WALL (1709251198ll * 1000000000ll + 500000000ll)

static uint8_t cmos(uint8_t i)
{
    io_out(bus, 0x70, 1, i);
    return (uint8_t)io_in(bus, 0x71, 1);
}

static void cmos_set(uint8_t i, uint8_t v)
{
    io_out(bus, 0x70, 1, i);
    io_out(bus, 0x71, 1, v);
}

int main(void)
{
    fake_clock_init(&fc, T0);
    irq_probe_init(&irq);
    bus = io_bus_new();
    rtc = rtc_init(bus, &irq.line, &fc.clock, WALL);
    CHECK(rtc != NULL);

    /* As the BIOS leaves it: BCD, 24-hour, 32.768 kHz, valid RAM. */
    CHECK_EQ(cmos(0x0A), 0x26);
    CHECK_EQ(cmos(0x0B), 0x02);
    CHECK_EQ(cmos(0x0C), 0x00);
    CHECK_EQ(cmos(0x0D), 0x80);
    CHECK_EQ(cmos(0x00), 0x58);
    CHECK_EQ(cmos(0x02), 0x59);
    CHECK_EQ(cmos(0x04), 0x23);
    CHECK_EQ(cmos(0x06), 0x05);     /* Thursday; Sunday = 1 */
    CHECK_EQ(cmos(0x07), 0x29);
    CHECK_EQ(cmos(0x08), 0x02);
    CHECK_EQ(cmos(0x09), 0x24);
    CHECK_EQ(cmos(0x32), 0x20);
    CHECK_EQ(io_in(bus, 0x70, 1), 0xFF);    /* index port is write-only */

    /* 1.5 s later it is 2024-03-01 00:00:00, a Friday. */
    fc.ns = T0 + 3 * SEC / 2;
    CHECK_EQ(cmos(0x00), 0x00);
    CHECK_EQ(cmos(0x02), 0x00);
    CHECK_EQ(cmos(0x04), 0x00);
    CHECK_EQ(cmos(0x06), 0x06);
    CHECK_EQ(cmos(0x07), 0x01);
    CHECK_EQ(cmos(0x08), 0x03);

    /* UIP: set only in the last 2.228 ms before each update. */
    fc.ns = T0 + 5 * SEC / 2 - 3000000;
    CHECK_EQ(cmos(0x0A) & 0x80, 0);
    fc.ns = T0 + 5 * SEC / 2 - 2000000;
    CHECK_EQ(cmos(0x0A), 0xA6);
    CHECK_EQ(cmos(0x00), 0x00);     /* still the old second */
    fc.ns = T0 + 5 * SEC / 2;       /* 00:00:01.0 */
    CHECK_EQ(cmos(0x0A), 0x26);
    CHECK_EQ(cmos(0x00), 0x01);

    /* Binary mode (DM = 1). */
    cmos_set(0x0B, 0x06);
    fc.ns = T0 + 12 * SEC;          /* 00:00:10.5 */
    CHECK_EQ(cmos(0x00), 10);
    CHECK_EQ(cmos(0x08), 3);
    CHECK_EQ(cmos(0x32), 20);
    /* 12-hour mode, BCD: midnight is 12 AM. */
    cmos_set(0x0B, 0x00);
    CHECK_EQ(cmos(0x04), 0x12);

    /* Setting the clock as Linux's mc146818_set_time does: SET, fields,
     * then release. Here: 2031-07-04 13:45:30, in 12-hour BCD. */
    cmos_set(0x0B, 0x90);
    CHECK_EQ(cmos(0x0B), 0x80);         /* SET going high clears UIE */
    CHECK_EQ(cmos(0x0A) & 0x80, 0);     /* and UIP */
    cmos_set(0x00, 0x30);
    cmos_set(0x02, 0x45);
    cmos_set(0x04, 0x81);           /* 1 PM */
    cmos_set(0x07, 0x04);
    cmos_set(0x08, 0x07);
    cmos_set(0x09, 0x31);
    fc.ns += 3 * SEC;               /* frozen while SET */
    CHECK_EQ(cmos(0x00), 0x30);
    cmos_set(0x0B, 0x00);           /* release, in the same format */
    CHECK_EQ(cmos(0x00), 0x30);
    CHECK_EQ(cmos(0x04), 0x81);
    cmos_set(0x0B, 0x02);           /* 24-hour BCD */
    CHECK_EQ(cmos(0x04), 0x13);
    CHECK_EQ(cmos(0x06), 0x06);     /* the RTC works out Friday */
    CHECK_EQ(cmos(0x09), 0x31);
    CHECK_EQ(cmos(0x32), 0x20);
    fc.ns += 10 * SEC;
    CHECK_EQ(cmos(0x00), 0x40);
    /* A single field written while running keeps the others. */
    cmos_set(0x09, 0x99);
    CHECK_EQ(cmos(0x09), 0x99);
    CHECK_EQ(cmos(0x08), 0x07);
    CHECK_EQ(cmos(0x00), 0x40);

    /* Update-ended interrupt on IRQ8. */
    /* Updates fall at T0 + 0.5 s + k s (the wall clock's phase). */
    fc.ns = (fc.ns / SEC) * SEC + 3 * SEC / 4;  /* 0.75 s before an update */
    cmos(0x0C);
    cmos_set(0x0B, 0x12);           /* UIE */
    CHECK_EQ(irq.level, 0);
    uint64_t dl = rtc_next_deadline(rtc, fc.ns);
    CHECK_EQ(dl, fc.ns + 3 * SEC / 4);
    rtc_update(rtc, dl - 1);
    CHECK_EQ(irq.level, 0);
    rtc_update(rtc, dl);
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(rtc_next_deadline(rtc, dl), RTC_NO_DEADLINE);
    fc.ns = dl + 5;
    /* IRQF | UF; PF is set too, at register A's 1024 Hz, though PIE is off. */
    CHECK_EQ(cmos(0x0C), 0xD0);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(cmos(0x0C), 0x00);
    /* Flags are set even with the interrupt off, without IRQF. */
    cmos_set(0x0B, 0x02);
    fc.ns += SEC;
    CHECK_EQ(cmos(0x0C) & 0xB0, 0x10);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(rtc_next_deadline(rtc, fc.ns), RTC_NO_DEADLINE);

    /* Periodic interrupt at 2 Hz (RS = 15). */
    cmos_set(0x0A, 0x2F);
    cmos_set(0x0B, 0x42);
    dl = rtc_next_deadline(rtc, fc.ns);
    CHECK(dl > fc.ns && dl <= fc.ns + SEC / 2);
    rtc_update(rtc, dl);
    CHECK_EQ(irq.level, 1);
    fc.ns = dl;
    CHECK_EQ(cmos(0x0C) & 0xC0, 0xC0);
    cmos_set(0x0A, 0x26);
    cmos_set(0x0B, 0x02);

    /* Alarm: seconds = now + 2, minutes and hours "don't care". */
    uint8_t s = cmos(0x00);
    uint8_t s2 = (uint8_t)((((s >> 4) * 10 + (s & 15) + 2) % 60 / 10) << 4 |
                           ((s >> 4) * 10 + (s & 15) + 2) % 60 % 10);
    cmos_set(0x01, s2);
    cmos_set(0x03, 0xC0);
    cmos_set(0x05, 0xFF);
    cmos(0x0C);
    cmos_set(0x0B, 0x22);           /* AIE */
    fc.ns += SEC;
    rtc_update(rtc, fc.ns);
    CHECK_EQ(irq.level, 0);
    fc.ns += SEC;
    rtc_update(rtc, fc.ns);
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(cmos(0x0C) & 0xA0, 0xA0);
    cmos_set(0x0B, 0x02);

    /* NMI mask in bit 7 of the index; the index still selects. */
    CHECK(!rtc_nmi_disabled(rtc));
    io_out(bus, 0x70, 1, 0x80 | 0x0D);
    CHECK(rtc_nmi_disabled(rtc));
    CHECK_EQ(io_in(bus, 0x71, 1), 0x80);
    io_out(bus, 0x70, 1, 0x0D);
    CHECK(!rtc_nmi_disabled(rtc));

    /* CMOS RAM and the memory size bytes for 32 MiB. */
    cmos_set(0x50, 0xA5);
    CHECK_EQ(cmos(0x50), 0xA5);
    rtc_set_memory(rtc, 32ull << 20);
    CHECK_EQ(cmos(0x15) | cmos(0x16) << 8, 640);
    CHECK_EQ(cmos(0x17) | cmos(0x18) << 8, 31 * 1024);
    CHECK_EQ(cmos(0x30) | cmos(0x31) << 8, 31 * 1024);
    CHECK_EQ(cmos(0x34) | cmos(0x35) << 8, (32 - 16) * 16);
    unsigned sum = 0;
    for (uint8_t i = 0x10; i <= 0x2D; i++)
        sum += cmos(i);
    CHECK_EQ(cmos(0x2E) << 8 | cmos(0x2F), sum);
    /* 3 GiB: the KiB counts saturate at 0xFFFF. */
    rtc_set_memory(rtc, 3ull << 30);
    CHECK_EQ(cmos(0x17) | cmos(0x18) << 8, 0xFFFF);
    CHECK_EQ(cmos(0x34) | cmos(0x35) << 8, (3072 - 16) * 16);

    rtc_free(rtc);
    io_bus_free(bus);
    return check_done();
}

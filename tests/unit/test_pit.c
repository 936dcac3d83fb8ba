/* Unit test of the 8254 against a fake clock: counts, latches, read-back, modes 0-4, gates, IRQ0 edges and deadlines. */
#include "check.h"
#include "hw/pit.h"

static struct io_bus *bus;
static struct pit *pit;
static struct fake_clock fc;
static struct irq_probe irq0;

static void outb(uint16_t port, uint8_t v) { io_out(bus, port, 1, v); }
static uint8_t inb(uint16_t port) { return (uint8_t)io_in(bus, port, 1); }

#define T0 1000000000ull    /* the fake clock starts at 1 s */

/* The clock time at which (ticks) and a half have elapsed since (start):
 * safely inside tick (ticks), away from rounding at its edges. */
static uint64_t at_tick(uint64_t start, uint64_t ticks)
{
    return start + (2 * ticks + 1) * 1000000000ull / (2 * PIT_HZ);
}

/* Exactly when the edge at (ticks) is due: ceil(ticks / PIT_HZ seconds). */
static uint64_t edge_time(uint64_t start, uint64_t ticks)
{
    return start + (ticks * 1000000000ull + PIT_HZ - 1) / PIT_HZ;
}

static void set_time(uint64_t ns)
{
    fc.ns = ns;
    pit_update(pit, ns);
}

static unsigned read_latched(uint16_t port, uint8_t latch_cmd)
{
    outb(0x43, latch_cmd);
    unsigned lo = inb(port);
    return lo | inb(port) << 8;
}

int main(void)
{
    fake_clock_init(&fc, T0);
    irq_probe_init(&irq0);
    bus = io_bus_new();
    pit = pit_init(bus, &irq0.line, &fc.clock);
    CHECK(pit != NULL);

    /* The BIOS state: channel 0 in mode 3 with count 65536 (18.2 Hz). */
    CHECK_EQ(pit_next_deadline(pit, T0), edge_time(T0, 65536));
    CHECK_EQ(irq0.level, 1);
    outb(0x43, 0xE2);               /* read-back: status of channel 0 */
    CHECK_EQ(inb(0x40), 0x80 | 0x30 | 3 << 1);

    /* Mode 2, count 1193 (Linux's periodic tick at HZ=1000: 0x34). */
    uint64_t start = T0 + 5000;
    fc.ns = start;
    outb(0x43, 0x34);
    outb(0x40, 1193 & 0xFF);
    outb(0x40, 1193 >> 8);
    int rises = irq0.rises;
    CHECK_EQ(pit_next_deadline(pit, start), edge_time(start, 1193));
    CHECK_EQ(edge_time(start, 1193) - start, 999848);
    set_time(edge_time(start, 1193) - 1);
    CHECK_EQ(irq0.rises, rises);
    set_time(edge_time(start, 1193));
    CHECK_EQ(irq0.rises, rises + 1);
    CHECK_EQ(irq0.level, 1);        /* OUT is high between the strobes */
    CHECK_EQ(pit_next_deadline(pit, fc.ns), edge_time(start, 2 * 1193));
    /* Ten periods late: the missed ticks coalesce into one edge. */
    set_time(at_tick(start, 12 * 1193 + 5));
    CHECK_EQ(irq0.rises, rises + 2);
    CHECK_EQ(pit_next_deadline(pit, fc.ns), edge_time(start, 13 * 1193));
    /* An overdue deadline is reported as now. */
    CHECK_EQ(pit_next_deadline(pit, edge_time(start, 14 * 1193) + 7),
             edge_time(start, 14 * 1193) + 7);

    /* Counter latch (Linux's pit_read: 0x00 then two reads of 0x40). */
    fc.ns = at_tick(start, 100);
    outb(0x43, 0x00);
    fc.ns = at_tick(start, 500);    /* the latch holds the old count */
    unsigned lo = inb(0x40);
    CHECK_EQ(lo | inb(0x40) << 8, 1193 - 100);
    /* A second latch before the read is ignored. */
    fc.ns = at_tick(start, 1193 + 10);
    outb(0x43, 0x00);
    fc.ns = at_tick(start, 1193 + 20);
    outb(0x43, 0x00);
    lo = inb(0x40);
    CHECK_EQ(lo | inb(0x40) << 8, 1193 - 10);
    /* Unlatched reads follow the live count: LSB, then MSB. */
    fc.ns = at_tick(start, 2 * 1193 + 3);
    CHECK_EQ(inb(0x40), (1193 - 3) & 0xFF);
    CHECK_EQ(inb(0x40), (1193 - 3) >> 8);

    /* Read-back of count and status together: status first. */
    fc.ns = at_tick(start, 3 * 1193 + 1);
    outb(0x43, 0xC2);
    CHECK_EQ(inb(0x40), 0x80 | 0x30 | 2 << 1);
    lo = inb(0x40);
    CHECK_EQ(lo | inb(0x40) << 8, 1193 - 1);

    /* Mode 3 square wave, count 100: OUT high 50 clocks, low 50. */
    start = fc.ns;
    outb(0x43, 0x36);
    outb(0x40, 100);
    outb(0x40, 0);
    rises = irq0.rises;
    set_time(at_tick(start, 10));
    CHECK_EQ(irq0.level, 1);
    CHECK_EQ(read_latched(0x40, 0x00), 100 - 2 * 10);
    set_time(at_tick(start, 60));
    CHECK_EQ(irq0.level, 0);
    CHECK_EQ(read_latched(0x40, 0x00), 100 - 2 * 10);
    CHECK_EQ(irq0.rises, rises);
    set_time(at_tick(start, 101));
    CHECK_EQ(irq0.level, 1);
    CHECK_EQ(irq0.rises, rises + 1);
    /* Late into a low half: the edge still comes, as a pulse. */
    set_time(at_tick(start, 370));
    CHECK_EQ(irq0.rises, rises + 2);
    CHECK_EQ(irq0.level, 0);

    /* Mode 4 one-shot (Linux's oneshot clockevent: 0x38): the strobe's
     * rising edge is one clock after the count expires, then nothing. */
    start = fc.ns;
    outb(0x43, 0x38);
    outb(0x40, 50);
    outb(0x40, 0);
    rises = irq0.rises;
    CHECK_EQ(pit_next_deadline(pit, start), edge_time(start, 51));
    set_time(at_tick(start, 50));
    CHECK_EQ(irq0.level, 0);
    set_time(at_tick(start, 51));
    CHECK_EQ(irq0.rises, rises + 1);
    CHECK_EQ(pit_next_deadline(pit, fc.ns), PIT_NO_DEADLINE);
    set_time(at_tick(start, 100000));
    CHECK_EQ(irq0.rises, rises + 1);
    /* The counter wraps and keeps counting after terminal count. */
    CHECK_EQ(read_latched(0x40, 0x00), (50 + 65536 - 100000 % 65536) % 65536);
    /* Writing a new count re-arms it. */
    start = fc.ns;
    outb(0x40, 10);
    outb(0x40, 0);
    set_time(at_tick(start, 11));
    CHECK_EQ(irq0.rises, rises + 2);

    /* Mode 0 on channel 0: OUT low from the control word, high at TC. */
    start = fc.ns;
    outb(0x43, 0x30);
    CHECK_EQ(irq0.level, 0);
    outb(0x40, 0x20);
    /* "Writing the first byte disables counting." */
    fc.ns = at_tick(start, 5);
    outb(0x43, 0xE2);
    CHECK_EQ(inb(0x40) & 0x40, 0x40);   /* NULL COUNT */
    start = fc.ns;
    outb(0x40, 0x00);
    rises = irq0.rises;
    set_time(at_tick(start, 31));
    CHECK_EQ(irq0.level, 0);
    set_time(at_tick(start, 32));
    CHECK_EQ(irq0.level, 1);
    CHECK_EQ(irq0.rises, rises + 1);
    CHECK_EQ(pit_next_deadline(pit, fc.ns), PIT_NO_DEADLINE);
    /* An update with an older time (the event loop read the clock before a
     * port access) does not replay OUT backwards. */
    pit_update(pit, at_tick(start, 10));
    CHECK_EQ(irq0.level, 1);
    CHECK_EQ(irq0.rises, rises + 1);
    outb(0x43, 0xE2);
    CHECK_EQ(inb(0x40), 0x80 | 0x30 | 0 << 1);

    /* LSB-only and MSB-only access. */
    start = fc.ns;
    outb(0x43, 0x14);               /* channel 0, LSB only, mode 2 */
    outb(0x40, 200);
    fc.ns = at_tick(start, 50);
    CHECK_EQ(inb(0x40), 150);
    CHECK_EQ(inb(0x40), 150);
    outb(0x43, 0x24);               /* MSB only */
    outb(0x40, 0x02);
    CHECK_EQ(pit_next_deadline(pit, fc.ns), edge_time(fc.ns, 0x200));

    /* BCD: count 0x0100 is 100 clocks; the count reads in BCD. */
    start = fc.ns;
    outb(0x43, 0x35);
    outb(0x40, 0x00);
    outb(0x40, 0x01);
    CHECK_EQ(pit_next_deadline(pit, start), edge_time(start, 100));
    fc.ns = at_tick(start, 37);
    CHECK_EQ(read_latched(0x40, 0x00), 0x63);

    /* Modes 6 and 7 are modes 2 and 3 (M2 is a don't-care for them). */
    outb(0x43, 0x3C);
    outb(0x43, 0xE2);
    CHECK_EQ(inb(0x40) & 0x0E, 2 << 1);
    outb(0x43, 0x3E);
    outb(0x43, 0xE2);
    CHECK_EQ(inb(0x40) & 0x0E, 3 << 1);

    /* Channel 2 as Linux's pit_calibrate_tsc uses it: gate high, speaker
     * off, mode 0, then poll OUT in port 0x61 bit 5. */
    outb(0x61, (inb(0x61) & ~0x02) | 0x01);
    CHECK_EQ(inb(0x61) & 0x03, 0x01);
    start = fc.ns;
    outb(0x43, 0xB0);
    outb(0x42, 0x00);
    outb(0x42, 0x10);               /* 4096 */
    fc.ns = at_tick(start, 4095);
    CHECK_EQ(inb(0x61) & 0x20, 0);
    fc.ns = at_tick(start, 4096);
    CHECK_EQ(inb(0x61) & 0x20, 0x20);
    /* quick_pit_calibrate reads the MSB of the live count. */
    start = fc.ns;
    outb(0x43, 0xB0);
    outb(0x42, 0xFF);
    outb(0x42, 0xFF);
    fc.ns = at_tick(start, 256 * 3 + 5);
    inb(0x42);
    CHECK_EQ(inb(0x42), 0xFF - 3);
    /* Gate low pauses mode 0; gate high resumes it. */
    outb(0x61, 0x00);
    fc.ns = at_tick(start, 256 * 20);
    inb(0x42);
    CHECK_EQ(inb(0x42), 0xFF - 3);
    outb(0x61, 0x01);
    fc.ns += 256 * 1000000000ull / PIT_HZ + 1000;
    inb(0x42);
    CHECK_EQ(inb(0x42), 0xFF - 4);
    /* Mode 2 with the gate low: OUT high and no counting; the rising gate
     * reloads the count. */
    outb(0x61, 0x00);
    outb(0x43, 0xB4);
    outb(0x42, 100);
    outb(0x42, 0);
    fc.ns += 1000000;
    CHECK_EQ(inb(0x61) & 0x20, 0x20);
    CHECK_EQ(read_latched(0x42, 0x80), 100);
    start = fc.ns;
    outb(0x61, 0x01);
    fc.ns = at_tick(start, 99);
    CHECK_EQ(inb(0x61) & 0x20, 0);  /* count 1: the low strobe */
    fc.ns = at_tick(start, 100);
    CHECK_EQ(inb(0x61) & 0x20, 0x20);
    /* Mode 1: a gate rising edge fires the one-shot (OUT low N clocks). */
    outb(0x61, 0x00);
    outb(0x43, 0xB2);
    outb(0x42, 10);
    outb(0x42, 0);
    CHECK_EQ(inb(0x61) & 0x20, 0x20);
    start = fc.ns;
    outb(0x61, 0x01);
    fc.ns = at_tick(start, 5);
    CHECK_EQ(inb(0x61) & 0x20, 0);
    CHECK_EQ(read_latched(0x42, 0x80), 5);
    fc.ns = at_tick(start, 10);
    CHECK_EQ(inb(0x61) & 0x20, 0x20);

    /* Port B: the refresh bit toggles; bits 2-3 read back; 0x43 reads 0xFF. */
    outb(0x61, 0x0C);
    CHECK_EQ(inb(0x61) & 0x0F, 0x0C);
    fc.ns = (fc.ns / 15085 + 1) * 15085 + 100;
    uint8_t r0 = inb(0x61) & 0x10;
    fc.ns += 15085;
    CHECK_EQ(inb(0x61) & 0x10, r0 ^ 0x10);
    CHECK_EQ(inb(0x43), 0xFF);

    pit_free(pit);
    io_bus_free(bus);
    return check_done();
}

/* pit: PIT channel 0 at 1 kHz through the 8259A, sti;hlt, latch, channel 2, rate against the RTC. */
#include "guest.h"

const char guest_name[] = "pit";

#define DIVISOR   1193          /* PIT_HZ / 1193 = 1000.15 Hz */
#define PORT_B    0x61          /* bit 0: channel 2 gate, bit 1: speaker, bit 5: channel 2 output */
#define PIT_CH2   0x42
#define PIT_MODE  0x43

static volatile uint32_t ticks;
static volatile uint16_t isr_in_handler;

static void on_tick(struct trapframe *tf)
{
    (void)tf;
    if (ticks++ == 0)
        isr_in_handler = pic_read_isr();
    pic_eoi(0);
}

static void wait_ticks(uint32_t n, uint32_t *wakeups)
{
    uint32_t end = ticks + n;

    while (ticks < end) {
        sti_hlt();
        cli();
        ++*wakeups;
    }
}

/* Every latched count lies in 1..DIVISOR (8254 datasheet: mode 2 counts N
 * down to 1), and the count moves. */
static void test_latch(void)
{
    uint16_t first = pit_read0(), v = first;
    int in_range = 1, moved = 0;

    for (int i = 0; i < 200; i++) {
        v = pit_read0();
        in_range &= v >= 1 && v <= DIVISOR;
        moved |= v != first;
    }
    kprintf("pit: counter latch %s, %s\n", in_range ? "in range" : "OUT OF RANGE",
            moved ? "moving" : "STUCK");
}

/* Channel 2 in mode 0 (interrupt on terminal count) with the gate from port
 * 0x61, the way Linux calibrates the TSC: 0xffff counts are 54.9 ms. */
static void test_channel2(void)
{
    outb(PORT_B, inb(PORT_B) & ~0x03);            /* gate low, speaker off */
    outb(PIT_MODE, 0xB0);                         /* channel 2, lobyte/hibyte, mode 0 */
    outb(PIT_CH2, 0xFF);
    outb(PIT_CH2, 0xFF);
    int low_before = !(inb(PORT_B) & 0x20);
    uint32_t start = ticks;
    outb(PORT_B, inb(PORT_B) | 0x01);             /* gate high: counting starts */
    sti();
    while (!(inb(PORT_B) & 0x20) && ticks - start < 1000)
        ;
    cli();
    uint32_t ms = ticks - start;
    outb(PORT_B, inb(PORT_B) & ~0x01);
    /* Ticks can be lost on a loaded host, never gained: a wide lower bound. */
    int ok = low_before && ms >= 10 && ms <= 150;
    kprintf("pit: channel 2 one-shot %s\n", ok ? "ok" : "WRONG");
    if (!ok || cmdline_uint("verbose", 0))
        kprintf("pit: out2 low before %d, %u ticks\n", low_before, ms);
    check(ok, "channel 2 one-shot");
}

/* The RTC is a clock independent of the PIT: over two of its seconds the
 * PIT must tick 2000 times, within a tolerance for a loaded host (which
 * loses ticks when the guest is descheduled). */
static void test_rate(void)
{
    uint32_t wakeups = 0;
    int s = rtc_seconds();

    while (rtc_seconds() == s)
        wait_ticks(1, &wakeups);
    uint32_t start = ticks;
    for (int edges = 0; edges < 2; edges++) {
        s = rtc_seconds();
        while (rtc_seconds() == s && ticks - start < 10000)
            wait_ticks(1, &wakeups);
    }
    uint32_t n = ticks - start;
    int ok = n >= 1200 && n <= 2800;
    kprintf("pit: rate %s against the rtc\n", ok ? "ok" : "WRONG");
    if (!ok || cmdline_uint("verbose", 0))
        kprintf("pit: %u ticks in 2 rtc seconds\n", n);
    check(ok, "pit rate");
}

int guest_main(void)
{
    uint32_t wakeups = 0;

    pic_init();
    trap_set_handler(IRQ_BASE + 0, on_tick);
    pit_periodic(DIVISOR);
    pic_unmask(0);
    kprintf("pit: imr 0x%04x\n", pic_read_imr());

    wait_ticks(1000, &wakeups);
    kprintf("pit: %u ticks\n", ticks);
    /* Two ticks may share a wake-up (the second is taken between iret and
     * cli when the host was late), but hlt must never return without one. */
    kprintf("pit: hlt %s\n", wakeups <= ticks ? "never woke without an interrupt" : "WRONG");
    if (wakeups > ticks || cmdline_uint("verbose", 0))
        kprintf("pit: %u wake-ups for %u ticks\n", wakeups, ticks);
    check(wakeups <= ticks, "hlt woke without an interrupt");
    kprintf("pit: isr in handler 0x%04x, after eoi 0x%04x\n", isr_in_handler, pic_read_isr());

    test_latch();
    test_channel2();
    test_rate();

    pic_mask(0);
    kprintf("pit: imr 0x%04x\n", pic_read_imr());
    return 0;
}

/* Unit test of the platform: every device on its ports, PIT -> IRQ0, COM1 -> IRQ4 and RTC -> IRQ8 through the PIC. */
#include <string.h>

#include "check.h"
#include "machine/platform.h"

static struct platform p;

static void outb(uint16_t port, uint8_t v) { io_out(p.io, port, 1, v); }
static uint8_t inb(uint16_t port) { return (uint8_t)io_in(p.io, port, 1); }

static char console[32];
static size_t nconsole;

static void console_tx(void *opaque, uint8_t byte)
{
    (void)opaque;
    if (nconsole < sizeof(console) - 1)
        console[nconsole++] = (char)byte;
}

int main(void)
{
    struct fake_clock fc;
    fake_clock_init(&fc, 1000);
    struct irq_probe intr;
    irq_probe_init(&intr);
    struct platform_config cfg = {
        .mem_bytes = 64ull << 20,
        .clock = &fc.clock,
        .wall_ns = 1700000000ll * 1000000000ll,
        .intr = &intr.line,
        .console_tx = console_tx,
    };
    CHECK_EQ(platform_init(&p, &cfg, NULL, 0), 0);

    static const struct { uint16_t port; const char *name; } map[] = {
        { 0x20, "pic-master" }, { 0xA1, "pic-slave" }, { 0x4D0, "pic-elcr" },
        { 0x40, "pit" }, { 0x43, "pit" }, { 0x61, "port-b" },
        { 0x3F8, "com1" }, { 0x3FF, "com1" }, { 0x70, "rtc" }, { 0x71, "rtc" },
        { 0xCF8, "pci-addr" }, { 0xCFF, "pci-data" }, { 0xF4, "debug-exit" },
        { 0xF7, "debug-exit" }, { 0x80, "port80" },
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        const char *name = io_port_name(p.io, map[i].port);
        CHECK(name && strcmp(name, map[i].name) == 0);
    }
    CHECK(io_port_name(p.io, 0x2F8) == NULL);   /* no COM2 */
    CHECK_EQ(inb(0x2F8), 0xFF);

    /* The PIC as Linux programs it: vectors 0x30 and 0x38. */
    static const uint8_t init[][2] = {
        { 0x20, 0x11 }, { 0x21, 0x30 }, { 0x21, 0x04 }, { 0x21, 0x01 },
        { 0xA0, 0x11 }, { 0xA1, 0x38 }, { 0xA1, 0x02 }, { 0xA1, 0x01 },
        { 0x21, 0x00 }, { 0xA1, 0x00 },
    };
    for (size_t i = 0; i < sizeof(init) / sizeof(init[0]); i++)
        outb(init[i][0], init[i][1]);
    CHECK_EQ(intr.level, 0);

    /* PIT channel 0 -> IRQ0 -> vector 0x30, driven by deadlines. */
    outb(0x43, 0x34);
    outb(0x40, 0xA9);
    outb(0x40, 0x04);               /* 1193: 1 kHz */
    uint64_t dl = platform_next_deadline(&p, fc.ns);
    CHECK(dl > fc.ns && dl <= fc.ns + 1000000);
    fc.ns = dl;
    platform_update(&p, fc.ns);
    CHECK_EQ(intr.level, 1);
    CHECK(pic_intr_pending(p.pic));
    CHECK_EQ(pic_acknowledge(p.pic), 0x30);
    CHECK_EQ(intr.level, 0);
    outb(0x20, 0x20);
    outb(0x21, 0x01);               /* mask the timer from here on */

    /* COM1 -> IRQ4 -> vector 0x34; output reaches the sink. */
    outb(0x3F8, 'o');
    outb(0x3F8, 'k');
    CHECK(strcmp(console, "ok") == 0);
    outb(0x3F9, 0x02);
    CHECK_EQ(intr.level, 1);
    CHECK_EQ(pic_acknowledge(p.pic), 0x34);
    CHECK_EQ(inb(0x3FA) & 0x0F, 0x02);
    outb(0x3F9, 0x00);
    outb(0x20, 0x20);
    CHECK_EQ(uart_receive(p.com1, (const uint8_t *)"x", 1), 1);
    outb(0x3F9, 0x01);
    CHECK_EQ(pic_acknowledge(p.pic), 0x34);
    CHECK_EQ(inb(0x3F8), 'x');
    outb(0x3F9, 0x00);
    outb(0x20, 0x20);

    /* RTC update-ended interrupt -> IRQ8 -> slave -> vector 0x38. */
    outb(0x70, 0x0B);
    outb(0x71, 0x12);
    /* Sleep from deadline to deadline, as the event loop does; the masked
     * timer's deadlines come and go without an interrupt. */
    uint64_t t0 = fc.ns;
    int wakeups = 0;
    while (!intr.level && fc.ns < t0 + 2000000000ull) {
        dl = platform_next_deadline(&p, fc.ns);
        CHECK(dl > fc.ns);
        fc.ns = dl;
        platform_update(&p, fc.ns);
        wakeups++;
    }
    CHECK_EQ(intr.level, 1);
    CHECK(fc.ns - t0 <= 1000000000);
    CHECK(wakeups > 100);
    CHECK_EQ(pic_acknowledge(p.pic), 0x38);
    outb(0x70, 0x0C);
    CHECK_EQ(inb(0x71) & 0x90, 0x90);
    outb(0xA0, 0x20);
    outb(0x20, 0x20);
    CHECK(!pic_intr_pending(p.pic));

    /* CMOS memory size for 64 MiB; PCI holds the host bridge alone; debug-exit works. */
    outb(0x70, 0x34);
    uint8_t lo = inb(0x71);
    outb(0x70, 0x35);
    CHECK_EQ(lo | inb(0x71) << 8, (64 - 16) * 16);
    io_out(p.io, 0xCF8, 4, 0x80000000);
    CHECK_EQ(io_in(p.io, 0xCFC, 4), 0x12378086);
    io_out(p.io, 0xCF8, 4, 0x80000800);
    CHECK_EQ(io_in(p.io, 0xCFC, 4), 0xFFFFFFFF);
    int status = 0;
    CHECK(!debugexit_requested(p.debugexit, &status));
    outb(0xF4, 0x02);
    CHECK(debugexit_requested(p.debugexit, &status));
    CHECK_EQ(status, 5);

    platform_destroy(&p);
    CHECK(p.io == NULL);

    /* Without debug-exit its ports stay unmapped. */
    cfg.no_debugexit = true;
    CHECK_EQ(platform_init(&p, &cfg, NULL, 0), 0);
    CHECK(p.debugexit == NULL);
    CHECK(io_port_name(p.io, 0xF4) == NULL);
    platform_destroy(&p);

    return check_done();
}

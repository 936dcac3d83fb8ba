/* Unit test of the 8259A pair: init sequence, masking, priority, EOI, cascade, AEOI, poll, rotation, spurious IRQs, ELCR. */
#include "check.h"
#include "hw/pic.h"

static struct io_bus *bus;
static struct pic *pic;

static void outb(uint16_t port, uint8_t v) { io_out(bus, port, 1, v); }
static uint8_t inb(uint16_t port) { return (uint8_t)io_in(bus, port, 1); }

static uint8_t read_isr(uint16_t cmd)
{
    outb(cmd, 0x0B);    /* OCW3: read ISR */
    uint8_t v = inb(cmd);
    outb(cmd, 0x0A);    /* OCW3: back to IRR */
    return v;
}

/* Linux's init_8259A(): vectors 0x30 and 0x38, cascade on IR2, 8086 mode. */
static void init_like_linux(uint8_t master_icw4)
{
    outb(0x21, 0xFF);
    outb(0xA1, 0xFF);
    outb(0x20, 0x11);
    outb(0x21, 0x30);
    outb(0x21, 0x04);
    outb(0x21, master_icw4);
    outb(0xA0, 0x11);
    outb(0xA1, 0x38);
    outb(0xA1, 0x02);
    outb(0xA1, 0x01);
    outb(0x21, 0x00);
    outb(0xA1, 0x00);
}

static void pulse(int irq)
{
    irq_pulse(pic_irq(pic, irq));
}

int main(void)
{
    struct irq_probe intr;
    irq_probe_init(&intr);
    bus = io_bus_new();
    pic = pic_init(bus, &intr.line);
    CHECK(pic != NULL);
    CHECK(pic_irq(pic, 2) == NULL);
    CHECK(pic_irq(pic, 16) == NULL);

    /* As the BIOS leaves it: everything but the cascade masked. */
    CHECK_EQ(inb(0x21), 0xFB);
    CHECK_EQ(inb(0xA1), 0xFF);
    pulse(0);
    CHECK(!pic_intr_pending(pic));
    CHECK_EQ(inb(0x20), 0x01);      /* IRR shows the masked request */

    /* ICW1 clears IRR (edge sense reset) and IMR; the IMR reads back. */
    init_like_linux(0x01);
    CHECK_EQ(inb(0x20), 0x00);
    CHECK(!pic_intr_pending(pic));
    outb(0x21, 0xA5);
    CHECK_EQ(inb(0x21), 0xA5);     /* Linux's probe of the PIC */
    outb(0x21, 0x00);

    /* One request: INTR rises; INTA gives the vector, moves IRR to ISR. */
    pulse(0);
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(intr.level, 1);
    CHECK_EQ(inb(0x20), 0x01);
    CHECK_EQ(pic_acknowledge(pic), 0x30);
    CHECK_EQ(intr.level, 0);
    CHECK_EQ(inb(0x20), 0x00);
    CHECK_EQ(read_isr(0x20), 0x01);

    /* Fully nested: lower requests wait while IR0 is in service. */
    pulse(3);
    pulse(1);
    CHECK(!pic_intr_pending(pic));
    CHECK_EQ(inb(0x20), 0x0A);
    outb(0x20, 0x20);               /* non-specific EOI */
    CHECK_EQ(read_isr(0x20), 0x00);
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(pic_acknowledge(pic), 0x31);   /* IR1 before IR3 */
    /* A higher request interrupts a lower one in service. */
    CHECK(!pic_intr_pending(pic));
    outb(0x20, 0x20);
    CHECK_EQ(pic_acknowledge(pic), 0x33);
    pulse(0);
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(pic_acknowledge(pic), 0x30);
    CHECK_EQ(read_isr(0x20), 0x09);
    outb(0x20, 0x20);               /* clears the highest: IR0 */
    CHECK_EQ(read_isr(0x20), 0x08);
    outb(0x20, 0x63);               /* specific EOI for IR3 */
    CHECK_EQ(read_isr(0x20), 0x00);

    /* Masking holds the request in IRR until unmasked. */
    outb(0x21, 0x10);
    pulse(4);
    CHECK(!pic_intr_pending(pic));
    CHECK_EQ(intr.level, 0);
    outb(0x21, 0x00);
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(intr.level, 1);
    CHECK_EQ(pic_acknowledge(pic), 0x34);
    outb(0x20, 0x20);

    /* Edge-triggered: a line held high interrupts once. */
    irq_set(pic_irq(pic, 5), 1);
    CHECK_EQ(pic_acknowledge(pic), 0x35);
    outb(0x20, 0x20);
    CHECK(!pic_intr_pending(pic));
    irq_set(pic_irq(pic, 5), 0);
    irq_set(pic_irq(pic, 5), 1);
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(pic_acknowledge(pic), 0x35);
    outb(0x20, 0x20);
    irq_set(pic_irq(pic, 5), 0);

    /* Cascade: a slave IRQ goes through master IR2 and the slave's vector. */
    pulse(10);
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(inb(0x20), 0x04);
    CHECK_EQ(pic_acknowledge(pic), 0x3A);
    CHECK_EQ(read_isr(0x20), 0x04);
    CHECK_EQ(read_isr(0xA0), 0x04);
    /* Master IR1 outranks the whole slave; slave IR9 waits behind IR2. */
    pulse(9);
    CHECK(!pic_intr_pending(pic));
    pulse(1);
    CHECK_EQ(pic_acknowledge(pic), 0x31);
    outb(0x20, 0x20);
    outb(0xA0, 0x20);               /* slave EOI, then master, as Linux does */
    outb(0x20, 0x20);
    CHECK_EQ(read_isr(0xA0), 0x00);
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(pic_acknowledge(pic), 0x39);
    outb(0xA0, 0x20);
    outb(0x20, 0x20);
    CHECK(!pic_intr_pending(pic));
    CHECK_EQ(read_isr(0x20), 0);

    /* Spurious: an INTA with nothing requested gives IR7, ISR untouched. */
    CHECK_EQ(pic_acknowledge(pic), 0x37);
    CHECK_EQ(read_isr(0x20), 0x00);

    /* Slave spurious: a level request gone before INTA gives IR15, with
     * master IR2 in service (Linux then EOIs the master only). */
    outb(0x4D1, 0x04);              /* ELCR: IRQ10 level-triggered */
    CHECK_EQ(inb(0x4D1), 0x04);
    irq_set(pic_irq(pic, 10), 1);
    CHECK(pic_intr_pending(pic));
    irq_set(pic_irq(pic, 10), 0);
    CHECK_EQ(inb(0xA0), 0x00);      /* the level request left IRR */
    CHECK_EQ(pic_acknowledge(pic), 0x3F);
    CHECK_EQ(read_isr(0xA0), 0x00);
    CHECK_EQ(read_isr(0x20), 0x04);
    outb(0x20, 0x20);
    /* A level request stays while the line is high, and recurs after EOI. */
    irq_set(pic_irq(pic, 10), 1);
    CHECK_EQ(pic_acknowledge(pic), 0x3A);
    CHECK_EQ(inb(0xA0), 0x04);
    outb(0xA0, 0x20);
    outb(0x20, 0x20);
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(pic_acknowledge(pic), 0x3A);
    irq_set(pic_irq(pic, 10), 0);
    outb(0xA0, 0x20);
    outb(0x20, 0x20);
    CHECK(!pic_intr_pending(pic));
    outb(0x4D1, 0x00);

    /* ELCR: IRQ0-2, 8 and 13 are always edge. */
    outb(0x4D0, 0xFF);
    outb(0x4D1, 0xFF);
    CHECK_EQ(inb(0x4D0), 0xF8);
    CHECK_EQ(inb(0x4D1), 0xDE);
    outb(0x4D0, 0x00);
    outb(0x4D1, 0x00);

    /* Poll command: the read acknowledges and returns 1000 0www. */
    pulse(6);
    outb(0x20, 0x0C);
    CHECK_EQ(inb(0x20), 0x86);
    CHECK_EQ(read_isr(0x20), 0x40);
    outb(0x20, 0x0C);
    CHECK_EQ(inb(0x20), 0x00);      /* nothing pending: W bit clear */
    outb(0x20, 0x20);

    /* Set priority: IR3 lowest makes IR4 highest. */
    outb(0x20, 0xC3);
    pulse(1);
    pulse(5);
    CHECK_EQ(pic_acknowledge(pic), 0x35);
    CHECK(!pic_intr_pending(pic));  /* IR1 now ranks below IR5 */
    outb(0x20, 0xA0);               /* rotate on non-specific EOI: IR5 lowest */
    pulse(4);                       /* IR4 now ranks below IR1 */
    CHECK_EQ(pic_acknowledge(pic), 0x31);
    outb(0x20, 0x20);
    CHECK_EQ(pic_acknowledge(pic), 0x34);
    outb(0x20, 0x20);
    outb(0x20, 0xC7);               /* back to IR0 highest */

    /* Special mask mode: masking the level in service lets lower ones in. */
    pulse(1);
    CHECK_EQ(pic_acknowledge(pic), 0x31);
    pulse(3);
    CHECK(!pic_intr_pending(pic));
    outb(0x21, 0x02);
    outb(0x20, 0x68);               /* OCW3: set special mask mode */
    CHECK(pic_intr_pending(pic));
    CHECK_EQ(pic_acknowledge(pic), 0x33);
    outb(0x20, 0x63);
    outb(0x20, 0x61);
    outb(0x20, 0x48);               /* reset special mask mode */
    outb(0x21, 0x00);
    CHECK_EQ(read_isr(0x20), 0x00);

    /* Automatic EOI: nothing stays in service. */
    init_like_linux(0x03);
    pulse(0);
    CHECK_EQ(pic_acknowledge(pic), 0x30);
    CHECK_EQ(read_isr(0x20), 0x00);
    pulse(0);
    CHECK(pic_intr_pending(pic));

    /* A half-done init sequence raises nothing. */
    outb(0x20, 0x11);
    outb(0x21, 0x40);
    pulse(1);
    CHECK(!pic_intr_pending(pic));
    outb(0x21, 0x04);
    outb(0x21, 0x01);
    pulse(1);
    CHECK_EQ(pic_acknowledge(pic), 0x41);

    pic_free(pic);
    io_bus_free(bus);
    return check_done();
}

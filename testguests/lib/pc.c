/* Legacy PC chips the guests program: 8259A PIC pair, 8254 PIT channel 0, MC146818 RTC. */
#include "guest.h"

#define PIC1_CMD  0x20
#define PIC1_DATA 0x21
#define PIC2_CMD  0xA0
#define PIC2_DATA 0xA1
#define PIC_EOI   0x20
#define PIC_CASCADE_IRQ 2

#define PIT_CH0  0x40
#define PIT_MODE 0x43

#define RTC_INDEX 0x70
#define RTC_DATA  0x71

/* 8259A datasheet, initialization sequence: ICW1 (edge, cascade, ICW4
 * needed), ICW2 (vector base), ICW3 (slave on IR2 / slave id 2), ICW4 (8086). */
void pic_init(void)
{
    outb(PIC1_CMD, 0x11);
    outb(PIC2_CMD, 0x11);
    outb(PIC1_DATA, IRQ_BASE);
    outb(PIC2_DATA, IRQ_BASE + 8);
    outb(PIC1_DATA, 1 << PIC_CASCADE_IRQ);
    outb(PIC2_DATA, PIC_CASCADE_IRQ);
    outb(PIC1_DATA, 0x01);
    outb(PIC2_DATA, 0x01);
    outb(PIC1_DATA, 0xFF);
    outb(PIC2_DATA, 0xFF);
}

void pic_unmask(int irq)
{
    if (irq >= 8) {
        outb(PIC2_DATA, inb(PIC2_DATA) & ~(1 << (irq - 8)));
        irq = PIC_CASCADE_IRQ;
    }
    outb(PIC1_DATA, inb(PIC1_DATA) & ~(1 << irq));
}

void pic_mask(int irq)
{
    if (irq >= 8)
        outb(PIC2_DATA, inb(PIC2_DATA) | (1 << (irq - 8)));
    else
        outb(PIC1_DATA, inb(PIC1_DATA) | (1 << irq));
}

/* Non-specific EOI; a slave interrupt needs one on each chip. */
void pic_eoi(int irq)
{
    if (irq >= 8)
        outb(PIC2_CMD, PIC_EOI);
    outb(PIC1_CMD, PIC_EOI);
}

/* OCW3 selects which register the next read of the command port returns. */
static uint16_t pic_read_ocw3(uint8_t ocw3)
{
    outb(PIC1_CMD, ocw3);
    outb(PIC2_CMD, ocw3);
    return (uint16_t)(inb(PIC1_CMD) | (inb(PIC2_CMD) << 8));
}

uint16_t pic_read_irr(void) { return pic_read_ocw3(0x0A); }
uint16_t pic_read_isr(void) { return pic_read_ocw3(0x0B); }

uint16_t pic_read_imr(void)
{
    return (uint16_t)(inb(PIC1_DATA) | (inb(PIC2_DATA) << 8));
}

/* Control word 0x34: channel 0, lobyte then hibyte, mode 2 (rate generator). */
void pit_periodic(uint16_t divisor)
{
    outb(PIT_MODE, 0x34);
    outb(PIT_CH0, divisor & 0xFF);
    outb(PIT_CH0, divisor >> 8);
}

/* Counter latch command for channel 0, then the latched count, low byte first. */
uint16_t pit_read0(void)
{
    outb(PIT_MODE, 0x00);
    uint8_t lo = inb(PIT_CH0);
    uint8_t hi = inb(PIT_CH0);
    return (uint16_t)(lo | (hi << 8));
}

static uint8_t rtc_read(uint8_t reg)
{
    outb(RTC_INDEX, reg);
    return inb(RTC_DATA);
}

/* MC146818: registers are stable only while UIP (register A bit 7) is clear;
 * register B bit 2 says binary, else BCD. */
int rtc_seconds(void)
{
    while (rtc_read(0x0A) & 0x80)
        ;
    uint8_t s = rtc_read(0x00);
    if (!(rtc_read(0x0B) & 0x04))
        s = (uint8_t)((s >> 4) * 10 + (s & 0xF));
    return s;
}

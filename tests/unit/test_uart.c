/* Unit test of the 16550A: Linux's autoconfig probes, THR/RBR, FIFO and trigger levels, IIR priorities, loopback, IRQ line. */
#include <string.h>

#include "check.h"
#include "hw/uart.h"

static struct io_bus *bus;
static struct uart *u;
static struct irq_probe irq;
static uint8_t sent[64];
static size_t nsent;

#define COM1 0x3F8
enum { RBR = 0, IER = 1, IIR = 2, FCR = 2, LCR = 3, MCR = 4, LSR = 5, MSR = 6, SCR = 7 };

static void outb(unsigned reg, uint8_t v) { io_out(bus, (uint16_t)(COM1 + reg), 1, v); }
static uint8_t inb(unsigned reg) { return (uint8_t)io_in(bus, (uint16_t)(COM1 + reg), 1); }

static void sink(void *opaque, uint8_t byte)
{
    (void)opaque;
    if (nsent < sizeof(sent))
        sent[nsent++] = byte;
}

int main(void)
{
    irq_probe_init(&irq);
    bus = io_bus_new();
    u = uart_init(bus, COM1, &irq.line, sink, NULL, "com1");
    CHECK(u != NULL);

    /* Reset state. */
    CHECK_EQ(inb(IIR), 0x01);
    CHECK_EQ(inb(LSR), 0x60);
    CHECK_EQ(inb(IER), 0x00);
    CHECK_EQ(irq.level, 0);

    /* autoconfig(): IER holds exactly its low 4 bits. */
    outb(IER, 0);
    CHECK_EQ(inb(IER), 0x00);
    outb(IER, 0x0F);
    CHECK_EQ(inb(IER), 0x0F);
    outb(IER, 0xFF);
    CHECK_EQ(inb(IER), 0x0F);      /* bit 6 (XScale UUE) does not stick */
    outb(IER, 0);
    /* Loopback check: MCR = LOOP | OUT2 | RTS gives MSR[7:4] = DCD | CTS. */
    outb(MCR, 0x1A);
    CHECK_EQ(inb(MSR) & 0xF0, 0x90);
    outb(MCR, 0x00);
    CHECK_EQ(inb(MSR) & 0xF0, 0xB0);   /* a terminal: DCD, DSR, CTS */
    /* FIFO enable: IIR[7:6] = 11 identifies a 16550A. */
    outb(LCR, 0xBF);
    outb(FCR, 0);                   /* the EFR write lands on FCR */
    outb(LCR, 0);
    outb(FCR, 0x01);
    CHECK_EQ(inb(IIR) & 0xC0, 0xC0);
    /* Not a 16750: FCR bit 5 never shows as IIR bit 5. */
    outb(FCR, 0x21);
    CHECK_EQ(inb(IIR) & 0xE0, 0xC0);
    outb(LCR, 0x80);
    outb(FCR, 0x21);
    CHECK_EQ(inb(IIR) & 0xE0, 0xC0);
    outb(LCR, 0);
    outb(FCR, 0x00);
    CHECK_EQ(inb(IIR), 0x01);

    /* Divisor latch behind DLAB; IER untouched by it. */
    outb(IER, 0x05);
    outb(LCR, 0x83);
    outb(RBR, 0x01);
    outb(IER, 0x00);
    CHECK_EQ(inb(RBR), 0x01);
    CHECK_EQ(inb(IER), 0x00);
    outb(LCR, 0x03);
    CHECK_EQ(inb(LCR), 0x03);
    CHECK_EQ(inb(IER), 0x05);
    outb(IER, 0);
    outb(SCR, 0x5A);
    CHECK_EQ(inb(SCR), 0x5A);

    /* Transmit: bytes reach the sink; THRE and TEMT stay set. */
    outb(RBR, 'h');
    outb(RBR, 'i');
    CHECK_EQ(nsent, 2);
    CHECK(memcmp(sent, "hi", 2) == 0);
    CHECK_EQ(inb(LSR) & 0x60, 0x60);

    /* THRE interrupt: raised by enabling ETBEI, cleared by reading IIR,
     * raised again by re-enabling (Linux's UART_BUG_THRE/TXEN tests). */
    outb(IER, 0x02);
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(inb(IIR), 0x02);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(inb(IIR), 0x01);
    outb(IER, 0x00);
    outb(IER, 0x02);
    CHECK_EQ(inb(IIR), 0x02);
    /* Writing THR clears it; the byte leaves at once and it is back. */
    outb(RBR, '!');
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(inb(IIR), 0x02);
    outb(IER, 0x00);

    /* Receive without FIFO: one holding register. */
    CHECK_EQ(uart_rx_room(u), 1);
    CHECK_EQ(uart_receive(u, (const uint8_t *)"ab", 2), 1);
    CHECK_EQ(inb(LSR) & 0x01, 0x01);
    CHECK_EQ(irq.level, 0);         /* ERBFI off */
    outb(IER, 0x01);
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(inb(IIR), 0x04);
    CHECK_EQ(inb(RBR), 'a');
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(inb(LSR) & 0x01, 0x00);
    CHECK_EQ(inb(IIR), 0x01);

    /* FIFO, trigger level 8 (what Linux programs for a 16550A). */
    outb(FCR, 0x87);
    CHECK_EQ(uart_rx_room(u), 16);
    CHECK_EQ(uart_receive(u, (const uint8_t *)"abc", 3), 3);
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(inb(IIR), 0xCC);       /* below the trigger: timeout indication */
    CHECK_EQ(uart_receive(u, (const uint8_t *)"defghijklmnopqrstu", 18), 13);
    CHECK_EQ(uart_rx_room(u), 0);
    CHECK_EQ(inb(IIR), 0xC4);       /* at the trigger: data available */
    CHECK_EQ(inb(LSR) & 0x02, 0);   /* refused input is no overrun */
    char got[17] = { 0 };
    for (int i = 0; i < 16 && (inb(LSR) & 0x01); i++)
        got[i] = (char)inb(RBR);
    CHECK(strcmp(got, "abcdefghijklmnop") == 0);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(inb(IIR), 0xC1);
    /* Clearing the RX FIFO drops what is queued. */
    uart_receive(u, (const uint8_t *)"xyz", 3);
    outb(FCR, 0x83);
    CHECK_EQ(inb(LSR) & 0x01, 0);
    CHECK_EQ(irq.level, 0);

    /* IIR priority: data available outranks THRE. */
    uart_receive(u, (const uint8_t *)"12345678", 8);
    outb(IER, 0x03);
    CHECK_EQ(inb(IIR), 0xC4);
    CHECK_EQ(inb(IIR), 0xC4);       /* reading IIR does not clear RDA */
    for (int i = 0; i < 8; i++)
        inb(RBR);
    CHECK_EQ(inb(IIR), 0xC2);
    CHECK_EQ(inb(IIR), 0xC1);
    outb(IER, 0x00);

    /* Loopback, as Linux's size_fifo(): 16 bytes fit, the 17th overruns. */
    outb(MCR, 0x10);
    CHECK_EQ(uart_rx_room(u), 0);   /* serial input disconnected */
    nsent = 0;
    for (int i = 0; i < 20; i++)
        outb(RBR, (uint8_t)i);
    CHECK_EQ(nsent, 0);
    int count = 0;
    while ((inb(LSR) & 0x01) && count < 256) {
        CHECK_EQ(inb(RBR), count);
        count++;
    }
    CHECK_EQ(count, 16);
    outb(IER, 0x04);                /* line status interrupt */
    outb(RBR, 0x55);                /* one byte fits: no overrun */
    CHECK_EQ(irq.level, 0);
    for (int i = 0; i < 16; i++)
        outb(RBR, (uint8_t)i);
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(inb(IIR), 0xC6);
    CHECK_EQ(inb(LSR) & 0x03, 0x03);    /* DR and OE */
    CHECK_EQ(inb(LSR) & 0x02, 0x00);    /* OE clears on read */
    CHECK_EQ(irq.level, 0);
    outb(FCR, 0x03);
    /* Modem status in loopback: outputs feed the inputs, deltas interrupt. */
    outb(IER, 0x08);
    inb(MSR);
    CHECK_EQ(irq.level, 0);
    outb(MCR, 0x10 | 0x02);         /* RTS -> CTS */
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(inb(IIR), 0xC0);
    CHECK_EQ(inb(MSR), 0x10 | 0x01);    /* CTS, DCTS */
    CHECK_EQ(irq.level, 0);
    outb(MCR, 0x10 | 0x04);         /* OUT1 -> RI, CTS drops */
    CHECK_EQ(inb(MSR), 0x40 | 0x01);
    outb(MCR, 0x10);                /* RI falls: trailing edge */
    CHECK_EQ(inb(MSR), 0x04);
    outb(IER, 0x00);
    outb(MCR, 0x0B);
    inb(MSR);
    CHECK_EQ(uart_rx_room(u), 16);

    /* Turning the FIFO off empties it. */
    uart_receive(u, (const uint8_t *)"q", 1);
    outb(FCR, 0x00);
    CHECK_EQ(inb(LSR) & 0x01, 0);
    CHECK_EQ(uart_rx_room(u), 1);

    uart_free(u);
    io_bus_free(bus);
    return check_done();
}

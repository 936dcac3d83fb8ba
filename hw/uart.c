/* 16550A UART, modelled from the National PC16550D datasheet; transmission is instantaneous. */
#include <stdbool.h>
#include <stdlib.h>

#include "uart.h"

/* Register offsets (DLAB = LCR bit 7 selects DLL/DLM at 0 and 1). */
enum { UART_RBR_THR = 0, UART_IER = 1, UART_IIR_FCR = 2, UART_LCR = 3,
       UART_MCR = 4, UART_LSR = 5, UART_MSR = 6, UART_SCR = 7 };

#define IER_ERBFI 0x01  /* received data available */
#define IER_ETBEI 0x02  /* THR empty */
#define IER_ELSI  0x04  /* receiver line status */
#define IER_EDSSI 0x08  /* modem status */

#define IIR_NONE    0x01
#define IIR_MSR     0x00
#define IIR_THRE    0x02
#define IIR_RDA     0x04
#define IIR_RLS     0x06
#define IIR_TIMEOUT 0x0C
#define IIR_FIFO    0xC0

#define FCR_ENABLE  0x01
#define FCR_CLR_RX  0x02

#define LCR_DLAB    0x80

#define MCR_DTR  0x01
#define MCR_RTS  0x02
#define MCR_OUT1 0x04
#define MCR_OUT2 0x08
#define MCR_LOOP 0x10

#define LSR_DR   0x01
#define LSR_OE   0x02
#define LSR_ERRS 0x1E   /* OE, PE, FE, BI */
#define LSR_THRE 0x20
#define LSR_TEMT 0x40

#define MSR_DCTS 0x01
#define MSR_DDSR 0x02
#define MSR_TERI 0x04
#define MSR_DDCD 0x08
#define MSR_CTS  0x10
#define MSR_DSR  0x20
#define MSR_RI   0x40
#define MSR_DCD  0x80

/* FIFO depth. Linux's 8250 driver (drivers/tty/serial/8250/8250_port.c)
 * calls a UART a 16550A when IIR bits 7-6 read 11 after FCR enables the FIFO
 * (autoconfig), then takes fifo_size = tx_loadsz = 16 from
 * uart_config[PORT_16550A]. A 64-byte FIFO belongs to other chips it tells
 * apart: a 16750 shows IIR bit 5 after FCR bit 5 is written with DLAB set,
 * and a "U6_16550A" keeps 64 looped-back bytes in size_fifo(). So a faithful
 * 16550A holds 16 bytes and never shows IIR bit 5; kvmtool's 64-byte FIFO is
 * its own choice, not what the kernel expects. */
struct uart {
    uint8_t rx[UART_FIFO_LEN];
    unsigned rx_head, rx_count;
    uint8_t ier, fcr, lcr, mcr, scr;
    uint8_t lsr_errs;       /* OE, PE, FE, BI: cleared by reading LSR */
    uint8_t msr_delta;      /* DCTS, DDSR, TERI, DDCD: cleared by reading MSR */
    uint8_t msr_lines;      /* CTS, DSR, RI, DCD as last seen */
    uint16_t divisor;
    bool thre_pending;      /* the THRE interrupt condition */
    struct irq_line *irq;
    uart_tx_fn *tx;
    void *tx_opaque;
};

static bool uart_fifo_on(const struct uart *u)
{
    return u->fcr & FCR_ENABLE;
}

static unsigned uart_rx_capacity(const struct uart *u)
{
    return uart_fifo_on(u) ? UART_FIFO_LEN : 1;
}

/* FCR bits 7-6: RCVR trigger level 1, 4, 8 or 14 bytes. */
static unsigned uart_rx_trigger(const struct uart *u)
{
    static const unsigned level[4] = { 1, 4, 8, 14 };
    return level[u->fcr >> 6];
}

/* Modem status inputs. In loopback the four modem control outputs are
 * connected internally to the four inputs: CTS = RTS, DSR = DTR, RI = OUT1,
 * DCD = OUT2. Otherwise a connected terminal with
 * carrier: CTS, DSR and DCD asserted (as QEMU presents its serial port). */
static uint8_t uart_modem_lines(const struct uart *u)
{
    if (!(u->mcr & MCR_LOOP))
        return MSR_CTS | MSR_DSR | MSR_DCD;
    uint8_t m = 0;
    if (u->mcr & MCR_RTS)  m |= MSR_CTS;
    if (u->mcr & MCR_DTR)  m |= MSR_DSR;
    if (u->mcr & MCR_OUT1) m |= MSR_RI;
    if (u->mcr & MCR_OUT2) m |= MSR_DCD;
    return m;
}

static void uart_update_msr(struct uart *u)
{
    uint8_t now = uart_modem_lines(u), changed = now ^ u->msr_lines;
    if (changed & MSR_CTS) u->msr_delta |= MSR_DCTS;
    if (changed & MSR_DSR) u->msr_delta |= MSR_DDSR;
    if (changed & MSR_DCD) u->msr_delta |= MSR_DDCD;
    if (changed & u->msr_lines & MSR_RI)    /* trailing edge of RI only */
        u->msr_delta |= MSR_TERI;
    u->msr_lines = now;
}

/* The pending interrupt in priority order (datasheet table "Interrupt
 * Control Functions"): line status, received data, character timeout, THR
 * empty, modem status. */
static uint8_t uart_iid(const struct uart *u)
{
    if ((u->ier & IER_ELSI) && u->lsr_errs)
        return IIR_RLS;
    if ((u->ier & IER_ERBFI) && u->rx_count) {
        /* FIFO mode: data available at the trigger level; below it, the
         * timeout indication that real hardware gives after 4 idle
         * character times. Input arrives here in bursts from the monitor,
         * so we report it at once rather than run a timer. */
        if (uart_fifo_on(u) && u->rx_count < uart_rx_trigger(u))
            return IIR_TIMEOUT;
        return IIR_RDA;
    }
    if ((u->ier & IER_ETBEI) && u->thre_pending)
        return IIR_THRE;
    if ((u->ier & IER_EDSSI) && u->msr_delta)
        return IIR_MSR;
    return IIR_NONE;
}

/* Recomputed after every register access and input. On a PC the INTR pin
 * reaches the PIC through a gate driven by OUT2; QEMU, against which our
 * test guests are checked, does not model that gate, so neither do we. */
static void uart_update_irq(struct uart *u)
{
    irq_set(u->irq, uart_iid(u) != IIR_NONE);
}

static void uart_rx_push(struct uart *u, uint8_t byte)
{
    if (u->rx_count >= uart_rx_capacity(u)) {
        /* Overrun (LSR bit 1): without the FIFO the new character replaces
         * the unread one in RBR; with it, the character in the shift
         * register is lost and the FIFO kept. */
        u->lsr_errs |= LSR_OE;
        if (!uart_fifo_on(u))
            u->rx[u->rx_head] = byte;
        return;
    }
    u->rx[(u->rx_head + u->rx_count) % UART_FIFO_LEN] = byte;
    u->rx_count++;
}

static uint8_t uart_rx_pop(struct uart *u)
{
    if (u->rx_count == 0)
        return 0;
    uint8_t byte = u->rx[u->rx_head];
    u->rx_head = (u->rx_head + 1) % UART_FIFO_LEN;
    u->rx_count--;
    return byte;
}

static void uart_rx_clear(struct uart *u)
{
    u->rx_head = 0;
    u->rx_count = 0;
}

static void uart_transmit(struct uart *u, uint8_t byte)
{
    if (u->mcr & MCR_LOOP)
        uart_rx_push(u, byte);  /* the TX shift register loops back into RX */
    else if (u->tx)
        u->tx(u->tx_opaque, byte);
    /* Writing THR clears the THRE interrupt; the byte leaves at once, so THR
     * is empty again and the condition returns. */
    u->thre_pending = true;
}

static void uart_write(struct uart *u, uint16_t off, uint8_t val)
{
    bool dlab = u->lcr & LCR_DLAB;
    switch (off) {
    case UART_RBR_THR:
        if (dlab)
            u->divisor = (u->divisor & 0xFF00) | val;
        else
            uart_transmit(u, val);
        break;
    case UART_IER:
        if (dlab) {
            u->divisor = (uint16_t)((u->divisor & 0x00FF) | val << 8);
        } else {
            /* Bits 7-4 are always 0 on a 16550A; Linux's autoconfig relies
             * on it (IER test, and bit 6 to tell an XScale UART). Enabling
             * ETBEI with THR empty raises THRE at once, which the driver's
             * startup checks (UART_BUG_TXEN, UART_BUG_THRE). */
            if ((val & IER_ETBEI) && !(u->ier & IER_ETBEI))
                u->thre_pending = true;
            u->ier = val & 0x0F;
        }
        break;
    case UART_IIR_FCR:
        /* Other FCR bits are programmed only when FCR0 is written as 1;
         * changing FCR0 clears both FIFOs. The TX FIFO is always empty here. */
        if ((val ^ u->fcr) & FCR_ENABLE)
            uart_rx_clear(u);
        if (val & FCR_ENABLE) {
            if (val & FCR_CLR_RX)
                uart_rx_clear(u);
            u->fcr = val & 0xC9;    /* enable, DMA mode select, trigger */
        } else {
            u->fcr = 0;
        }
        break;
    case UART_LCR:
        u->lcr = val;
        break;
    case UART_MCR:
        u->mcr = val & 0x1F;
        uart_update_msr(u);
        break;
    case UART_SCR:
        u->scr = val;
        break;
    default:    /* LSR (factory test), MSR: read-only */
        break;
    }
}

static uint8_t uart_read(struct uart *u, uint16_t off)
{
    bool dlab = u->lcr & LCR_DLAB;
    uint8_t v;
    switch (off) {
    case UART_RBR_THR:
        return dlab ? (uint8_t)u->divisor : uart_rx_pop(u);
    case UART_IER:
        return dlab ? (uint8_t)(u->divisor >> 8) : u->ier;
    case UART_IIR_FCR:
        v = uart_iid(u);
        if (v == IIR_THRE)
            u->thre_pending = false;    /* "reading the IIR (if source of interrupt)" */
        return v | (uart_fifo_on(u) ? IIR_FIFO : 0);
    case UART_LCR:
        return u->lcr;
    case UART_MCR:
        return u->mcr;
    case UART_LSR:
        /* THRE and TEMT: transmission is instantaneous. Bit 7 (error in
         * RCVR FIFO) stays 0: no parity, framing or break errors arise. */
        v = u->lsr_errs | LSR_THRE | LSR_TEMT | (u->rx_count ? LSR_DR : 0);
        u->lsr_errs = 0;
        return v;
    case UART_MSR:
        v = u->msr_lines | u->msr_delta;
        u->msr_delta = 0;
        return v;
    default:
        return u->scr;
    }
}

static void uart_io(uint16_t off, uint32_t *data, unsigned len, bool is_write,
                    void *opaque)
{
    (void)len;
    struct uart *u = opaque;
    if (is_write)
        uart_write(u, off, (uint8_t)*data);
    else
        *data = uart_read(u, off);
    uart_update_irq(u);
}

size_t uart_rx_room(const struct uart *u)
{
    if (u->mcr & MCR_LOOP)
        return 0;
    return uart_rx_capacity(u) - u->rx_count;
}

size_t uart_receive(struct uart *u, const uint8_t *buf, size_t len)
{
    size_t room = uart_rx_room(u), n = len < room ? len : room;
    for (size_t i = 0; i < n; i++)
        uart_rx_push(u, buf[i]);
    uart_update_irq(u);
    return n;
}

struct uart *uart_init(struct io_bus *bus, uint16_t base, struct irq_line *irq,
                       uart_tx_fn *tx, void *tx_opaque, const char *name)
{
    struct uart *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return NULL;
    u->irq = irq;
    u->tx = tx;
    u->tx_opaque = tx_opaque;
    u->divisor = 12;    /* 9600 baud from the 1.8432 MHz clock */
    u->msr_lines = uart_modem_lines(u);
    if (io_register(bus, base, 8, uart_io, u, name)) {
        free(u);
        return NULL;
    }
    return u;
}

void uart_free(struct uart *u)
{
    free(u);
}

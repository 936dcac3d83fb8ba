/* 16550A UART (COM1 at 0x3F8, IRQ4): output to a sink callback, input pushed by the monitor. */
#ifndef RING3_HW_UART_H
#define RING3_HW_UART_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "irq.h"

#define UART_COM1_BASE 0x3F8
#define UART_COM1_IRQ  4
#define UART_FIFO_LEN  16   /* 16550A: 16-byte FIFOs */

/* Receives each byte the guest transmits (not in loopback mode). Runs inside
 * the guest's port access; it should not block for long. */
typedef void uart_tx_fn(void *opaque, uint8_t byte);

struct uart;

/* Create a UART at ports (base)..(base + 7) on (bus), named (name) in traces
 * (a string literal). Transmitted bytes go to (tx)(tx_opaque) (tx may be
 * NULL: dropped). (irq) is its interrupt line (may be NULL). Returns NULL if
 * out of memory or the ports are taken. */
struct uart *uart_init(struct io_bus *bus, uint16_t base, struct irq_line *irq,
                       uart_tx_fn *tx, void *tx_opaque, const char *name);

void uart_free(struct uart *u);

/* Deliver up to (len) bytes from (buf) to the receiver, as if they arrived
 * on the serial line, raising the receive interrupt if enabled. Returns how
 * many were taken: at most uart_rx_room(). The monitor keeps the rest and
 * offers them again later, so host input is never lost to an overrun. */
size_t uart_receive(struct uart *u, const uint8_t *buf, size_t len);

/* How many bytes uart_receive() would take now: the free space in the RX
 * FIFO (16 bytes, or the 1-byte holding register with the FIFO off), and 0
 * in loopback mode, where the serial input is disconnected. The monitor
 * should read host input only while this is nonzero, and check it again
 * after each guest port access. */
size_t uart_rx_room(const struct uart *u);

#endif

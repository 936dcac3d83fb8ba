/* 8259A programmable interrupt controller pair (master 0x20, slave 0xA0, cascade on IR2) with the ELCR (0x4D0). */
#ifndef RING3_HW_PIC_H
#define RING3_HW_PIC_H

#include <stdbool.h>

#include "io.h"
#include "irq.h"

#define PIC_MASTER_BASE 0x20
#define PIC_SLAVE_BASE  0xA0
#define PIC_ELCR_BASE   0x4D0
#define PIC_CASCADE_IR  2

struct pic;

/* Create the pair and register its ports on (bus). It starts as a PC BIOS
 * leaves it: 8086 mode, edge-triggered, vectors 0x08-0x0F and 0x70-0x77,
 * every IRQ masked but the cascade; guests reprogram it with ICW1-4.
 * (intr) is the CPU's INTR pin: driven high while pic_intr_pending() and low
 * otherwise (may be NULL; its receiver runs inside guest port accesses and
 * device updates, so it should only note the change, e.g. set the shared
 * page's pending flag). Returns NULL if out of memory or the ports are
 * taken. */
struct pic *pic_init(struct io_bus *bus, struct irq_line *intr);

void pic_free(struct pic *pic);

/* The input line for ISA IRQ (irq) = 0..15, for a device to drive with
 * irq_set(). Returns NULL for 2 (the cascade) or an out-of-range number. */
struct irq_line *pic_irq(struct pic *pic, int irq);

/* True if the master would interrupt the CPU now: an unmasked request of
 * higher priority than any in service (datasheet: "Interrupt Sequence"). */
bool pic_intr_pending(const struct pic *pic);

/* The CPU's INTA cycle: returns the vector (0..255) the CPU fetches, setting
 * in-service bits as the 8259A does. Call only when the CPU accepts an
 * interrupt (virtual IF set and pic_intr_pending()); if the request went away
 * meanwhile, returns the spurious vector for IR7 (base + 7) of the chip that
 * lost it, like the hardware. */
int pic_acknowledge(struct pic *pic);

#endif

/* IRQ lines as small objects: a device drives a line, the line calls its receiver only on a real change. */
#ifndef RING3_HW_IRQ_H
#define RING3_HW_IRQ_H

#include <stddef.h>

/* The receiving end (an interrupt controller input, or the CPU's INTR pin):
 * called with (irq_num) and the new (level), 0 or 1, only when it changes. */
typedef void irq_set_fn(void *opaque, int irq_num, int level);

/* One sender drives a line (ISA IRQs are not shared). */
struct irq_line {
    irq_set_fn *set_irq;    /* NULL: an unconnected line */
    void *opaque;
    int irq_num;
    int level;              /* as last driven by the sender */
};

/* Connect (line) to (set_irq)(opaque, irq_num, ...), starting low. */
static inline void irq_line_init(struct irq_line *line, irq_set_fn *set_irq,
                                 void *opaque, int irq_num)
{
    line->set_irq = set_irq;
    line->opaque = opaque;
    line->irq_num = irq_num;
    line->level = 0;
}

/* Drive (line) to (level) (nonzero = high). The receiver hears of it only if
 * the level really changes. (line) may be NULL (a device left unconnected). */
static inline void irq_set(struct irq_line *line, int level)
{
    if (line == NULL)
        return;
    level = level != 0;
    if (level == line->level)
        return;
    line->level = level;
    if (line->set_irq)
        line->set_irq(line->opaque, line->irq_num, level);
}

/* A rising edge that ends low again: for edge-triggered inputs. */
static inline void irq_pulse(struct irq_line *line)
{
    irq_set(line, 1);
    irq_set(line, 0);
}

#endif

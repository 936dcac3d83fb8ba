/* 8259A PIC pair as on the PC/AT, modelled from the Intel 8259A datasheet (231468); 8086 mode only. */
#include <stdlib.h>

#include "pic.h"

struct pic_chip {
    uint8_t irr, isr, imr;
    uint8_t input;          /* current level of the IR pins */
    uint8_t elcr;           /* ELCR: 1 = that IR is level-triggered */
    uint8_t elcr_mask;      /* ELCR bits that are not hardwired to edge */
    uint8_t vector_base;    /* ICW2, T7-T3 */
    uint8_t icw3;           /* master: IRs with a slave; slave: its ID */
    uint8_t lowest;         /* IR of lowest priority (rotation) */
    uint8_t init_step;      /* 0 = operational, else the ICW expected next */
    bool is_master;
    bool icw4_needed, single, ltim, aeoi, rotate_aeoi, sfnm;
    bool read_isr, poll, special_mask;
};

struct pic {
    struct pic_chip chip[2];
    struct irq_line line[16];
    struct irq_line *intr;
};

static uint8_t chip_level_mask(const struct pic_chip *c)
{
    return c->ltim ? 0xFF : c->elcr;
}

/* Priority rank of (ir): 0 is the highest. "Specific Rotation": the IR after
 * the lowest-priority one has the highest priority. */
static int chip_rank(const struct pic_chip *c, int ir)
{
    return (ir - c->lowest - 1) & 7;
}

static int chip_highest(const struct pic_chip *c, uint8_t bits)
{
    for (int i = 0; i < 8; i++) {
        int ir = (c->lowest + 1 + i) & 7;
        if (bits & (1u << ir))
            return ir;
    }
    return -1;
}

/* The IR this chip would raise INT for, or -1 ("Fully Nested Mode": a request
 * is passed on only if of higher priority than every IR in service). */
static int chip_pending(const struct pic_chip *c)
{
    if (c->init_step)
        return -1;  /* not programmed yet: its vectors are not known */
    int ir = chip_highest(c, c->irr & ~c->imr);
    if (ir < 0)
        return -1;
    uint8_t in_service = c->isr;
    /* "Special Mask Mode": a masked level no longer inhibits the others. */
    if (c->special_mask)
        in_service &= ~c->imr;
    int cur = chip_highest(c, in_service);
    if (cur < 0)
        return ir;
    int r = chip_rank(c, ir), rc = chip_rank(c, cur);
    /* "Special Fully Nested Mode": a slave in service is not locked out, so
     * a higher request inside it passes through the master again. */
    bool sfnm_slave = c->is_master && c->sfnm && (c->icw3 & (1u << ir));
    if (r < rc || (r == rc && sfnm_slave))
        return ir;
    return -1;
}

static void chip_set_input(struct pic_chip *c, int ir, int level)
{
    uint8_t m = (uint8_t)(1u << ir);
    if (chip_level_mask(c) & m) {
        /* Level-triggered: the request follows the pin. */
        c->irr = level ? c->irr | m : c->irr & ~m;
    } else if (level && !(c->input & m)) {
        /* Edge-triggered: a low-to-high transition latches the request. The
         * datasheet asks the pin to stay high until INTA and yields IR7 if it
         * falls earlier; our devices update lazily and may pulse, so the
         * request stays latched until INTA (as QEMU's i8259 also does). */
        c->irr |= m;
    }
    c->input = level ? c->input | m : c->input & ~m;
}

/* INTA on this chip for (ir): "the highest priority ISR bit is set and the
 * corresponding IRR bit is reset"; AEOI ends it at the last INTA pulse. */
static void chip_ack(struct pic_chip *c, int ir)
{
    uint8_t m = (uint8_t)(1u << ir);
    c->irr &= ~m;
    if (chip_level_mask(c) & c->input & m)
        c->irr |= m;
    if (c->aeoi) {
        if (c->rotate_aeoi)
            c->lowest = (uint8_t)ir;
    } else {
        c->isr |= m;
    }
}

static void pic_update(struct pic *pic)
{
    /* The slave's INT pin drives master IR2. */
    chip_set_input(&pic->chip[0], PIC_CASCADE_IR, chip_pending(&pic->chip[1]) >= 0);
    irq_set(pic->intr, chip_pending(&pic->chip[0]) >= 0);
}

/* ICW1 (A0=0, D4=1), datasheet "Initialization Command Words": the edge sense
 * circuit is reset, IMR cleared, IR7 gets priority 7, special mask mode
 * cleared, status read set to IRR, and ICW4 functions zeroed. */
static void chip_icw1(struct pic_chip *c, uint8_t val)
{
    c->icw4_needed = val & 0x01;
    c->single = val & 0x02;
    c->ltim = val & 0x08;
    c->imr = 0;
    c->isr = 0;
    c->irr = c->input & chip_level_mask(c);
    c->lowest = 7;
    c->special_mask = false;
    c->read_isr = false;
    c->poll = false;
    c->aeoi = false;
    c->rotate_aeoi = false;
    c->sfnm = false;
    c->init_step = 2;
}

/* OCW2 (A0=0, D4=0, D3=0): R, SL, EOI in D7-D5, level in D2-D0. */
static void chip_ocw2(struct pic_chip *c, uint8_t val)
{
    int ir = val & 7;
    int cur = chip_highest(c, c->isr);
    switch (val >> 5) {
    case 0: /* rotate in automatic EOI mode (clear) */
        c->rotate_aeoi = false;
        break;
    case 4: /* rotate in automatic EOI mode (set) */
        c->rotate_aeoi = true;
        break;
    case 1: /* non-specific EOI: the highest ISR bit */
        if (cur >= 0)
            c->isr &= ~(1u << cur);
        break;
    case 5: /* rotate on non-specific EOI */
        if (cur >= 0) {
            c->isr &= ~(1u << cur);
            c->lowest = (uint8_t)cur;
        }
        break;
    case 3: /* specific EOI */
        c->isr &= ~(1u << ir);
        break;
    case 7: /* rotate on specific EOI */
        c->isr &= ~(1u << ir);
        c->lowest = (uint8_t)ir;
        break;
    case 6: /* set priority */
        c->lowest = (uint8_t)ir;
        break;
    default: /* 2: no operation */
        break;
    }
}

/* OCW3 (A0=0, D4=0, D3=1): ESMM/SMM, poll, RR/RIS. */
static void chip_ocw3(struct pic_chip *c, uint8_t val)
{
    if (val & 0x04)
        c->poll = true;
    if (val & 0x02)
        c->read_isr = val & 0x01;
    if (val & 0x40)
        c->special_mask = val & 0x20;
}

static void chip_write_data(struct pic_chip *c, uint8_t val)
{
    switch (c->init_step) {
    case 2: /* ICW2: T7-T3 of the vector (8086 mode) */
        c->vector_base = val & 0xF8;
        c->init_step = c->single ? (c->icw4_needed ? 4 : 0) : 3;
        break;
    case 3: /* ICW3: slave bit mask (master) or slave ID */
        c->icw3 = c->is_master ? val : (val & 7);
        c->init_step = c->icw4_needed ? 4 : 0;
        break;
    case 4: /* ICW4: D0 uPM (8086 assumed), D1 AEOI, D4 SFNM; BUF, M/S unused */
        c->aeoi = val & 0x02;
        c->sfnm = val & 0x10;
        c->init_step = 0;
        break;
    default: /* OCW1 */
        c->imr = val;
        break;
    }
}

/* "Poll Command": the read acts as INTA and returns 1000 0W2W1W0, or 0. */
static uint8_t chip_poll(struct pic_chip *c)
{
    c->poll = false;
    int ir = chip_pending(c);
    if (ir < 0)
        return 0;
    chip_ack(c, ir);
    return (uint8_t)(0x80 | ir);
}

static void pic_chip_io(struct pic *pic, struct pic_chip *c, uint16_t off,
                        uint32_t *data, bool is_write)
{
    uint8_t val = (uint8_t)*data;
    if (is_write) {
        if (off == 1)
            chip_write_data(c, val);
        else if (val & 0x10)
            chip_icw1(c, val);
        else if (val & 0x08)
            chip_ocw3(c, val);
        else
            chip_ocw2(c, val);
    } else if (off == 1) {
        *data = c->imr;
    } else if (c->poll) {
        *data = chip_poll(c);
    } else {
        *data = c->read_isr ? c->isr : c->irr;
    }
    pic_update(pic);
}

static void pic_master_io(uint16_t off, uint32_t *data, unsigned len,
                          bool is_write, void *opaque)
{
    (void)len;
    struct pic *pic = opaque;
    pic_chip_io(pic, &pic->chip[0], off, data, is_write);
}

static void pic_slave_io(uint16_t off, uint32_t *data, unsigned len,
                         bool is_write, void *opaque)
{
    (void)len;
    struct pic *pic = opaque;
    pic_chip_io(pic, &pic->chip[1], off, data, is_write);
}

/* Edge/Level Control Registers of the PC chipset (82371AB PIIX4 datasheet,
 * ELCR1/ELCR2): one bit per IRQ, 1 = level. IRQ0-2, 8 and 13 stay edge. */
static void pic_elcr_io(uint16_t off, uint32_t *data, unsigned len,
                        bool is_write, void *opaque)
{
    (void)len;
    struct pic *pic = opaque;
    struct pic_chip *c = &pic->chip[off];
    if (!is_write) {
        *data = c->elcr;
        return;
    }
    c->elcr = (uint8_t)*data & c->elcr_mask;
    uint8_t level = chip_level_mask(c);
    c->irr = (c->irr & ~level) | (c->input & level);
    pic_update(pic);
}

static void pic_set_irq(void *opaque, int irq, int level)
{
    struct pic *pic = opaque;
    chip_set_input(&pic->chip[irq >> 3], irq & 7, level);
    pic_update(pic);
}

struct pic *pic_init(struct io_bus *bus, struct irq_line *intr)
{
    struct pic *pic = calloc(1, sizeof(*pic));
    if (pic == NULL)
        return NULL;
    pic->intr = intr;
    /* Start as a PC BIOS leaves the pair: programmed in 8086 mode, edge
     * triggered, vectors 0x08 and 0x70, cascade on IR2, all else masked. */
    for (int i = 0; i < 2; i++) {
        struct pic_chip *c = &pic->chip[i];
        c->is_master = i == 0;
        c->lowest = 7;
        c->icw4_needed = true;
        c->imr = 0xFF;
    }
    pic->chip[0].vector_base = 0x08;
    pic->chip[0].icw3 = 1u << PIC_CASCADE_IR;
    pic->chip[0].imr = (uint8_t)~(1u << PIC_CASCADE_IR);
    pic->chip[0].elcr_mask = 0xF8;
    pic->chip[1].vector_base = 0x70;
    pic->chip[1].icw3 = PIC_CASCADE_IR;
    pic->chip[1].elcr_mask = 0xDE;
    for (int i = 0; i < 16; i++)
        irq_line_init(&pic->line[i], pic_set_irq, pic, i);

    if (io_register(bus, PIC_MASTER_BASE, 2, pic_master_io, pic, "pic-master"))
        goto fail;
    if (io_register(bus, PIC_SLAVE_BASE, 2, pic_slave_io, pic, "pic-slave"))
        goto fail_master;
    if (io_register(bus, PIC_ELCR_BASE, 2, pic_elcr_io, pic, "pic-elcr"))
        goto fail_slave;
    return pic;

fail_slave:
    io_unregister(bus, PIC_SLAVE_BASE);
fail_master:
    io_unregister(bus, PIC_MASTER_BASE);
fail:
    free(pic);
    return NULL;
}

void pic_free(struct pic *pic)
{
    free(pic);
}

struct irq_line *pic_irq(struct pic *pic, int irq)
{
    if (irq < 0 || irq > 15 || irq == PIC_CASCADE_IR)
        return NULL;
    return &pic->line[irq];
}

bool pic_intr_pending(const struct pic *pic)
{
    return chip_pending(&pic->chip[0]) >= 0;
}

int pic_acknowledge(struct pic *pic)
{
    struct pic_chip *m = &pic->chip[0], *s = &pic->chip[1];
    int vector;
    int ir = chip_pending(m);
    if (ir < 0) {
        /* "Interrupt Sequence": with no request left at INTA the 8259A
         * answers as if IR7 had been requested, without setting ISR bit 7. */
        vector = m->vector_base | 7;
    } else {
        chip_ack(m, ir);
        if (!m->single && (m->icw3 & (1u << ir))) {
            /* Cascade: the master's CAS lines select the slave, which
             * supplies the vector (or its own IR7 if it lost the request). */
            int sir = chip_pending(s);
            if (sir < 0) {
                vector = s->vector_base | 7;
            } else {
                chip_ack(s, sir);
                vector = s->vector_base | sir;
            }
        } else {
            vector = m->vector_base | ir;
        }
    }
    pic_update(pic);
    return vector;
}

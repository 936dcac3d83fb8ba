/* 8254 PIT, modelled from the Intel 8254 datasheet (231164): counters are computed from a clock, never ticked. */
#include <stdbool.h>
#include <stdlib.h>

#include "pit.h"

/* Access modes of the control word (RW1, RW0). */
enum { PIT_RW_LATCH = 0, PIT_RW_LSB = 1, PIT_RW_MSB = 2, PIT_RW_LOHI = 3 };

struct pit_channel {
    uint16_t count_reg;     /* the count as written; 0 = 65536 (BCD: 10000) */
    uint8_t mode;           /* 0-5 */
    uint8_t rw;             /* PIT_RW_* */
    bool bcd;
    bool loaded;            /* a count is in the counting element */
    bool triggered;         /* modes 1, 5: a gate rising edge since the load */
    bool gate;
    bool running;           /* the counting element is counting */
    uint64_t start_ns;      /* when the current run began */
    uint64_t ticks_before;  /* ticks counted in earlier runs (gate pauses) */
    uint64_t irq_ticks;     /* channel 0: OUT edges delivered up to here */
    bool write_msb_next, read_msb_next;
    uint8_t write_lsb;
    bool count_latched, status_latched;
    uint16_t latch;
    uint8_t status;
};

struct pit {
    struct pit_channel ch[3];
    struct irq_line *irq0;
    const struct hw_clock *clock;
    uint8_t port_b;         /* bits 0-3 as last written to 0x61 */
};

static uint64_t pit_ns_to_ticks(uint64_t ns)
{
    return ns / NS_PER_SEC * PIT_HZ + ns % NS_PER_SEC * PIT_HZ / NS_PER_SEC;
}

/* The first ns at which pit_ns_to_ticks() reaches (ticks). */
static uint64_t pit_ticks_to_ns(uint64_t ticks)
{
    return ticks / PIT_HZ * NS_PER_SEC +
           (ticks % PIT_HZ * NS_PER_SEC + PIT_HZ - 1) / PIT_HZ;
}

static uint32_t pit_bcd_to_bin(uint16_t v)
{
    return (v >> 12 & 0xF) * 1000 + (v >> 8 & 0xF) * 100 + (v >> 4 & 0xF) * 10 + (v & 0xF);
}

static uint16_t pit_bin_to_bcd(uint32_t v)
{
    return (uint16_t)((v / 1000 % 10) << 12 | (v / 100 % 10) << 8 | (v / 10 % 10) << 4 | v % 10);
}

/* N: the initial count in clocks (a count of 0 is the maximum: 2^16 in
 * binary, 10^4 in BCD). Modes 2 and 3 take at least 2 (1 is illegal). */
static uint32_t pit_period(const struct pit_channel *c)
{
    uint32_t n = c->bcd ? pit_bcd_to_bin(c->count_reg) : c->count_reg;
    if (n == 0)
        n = c->bcd ? 10000 : 65536;
    if ((c->mode == 2 || c->mode == 3) && n < 2)
        n = 2;
    return n;
}

static bool pit_gated_mode(const struct pit_channel *c)
{
    return c->mode == 1 || c->mode == 5;
}

static uint64_t pit_elapsed(const struct pit_channel *c, uint64_t now)
{
    uint64_t d = c->ticks_before;
    if (c->running && now > c->start_ns)
        d += pit_ns_to_ticks(now - c->start_ns);
    return d;
}

/* The counting element (CE) after (d) clocks, in binary. */
static uint32_t pit_count_at(const struct pit_channel *c, uint64_t d)
{
    uint32_t n = pit_period(c);
    uint32_t modulus = c->bcd ? 10000 : 65536;
    if (!c->loaded || (pit_gated_mode(c) && !c->triggered))
        return n % modulus;
    switch (c->mode) {
    case 2: /* counts N..1, reloading when it reaches 1 */
        return (uint32_t)(n - d % n) % modulus;
    case 3: { /* decrements by two, reloading at each half period; odd N
               * loads N-1, with OUT high for (N+1)/2 and low for (N-1)/2 */
        uint32_t p = (uint32_t)(d % n), hi = (n + 1) / 2;
        uint32_t q = p < hi ? p : p - hi;
        return ((n & ~1u) - 2 * q) % modulus;
    }
    default: /* 0, 1, 4, 5: counts down once, then wraps and keeps going */
        return (uint32_t)((n + modulus - d % modulus) % modulus);
    }
}

/* OUT after (d) clocks: the waveforms of "Mode 0" to "Mode 5". */
static bool pit_out_at(const struct pit_channel *c, uint64_t d)
{
    uint32_t n = pit_period(c);
    if (!c->loaded)
        return c->mode != 0;    /* the control word sets OUT low in mode 0, else high */
    switch (c->mode) {
    case 0: return d >= n;                          /* high at terminal count */
    case 1: return !c->triggered || d >= n;         /* low during the one-shot */
    case 2: return !c->gate || d % n != n - 1;      /* low for one clock at 1 */
    case 3: return !c->gate || d % n < (n + 1) / 2; /* square wave */
    case 4: return d != n;                          /* low strobe for one clock */
    default: return !c->triggered || d != n;        /* 5: strobe after trigger */
    }
}

/* The first clock count > (d) at which OUT rises, or UINT64_MAX. */
static uint64_t pit_next_edge(const struct pit_channel *c, uint64_t d)
{
    uint64_t n = pit_period(c);
    if (!c->loaded || (pit_gated_mode(c) && !c->triggered))
        return UINT64_MAX;
    switch (c->mode) {
    case 0: case 1: return d < n ? n : UINT64_MAX;
    case 4: case 5: return d < n + 1 ? n + 1 : UINT64_MAX;
    default: return (d / n + 1) * n;   /* 2, 3: at every reload */
    }
}

/* Start counting the loaded count from its beginning. */
static void pit_restart(struct pit_channel *c, uint64_t now)
{
    c->ticks_before = 0;
    c->irq_ticks = 0;
    c->start_ns = now;
    c->running = c->loaded && (pit_gated_mode(c) ? c->triggered : c->gate);
}

static void pit_load(struct pit_channel *c, uint16_t count, uint64_t now)
{
    /* A new count restarts the counter at once. (In modes 2 and 3 the 8254
     * finishes the current period first; Linux writes the control word
     * before each count, which resets the counter anyway.) */
    c->count_reg = count;
    c->loaded = true;
    c->triggered = false;
    pit_restart(c, now);
}

/* "GATE" rules per mode: 0 and 4 pause while low; 2 and 3 stop while low
 * (OUT forced high) and reload on the rising edge; 1 and 5 start on it. */
static void pit_set_gate(struct pit_channel *c, bool gate, uint64_t now)
{
    if (gate == c->gate)
        return;
    if (c->mode == 0 || c->mode == 4) {
        c->ticks_before = pit_elapsed(c, now);
        c->start_ns = now;
        c->gate = gate;
        c->running = c->loaded && gate;
        return;
    }
    c->gate = gate;
    if (pit_gated_mode(c)) {
        if (gate && c->loaded) {
            c->triggered = true;
            pit_restart(c, now);
        }
    } else if (gate) {
        pit_restart(c, now);
    } else {
        c->ticks_before = pit_elapsed(c, now);
        c->running = false;
    }
}

static uint8_t pit_status(const struct pit_channel *c, uint64_t now)
{
    /* Read-Back status byte: OUT, NULL COUNT, RW1-0, M2-0, BCD. */
    return (uint8_t)(pit_out_at(c, pit_elapsed(c, now)) << 7 | !c->loaded << 6 |
                     c->rw << 4 | c->mode << 1 | c->bcd);
}

static uint16_t pit_read_count(const struct pit_channel *c, uint64_t now)
{
    uint32_t v = pit_count_at(c, pit_elapsed(c, now));
    return c->bcd ? pit_bin_to_bcd(v) : (uint16_t)v;
}

/* "Counter Latch Command": a second latch before the first is read is
 * ignored. */
static void pit_latch_count(struct pit_channel *c, uint64_t now)
{
    if (c->count_latched)
        return;
    c->latch = pit_read_count(c, now);
    c->count_latched = true;
}

void pit_update(struct pit *pit, uint64_t now)
{
    struct pit_channel *c = &pit->ch[0];
    uint64_t d = pit_elapsed(c, now);
    if (d <= c->irq_ticks) {
        d = c->irq_ticks;   /* a stale (now) must not replay OUT backwards */
    } else {
        if (pit_next_edge(c, c->irq_ticks) <= d) {
            irq_set(pit->irq0, 0);
            irq_set(pit->irq0, 1);
        }
        c->irq_ticks = d;
    }
    irq_set(pit->irq0, pit_out_at(c, d));
}

uint64_t pit_next_deadline(struct pit *pit, uint64_t now)
{
    const struct pit_channel *c = &pit->ch[0];
    if (!c->running)
        return PIT_NO_DEADLINE;
    uint64_t edge = pit_next_edge(c, c->irq_ticks);
    if (edge == UINT64_MAX)
        return PIT_NO_DEADLINE;
    uint64_t t = c->start_ns;
    if (edge > c->ticks_before)
        t += pit_ticks_to_ns(edge - c->ticks_before);
    return t < now ? now : t;
}

static void pit_control(struct pit *pit, uint8_t val, uint64_t now)
{
    int sc = val >> 6;
    if (sc == 3) {
        /* "Read-Back Command": D5 = !COUNT, D4 = !STATUS, D3-D1 = CNT2-0. */
        for (int i = 0; i < 3; i++) {
            struct pit_channel *c = &pit->ch[i];
            if (!(val & (2 << i)))
                continue;
            if (!(val & 0x20))
                pit_latch_count(c, now);
            if (!(val & 0x10) && !c->status_latched) {
                c->status = pit_status(c, now);
                c->status_latched = true;
            }
        }
        return;
    }
    struct pit_channel *c = &pit->ch[sc];
    int rw = (val >> 4) & 3;
    if (rw == PIT_RW_LATCH) {
        pit_latch_count(c, now);
        return;
    }
    /* "Write Operations": a control word resets the counter's logic, sets
     * OUT to its initial state and waits for a new count. */
    c->rw = (uint8_t)rw;
    c->mode = (val >> 1) & 7;
    if (c->mode > 5)
        c->mode -= 4;   /* x10 is mode 2, x11 mode 3 */
    c->bcd = val & 1;
    c->loaded = false;
    c->triggered = false;
    c->write_msb_next = c->read_msb_next = false;
    c->count_latched = c->status_latched = false;
    pit_restart(c, now);
}

static void pit_write_counter(struct pit_channel *c, uint8_t val, uint64_t now)
{
    switch (c->rw) {
    case PIT_RW_LSB:
        pit_load(c, val, now);
        break;
    case PIT_RW_MSB:
        pit_load(c, (uint16_t)(val << 8), now);
        break;
    case PIT_RW_LOHI:
        if (!c->write_msb_next) {
            c->write_lsb = val;
            c->write_msb_next = true;
            /* Mode 0: "writing the first byte disables counting" (OUT low). */
            if (c->mode == 0) {
                c->loaded = false;
                c->running = false;
            }
        } else {
            c->write_msb_next = false;
            pit_load(c, (uint16_t)(c->write_lsb | val << 8), now);
        }
        break;
    default:
        break;
    }
}

static uint8_t pit_read_counter(struct pit_channel *c, uint64_t now)
{
    if (c->status_latched) {
        c->status_latched = false;
        return c->status;
    }
    uint16_t v = c->count_latched ? c->latch : pit_read_count(c, now);
    bool msb;
    switch (c->rw) {
    case PIT_RW_MSB:
        msb = true;
        c->count_latched = false;
        break;
    case PIT_RW_LOHI:
        msb = c->read_msb_next;
        c->read_msb_next = !msb;
        if (msb)
            c->count_latched = false;
        break;
    default:
        msb = false;
        c->count_latched = false;
        break;
    }
    return msb ? (uint8_t)(v >> 8) : (uint8_t)v;
}

static void pit_io(uint16_t off, uint32_t *data, unsigned len, bool is_write,
                   void *opaque)
{
    (void)len;
    struct pit *pit = opaque;
    uint64_t now = hw_clock_now(pit->clock);
    pit_update(pit, now);
    if (off == 3) {
        if (is_write)
            pit_control(pit, (uint8_t)*data, now);
        else
            *data = 0xFF;   /* the control word register is write-only */
    } else if (is_write) {
        pit_write_counter(&pit->ch[off], (uint8_t)*data, now);
    } else {
        *data = pit_read_counter(&pit->ch[off], now);
    }
    pit_update(pit, now);
}

/* PC/AT port B (0x61). Write: bit 0 timer 2 gate, bit 1 speaker data, bits
 * 2-3 parity/channel check enables. Read: those bits, bit 4 the refresh
 * toggle (flips every 15.085 us), bit 5 timer 2 OUT; bits 6-7 (parity and
 * channel check errors) are 0. Linux calibrates the TSC by gating channel 2
 * here and polling bit 5. */
static void pit_port_b_io(uint16_t off, uint32_t *data, unsigned len,
                          bool is_write, void *opaque)
{
    (void)off;
    (void)len;
    struct pit *pit = opaque;
    uint64_t now = hw_clock_now(pit->clock);
    struct pit_channel *c2 = &pit->ch[2];
    if (is_write) {
        pit->port_b = (uint8_t)*data & 0x0F;
        pit_set_gate(c2, pit->port_b & 1, now);
        return;
    }
    bool out2 = pit_out_at(c2, pit_elapsed(c2, now));
    bool refresh = (now / 15085) & 1;
    *data = pit->port_b | refresh << 4 | out2 << 5;
}

struct pit *pit_init(struct io_bus *bus, struct irq_line *irq0,
                     const struct hw_clock *clock)
{
    struct pit *pit = calloc(1, sizeof(*pit));
    if (pit == NULL)
        return NULL;
    pit->irq0 = irq0;
    pit->clock = clock;
    uint64_t now = hw_clock_now(clock);
    static const uint8_t mode[3] = { 3, 2, 3 };
    static const uint16_t count[3] = { 0, 18, 0 };
    for (int i = 0; i < 3; i++) {
        struct pit_channel *c = &pit->ch[i];
        c->rw = PIT_RW_LOHI;
        c->mode = mode[i];
        c->gate = i != 2;   /* gates 0 and 1 are tied high on the PC */
        pit_load(c, count[i], now);
    }
    if (io_register(bus, PIT_BASE, 4, pit_io, pit, "pit"))
        goto fail;
    if (io_register(bus, PIT_PORT_B, 1, pit_port_b_io, pit, "port-b")) {
        io_unregister(bus, PIT_BASE);
        goto fail;
    }
    pit_update(pit, now);
    return pit;
fail:
    free(pit);
    return NULL;
}

void pit_free(struct pit *pit)
{
    free(pit);
}

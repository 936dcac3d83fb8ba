/* Port I/O dispatcher: a 64 Ki-entry port map, byte splitting for 8-bit devices, unmapped = all ones. */
#include <stdlib.h>

#include "io.h"

struct io_bus *io_bus_new(void)
{
    return calloc(1, sizeof(struct io_bus));
}

void io_bus_free(struct io_bus *bus)
{
    free(bus);
}

static int io_add(struct io_bus *bus, uint16_t base, uint32_t len, bool wide,
                  io_handler_fn *handler, void *opaque, const char *name)
{
    if (len == 0 || base + len > 0x10000 || handler == NULL)
        return -1;
    for (uint32_t p = base; p < base + len; p++)
        if (bus->owner[p])
            return -1;
    for (int i = 0; i < IO_MAX_REGIONS; i++) {
        struct io_region *r = &bus->region[i];
        if (r->handler)
            continue;
        *r = (struct io_region){ base, len, wide, handler, opaque, name };
        for (uint32_t p = base; p < base + len; p++)
            bus->owner[p] = (uint8_t)(i + 1);
        return 0;
    }
    return -1;
}

int io_register(struct io_bus *bus, uint16_t base, uint32_t len,
                io_handler_fn *handler, void *opaque, const char *name)
{
    return io_add(bus, base, len, false, handler, opaque, name);
}

int io_register_wide(struct io_bus *bus, uint16_t base, uint32_t len,
                     io_handler_fn *handler, void *opaque, const char *name)
{
    return io_add(bus, base, len, true, handler, opaque, name);
}

int io_unregister(struct io_bus *bus, uint16_t base)
{
    unsigned i = bus->owner[base];
    if (i == 0 || bus->region[i - 1].base != base)
        return -1;
    struct io_region *r = &bus->region[i - 1];
    for (uint32_t p = r->base; p < r->base + r->len; p++)
        bus->owner[p] = 0;
    *r = (struct io_region){ 0 };
    return 0;
}

static struct io_region *io_owner(struct io_bus *bus, uint16_t port)
{
    unsigned i = bus->owner[port];
    return i ? &bus->region[i - 1] : NULL;
}

/* The region that takes this access whole, or NULL if it must be split. */
static struct io_region *io_whole(struct io_bus *bus, uint16_t port, unsigned len)
{
    struct io_region *r = io_owner(bus, port);
    if (r == NULL || (len > 1 && (!r->wide || port + len > r->base + r->len)))
        return NULL;
    return r;
}

static uint8_t io_in8(struct io_bus *bus, uint16_t port)
{
    struct io_region *r = io_owner(bus, port);
    if (r == NULL) {
        bus->unmapped_reads++;
        return 0xFF;
    }
    uint32_t v = 0xFF;
    r->handler(port - r->base, &v, 1, false, r->opaque);
    return (uint8_t)v;
}

static void io_out8(struct io_bus *bus, uint16_t port, uint8_t value)
{
    struct io_region *r = io_owner(bus, port);
    if (r == NULL) {
        bus->unmapped_writes++;
        return;
    }
    uint32_t v = value;
    r->handler(port - r->base, &v, 1, true, r->opaque);
}

static uint32_t io_mask(unsigned len)
{
    return len >= 4 ? 0xFFFFFFFFu : (1u << (8 * len)) - 1;
}

uint32_t io_in(struct io_bus *bus, uint16_t port, unsigned len)
{
    len = len > 4 ? 4 : len;
    struct io_region *r = io_whole(bus, port, len);
    uint32_t v = 0;
    if (r) {
        v = 0xFFFFFFFFu;
        r->handler(port - r->base, &v, len, false, r->opaque);
    } else {
        /* Little-endian: the byte at the lowest port is the low byte. */
        for (unsigned i = 0; i < len; i++)
            v |= (uint32_t)io_in8(bus, (uint16_t)(port + i)) << (8 * i);
    }
    v &= io_mask(len);
    if (bus->trace)
        bus->trace(bus->trace_opaque, port, len, false, v, io_port_name(bus, port));
    return v;
}

void io_out(struct io_bus *bus, uint16_t port, unsigned len, uint32_t value)
{
    len = len > 4 ? 4 : len;
    value &= io_mask(len);
    struct io_region *r = io_whole(bus, port, len);
    if (r) {
        uint32_t v = value;
        r->handler(port - r->base, &v, len, true, r->opaque);
    } else {
        for (unsigned i = 0; i < len; i++)
            io_out8(bus, (uint16_t)(port + i), (uint8_t)(value >> (8 * i)));
    }
    if (bus->trace)
        bus->trace(bus->trace_opaque, port, len, true, value, io_port_name(bus, port));
}

void io_set_trace(struct io_bus *bus, io_trace_fn *fn, void *opaque)
{
    bus->trace = fn;
    bus->trace_opaque = opaque;
}

const char *io_port_name(const struct io_bus *bus, uint16_t port)
{
    unsigned i = bus->owner[port];
    return i ? bus->region[i - 1].name : NULL;
}

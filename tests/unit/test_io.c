/* Unit test of the port I/O dispatcher: unmapped ports, byte splitting, wide regions, overlap, trace. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hw/io.h"

/* A device that logs its accesses and keeps 16 bytes of registers. */
struct logdev {
    uint8_t reg[16];
    int calls;
    uint16_t off[16];
    unsigned len[16];
    bool write[16];
    uint32_t value[16];
};

static void logdev_io(uint16_t off, uint32_t *data, unsigned len, bool is_write,
                      void *opaque)
{
    struct logdev *d = opaque;
    if (d->calls < 16) {
        d->off[d->calls] = off;
        d->len[d->calls] = len;
        d->write[d->calls] = is_write;
        d->value[d->calls] = is_write ? *data : 0;
    }
    d->calls++;
    if (is_write) {
        for (unsigned i = 0; i < len; i++)
            d->reg[(off + i) & 15] = (uint8_t)(*data >> (8 * i));
    } else {
        uint32_t v = 0;
        for (unsigned i = 0; i < len; i++)
            v |= (uint32_t)d->reg[(off + i) & 15] << (8 * i);
        *data = v;
    }
}

struct tracelog {
    int calls;
    uint16_t port;
    unsigned len;
    bool is_write;
    uint32_t value;
    const char *name;
};

static void trace_fn(void *opaque, uint16_t port, unsigned len, bool is_write,
                     uint32_t value, const char *name)
{
    struct tracelog *t = opaque;
    t->calls++;
    t->port = port;
    t->len = len;
    t->is_write = is_write;
    t->value = value;
    t->name = name;
}

int main(void)
{
    struct io_bus *bus = io_bus_new();
    CHECK(bus != NULL);

    /* Unmapped: all ones at every width, writes dropped and counted. */
    CHECK_EQ(io_in(bus, 0x1234, 1), 0xFF);
    CHECK_EQ(io_in(bus, 0x1234, 2), 0xFFFF);
    CHECK_EQ(io_in(bus, 0x1234, 4), 0xFFFFFFFF);
    CHECK_EQ(bus->unmapped_reads, 7);
    io_out(bus, 0x1234, 2, 0xABCD);
    CHECK_EQ(bus->unmapped_writes, 2);
    CHECK_EQ(io_in(bus, 0xFFFE, 4), 0xFFFFFFFF);    /* wraps, does not crash */

    /* An 8-bit device: wide accesses arrive as bytes, low port first. */
    struct logdev a = { 0 };
    CHECK_EQ(io_register(bus, 0x100, 4, logdev_io, &a, "a"), 0);
    io_out(bus, 0x100, 4, 0x44332211);
    CHECK_EQ(a.calls, 4);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(a.off[i], i);
        CHECK_EQ(a.len[i], 1);
        CHECK(a.write[i]);
        CHECK_EQ(a.value[i], 0x11 * (i + 1));
    }
    CHECK_EQ(io_in(bus, 0x102, 2), 0x4433);
    CHECK_EQ(io_in(bus, 0x100, 1), 0x11);
    CHECK_EQ(a.calls, 7);
    /* A word straddling the end: the unmapped half reads 0xFF. */
    CHECK_EQ(io_in(bus, 0x103, 2), 0xFF44);
    CHECK_EQ(io_in(bus, 0x0FF, 2), 0x11FF);
    /* Byte writes zero-extend: the handler sees only the byte. */
    a.calls = 0;
    io_out(bus, 0x101, 1, 0xFFFFFF99);
    CHECK_EQ(a.value[0], 0x99);

    /* A wide device: whole accesses inside it, split where they cross its end. */
    struct logdev w = { 0 };
    CHECK_EQ(io_register_wide(bus, 0x200, 4, logdev_io, &w, "w"), 0);
    io_out(bus, 0x200, 4, 0xDDCCBBAA);
    CHECK_EQ(w.calls, 1);
    CHECK_EQ(w.len[0], 4);
    CHECK_EQ(w.value[0], 0xDDCCBBAA);
    CHECK_EQ(io_in(bus, 0x202, 2), 0xDDCC);
    CHECK_EQ(w.calls, 2);
    CHECK_EQ(w.off[1], 2);
    CHECK_EQ(w.len[1], 2);
    w.calls = 0;
    CHECK_EQ(io_in(bus, 0x203, 2), 0xFFDD);
    CHECK_EQ(w.calls, 1);
    CHECK_EQ(w.len[0], 1);
    CHECK_EQ(w.off[0], 3);

    /* Overlaps and bad ranges are refused; unregister frees the range. */
    struct logdev b = { 0 };
    CHECK_EQ(io_register(bus, 0x103, 2, logdev_io, &b, "b"), -1);
    CHECK_EQ(io_register(bus, 0x0FE, 3, logdev_io, &b, "b"), -1);
    CHECK_EQ(io_register(bus, 0x300, 0, logdev_io, &b, "b"), -1);
    CHECK_EQ(io_register(bus, 0xFFFF, 2, logdev_io, &b, "b"), -1);
    CHECK_EQ(io_register(bus, 0xFFFF, 1, logdev_io, &b, "b"), 0);
    CHECK_EQ(io_unregister(bus, 0x101), -1);
    CHECK_EQ(io_unregister(bus, 0x100), 0);
    CHECK_EQ(io_in(bus, 0x100, 1), 0xFF);
    CHECK(io_port_name(bus, 0x101) == NULL);
    CHECK_EQ(io_register(bus, 0x0FE, 3, logdev_io, &b, "b"), 0);
    CHECK(strcmp(io_port_name(bus, 0x100), "b") == 0);
    CHECK(strcmp(io_port_name(bus, 0x201), "w") == 0);

    /* Trace: every guest access, with the owner's name or NULL. */
    struct tracelog t = { 0 };
    io_set_trace(bus, trace_fn, &t);
    io_out(bus, 0x200, 2, 0x1234);
    CHECK_EQ(t.calls, 1);
    CHECK_EQ(t.port, 0x200);
    CHECK_EQ(t.len, 2);
    CHECK(t.is_write);
    CHECK_EQ(t.value, 0x1234);
    CHECK(t.name && strcmp(t.name, "w") == 0);
    CHECK_EQ(io_in(bus, 0x5555, 1), 0xFF);
    CHECK_EQ(t.calls, 2);
    CHECK(!t.is_write);
    CHECK_EQ(t.value, 0xFF);
    CHECK(t.name == NULL);
    io_set_trace(bus, NULL, NULL);
    io_in(bus, 0x5555, 1);
    CHECK_EQ(t.calls, 2);

    /* The region table fills up cleanly. */
    int ok = 0;
    for (int i = 0; i < 2 * IO_MAX_REGIONS; i++)
        ok += io_register(bus, (uint16_t)(0x1000 + i), 1, logdev_io, &b, "x") == 0;
    CHECK(ok > 0 && ok < IO_MAX_REGIONS);

    io_bus_free(bus);
    return check_done();
}

/* Port I/O dispatcher: devices register port ranges; the monitor routes every guest in/out here. */
#ifndef RING3_HW_IO_H
#define RING3_HW_IO_H

#include <stdbool.h>
#include <stdint.h>

#define IO_MAX_REGIONS 64

/* A device's port handler. (off) is the port minus the region's base, (len)
 * is 1, 2 or 4. On a read the handler stores the value in (*data); on a
 * write (*data) holds the value, zero-extended. Handlers registered with
 * io_register() only ever see len 1. Handlers may raise or lower IRQ lines;
 * they must not call back into the dispatcher. */
typedef void io_handler_fn(uint16_t off, uint32_t *data, unsigned len,
                           bool is_write, void *opaque);

/* Called for every guest access once it is complete: (name) is the owning
 * region's name, or NULL for an unmapped port; (value) is what was written or
 * what the guest read. */
typedef void io_trace_fn(void *opaque, uint16_t port, unsigned len,
                         bool is_write, uint32_t value, const char *name);

struct io_region {
    uint16_t base;
    uint32_t len;
    bool wide;              /* handler takes 16/32-bit accesses whole */
    io_handler_fn *handler;
    void *opaque;
    const char *name;
};

struct io_bus {
    uint8_t owner[65536];   /* port -> 1 + index into region[], 0 = unmapped */
    struct io_region region[IO_MAX_REGIONS];
    io_trace_fn *trace;
    void *trace_opaque;
    uint64_t unmapped_reads;
    uint64_t unmapped_writes;
};

/* Allocate an empty bus: every port unmapped, no trace. Returns NULL if out
 * of memory. */
struct io_bus *io_bus_new(void);

/* Free (bus) and its regions; the devices' own state is theirs to free. */
void io_bus_free(struct io_bus *bus);

/* Map ports (base) to (base + len - 1) to (handler) for an 8-bit device:
 * a 16- or 32-bit access is split into byte accesses, low port first.
 * (name) must outlive the bus (a string literal). Returns 0, or -1 if the
 * range is empty, runs past 0xFFFF, overlaps a mapped port, or the region
 * table is full. */
int io_register(struct io_bus *bus, uint16_t base, uint32_t len,
                io_handler_fn *handler, void *opaque, const char *name);

/* As io_register(), but the handler takes an access of 2 or 4 bytes whole
 * when it lies entirely inside the range; one that crosses the end is split. */
int io_register_wide(struct io_bus *bus, uint16_t base, uint32_t len,
                     io_handler_fn *handler, void *opaque, const char *name);

/* Unmap the region registered at exactly (base) (for relocatable ranges such
 * as PCI BARs). Returns 0, or -1 if no region starts at (base). */
int io_unregister(struct io_bus *bus, uint16_t base);

/* The guest's `in` of (len) = 1, 2 or 4 bytes at (port). Unmapped bytes read
 * as 0xFF (an idle ISA bus floats high). The result is zero-extended. */
uint32_t io_in(struct io_bus *bus, uint16_t port, unsigned len);

/* The guest's `out` of the low (len) = 1, 2 or 4 bytes of (value) at (port).
 * Writes to unmapped bytes are dropped. Both directions count each unmapped
 * byte in unmapped_reads / unmapped_writes. */
void io_out(struct io_bus *bus, uint16_t port, unsigned len, uint32_t value);

/* Install (fn) (NULL to remove) to be told of every guest access. */
void io_set_trace(struct io_bus *bus, io_trace_fn *fn, void *opaque);

/* The name of the region that owns (port), or NULL. */
const char *io_port_name(const struct io_bus *bus, uint16_t port);

#endif

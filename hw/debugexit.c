/* isa-debug-exit compatible port: turns a guest write into an exit request for the monitor. */
#include <stdlib.h>

#include "debugexit.h"

struct debugexit {
    bool requested;
    int status;
    debugexit_fn *notify;
    void *opaque;
};

static void debugexit_io(uint16_t off, uint32_t *data, unsigned len,
                         bool is_write, void *opaque)
{
    (void)off;
    (void)len;
    struct debugexit *d = opaque;
    if (!is_write) {
        *data = 0;  /* QEMU reads the port as 0: how a guest can detect it */
        return;
    }
    if (d->requested)
        return;
    d->requested = true;
    /* QEMU calls exit((val << 1) | 1) with the value as written (any width
     * up to 4 bytes, at any port of the range); the OS keeps the low 8
     * bits of an exit status. */
    d->status = (int)((((uint64_t)*data << 1) | 1) & 0xFF);
    if (d->notify)
        d->notify(d->opaque, d->status);
}

struct debugexit *debugexit_init(struct io_bus *bus, uint16_t base, uint16_t len,
                                 debugexit_fn *notify, void *opaque)
{
    struct debugexit *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    d->notify = notify;
    d->opaque = opaque;
    if (io_register_wide(bus, base, len, debugexit_io, d, "debug-exit")) {
        free(d);
        return NULL;
    }
    return d;
}

void debugexit_free(struct debugexit *d)
{
    free(d);
}

bool debugexit_requested(const struct debugexit *d, int *status)
{
    if (d->requested && status)
        *status = d->status;
    return d->requested;
}

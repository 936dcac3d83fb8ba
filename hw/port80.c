/* Port 0x80, which Linux writes as an I/O delay and firmware as POST codes. */
#include <stdbool.h>
#include <stdlib.h>

#include "port80.h"

struct port80 {
    int last;
};

/* Nothing on a PC answers reads of 0x80 (a POST card only latches writes),
 * so they float to 0xFF, which is also what QEMU returns. (Linux's 8250
 * probe writes 0x80 between UART reads so that a floating bus cannot echo
 * a value back; it relies on nothing answering here.) */
static void port80_io(uint16_t off, uint32_t *data, unsigned len, bool is_write,
                      void *opaque)
{
    (void)off;
    (void)len;
    struct port80 *p = opaque;
    if (is_write)
        p->last = (uint8_t)*data;
    else
        *data = 0xFF;
}

struct port80 *port80_init(struct io_bus *bus)
{
    struct port80 *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->last = -1;
    if (io_register(bus, PORT80_BASE, 1, port80_io, p, "port80")) {
        free(p);
        return NULL;
    }
    return p;
}

void port80_free(struct port80 *p)
{
    free(p);
}

int port80_last(const struct port80 *p)
{
    return p->last;
}

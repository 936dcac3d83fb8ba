/* Port 0x80: the POST-code / I/O-delay port. Writes are kept for traces; reads return 0xFF. */
#ifndef RING3_HW_PORT80_H
#define RING3_HW_PORT80_H

#include <stdint.h>

#include "io.h"

#define PORT80_BASE 0x80

struct port80;

/* Register port 0x80 on (bus). Returns NULL if out of memory or taken. */
struct port80 *port80_init(struct io_bus *bus);

void port80_free(struct port80 *p);

/* The last value written (a POST code, or Linux's io_delay byte), or -1 if
 * none has been. */
int port80_last(const struct port80 *p);

#endif

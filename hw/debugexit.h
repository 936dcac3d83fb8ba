/* isa-debug-exit: a guest write of V ends the run with exit status (V << 1) | 1, as under QEMU. */
#ifndef RING3_HW_DEBUGEXIT_H
#define RING3_HW_DEBUGEXIT_H

#include <stdbool.h>
#include <stdint.h>

#include "io.h"

/* QEMU's `-device isa-debug-exit,iobase=0xf4,iosize=0x04`. */
#define DEBUGEXIT_BASE 0xF4
#define DEBUGEXIT_LEN  4

/* Told once, from inside the guest's port access, that the guest asked to
 * exit with (status); the monitor stops the vcpu, restores the terminal and
 * exits with it. */
typedef void debugexit_fn(void *opaque, int status);

struct debugexit;

/* Register ports (base)..(base + len - 1) on (bus). (notify) may be NULL: the
 * run loop then polls debugexit_requested(). Returns NULL if out of memory
 * or the ports are taken. */
struct debugexit *debugexit_init(struct io_bus *bus, uint16_t base, uint16_t len,
                                 debugexit_fn *notify, void *opaque);

void debugexit_free(struct debugexit *d);

/* True once the guest has written to the port; then (*status) (if not NULL)
 * is the exit status: ((V << 1) | 1) & 0xFF for the value V written with
 * outb, outw or outl, which is what QEMU's exit((V << 1) | 1) leaves as the
 * process's status. The first write wins. */
bool debugexit_requested(const struct debugexit *d, int *status);

#endif

/* The PC platform: creates the I/O bus and every legacy device, wired to its ports and IRQ lines, in one call. */
#ifndef RING3_HW_PLATFORM_H
#define RING3_HW_PLATFORM_H

#include <stdbool.h>
#include <stdint.h>

#include "block/image.h"
#include "hw/clock.h"
#include "hw/debugexit.h"
#include "hw/i8042.h"
#include "hw/io.h"
#include "hw/irq.h"
#include "hw/pci.h"
#include "hw/pic.h"
#include "hw/pit.h"
#include "hw/port80.h"
#include "hw/rtc.h"
#include "hw/uart.h"
#include "net/backend.h"
#include "virtio/blk.h"
#include "virtio/net.h"

#define PLATFORM_NO_DEADLINE UINT64_MAX
#define PLATFORM_MAX_DISKS 4
#define PLATFORM_MAX_NICS 4
#define PLATFORM_IO_MAX_FDS 256       /* host descriptors polled at once, over every backend */

struct platform_config {
    uint64_t mem_bytes;             /* guest RAM, for the CMOS size bytes */
    const struct hw_clock *clock;   /* NULL: hw_clock_monotonic */
    int64_t wall_ns;                /* RTC start time; 0: the host's time now */
    struct irq_line *intr;          /* the CPU's INTR pin (see pic_init) */
    uart_tx_fn *console_tx;         /* COM1 output sink (see uart_init) */
    void *console_opaque;
    debugexit_fn *exit_notify;      /* may be NULL (see debugexit_init) */
    void *exit_opaque;
    bool no_debugexit;              /* leave ports 0xF4-0xF7 unmapped */
    const struct guestmem *gm;      /* what the disks and NICs reach by DMA, and an IKC group maps */
    struct disk_image *disks[PLATFORM_MAX_DISKS];  /* vda, vdb, ...: the platform owns them */
    struct disk_remote *remotes[PLATFORM_MAX_DISKS];   /* or, in a slot, a disk another serves */
    unsigned ndisks;
    struct disk_export *exports[PLATFORM_MAX_DISKS];   /* disks this one serves (owned too) */
    unsigned nexports;
    struct net_spec nics[PLATFORM_MAX_NICS];       /* eth0, eth1, ... */
    unsigned nnics;
};

struct platform {
    struct io_bus *io;
    struct pic *pic;
    struct pit *pit;        /* channel 0 -> IRQ0 */
    struct uart *com1;      /* 0x3F8 -> IRQ4 */
    struct rtc *rtc;        /* 0x70 -> IRQ8 */
    struct pci_bus *pci;
    struct debugexit *debugexit;    /* NULL with no_debugexit */
    struct port80 *port80;
    struct i8042 *i8042;    /* 0x60, 0x64: the reset line */
    struct virtio_blk *disk[PLATFORM_MAX_DISKS];    /* PCI 00:04.0 on, IRQ 11, 10, 9, 5 */
    struct virtio_net *nic[PLATFORM_MAX_NICS];      /* PCI 00:08.0 on, IRQ 15, 14, 12, 7 */
    struct net_backend *backend[PLATFORM_MAX_NICS]; /* NULL for --net none */
    struct disk_remote *remote[PLATFORM_MAX_DISKS]; /* the served disks among disk[] */
    struct disk_export *export[PLATFORM_MAX_DISKS];
    const struct hw_clock *clock;
};

/* Fill (p) with a new I/O bus holding the 8259 pair (0x20, 0xA0, ELCR
 * 0x4D0), the 8254 (0x40-0x43, port B 0x61), COM1 (0x3F8-0x3FF), the CMOS
 * RTC (0x70-0x71), PCI configuration (0xCF8, 0xCFC), isa-debug-exit
 * (0xF4-0xF7), port 0x80 and the virtio disks, as (cfg) says. Returns 0, or
 * -1 with nothing left allocated (the disk images closed) and, when a network
 * backend would not start, why in (err). */
int platform_init(struct platform *p, const struct platform_config *cfg, char *err, size_t errlen);

/* Free everything platform_init() made. */
void platform_destroy(struct platform *p);

/* Bring the timers' interrupts up to time (now) (see pit_update, rtc_update). */
void platform_update(struct platform *p, uint64_t now);

/* Close the network backends (a stream server's socket file goes) and the disks served to or by
 * an IKC group (the group learns at once), as the run ends; the NICs stay, joined to nothing. */
void platform_io_close(struct platform *p);

/* Add the descriptors the network backends and the IKC disks wait on to (pfd) from (*n) on,
 * at most (max), and lower (*deadline) to their next timer; then, after a
 * poll() of them, platform_io_dispatch() moves what is ready. */
void platform_io_fill(struct platform *p, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline);
void platform_io_dispatch(struct platform *p);

/* Both, with a poll() that does not wait: frames and requests move now (host
 * monotonic ns, the backends' clock). */
void platform_io_poll(struct platform *p, uint64_t now);

/* The earliest time (clock ns, >= now) at which platform_update() may raise
 * an interrupt, or PLATFORM_NO_DEADLINE: how long the event loop may sleep. */
uint64_t platform_next_deadline(struct platform *p, uint64_t now);

#endif

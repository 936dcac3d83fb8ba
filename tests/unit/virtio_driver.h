/* The driver's side of a legacy virtio-PCI device, for the device unit tests: PCI configuration
 * mechanism #1, the legacy registers (virtio 1.2, 4.1.4.8, without MSI-X) and split virtqueues
 * in the legacy layout (2.7). A test includes it once, fills (gm), (bus), (slot) and (port), and
 * points (vq) at the queue the descriptor helpers work on. */
#ifndef RING3_TEST_VIRTIO_DRIVER_H
#define RING3_TEST_VIRTIO_DRIVER_H

#include <stdint.h>
#include <string.h>

#include "check.h"
#include "hw/io.h"
#include "memory/guestmem.h"

#define VIO_DEVICE_FEATURES 0x00
#define VIO_DRIVER_FEATURES 0x04
#define VIO_QUEUE_PFN       0x08
#define VIO_QUEUE_SIZE      0x0C
#define VIO_QUEUE_SEL       0x0E
#define VIO_QUEUE_NOTIFY    0x10
#define VIO_STATUS          0x12
#define VIO_ISR             0x13
#define VIO_CONFIG          0x14

#define D_NEXT     1
#define D_WRITE    2
#define D_INDIRECT 4

#define QSIZE      256u
/* A queue of QSIZE entries from its ring's address: the available ring after the descriptors,
 * the used ring at the next 4096-byte boundary after the available ring. */
#define Q_AVAIL(ring) ((ring) + 16 * QSIZE)
#define Q_USED(ring)  ((ring) + 0x2000)
#define Q_BYTES       0x3000u

static struct guestmem gm;
static struct io_bus *bus;
static unsigned slot;
static uint16_t port;

/* A queue as its driver keeps it. */
struct drv_queue {
    uint16_t index;
    uint32_t ring;                  /* guest-physical, page-aligned */
    uint16_t avail_idx, used_seen;
};
static struct drv_queue *vq;

static inline uint32_t cfg_read(unsigned reg, unsigned len)
{
    io_out(bus, 0xCF8, 4, 0x80000000u | slot << 11 | (reg & 0xFC));
    return io_in(bus, 0xCFC + (reg & 3), len);
}

static inline void cfg_write(unsigned reg, unsigned len, uint32_t v)
{
    io_out(bus, 0xCF8, 4, 0x80000000u | slot << 11 | (reg & 0xFC));
    io_out(bus, 0xCFC + (reg & 3), len, v);
}

static inline uint8_t *at(uint32_t gpa) { return gm.phys + gpa; }
static inline uint16_t rd16(uint32_t gpa) { uint16_t v; memcpy(&v, at(gpa), 2); return v; }
static inline uint32_t rd32(uint32_t gpa) { uint32_t v; memcpy(&v, at(gpa), 4); return v; }
static inline void wr16(uint32_t gpa, uint16_t v) { memcpy(at(gpa), &v, 2); }

static inline void put_desc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
    uint8_t d[16];
    memcpy(d, &addr, 8);
    memcpy(d + 8, &len, 4);
    memcpy(d + 12, &flags, 2);
    memcpy(d + 14, &next, 2);
    memcpy(at(vq->ring + 16 * i), d, 16);
}

static inline void status_write(uint8_t v) { io_out(bus, port + VIO_STATUS, 1, v); }
static inline uint8_t status_read(void) { return (uint8_t)io_in(bus, port + VIO_STATUS, 1); }
static inline uint8_t isr_read(void) { return (uint8_t)io_in(bus, port + VIO_ISR, 1); }

/* Queue (q), emptied, at its ring (the driver's part of 3.1.2 for one queue). */
static inline void queue_setup(struct drv_queue *q)
{
    memset(at(q->ring), 0, Q_BYTES);
    q->avail_idx = q->used_seen = 0;
    io_out(bus, port + VIO_QUEUE_SEL, 2, q->index);
    CHECK_EQ(io_in(bus, port + VIO_QUEUE_SIZE, 2), QSIZE);
    io_out(bus, port + VIO_QUEUE_PFN, 4, q->ring >> 12);
}

/* Chain (head) into (vq)'s available ring, and notify. */
static inline void kick(uint16_t head)
{
    wr16(Q_AVAIL(vq->ring) + 4 + 2 * (vq->avail_idx % QSIZE), head);
    wr16(Q_AVAIL(vq->ring) + 2, ++vq->avail_idx);
    io_out(bus, port + VIO_QUEUE_NOTIFY, 2, vq->index);
}

/* The next used element of (vq), if the device returned one: 1 with its id and length. */
static inline int take_used(uint32_t *id, uint32_t *len)
{
    if (rd16(Q_USED(vq->ring) + 2) == vq->used_seen)
        return 0;
    uint32_t e = Q_USED(vq->ring) + 4 + 8 * (vq->used_seen % QSIZE);
    *id = rd32(e);
    *len = rd32(e + 4);
    vq->used_seen++;
    return 1;
}

#endif

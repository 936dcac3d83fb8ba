/* A split virtqueue in guest memory, in the legacy layout, read as untrusted input. */
#ifndef RING3_VIRTIO_VIRTQUEUE_H
#define RING3_VIRTIO_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "memory/guestmem.h"

/* Virtio 1.2, 2.7 "Split Virtqueues": the legacy interface puts the
 * descriptor table, the available ring and (at the next 4096-byte boundary,
 * "Legacy Interfaces: A Note on Virtqueue Layout", 2.7.2) the used ring
 * contiguously at the page the driver writes to QUEUE_PFN. */
#define VQ_LEGACY_ALIGN   4096u
#define VQ_MAX_SIZE       256u      /* the size this device offers */

#define VQ_DESC_F_NEXT    1u
#define VQ_DESC_F_WRITE   2u
#define VQ_DESC_F_INDIRECT 4u
#define VQ_AVAIL_F_NO_INTERRUPT 1u

/* One buffer of a descriptor chain, resolved to host memory. */
struct vq_buf {
    uint8_t *ptr;
    uint32_t len;
    bool device_writes;     /* VQ_DESC_F_WRITE */
};

/* A descriptor chain taken from the available ring. */
struct vq_chain {
    uint16_t head;
    unsigned n;
    struct vq_buf buf[VQ_MAX_SIZE];
};

struct virtqueue {
    const struct guestmem *gm;
    uint16_t size;          /* entries; a power of 2, 0 while the queue is off */
    uint32_t pfn;           /* QUEUE_PFN as the driver wrote it */
    uint64_t desc, avail, used;     /* guest-physical addresses of the three parts */
    uint16_t last_avail;    /* the next available-ring slot the device takes */
    uint16_t used_idx;      /* the device's own copy of the used index (the guest's may be forged) */
};

/* Bytes from the descriptor table to the end of the used ring, for a queue
 * of (size) entries in the legacy layout. */
uint64_t vq_legacy_bytes(uint16_t size);

/* Place queue (q) of (size) entries at page (pfn) of (gm) (0: turn it off).
 * Returns 0, or -1 when the rings do not lie wholly inside guest memory. */
int vq_set_pfn(struct virtqueue *q, const struct guestmem *gm, uint16_t size, uint32_t pfn);

/* Forget the queue's rings and position (the driver reset the device). */
void vq_reset(struct virtqueue *q);

/* Take the next available chain into (c). Returns 1 when one was taken, 0
 * when the ring holds nothing new, or -1 when the chain or the ring is
 * malformed (an index beyond the table, a loop, a buffer outside guest
 * memory, an indirect descriptor this device did not offer, a read-only
 * buffer after a writable one): (*why) then says which. */
int vq_pop(struct virtqueue *q, struct vq_chain *c, const char **why);

/* Give the last (n) chains vq_pop() took back, unused: the next vq_pop() takes them again (as
 * QEMU's virtqueue_unpop; the driver cannot tell, since the device owns an available buffer until
 * it is used). At most what was taken since the queue was placed. */
void vq_unpop(struct virtqueue *q, uint16_t n);

/* Return chain (head) to the driver through the used ring, with (written)
 * bytes written into its buffers. Returns whether the driver wants an
 * interrupt for it (VQ_AVAIL_F_NO_INTERRUPT clear). A queue that is off
 * meanwhile takes nothing (false). */
bool vq_push(struct virtqueue *q, uint16_t head, uint32_t written);

/* The same for (n) chains at once, whose used elements the driver sees together: the used index
 * moves once, after all of them (a frame spread over several receive chains, virtio 1.2,
 * 5.1.6.4). */
struct vq_used {
    uint32_t head, written;
};
bool vq_push_n(struct virtqueue *q, const struct vq_used *used, unsigned n);

#endif

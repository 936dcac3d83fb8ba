/* A split virtqueue: descriptor chains taken from the available ring and returned through the used ring.
 *
 * Everything here reads memory the guest controls and may change at any
 * time: each index is masked or bounds-checked before use, each field is
 * read once into a local, and each buffer is resolved through guestmem_ptr.
 * The rules are those of virtio 1.2, 2.7 "Split Virtqueues".
 */
#include "virtqueue.h"

#include <string.h>

struct vq_desc {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
};

#define VQ_RING_HDR 4u      /* flags and idx of the available and used rings */

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) & ~(a - 1);
}

uint64_t vq_legacy_bytes(uint16_t size)
{
    uint64_t avail_end = 16ull * size + VQ_RING_HDR + 2ull * size + 2;
    return align_up(avail_end, VQ_LEGACY_ALIGN) + VQ_RING_HDR + 8ull * size + 2;
}

int vq_set_pfn(struct virtqueue *q, const struct guestmem *gm, uint16_t size, uint32_t pfn)
{
    uint64_t base = (uint64_t)pfn * VQ_LEGACY_ALIGN;
    vq_reset(q);
    if (pfn == 0)
        return 0;
    if (!guestmem_ok(gm, base, vq_legacy_bytes(size)))
        return -1;
    q->gm = gm;
    q->size = size;
    q->pfn = pfn;
    q->desc = base;
    q->avail = base + 16ull * size;
    q->used = align_up(q->avail + VQ_RING_HDR + 2ull * size + 2, VQ_LEGACY_ALIGN);
    return 0;
}

void vq_reset(struct virtqueue *q)
{
    *q = (struct virtqueue){ 0 };
}

/* The rings were checked to lie in guest memory when placed: these pointers are in bounds. */
static uint16_t *avail_word(const struct virtqueue *q, unsigned i)
{
    return (uint16_t *)(q->gm->phys + q->avail) + i;
}

static uint8_t *used_at(const struct virtqueue *q, uint64_t off)
{
    return q->gm->phys + q->used + off;
}

int vq_pop(struct virtqueue *q, struct vq_chain *c, const char **why)
{
    if (q->size == 0)
        return 0;
    /* 2.7.13: the driver publishes idx after the ring entries it covers. */
    uint16_t avail_idx = __atomic_load_n(avail_word(q, 1), __ATOMIC_ACQUIRE);
    if (avail_idx == q->last_avail)
        return 0;
    if ((uint16_t)(avail_idx - q->last_avail) > q->size) {
        *why = "an available index more than a ring ahead";
        return -1;
    }
    uint16_t head = __atomic_load_n(avail_word(q, 2 + (q->last_avail & (q->size - 1))),
                                    __ATOMIC_RELAXED);
    if (head >= q->size) {
        *why = "a chain head beyond the descriptor table";
        return -1;
    }
    q->last_avail++;
    c->head = head;
    c->n = 0;

    bool seen_writable = false;
    uint16_t i = head;
    for (;;) {
        struct vq_desc d;
        memcpy(&d, q->gm->phys + q->desc + 16ull * i, sizeof d);
        /* 2.7.5.3: "The device MUST NOT ... a loop" shows as a chain longer than the table. */
        if (c->n == q->size) {
            *why = "a descriptor chain that loops";
            return -1;
        }
        if (d.flags & VQ_DESC_F_INDIRECT) {
            *why = "an indirect descriptor (VIRTIO_RING_F_INDIRECT_DESC was not offered)";
            return -1;
        }
        uint8_t *p = guestmem_ptr(q->gm, d.addr, d.len);
        if (p == NULL) {
            *why = "a buffer outside guest memory";
            return -1;
        }
        bool w = d.flags & VQ_DESC_F_WRITE;
        /* 2.7.4.2: device-readable descriptors come before device-writable ones. */
        if (seen_writable && !w) {
            *why = "a device-readable buffer after a device-writable one";
            return -1;
        }
        seen_writable |= w;
        c->buf[c->n++] = (struct vq_buf){ p, d.len, w };
        if (!(d.flags & VQ_DESC_F_NEXT))
            return 1;
        if (d.next >= q->size) {
            *why = "a next index beyond the descriptor table";
            return -1;
        }
        i = d.next;
    }
}

void vq_unpop(struct virtqueue *q, uint16_t n)
{
    q->last_avail = (uint16_t)(q->last_avail - n);
}

bool vq_push_n(struct virtqueue *q, const struct vq_used *used, unsigned n)
{
    /* A queue the driver turned off (a queue address of 0) without a reset while a backend still
     * held one of its chains: nothing to give back to, and no ring in guest memory. */
    if (q->size == 0)
        return false;
    for (unsigned i = 0; i < n; i++) {
        uint32_t elem[2] = { used[i].head, used[i].written };
        memcpy(used_at(q, VQ_RING_HDR + 8ull * (q->used_idx & (q->size - 1))), elem, sizeof elem);
        q->used_idx++;
    }
    /* 2.7.8.2: the elements are visible before the index that covers them. */
    __atomic_store_n((uint16_t *)used_at(q, 2), q->used_idx, __ATOMIC_RELEASE);
    return !(__atomic_load_n(avail_word(q, 0), __ATOMIC_ACQUIRE) & VQ_AVAIL_F_NO_INTERRUPT);
}

bool vq_push(struct virtqueue *q, uint16_t head, uint32_t written)
{
    return vq_push_n(q, &(struct vq_used){ head, written }, 1);
}

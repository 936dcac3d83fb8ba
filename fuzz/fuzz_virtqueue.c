/* Fuzz target: a split virtqueue (virtio/virtqueue.c) whose rings and descriptors the input writes.
 *
 * The input places a queue of 2^k entries at a page it picks, fills guest memory from there, then
 * takes chains and returns them. Beyond "no crash": every buffer of a chain lies wholly in guest
 * RAM, a chain is no longer than the queue, no buffer the device reads follows one it writes
 * (virtio 1.2, 2.7.4.2), and returning a chain moves the used index by one. */
#include <stdlib.h>

#include "guest.h"
#include "virtio/virtqueue.h"

#define MEM_BYTES (64u * GM_PAGE_SIZE)

static void check_chain(const struct guestmem *gm, const struct virtqueue *q, const struct vq_chain *c)
{
    if (c->n == 0 || c->n > q->size || c->head >= q->size)
        abort();
    bool writing = false;
    for (unsigned i = 0; i < c->n; i++) {
        const struct vq_buf *b = &c->buf[i];
        if (b->ptr < gm->phys || b->len > gm->size || (uint64_t)(b->ptr - gm->phys) > gm->size - b->len)
            abort();
        if (writing && !b->device_writes)
            abort();
        writing |= b->device_writes;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in = { data, size };
    static struct guestmem gm;
    static struct virtqueue q;
    static struct vq_chain c;
    fuzz_guestmem(&gm, MEM_BYTES);

    uint16_t qsize = (uint16_t)(1u << (fuzz_u8(&in) % 9));
    uint32_t pfn = fuzz_u8(&in) % (MEM_BYTES / GM_PAGE_SIZE + 2);
    if (vq_set_pfn(&q, &gm, qsize, pfn) != 0 || pfn == 0)
        return 0;
    /* The rest of the input is guest memory from the queue's page on, and the same bytes drive
     * the device: how many chains to take before returning them. */
    const uint8_t *script = in.p;
    size_t script_len = in.left;
    fuzz_bytes(&in, gm.phys + q.desc, gm.size - q.desc);

    uint16_t taken[VQ_MAX_SIZE];
    unsigned ntaken = 0;
    for (size_t step = 0; step < script_len && step < 64; step++) {
        const char *why = NULL;
        if (script[step] & 1) {
            int r = vq_pop(&q, &c, &why);
            if (r < 0 && !why)
                abort();
            if (r < 0)
                break;              /* the device stops on a malformed ring, as virtio_blk does */
            if (r == 1) {
                check_chain(&gm, &q, &c);
                if (ntaken < VQ_MAX_SIZE)
                    taken[ntaken++] = c.head;
            }
        } else if (ntaken > 0) {
            uint16_t before = q.used_idx;
            vq_push(&q, taken[--ntaken], script[step] * 7u);
            if ((uint16_t)(q.used_idx - before) != 1)
                abort();
        }
    }
    return 0;
}

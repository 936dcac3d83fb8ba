/* virtio-blk: requests from the guest's virtio_blk driver, done on a raw disk image.
 *
 * Virtio 1.2, 5.2.6: a request is a chain of a 16-byte header the device
 * reads (type, reserved, sector), the data (read by the device for a write,
 * written by it for a read), and one status byte the device writes last.
 * Requests complete in the order they are taken, before the notifying `out`
 * returns to the guest; a flush (VIRTIO_BLK_T_FLUSH) returns only once the
 * image is on stable storage (fdatasync).
 */
#include "blk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLK_F_SEG_MAX   (1u << 2)
#define BLK_F_RO        (1u << 5)
#define BLK_F_BLK_SIZE  (1u << 6)
#define BLK_F_FLUSH     (1u << 9)

#define BLK_T_IN        0
#define BLK_T_OUT       1
#define BLK_T_FLUSH     4
#define BLK_T_GET_ID    8

#define BLK_S_OK        0
#define BLK_S_IOERR     1
#define BLK_S_UNSUPP    2

#define BLK_ID_BYTES    20
#define BLK_HDR_BYTES   16

/* struct virtio_blk_config (5.2.4) up to blk_size; the rest reads as zero. */
#define BLK_CFG_CAPACITY 0
#define BLK_CFG_SEG_MAX  12
#define BLK_CFG_BLK_SIZE 20
#define BLK_CFG_BYTES    60

struct virtio_blk {
    struct virtio_pci *vp;
    struct disk_image *image;
    char id[BLK_ID_BYTES];      /* GET_ID's answer: "ring3-vda", NUL-padded */
    char who[32];               /* "virtio-blk vda", for messages */
    uint8_t config[BLK_CFG_BYTES];
    struct vq_chain chain;      /* the request being done */
    struct iovec data[VQ_MAX_SIZE];
};

static void put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

/* The request's data buffers into b->data: the device-readable bytes after
 * the header, or the device-writable bytes before the status byte. Returns
 * the count, and their total length in (*len). */
static int gather(struct virtio_blk *b, const struct vq_chain *c, bool writable, uint64_t *len)
{
    uint64_t skip = writable ? 0 : BLK_HDR_BYTES;
    int n = 0;
    *len = 0;
    for (unsigned i = 0; i < c->n; i++) {
        const struct vq_buf *buf = &c->buf[i];
        if (buf->device_writes != writable)
            continue;
        uint64_t blen = buf->len - (writable && i == c->n - 1 ? 1 : 0);
        if (skip >= blen) {
            skip -= blen;
            continue;
        }
        b->data[n++] = (struct iovec){ buf->ptr + skip, blen - skip };
        *len += blen - skip;
        skip = 0;
    }
    return n;
}

static bool in_range(const struct virtio_blk *b, uint64_t sector, uint64_t len)
{
    uint64_t sectors = disk_image_size(b->image) / DISK_SECTOR;
    return len % DISK_SECTOR == 0 && sector <= sectors && len / DISK_SECTOR <= sectors - sector;
}

/* Do one request. Returns the status byte, with the bytes written into the
 * chain's buffers (status included) in (*written). */
static uint8_t do_request(struct virtio_blk *b, const struct vq_chain *c, uint32_t type,
                          uint64_t sector, uint32_t *written)
{
    uint64_t len;
    switch (type) {
    case BLK_T_IN: {
        int n = gather(b, c, true, &len);
        if (!in_range(b, sector, len) ||
            disk_image_read(b->image, b->data, n, sector * DISK_SECTOR, len))
            return BLK_S_IOERR;
        *written += (uint32_t)len;
        return BLK_S_OK;
    }
    case BLK_T_OUT: {
        int n = gather(b, c, false, &len);
        if (!disk_image_writable(b->image) || !in_range(b, sector, len) ||
            disk_image_write(b->image, b->data, n, sector * DISK_SECTOR, len))
            return BLK_S_IOERR;
        return BLK_S_OK;
    }
    case BLK_T_FLUSH:
        return disk_image_flush(b->image) ? BLK_S_IOERR : BLK_S_OK;
    case BLK_T_GET_ID: {
        /* 5.2.6: up to 20 bytes, NUL-padded when shorter. */
        int n = gather(b, c, true, &len);
        uint64_t done = 0;
        for (int i = 0; i < n && done < BLK_ID_BYTES; i++) {
            size_t k = b->data[i].iov_len < BLK_ID_BYTES - done ? b->data[i].iov_len
                                                                : BLK_ID_BYTES - done;
            memcpy(b->data[i].iov_base, b->id + done, k);
            done += k;
        }
        *written += (uint32_t)done;
        return BLK_S_OK;
    }
    default:
        return BLK_S_UNSUPP;
    }
}

/* One chain: returns 0 with the used length in (*written), or -1 when the
 * chain has no room for the header or the status byte (a driver bug QEMU
 * also treats as fatal to the device). */
static int blk_request(struct virtio_blk *b, const struct vq_chain *c, uint32_t *written,
                       const char **why)
{
    uint8_t hdr[BLK_HDR_BYTES];
    unsigned got = 0;
    for (unsigned i = 0; i < c->n && !c->buf[i].device_writes && got < sizeof hdr; i++) {
        unsigned k = c->buf[i].len < sizeof hdr - got ? c->buf[i].len : sizeof hdr - got;
        memcpy(hdr + got, c->buf[i].ptr, k);
        got += k;
    }
    if (got < sizeof hdr || c->n == 0 || !c->buf[c->n - 1].device_writes ||
        c->buf[c->n - 1].len == 0) {
        *why = "a virtio-blk request without its header or status byte";
        return -1;
    }
    uint32_t type;
    uint64_t sector;
    memcpy(&type, hdr, 4);
    memcpy(&sector, hdr + 8, 8);
    *written = 1;
    uint8_t status = do_request(b, c, type, sector, written);
    const struct vq_buf *last = &c->buf[c->n - 1];
    last->ptr[last->len - 1] = status;
    return 0;
}

static void blk_notify(void *opaque, struct virtio_pci *vp, unsigned index)
{
    struct virtio_blk *b = opaque;
    struct virtqueue *q = virtio_pci_queue(vp, index);
    const char *why = NULL;
    bool interrupt = false;
    int r;
    while ((r = vq_pop(q, &b->chain, &why)) > 0) {
        uint32_t written;
        if (blk_request(b, &b->chain, &written, &why)) {
            r = -1;
            break;
        }
        interrupt |= vq_push(q, b->chain.head, written);
    }
    if (r < 0)
        virtio_pci_error(vp, why);
    if (interrupt)
        virtio_pci_interrupt(vp);
}

struct virtio_blk *virtio_blk_init(struct pci_bus *pci, struct io_bus *io,
                                   const struct guestmem *gm, unsigned slot, uint16_t port,
                                   struct irq_line *irq, uint8_t irq_num,
                                   struct disk_image *image, const char *name)
{
    struct virtio_blk *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->image = image;
    snprintf(b->id, sizeof b->id, "ring3-%.8s", name);
    snprintf(b->who, sizeof b->who, "virtio-blk %s", name);
    put_le(b->config + BLK_CFG_CAPACITY, disk_image_size(image) / DISK_SECTOR, 8);
    put_le(b->config + BLK_CFG_SEG_MAX, VQ_MAX_SIZE - 2, 4);   /* room for header and status */
    put_le(b->config + BLK_CFG_BLK_SIZE, DISK_SECTOR, 4);
    const struct virtio_device dev = {
        .name = b->who,
        .pci_device_id = 0x1001,
        .type = 2,
        .class_code = 0x010000,     /* mass storage, SCSI: what QEMU's virtio-blk-pci reports */
        .features = BLK_F_SEG_MAX | BLK_F_BLK_SIZE | BLK_F_FLUSH |
                    (disk_image_writable(image) ? 0 : BLK_F_RO),
        .nqueues = 1,
        .config = b->config,
        .config_len = sizeof b->config,
        .notify = blk_notify,
        .opaque = b,
    };
    b->vp = virtio_pci_init(pci, io, gm, slot, port, irq, irq_num, &dev);
    if (b->vp == NULL) {
        free(b);
        return NULL;
    }
    return b;
}

void virtio_blk_free(struct virtio_blk *b)
{
    if (b == NULL)
        return;
    virtio_pci_free(b->vp);
    disk_image_close(b->image);
    free(b);
}

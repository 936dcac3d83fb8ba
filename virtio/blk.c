/* virtio-blk: requests from the guest's virtio_blk driver, done on a raw disk image, or by the
 * member of an IKC group that serves the disk (block/served.h).
 *
 * Virtio 1.2, 5.2.6: a request is a chain of a 16-byte header the device
 * reads (type, reserved, sector), the data (read by the device for a write,
 * written by it for a read), and one status byte the device writes last.
 * On an image, requests complete in the order they are taken, before the notifying `out`
 * returns to the guest; a flush (VIRTIO_BLK_T_FLUSH) returns only once the
 * image is on stable storage (fdatasync). A served disk's requests go to the server as they are
 * taken, its buffers as they are (the server reads and writes them itself), and each completes
 * when the server answers, in any order, as the specification allows (2.7.13).
 */
#include "blk.h"

#include "block/served.h"

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
    struct disk_image *image;   /* or: */
    struct disk_remote *remote;
    uint64_t size;              /* bytes */
    uint16_t epoch;             /* counts resets: an answer to a request before one is stale */
    uint8_t *status_at[VQ_MAX_SIZE];    /* a served disk's request in flight: its status byte */
    uint32_t written_at[VQ_MAX_SIZE];   /* and the bytes it writes when it succeeds */
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
    uint64_t sectors = b->size / DISK_SECTOR;
    return len % DISK_SECTOR == 0 && sector <= sectors && len / DISK_SECTOR <= sectors - sector;
}

/* A read, write or flush of a served disk, sent: BLK_S_PENDING until the server answers. */
#define BLK_S_PENDING 0xFF
static uint8_t remote_request(struct virtio_blk *b, const struct vq_chain *c, uint32_t type,
                              uint64_t sector, uint32_t *written)
{
    uint64_t len = 0;
    int n = 0;
    unsigned cmd = type == BLK_T_IN ? SERVED_READ : type == BLK_T_OUT ? SERVED_WRITE : SERVED_FLUSH;
    if (type != BLK_T_FLUSH) {
        n = gather(b, c, type == BLK_T_IN, &len);
        if (!in_range(b, sector, len) || (type == BLK_T_OUT && !disk_remote_writable(b->remote)))
            return BLK_S_IOERR;
    }
    if (disk_remote_submit(b->remote, cmd, sector * DISK_SECTOR, len, b->data, (unsigned)n,
                           (uint32_t)b->epoch << 16 | c->head))
        return BLK_S_IOERR;
    const struct vq_buf *last = &c->buf[c->n - 1];
    b->status_at[c->head] = last->ptr + last->len - 1;
    b->written_at[c->head] = *written + (type == BLK_T_IN ? (uint32_t)len : 0);
    return BLK_S_PENDING;
}

/* The server answered request (id). */
static void remote_done(void *opaque, uint32_t id, int err)
{
    struct virtio_blk *b = opaque;
    uint16_t head = (uint16_t)id;
    if (id >> 16 != b->epoch || head >= VQ_MAX_SIZE || b->status_at[head] == NULL ||
        virtio_pci_broken(b->vp))
        return;                         /* from before a reset */
    *b->status_at[head] = err ? BLK_S_IOERR : BLK_S_OK;
    b->status_at[head] = NULL;
    if (vq_push(virtio_pci_queue(b->vp, 0), head, err ? 1 : b->written_at[head]))
        virtio_pci_interrupt(b->vp);
}

/* Do one request. Returns the status byte, with the bytes written into the
 * chain's buffers (status included) in (*written). */
static uint8_t do_request(struct virtio_blk *b, const struct vq_chain *c, uint32_t type,
                          uint64_t sector, uint32_t *written)
{
    uint64_t len;
    bool io = type == BLK_T_IN || type == BLK_T_OUT || type == BLK_T_FLUSH;
    if (io && b->remote)
        return remote_request(b, c, type, sector, written);
    if (io && b->image == NULL)
        return BLK_S_IOERR;             /* a served disk closed at the end of the run */
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

/* One chain: returns 0 with the used length in (*written), 1 when a served disk's server has it,
 * or -1 when the chain has no room for the header or the status byte (a driver bug QEMU
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
    if (status == BLK_S_PENDING)
        return 1;
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
        int sent = blk_request(b, &b->chain, &written, &why);
        if (sent < 0) {
            r = -1;
            break;
        }
        if (sent == 0)
            interrupt |= vq_push(q, b->chain.head, written);
    }
    if (r < 0)
        virtio_pci_error(vp, why);
    if (interrupt)
        virtio_pci_interrupt(vp);
}

/* The driver reset the device: answers to what it asked before are dropped. */
static void blk_reset(void *opaque)
{
    struct virtio_blk *b = opaque;
    b->epoch++;
    memset(b->status_at, 0, sizeof b->status_at);
}

struct virtio_blk *virtio_blk_init(struct pci_bus *pci, struct io_bus *io,
                                   const struct guestmem *gm, unsigned slot, uint16_t port,
                                   struct irq_line *irq, uint8_t irq_num,
                                   struct disk_image *image, struct disk_remote *remote,
                                   const char *name)
{
    struct virtio_blk *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->image = image;
    b->remote = remote;
    b->size = image ? disk_image_size(image) : disk_remote_size(remote);
    bool writable = image ? disk_image_writable(image) : disk_remote_writable(remote);
    snprintf(b->id, sizeof b->id, "ring3-%.8s", name);
    snprintf(b->who, sizeof b->who, "virtio-blk %s", name);
    put_le(b->config + BLK_CFG_CAPACITY, b->size / DISK_SECTOR, 8);
    put_le(b->config + BLK_CFG_SEG_MAX, VQ_MAX_SIZE - 2, 4);   /* room for header and status */
    put_le(b->config + BLK_CFG_BLK_SIZE, DISK_SECTOR, 4);
    const struct virtio_device dev = {
        .name = b->who,
        .pci_device_id = 0x1001,
        .type = 2,
        .class_code = 0x010000,     /* mass storage, SCSI: what QEMU's virtio-blk-pci reports */
        .features = BLK_F_SEG_MAX | BLK_F_BLK_SIZE | BLK_F_FLUSH |
                    (writable ? 0 : BLK_F_RO),
        .nqueues = 1,
        .config = b->config,
        .config_len = sizeof b->config,
        .notify = blk_notify,
        .reset = blk_reset,
        .opaque = b,
    };
    b->vp = virtio_pci_init(pci, io, gm, slot, port, irq, irq_num, &dev);
    if (b->vp == NULL) {
        free(b);
        return NULL;
    }
    if (remote)
        disk_remote_attach(remote, remote_done, b);
    return b;
}

void virtio_blk_close_remote(struct virtio_blk *b)
{
    if (b == NULL || b->remote == NULL)
        return;
    disk_remote_free(b->remote);
    b->remote = NULL;
    b->size = 0;                    /* every request is out of range from now on */
}

void virtio_blk_free(struct virtio_blk *b)
{
    if (b == NULL)
        return;
    virtio_pci_free(b->vp);
    if (b->image)
        disk_image_close(b->image);
    disk_remote_free(b->remote);
    free(b);
}

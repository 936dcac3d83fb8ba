/* virtio-net: Ethernet frames between the guest's virtio_net driver and a network backend.
 *
 * Virtio 1.2, 5.1, legacy interface: queue 0 receives, queue 1 transmits. Every frame comes
 * behind a struct virtio_net_hdr (5.1.6): 10 bytes, or 12 with MRG_RXBUF, whose num_buffers
 * says over how many receive chains a frame was spread (5.1.6.3.2, 5.1.6.4).
 *
 * Offloads (5.1.3, 5.1.6.2): the driver may leave a frame's transport checksum to the device
 * (CSUM) and hand it TCP segments of up to 64 KiB (HOST_TSO4, HOST_TSO6, HOST_ECN). A backend
 * whose peer takes them (a TAP device with vnet headers) gets them as they are; for the others
 * the backend interface completes the checksum and cuts the segments (net/offload.c). The other
 * way, GUEST_CSUM lets the NIC say that a frame's checksums were checked (libslirp made them) or
 * are still to be done, and GUEST_TSO4/TSO6/ECN, offered only when the backend can deliver such
 * frames, lets it pass 64 KiB TCP segments in; a frame the driver did not agree to take is
 * checksummed and cut here first. MTU tells the driver the largest frame the backend takes
 * (5.1.4.1).
 *
 * A transmitted chain is sent to the backend before the notifying `out` returns; a frame whose
 * header asks what it cannot give is dropped, as a TAP device drops it. A backend that copies
 * straight out of guest RAM (the IKC switch: another monitor copies the frame into its own
 * guest) takes the chain's buffers as they are, and the chain is returned when it says so. A frame for the guest
 * takes the next receive chains; while the driver has posted too few, up to RX_BACKLOG frames
 * wait for its next notification (TCP through the backend would otherwise retransmit after a
 * loss); beyond that a backend that can (a stream, a TAP) keeps its frames until the driver posts
 * more. The backend's link state is STATUS's LINK_UP bit.
 */
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Feature bits (5.1.3). */
#define NET_F_CSUM          (1u << 0)
#define NET_F_GUEST_CSUM    (1u << 1)
#define NET_F_MTU           (1u << 3)
#define NET_F_MAC           (1u << 5)
#define NET_F_GUEST_TSO4    (1u << 7)
#define NET_F_GUEST_TSO6    (1u << 8)
#define NET_F_GUEST_ECN     (1u << 9)
#define NET_F_HOST_TSO4     (1u << 11)
#define NET_F_HOST_TSO6     (1u << 12)
#define NET_F_HOST_ECN      (1u << 13)
#define NET_F_MRG_RXBUF     (1u << 15)
#define NET_F_STATUS        (1u << 16)
#define NET_S_LINK_UP       1u

/* What every NIC offers: the monitor segments and checksums where the backend's peer cannot. */
#define NET_FEATURES (NET_F_CSUM | NET_F_GUEST_CSUM | NET_F_MTU | NET_F_MAC | NET_F_HOST_TSO4 | \
                      NET_F_HOST_TSO6 | NET_F_HOST_ECN | NET_F_MRG_RXBUF | NET_F_STATUS)

#define MRG_HDR_BYTES   12          /* struct virtio_net_hdr_mrg_rxbuf: num_buffers at 10 */
#define NET_CFG_BYTES   12          /* mac[6], status, max_virtqueue_pairs, mtu (5.1.4) */
#define NET_CFG_MTU     10
#define RX_QUEUE        0
#define TX_QUEUE        1
#define RX_BACKLOG      256

struct frame {
    struct net_hdr hdr;
    size_t len;
    uint8_t *data;
};

struct virtio_net {
    struct virtio_pci *vp;
    uint16_t tx_epoch;              /* counts resets: a transmit a backend held across one is stale */
    struct net_backend *backend;
    char who[32];
    uint8_t config[NET_CFG_BYTES];
    unsigned told;                  /* the guest's offloads the backend was last told of */
    bool told_drop;                 /* a dropped transmit was reported */
    /* A transmitted frame's answer (ARP, DHCP) comes back through receive() before the
     * transmit chain is returned: each direction has its own. rx_first is a frame's first
     * receive chain, which gets num_buffers once the frame is in. */
    struct vq_chain rx_first, rx_chain, tx_chain;
    struct vq_used rx_used[VQ_MAX_SIZE];
    struct iovec tx_iov[VQ_MAX_SIZE];
    struct frame backlog[RX_BACKLOG];
    unsigned head, count;           /* the backlog's oldest frame, and how many */
    uint8_t tx[NET_MAX_FRAME];      /* a transmitted frame gathered, for a backend that copies */
    uint8_t rx_whole[NET_MAX_FRAME]; /* a received frame checksummed and cut for the driver */
};

static bool has(const struct virtio_net *n, uint32_t feature)
{
    return virtio_pci_features(n->vp) & feature;
}

/* 5.1.6: the header's size, the same both ways. */
static size_t hdr_bytes(const struct virtio_net *n)
{
    return has(n, NET_F_MRG_RXBUF) ? MRG_HDR_BYTES : NET_HDR_BYTES;
}

/* The offloads the driver takes in what it receives (5.1.6.3.1: none without GUEST_CSUM). */
static unsigned guest_offloads(const struct virtio_net *n)
{
    if (!has(n, NET_F_GUEST_CSUM))
        return 0;
    return NET_OFFLOAD_CSUM | (has(n, NET_F_GUEST_TSO4) ? NET_OFFLOAD_TSO4 : 0) |
           (has(n, NET_F_GUEST_TSO6) ? NET_OFFLOAD_TSO6 : 0) |
           (has(n, NET_F_GUEST_ECN) ? NET_OFFLOAD_ECN : 0);
}

/* Once the driver is running, its backend learns what it may hand it (a TAP: TUNSETOFFLOAD). */
static void tell_offloads(struct virtio_net *n)
{
    unsigned offloads = guest_offloads(n);
    if (n->backend && virtio_pci_driver_ok(n->vp) && offloads != n->told) {
        net_backend_guest_offloads(n->backend, offloads);
        n->told = offloads;
    }
}

/* ---- receive ---- */

/* Bytes [skip, skip + len) of the frame in pieces (iov, niov) into chain (c)'s buffers, from
 * byte (off) of the chain on. */
static void chain_write_iov(const struct vq_chain *c, size_t off, const struct iovec *iov,
                            unsigned niov, size_t skip, size_t len)
{
    for (unsigned i = 0; i < c->n && len; i++) {
        const struct vq_buf *b = &c->buf[i];
        if (off >= b->len) {
            off -= b->len;
            continue;
        }
        size_t k = b->len - off < len ? b->len - off : len;
        net_iov_read(iov, niov, skip, b->ptr + off, k);
        skip += k;
        len -= k;
        off = 0;
    }
}

/* (len) bytes from (src) into chain (c)'s buffers, from byte (off) of the chain on. */
static void chain_write(const struct vq_chain *c, size_t off, const uint8_t *src, size_t len)
{
    struct iovec iov = { (void *)src, len };
    chain_write_iov(c, off, &iov, 1, 0, len);
}

/* Bytes [from, from + len) of the header (hdr, hdr_len) and the frame after it (iov, niov),
 * into chain (c). */
static void chain_fill(const struct vq_chain *c, const uint8_t *hdr, size_t hdr_len,
                       const struct iovec *iov, unsigned niov, size_t from, size_t len)
{
    size_t in_hdr = from < hdr_len ? hdr_len - from : 0;
    if (in_hdr > len)
        in_hdr = len;
    /* From a later chain on, (from) lies past the header: as in tx_split, no pointer beyond
     * its array (C11 6.5.6p8). */
    if (in_hdr)
        chain_write(c, 0, hdr + from, in_hdr);
    chain_write_iov(c, in_hdr, iov, niov, from + in_hdr - hdr_len, len - in_hdr);
}

/* The bytes chain (c) holds, all of them device-writable; -1 when one is not. */
static long chain_room(const struct vq_chain *c)
{
    long room = 0;
    for (unsigned i = 0; i < c->n; i++) {
        if (!c->buf[i].device_writes)
            return -1;
        room += c->buf[i].len;
    }
    return room;
}

/* One frame and its header (h) into the next receive chains: one without MRG_RXBUF, as many as
 * it fills with it (5.1.6.3.2: all but the last used up completely). Returns 1 when it went in
 * or was lost, 0 when the driver has not posted room for it yet, -1 when the queue is
 * malformed. As QEMU's virtio_net_receive, a frame that a lone chain cannot hold is lost and
 * the chain stays with the driver, and one the whole ring could not hold is lost too. */
static int rx_frame(struct virtio_net *n, const struct net_hdr *h, const struct iovec *iov,
                    unsigned niov, size_t len, bool *interrupt)
{
    struct virtqueue *q = virtio_pci_queue(n->vp, RX_QUEUE);
    bool merge = has(n, NET_F_MRG_RXBUF);
    uint8_t hdr[MRG_HDR_BYTES] = { 0 };
    if (has(n, NET_F_GUEST_CSUM))
        net_hdr_store(h, hdr);      /* 5.1.6.3.2: else flags and gso_type are 0 */
    size_t hdr_len = hdr_bytes(n), total = hdr_len + len, done = 0;
    unsigned used = 0;
    while (done < total) {
        if (used == (merge ? q->size : 1u)) {
            vq_unpop(q, (uint16_t)used);
            return 1;
        }
        struct vq_chain *c = used == 0 ? &n->rx_first : &n->rx_chain;
        const char *why = NULL;
        int r = vq_pop(q, c, &why);
        long room = r > 0 ? chain_room(c) : 0;
        if (r < 0 || room < 0) {
            virtio_pci_error(n->vp, r < 0 ? why : "a virtio-net receive buffer the device may "
                             "not write");
            return -1;
        }
        if (r == 0) {
            vq_unpop(q, (uint16_t)used);
            return 0;
        }
        size_t k = (size_t)room < total - done ? (size_t)room : total - done;
        chain_fill(c, hdr, hdr_len, iov, niov, done, k);
        n->rx_used[used++] = (struct vq_used){ c->head, (uint32_t)k };
        done += k;
    }
    if (merge) {
        uint8_t num_buffers[2] = { (uint8_t)used, (uint8_t)(used >> 8) };
        chain_write(&n->rx_first, NET_HDR_BYTES, num_buffers, 2);
    }
    *interrupt |= vq_push_n(q, n->rx_used, used);
    return 1;
}

/* The backlog into the receive queue, as far as it has chains. */
static void rx_flush(struct virtio_net *n)
{
    bool interrupt = false;
    while (n->count && !virtio_pci_broken(n->vp)) {
        struct frame *f = &n->backlog[n->head];
        struct iovec iov = { f->data, f->len };
        if (rx_frame(n, &f->hdr, &iov, 1, f->len, &interrupt) <= 0)
            break;
        free(f->data);
        n->head = (n->head + 1) % RX_BACKLOG;
        n->count--;
    }
    if (interrupt)
        virtio_pci_interrupt(n->vp);
}

/* A frame the driver takes as it is: into the receive queue, or the backlog. False when
 * neither has room. */
static bool rx_or_keep(struct virtio_net *n, const struct net_hdr *h, const struct iovec *iov,
                       unsigned niov, size_t len)
{
    if (n->count == 0) {
        bool interrupt = false;
        int r = rx_frame(n, h, iov, niov, len, &interrupt);
        if (interrupt)
            virtio_pci_interrupt(n->vp);
        if (r != 0)
            return true;
    }
    if (n->count == RX_BACKLOG)
        return false;
    struct frame *f = &n->backlog[(n->head + n->count) % RX_BACKLOG];
    f->data = malloc(len);
    if (f->data == NULL)
        return true;                    /* lost */
    net_iov_read(iov, niov, 0, f->data, len);
    f->hdr = *h;
    f->len = len;
    n->count++;
    return true;
}

/* net_offload_apply's emit: a frame checksummed or cut for a driver that takes no offloads. */
static void rx_whole(void *opaque, const uint8_t *frame, size_t len)
{
    static const struct net_hdr whole;
    struct iovec iov = { (void *)frame, len };
    rx_or_keep(opaque, &whole, &iov, 1, len);   /* a segment with no room is lost */
}

/* A frame from the backend. False when neither the receive queue nor the backlog has room: a
 * backend that can keeps it for net_backend_resume(). */
static bool receive_iov(void *opaque, const struct net_hdr *h, const struct iovec *iov,
                        unsigned niov, size_t len)
{
    struct virtio_net *n = opaque;
    if (virtio_pci_broken(n->vp) || !virtio_pci_driver_ok(n->vp) || len > NET_MAX_FRAME)
        return true;                    /* lost, as on a NIC that is not running */
    tell_offloads(n);
    if (net_hdr_within(h, guest_offloads(n)))
        return rx_or_keep(n, h, iov, niov, len);
    /* Sent by the backend before it heard what the driver takes: done here. A frame whose
     * header makes no sense is lost. */
    const char *why;
    net_iov_read(iov, niov, 0, n->rx_whole, len);
    net_offload_apply(h, n->rx_whole, len, rx_whole, n, &why);
    return true;
}

static bool receive(void *opaque, const struct net_hdr *h, const uint8_t *frame, size_t len)
{
    struct iovec iov = { (void *)frame, len };
    return receive_iov(opaque, h, &iov, 1, len);
}

/* Virtio 1.2, 5.1.4: STATUS's LINK_UP bit, and a configuration interrupt when it changes. */
static void link_changed(void *opaque, bool up)
{
    struct virtio_net *n = opaque;
    uint8_t status = up ? NET_S_LINK_UP : 0;
    if (n->config[6] == status)
        return;
    n->config[6] = status;
    virtio_pci_config_changed(n->vp);
}

/* ---- transmit ---- */

/* A frame the backend could not send as its header asked: lost, with one line the first time. */
static void tx_dropped(struct virtio_net *n, const char *why)
{
    if (!n->told_drop)
        fprintf(stderr, "ring3: %s: dropped a frame the guest sent: its virtio-net header asks "
                "for %s (more such frames are dropped silently)\n", n->who, why);
    n->told_drop = true;
}

/* Chain (c): its header into (*h) and its frame, as pieces of guest RAM, into (n->tx_iov), (*len)
 * bytes in all. Returns the count of pieces, or -1 with (*why) set when the chain is malformed. */
static int tx_split(struct virtio_net *n, const struct vq_chain *c, struct net_hdr *h,
                    size_t *len, const char **why)
{
    size_t hdr_len = hdr_bytes(n), total = 0;
    int niov = 0;
    uint8_t hdr[MRG_HDR_BYTES];
    for (unsigned i = 0; i < c->n; i++) {
        const struct vq_buf *b = &c->buf[i];
        if (b->device_writes) {
            *why = "a virtio-net transmit buffer the device must write";
            return -1;
        }
        size_t in_hdr = total < hdr_len ? hdr_len - total : 0;
        if (in_hdr > b->len)
            in_hdr = b->len;
        /* Only while the header is still being gathered: past it, hdr + total would point
         * beyond the array, which C11 6.5.6p8 leaves undefined even for a copy of 0 bytes. */
        if (in_hdr)
            memcpy(hdr + total, b->ptr, in_hdr);
        if (b->len > in_hdr)
            n->tx_iov[niov++] = (struct iovec){ b->ptr + in_hdr, b->len - in_hdr };
        total += b->len;
    }
    if (total < hdr_len) {
        *why = "a virtio-net transmit chain shorter than its header";
        return -1;
    }
    if (total - hdr_len > NET_MAX_FRAME) {
        *why = "a virtio-net frame longer than 65550 bytes";
        return -1;
    }
    *h = net_hdr_load(hdr);
    /* 5.1.6.2.1: the driver sets no flag but NEEDS_CSUM; a DATA_VALID it set anyway would
     * make a TAP's host kernel skip checking the frame: the device ignores it (5.1.6.2.2) */
    h->flags &= NET_HDR_F_NEEDS_CSUM;
    *len = total - hdr_len;
    return niov;
}

/* A frame net_backend_send_chain() took is done with: its chain goes back to the driver. */
static void sent(void *opaque, uint32_t id)
{
    struct virtio_net *n = opaque;
    if (id >> 16 != n->tx_epoch || virtio_pci_broken(n->vp))
        return;                             /* from before a reset: the queue is another now */
    if (vq_push(virtio_pci_queue(n->vp, TX_QUEUE), (uint16_t)id, 0))
        virtio_pci_interrupt(n->vp);
}

/* Each transmitted chain: its header and frame to the backend. */
static void tx_all(struct virtio_net *n)
{
    struct virtqueue *q = virtio_pci_queue(n->vp, TX_QUEUE);
    const char *why = NULL;
    bool interrupt = false;
    int r;
    while ((r = vq_pop(q, &n->tx_chain, &why)) > 0) {
        struct net_hdr h;
        size_t len;
        int niov = tx_split(n, &n->tx_chain, &h, &len, &why);
        if (niov < 0) {
            r = -1;
            break;
        }
        /* A backend that copies out of guest RAM itself takes the pieces, and the chain is
         * returned when it says (sent); the others get the frame gathered. */
        int held = len && n->backend ? net_backend_send_chain(n->backend, &h, n->tx_iov,
                                                              (unsigned)niov, len,
                                                              (uint32_t)n->tx_epoch << 16 |
                                                              n->tx_chain.head) : 0;
        if (held == 1)
            continue;
        const char *bad;
        if (held < 0) {
            net_iov_read(n->tx_iov, (unsigned)niov, 0, n->tx, len);
            if (net_backend_send(n->backend, &h, n->tx, len, &bad) < 0)
                tx_dropped(n, bad);
        }
        /* A receive chain the frame's answer found malformed stops the device: this one
         * does not complete either, as in QEMU (virtqueue_fill of a broken device). */
        if (virtio_pci_broken(n->vp))
            break;
        interrupt |= vq_push(q, n->tx_chain.head, 0);
    }
    if (n->backend)
        net_backend_flush(n->backend);
    if (r < 0)
        virtio_pci_error(n->vp, why);
    if (interrupt)
        virtio_pci_interrupt(n->vp);
}

static void net_notify(void *opaque, struct virtio_pci *vp, unsigned index)
{
    struct virtio_net *n = opaque;
    (void)vp;
    tell_offloads(n);
    if (index == TX_QUEUE) {
        tx_all(n);
    } else if (index == RX_QUEUE) {
        rx_flush(n);
        if (n->count < RX_BACKLOG && n->backend)
            net_backend_resume(n->backend);
    }
}

/* The frames waiting for the driver are lost, as QEMU's reset purges its queue. */
static void backlog_drop(struct virtio_net *n)
{
    while (n->count) {
        free(n->backlog[n->head].data);
        n->head = (n->head + 1) % RX_BACKLOG;
        n->count--;
    }
}

static void net_reset(void *opaque)
{
    struct virtio_net *n = opaque;
    n->tx_epoch++;
    backlog_drop(n);
}

struct virtio_net *virtio_net_init(struct pci_bus *pci, struct io_bus *io,
                                   const struct guestmem *gm, unsigned slot, uint16_t port,
                                   struct irq_line *irq, uint8_t irq_num,
                                   const uint8_t mac[6], uint16_t mtu, const char *name)
{
    struct virtio_net *n = calloc(1, sizeof *n);
    if (n == NULL)
        return NULL;
    snprintf(n->who, sizeof n->who, "virtio-net %s", name);
    memcpy(n->config, mac, 6);
    n->config[6] = NET_S_LINK_UP;     /* until the backend says otherwise */
    n->config[NET_CFG_MTU] = (uint8_t)mtu;              /* the legacy layout is the guest's: LE */
    n->config[NET_CFG_MTU + 1] = (uint8_t)(mtu >> 8);
    const struct virtio_device dev = {
        .name = n->who,
        .pci_device_id = 0x1000,
        .type = 1,
        .class_code = 0x020000,     /* network, Ethernet */
        .features = NET_FEATURES,
        .nqueues = 2,
        .config = n->config,
        .config_len = sizeof n->config,
        .notify = net_notify,
        .reset = net_reset,
        .opaque = n,
    };
    n->vp = virtio_pci_init(pci, io, gm, slot, port, irq, irq_num, &dev);
    if (n->vp == NULL) {
        free(n);
        return NULL;
    }
    return n;
}

struct net_client virtio_net_client(struct virtio_net *n)
{
    return (struct net_client){ receive, link_changed, n, receive_iov, sent };
}

void virtio_net_attach(struct virtio_net *n, struct net_backend *backend)
{
    n->backend = backend;
    n->told = 0;
    if (backend == NULL)
        return;
    /* 5.1.3.1: no GUEST_TSO4/TSO6 without GUEST_CSUM, which every NIC offers. */
    unsigned o = backend->offloads;
    virtio_pci_offer(n->vp, NET_FEATURES | (o & NET_OFFLOAD_TSO4 ? NET_F_GUEST_TSO4 : 0) |
                            (o & NET_OFFLOAD_TSO6 ? NET_F_GUEST_TSO6 : 0) |
                            (o & NET_OFFLOAD_ECN ? NET_F_GUEST_ECN : 0));
}

void virtio_net_free(struct virtio_net *n)
{
    if (n == NULL)
        return;
    backlog_drop(n);
    virtio_pci_free(n->vp);
    free(n);
}

/* virtio-net: Ethernet frames between the guest's virtio_net driver and a network backend.
 *
 * Virtio 1.2, 5.1, legacy interface: queue 0 receives, queue 1 transmits. Every buffer
 * starts with the 10-byte struct virtio_net_hdr (5.1.6; 12 bytes only with MRG_RXBUF,
 * which is not offered), all zero here: no checksum or segmentation offload is offered
 * either, so frames are whole and checksummed both ways. MTU tells the driver the largest
 * frame the backend takes (5.1.4.1): up to 65520 bytes of IP packet on user-mode networking,
 * whose every frame then carries up to 44 TCP segments' worth of data. A transmitted chain is sent to
 * the backend before the notifying `out` returns. A frame for the guest takes the next
 * receive chain; while the driver has posted none, up to RX_BACKLOG frames wait for its
 * next notification (TCP through the backend would otherwise retransmit after a loss);
 * beyond that a backend that can (a stream) keeps its frames until the driver posts more.
 * The backend's link state is STATUS's LINK_UP bit.
 */
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_F_MTU       (1u << 3)
#define NET_F_MAC       (1u << 5)
#define NET_F_STATUS    (1u << 16)
#define NET_S_LINK_UP   1u

#define NET_HDR_BYTES   10
#define NET_CFG_BYTES   12          /* mac[6], status, max_virtqueue_pairs, mtu (5.1.4) */
#define NET_CFG_MTU     10
#define RX_QUEUE        0
#define TX_QUEUE        1
#define RX_BACKLOG      256

struct frame {
    size_t len;
    uint8_t *data;
};

struct virtio_net {
    struct virtio_pci *vp;
    struct net_backend *backend;
    char who[32];
    uint8_t config[NET_CFG_BYTES];
    /* One each: a transmitted frame's answer (ARP, DHCP) comes back through
     * receive() before the transmit chain is returned. */
    struct vq_chain rx_chain, tx_chain;
    struct frame backlog[RX_BACKLOG];
    unsigned head, count;           /* the backlog's oldest frame, and how many */
    uint8_t tx[NET_HDR_BYTES + NET_MAX_FRAME];
};

/* One frame into the next receive chain. Returns 1 when it went in, 0 when
 * the driver has posted no chain, -1 when the queue is malformed. */
static int rx_one(struct virtio_net *n, const uint8_t *frame, size_t len, bool *interrupt)
{
    struct virtqueue *q = virtio_pci_queue(n->vp, RX_QUEUE);
    const char *why = NULL;
    int r = vq_pop(q, &n->rx_chain, &why);
    if (r <= 0) {
        if (r < 0)
            virtio_pci_error(n->vp, why);
        return r;
    }
    size_t total = NET_HDR_BYTES + len, done = 0;
    for (unsigned i = 0; i < n->rx_chain.n && done < total; i++) {
        const struct vq_buf *b = &n->rx_chain.buf[i];
        if (!b->device_writes) {
            virtio_pci_error(n->vp, "a virtio-net receive buffer the device may not write");
            return -1;
        }
        size_t k = b->len < total - done ? b->len : total - done, j = 0;
        for (; j < k && done + j < NET_HDR_BYTES; j++)
            b->ptr[j] = 0;
        memcpy(b->ptr + j, frame + (done + j - NET_HDR_BYTES), k - j);
        done += k;
    }
    if (done < total) {
        /* A buffer too small for the frame: the frame is lost, as on a NIC. */
        done = 0;
    }
    *interrupt |= vq_push(q, n->rx_chain.head, (uint32_t)done);
    return 1;
}

/* The backlog into the receive queue, as far as it has chains. */
static void rx_flush(struct virtio_net *n)
{
    bool interrupt = false;
    while (n->count && !virtio_pci_broken(n->vp)) {
        struct frame *f = &n->backlog[n->head];
        if (rx_one(n, f->data, f->len, &interrupt) <= 0)
            break;
        free(f->data);
        n->head = (n->head + 1) % RX_BACKLOG;
        n->count--;
    }
    if (interrupt)
        virtio_pci_interrupt(n->vp);
}

/* A frame from the backend. False when neither a receive chain nor the backlog
 * has room: a backend that can keeps it for net_backend_resume(). */
static bool receive(void *opaque, const uint8_t *frame, size_t len)
{
    struct virtio_net *n = opaque;
    if (virtio_pci_broken(n->vp) || !virtio_pci_driver_ok(n->vp) || len > NET_MAX_FRAME)
        return true;                    /* lost, as on a NIC that is not running */
    if (n->count == 0) {
        bool interrupt = false;
        int r = rx_one(n, frame, len, &interrupt);
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
    memcpy(f->data, frame, len);
    f->len = len;
    n->count++;
    return true;
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

/* Each transmitted chain: the device-readable bytes, header first, to the backend. */
static void tx_all(struct virtio_net *n)
{
    struct virtqueue *q = virtio_pci_queue(n->vp, TX_QUEUE);
    const char *why = NULL;
    bool interrupt = false;
    int r;
    while ((r = vq_pop(q, &n->tx_chain, &why)) > 0) {
        size_t len = 0;
        for (unsigned i = 0; i < n->tx_chain.n; i++) {
            const struct vq_buf *b = &n->tx_chain.buf[i];
            if (b->device_writes || b->len > sizeof n->tx - len) {
                why = b->device_writes ? "a virtio-net transmit buffer the device must write"
                                       : "a virtio-net frame longer than 65550 bytes";
                r = -1;
                break;
            }
            memcpy(n->tx + len, b->ptr, b->len);
            len += b->len;
        }
        if (r < 0)
            break;
        if (len > NET_HDR_BYTES && n->backend)
            net_backend_send(n->backend, n->tx + NET_HDR_BYTES, len - NET_HDR_BYTES);
        interrupt |= vq_push(q, n->tx_chain.head, 0);
    }
    if (r < 0)
        virtio_pci_error(n->vp, why);
    if (interrupt)
        virtio_pci_interrupt(n->vp);
}

static void net_notify(void *opaque, struct virtio_pci *vp, unsigned index)
{
    struct virtio_net *n = opaque;
    (void)vp;
    if (index == TX_QUEUE) {
        tx_all(n);
    } else if (index == RX_QUEUE) {
        rx_flush(n);
        if (n->count < RX_BACKLOG && n->backend)
            net_backend_resume(n->backend);
    }
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
        .features = NET_F_MAC | NET_F_STATUS | NET_F_MTU,
        .nqueues = 2,
        .config = n->config,
        .config_len = sizeof n->config,
        .notify = net_notify,
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
    return (struct net_client){ receive, link_changed, n };
}

void virtio_net_attach(struct virtio_net *n, struct net_backend *backend)
{
    n->backend = backend;
}

void virtio_net_free(struct virtio_net *n)
{
    if (n == NULL)
        return;
    while (n->count) {
        free(n->backlog[n->head].data);
        n->head = (n->head + 1) % RX_BACKLOG;
        n->count--;
    }
    virtio_pci_free(n->vp);
    free(n);
}

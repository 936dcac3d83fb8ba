/* Unit test of virtio-net on the legacy virtio-PCI transport: features and configuration,
 * frames both ways, the receive backlog and its resume, the link and its configuration
 * interrupt, malformed transmit and receive chains (nothing completes; a reset recovers). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "virtio/net.h"
#include "virtio_driver.h"

#define MEM_BYTES   (1u << 20)
#define SLOT        8
#define PORT        0xC400
#define IRQ_NUM     15
#define MTU         1500

#define F_MTU       (1u << 3)
#define F_MAC       (1u << 5)
#define F_STATUS    (1u << 16)
#define ISR_QUEUE   1
#define ISR_CONFIG  2

#define HDR_BYTES   10              /* struct virtio_net_hdr without MRG_RXBUF (5.1.6) */
#define RX_RING     0x10000u
#define TX_RING     0x14000u
#define TX_HDR      0x20000u
#define TX_FRAME    0x20100u
#define RX_BUF      0x30000u        /* receive buffers, 0x1000 apart */

static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };

static struct pci_bus *pci;
static struct irq_probe irq;
static struct virtio_net *nic;
static struct drv_queue rxq = { .index = 0, .ring = RX_RING };
static struct drv_queue txq = { .index = 1, .ring = TX_RING };

/* ---- a backend that records what the NIC sends ---- */

static struct {
    struct net_backend base;
    unsigned sent, resumed;
    size_t len;
    uint8_t frame[128];
} backend;

static void b_send(struct net_backend *b, const uint8_t *frame, size_t len)
{
    (void)b;
    backend.sent++;
    backend.len = len;
    memcpy(backend.frame, frame, len < sizeof backend.frame ? len : sizeof backend.frame);
}

static void b_fill(struct net_backend *b, struct pollfd *pfd, unsigned *n, unsigned max,
                   uint64_t *deadline)
{
    (void)b, (void)pfd, (void)n, (void)max, (void)deadline;
}

static void b_nothing(struct net_backend *b) { (void)b; }
static void b_resume(struct net_backend *b) { (void)b; backend.resumed++; }

static const struct net_backend_ops ops = { b_send, b_fill, b_nothing, b_resume, b_nothing };

/* ---- the driver ---- */

static void driver_init(void)
{
    status_write(0);
    status_write(1);
    status_write(3);
    io_out(bus, port + VIO_DRIVER_FEATURES, 4, F_MAC | F_STATUS | F_MTU);
    queue_setup(&rxq);
    queue_setup(&txq);
    status_write(7);
    CHECK_EQ(status_read(), 7);
    (void)isr_read();
}

/* A frame of (len) bytes, (fill) each, for the host: header and frame in two buffers. */
static void transmit(uint32_t len, uint8_t fill, uint16_t frame_flags)
{
    vq = &txq;
    memset(at(TX_HDR), 0, HDR_BYTES);
    memset(at(TX_FRAME), fill, len);
    put_desc(0, TX_HDR, HDR_BYTES, D_NEXT, 1);
    put_desc(1, TX_FRAME, len, frame_flags, 0);
    kick(0);
}

/* Receive buffer (i) of (len) bytes, with (flags), made available. */
static void post_rx(unsigned i, uint32_t len, uint16_t flags)
{
    vq = &rxq;
    memset(at(RX_BUF + 0x1000 * i), 0xEE, len);
    put_desc(i, RX_BUF + 0x1000 * i, len, flags, 0);
    kick((uint16_t)i);
}

static bool receive(const uint8_t *frame, size_t len)
{
    struct net_client c = virtio_net_client(nic);
    return c.receive(c.opaque, frame, len);
}

static void set_link(bool up)
{
    struct net_client c = virtio_net_client(nic);
    c.link(c.opaque, up);
}

/* ---- the tests ---- */

static void test_config(void)
{
    CHECK_EQ(cfg_read(0x00, 4), 0x10001AF4);        /* transitional network device */
    CHECK_EQ(cfg_read(0x2C, 4) >> 16, 1);           /* subsystem: virtio type 1, network */
    CHECK_EQ(cfg_read(0x08, 4) >> 8, 0x020000);     /* class: network, Ethernet */
    CHECK_EQ(io_in(bus, port + VIO_DEVICE_FEATURES, 4), F_MAC | F_STATUS | F_MTU);
    for (unsigned i = 0; i < 6; i++)
        CHECK_EQ(io_in(bus, port + VIO_CONFIG + i, 1), mac[i]);
    CHECK_EQ(io_in(bus, port + VIO_CONFIG + 6, 2), 1);          /* STATUS: LINK_UP */
    CHECK_EQ(io_in(bus, port + VIO_CONFIG + 10, 2), MTU);
}

static void test_frames(void)
{
    driver_init();
    uint32_t id, len;
    /* the guest's frame reaches the backend without its header; the chain comes back */
    transmit(60, 0xA5, 0);
    CHECK_EQ(backend.sent, 1);
    CHECK_EQ(backend.len, 60);
    CHECK(backend.frame[0] == 0xA5 && backend.frame[59] == 0xA5);
    vq = &txq;
    CHECK(take_used(&id, &len) && id == 0 && len == 0);
    CHECK_EQ(isr_read(), ISR_QUEUE);

    /* a frame for the guest: a zero header, then the frame, in the posted buffer */
    uint8_t frame[100];
    memset(frame, 0x3C, sizeof frame);
    post_rx(0, HDR_BYTES + 1514, D_WRITE);
    CHECK(receive(frame, sizeof frame));
    vq = &rxq;
    CHECK(take_used(&id, &len) && id == 0 && len == HDR_BYTES + sizeof frame);
    CHECK(at(RX_BUF)[0] == 0 && at(RX_BUF)[HDR_BYTES - 1] == 0);
    CHECK(memcmp(at(RX_BUF) + HDR_BYTES, frame, sizeof frame) == 0);
    CHECK_EQ(isr_read(), ISR_QUEUE);

    /* no buffer posted: the frames wait, up to the backlog's size; then the NIC says so */
    unsigned taken = 0;
    while (taken < 1000 && receive(frame, sizeof frame))
        taken++;
    CHECK_EQ(taken, 256);
    CHECK(!take_used(&id, &len));
    unsigned resumed = backend.resumed;
    post_rx(1, HDR_BYTES + 1514, D_WRITE);                      /* one comes in; room again */
    CHECK(take_used(&id, &len) && id == 1 && len == HDR_BYTES + sizeof frame);
    CHECK_EQ(backend.resumed, resumed + 1);
    CHECK(receive(frame, sizeof frame));
    CHECK(!receive(frame, sizeof frame));
    (void)isr_read();
}

static void test_link(void)
{
    driver_init();
    /* 5.1.4: a link change is STATUS's LINK_UP bit and a configuration interrupt */
    irq.rises = 0;
    set_link(false);
    CHECK_EQ(io_in(bus, port + VIO_CONFIG + 6, 2), 0);
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(isr_read(), ISR_CONFIG);
    CHECK_EQ(irq.level, 0);
    set_link(false);                                            /* no change, no interrupt */
    CHECK_EQ(irq.rises, 1);
    set_link(true);
    CHECK_EQ(io_in(bus, port + VIO_CONFIG + 6, 2), 1);
    CHECK_EQ(isr_read(), ISR_CONFIG);
    /* before DRIVER_OK the driver reads the configuration itself: no interrupt */
    status_write(0);
    irq.rises = 0;
    set_link(false);
    CHECK_EQ(irq.rises, 0);
    CHECK_EQ(io_in(bus, port + VIO_CONFIG + 6, 2), 0);
    set_link(true);
}

/* After a malformed chain: nothing completes, nothing moves; a reset brings the device back. */
static void expect_stopped_then_reset(struct drv_queue *q)
{
    uint32_t id, len;
    vq = q;
    CHECK(!take_used(&id, &len));
    unsigned sent = backend.sent;
    transmit(60, 0x11, 0);                                      /* a good frame: not sent */
    CHECK_EQ(backend.sent, sent);
    vq = &txq;
    CHECK(!take_used(&id, &len));
    driver_init();
    transmit(60, 0x22, 0);
    CHECK_EQ(backend.sent, sent + 1);
    CHECK(take_used(&id, &len));
    (void)isr_read();
}

static void test_malformed(void)
{
    uint8_t frame[64] = { 0 };
    /* 2.7.4.2: a transmit buffer the device may write */
    driver_init();
    unsigned sent = backend.sent;
    transmit(60, 0x33, D_WRITE);
    CHECK_EQ(backend.sent, sent);
    expect_stopped_then_reset(&txq);

    /* a frame over 65550 bytes, in buffers that guest memory holds */
    driver_init();
    sent = backend.sent;
    vq = &txq;
    put_desc(0, TX_HDR, HDR_BYTES, D_NEXT, 1);
    put_desc(1, 0x40000, 0x10000, D_NEXT, 2);
    put_desc(2, 0x50000, 0x100, 0, 0);
    kick(0);
    CHECK_EQ(backend.sent, sent);
    expect_stopped_then_reset(&txq);

    /* a receive buffer the device may not write: the frame is lost, nothing completes */
    driver_init();
    post_rx(0, HDR_BYTES + 1514, 0);
    CHECK(receive(frame, sizeof frame));
    CHECK_EQ(*at(RX_BUF), 0xEE);
    expect_stopped_then_reset(&rxq);

    /* a receive chain that loops */
    driver_init();
    vq = &rxq;
    put_desc(0, RX_BUF, 8, D_NEXT | D_WRITE, 1);
    put_desc(1, RX_BUF + 8, 8, D_NEXT | D_WRITE, 0);
    kick(0);
    CHECK(receive(frame, sizeof frame));
    expect_stopped_then_reset(&rxq);
}

int main(void)
{
    gm = (struct guestmem){ .fd = -1, .phys = calloc(1, MEM_BYTES), .size = MEM_BYTES };
    CHECK(gm.phys != NULL);
    slot = SLOT;
    port = PORT;
    bus = io_bus_new();
    pci = pci_init(bus);
    irq_probe_init(&irq);
    nic = virtio_net_init(pci, bus, &gm, SLOT, PORT, &irq.line, IRQ_NUM, mac, MTU, "eth0");
    CHECK(nic != NULL);
    backend.base.ops = &ops;
    virtio_net_attach(nic, &backend.base);

    test_config();
    test_frames();
    test_link();
    test_malformed();

    virtio_net_free(nic);
    pci_free(pci);
    io_bus_free(bus);
    free(gm.phys);
    return check_done();
}

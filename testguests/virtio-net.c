/* virtio-net: a legacy virtio-PCI NIC driven by hand on user-mode networking (libslirp, under
 * QEMU and ring3 alike): PCI discovery, init, an ARP exchange and a DHCP offer with and without
 * MRG_RXBUF, INTx, malformed transmit and receive chains (no completion until a reset). */
#include "guest.h"
#include "virtio.h"

const char guest_name[] = "virtio-net";

/* Feature bits (virtio 1.2, 5.1.3). Only what QEMU 7.2 and ring3 both offer on user-mode
 * networking is printed or used: QEMU offers no checksum or segmentation offload to a peer
 * without vnet headers, ring3 does (it segments itself). */
#define NET_F_MAC       (1u << 5)
#define NET_F_MRG_RXBUF (1u << 15)
#define NET_F_STATUS    (1u << 16)
#define NET_S_LINK_UP   1u

#define HDR_BYTES       10      /* struct virtio_net_hdr (5.1.6) */
#define MRG_HDR_BYTES   12      /* with num_buffers, under MRG_RXBUF */
#define RX_QUEUE        0
#define TX_QUEUE        1

/* The user network both give (QEMU's -netdev user defaults, ring3's --net user). */
static const uint8_t guest_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
static const uint8_t guest_ip[4] = { 10, 0, 2, 15 };
static const uint8_t host_ip[4] = { 10, 0, 2, 2 };

static uint32_t pci_bdf;
static uint16_t iobase;
static uint8_t irq_line;

#define RING_BYTES 0x4000u      /* 256 entries: 0x1206 bytes of descriptors and avail, then used */
static uint8_t rx_mem[RING_BYTES] __attribute__((aligned(4096)));
static uint8_t tx_mem[RING_BYTES] __attribute__((aligned(4096)));
static struct vring rxq, txq;

#define RX_BUFS     16
#define RX_BUF_LEN  2048
static uint8_t rx_buf[RX_BUFS][RX_BUF_LEN] __attribute__((aligned(16)));
static uint8_t tx_buf[2048] __attribute__((aligned(16)));
static uint8_t scratch[8192] __attribute__((aligned(16)));
static size_t hdr_len = HDR_BYTES;

#define OUTSIDE_RAM 0xF0000000u        /* beyond the guest's 64 MiB, no device there */

/* ---- bytes on the wire ---- */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* RFC 1071: the one's-complement sum of (len) bytes, folded. */
static uint16_t sum16(const uint8_t *p, size_t len, uint32_t s)
{
    for (size_t i = 0; i < len; i += 2)
        s += (uint32_t)p[i] << 8 | (i + 1 < len ? p[i + 1] : 0);
    while (s > 0xFFFF)
        s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)s;
}

/* An ARP request (RFC 826) for (ip) from the guest: 42 bytes at (f). */
static size_t arp_request(uint8_t *f, const uint8_t ip[4])
{
    memset(f, 0xFF, 6);
    memcpy(f + 6, guest_mac, 6);
    put16(f + 12, 0x0806);
    put16(f + 14, 1);           /* Ethernet */
    put16(f + 16, 0x0800);      /* IPv4 */
    f[18] = 6;
    f[19] = 4;
    put16(f + 20, 1);           /* request */
    memcpy(f + 22, guest_mac, 6);
    memcpy(f + 28, guest_ip, 4);
    memset(f + 32, 0, 6);
    memcpy(f + 38, ip, 4);
    return 42;
}

/* A DHCPDISCOVER (RFC 2131, 2132) from 0.0.0.0:68 to 255.255.255.255:67, with its IP and UDP
 * checksums: the frame at (f). */
#define DHCP_XID 0x52330003u
static size_t dhcp_discover(uint8_t *f)
{
    memset(f, 0, 342);
    memset(f, 0xFF, 6);
    memcpy(f + 6, guest_mac, 6);
    put16(f + 12, 0x0800);
    uint8_t *ip = f + 14, *udp = ip + 20, *b = udp + 8;
    b[0] = 1;                   /* BOOTREQUEST */
    b[1] = 1;
    b[2] = 6;
    put16(b + 4, DHCP_XID >> 16);
    put16(b + 6, (uint16_t)DHCP_XID);
    memcpy(b + 28, guest_mac, 6);
    static const uint8_t options[] = { 99, 130, 83, 99, 53, 1, 1, 255 };   /* cookie, DISCOVER */
    memcpy(b + 236, options, sizeof options);
    size_t udp_len = 8 + 300;
    ip[0] = 0x45;
    put16(ip + 2, (uint16_t)(20 + udp_len));
    ip[8] = 64;
    ip[9] = 17;
    memset(ip + 16, 0xFF, 4);
    put16(ip + 10, (uint16_t)~sum16(ip, 20, 0));
    put16(udp, 68);
    put16(udp + 2, 67);
    put16(udp + 4, (uint16_t)udp_len);
    uint8_t pseudo[12] = { 0 };
    memcpy(pseudo, ip + 12, 8);
    pseudo[9] = 17;
    put16(pseudo + 10, (uint16_t)udp_len);
    put16(udp + 6, (uint16_t)~sum16(udp, udp_len, sum16(pseudo, 12, 0)));
    return 14 + 20 + udp_len;
}

/* ---- PCI discovery and set-up ---- */

static void test_config_header(void)
{
    uint32_t class_rev = pci_read(pci_bdf, 0x08);
    uint32_t subsys = pci_read(pci_bdf, 0x2C);
    uint32_t intr = pci_read(pci_bdf, 0x3C);
    irq_line = (uint8_t)intr;
    kprintf("pci: found 1af4:1000, revision %u, class 0x%06x\n", class_rev & 0xFF, class_rev >> 8);
    kprintf("pci: subsystem %04x:%04x, interrupt pin %u, line an ISA irq: %s\n", subsys & 0xFFFF,
            subsys >> 16, intr >> 8 & 0xFF, irq_line >= 3 && irq_line < 16 ? "yes" : "no");
    uint32_t bar = pci_read(pci_bdf, 0x10);
    kprintf("pci: bar0 is i/o: %s, assigned: %s\n", bar & 1 ? "yes" : "no",
            (bar & ~3u) != 0 ? "yes" : "no");
    iobase = (uint16_t)(bar & 0xFFFC);
    pci_write16(pci_bdf, 0x04, PCI_CMD_IO | PCI_CMD_MASTER);
}

/* Reset, (features), both queues, DRIVER_OK (virtio 1.2, 3.1.2); with (say), prints it. */
static void device_init(uint32_t features, int say)
{
    uint8_t st0;
    uint32_t accepted, offered = vio_negotiate(iobase, features, &st0, &accepted);
    uint16_t rx_size = vring_setup(iobase, &rxq, RX_QUEUE, rx_mem, sizeof rx_mem);
    uint16_t tx_size = vring_setup(iobase, &txq, TX_QUEUE, tx_mem, sizeof tx_mem);
    outb(iobase + VIO_STATUS, ST_ACKNOWLEDGE | ST_DRIVER | ST_DRIVER_OK);
    uint8_t st = inb(iobase + VIO_STATUS);
    hdr_len = features & NET_F_MRG_RXBUF ? MRG_HDR_BYTES : HDR_BYTES;
    if (!say) {
        check(st0 == 0 && st == 7 && accepted == features && rx_size && tx_size, "re-init");
        return;
    }
    kprintf("virtio: status after reset 0x%02x, isr 0x%02x\n", st0, inb(iobase + VIO_ISR));
    kprintf("virtio: offers mac %s, status %s, mrg_rxbuf %s\n", offered & NET_F_MAC ? "yes" : "no",
            offered & NET_F_STATUS ? "yes" : "no", offered & NET_F_MRG_RXBUF ? "yes" : "no");
    kprintf("virtio: driver features read back 0x%08x, status 0x%02x\n", accepted, st);
    kprintf("virtio: receive and transmit queues: %s\n", rx_size && tx_size ? "yes" : "no");
}

static void test_config_space(void)
{
    uint8_t m[6];
    for (int i = 0; i < 6; i++)
        m[i] = inb(iobase + VIO_CONFIG + i);
    uint16_t status = inw(iobase + VIO_CONFIG + 6);
    kprintf("virtio-net: mac %02x:%02x:%02x:%02x:%02x:%02x, link %s\n", m[0], m[1], m[2], m[3],
            m[4], m[5], status & NET_S_LINK_UP ? "up" : "down");
}

/* ---- frames ---- */

/* Receive buffers 0..n-1 of (len) bytes each, posted in descriptors of the same numbers. */
static void post_rx(unsigned n, uint32_t len)
{
    for (unsigned i = 0; i < n; i++) {
        memset(rx_buf[i], 0xEE, RX_BUF_LEN);
        vring_desc(&rxq, i, rx_buf[i], len, DESC_F_WRITE, 0);
        vring_kick(iobase, &rxq, (uint16_t)i);
    }
}

/* Offers (len) bytes of frame at (tx_buf + hdr_len) in transmit descriptor (i), behind a zero
 * header in the same buffer (VIRTIO_F_ANY_LAYOUT is not needed: each device takes the header
 * however the driver splits it). */
static void kick_frame(uint16_t i, size_t len)
{
    memset(tx_buf, 0, hdr_len);
    vring_desc(&txq, i, tx_buf, (uint32_t)(hdr_len + len), 0, 0);
    vring_kick(iobase, &txq, i);
}

/* An ARP request for 10.0.2.2 in transmit descriptor (i), offered. */
static void kick_arp(uint16_t i)
{
    kick_frame(i, arp_request(tx_buf + hdr_len, host_ip));
}

/* Sends (len) bytes as kick_frame() does; 1 when the chain came back. */
static int transmit(size_t len)
{
    kick_frame(0, len);
    uint32_t id, used;
    return vring_wait_used(iobase, &txq, SPINS_DONE, &id, &used) && id == 0 && used == 0;
}

/* The next received frame: its buffer's index and the used length, or 0. */
static int receive(uint32_t *id, uint32_t *len)
{
    return vring_wait_used(iobase, &rxq, SPINS_DONE, id, len) && *id < RX_BUFS;
}

static void test_arp(const char *what)
{
    post_rx(4, RX_BUF_LEN);
    int sent = transmit(arp_request(tx_buf + hdr_len, host_ip));
    uint32_t id = 0, len;
    int got = receive(&id, &len);
    const uint8_t *f = rx_buf[id] + hdr_len;
    int reply = got && len >= hdr_len + 42 && get16(f + 12) == 0x0806 && get16(f + 20) == 2;
    kprintf("%s: who-has 10.0.2.2: sent %s, reply %s", what, sent ? "yes" : "NO", reply ? "yes" : "NO");
    if (reply)
        kprintf(", %u.%u.%u.%u is-at %02x:%02x:%02x:%02x:%02x:%02x, to us %s", f[28], f[29], f[30],
                f[31], f[22], f[23], f[24], f[25], f[26], f[27],
                !memcmp(f, guest_mac, 6) && !memcmp(f + 32, guest_mac, 6) &&
                !memcmp(f + 38, guest_ip, 4) ? "yes" : "NO");
    kprintf(", header flags 0x%02x gso 0x%02x\n", rx_buf[id][0], rx_buf[id][1]);
    check(sent && reply, what);
    (void)inb(iobase + VIO_ISR);
}

/* The DHCP offer's payload as first received, for the comparison with MRG_RXBUF. */
static uint8_t offer[600];
static size_t offer_len;

/* What slirp's DHCPOFFER says: checks, and prints the options both give. */
static void show_offer(const uint8_t *f, size_t len)
{
    const uint8_t *ip = f + 14, *udp = ip + 20, *b = udp + 8;
    size_t udp_len = len >= 42 ? get16(udp + 4) : 0;
    int ok = len >= 42 + 240 && get16(f + 12) == 0x0800 && ip[9] == 17 && get16(udp) == 67 &&
             get16(udp + 2) == 68 && udp_len >= 8 + 240 && 34 + udp_len <= len;
    if (!ok) {
        kprintf("dhcp: no offer\n");
        check(0, "dhcp offer");
        return;
    }
    uint8_t pseudo[12] = { 0 };
    memcpy(pseudo, ip + 12, 8);
    pseudo[9] = 17;
    put16(pseudo + 10, (uint16_t)udp_len);
    int ip_ok = sum16(ip, (size_t)(ip[0] & 0xF) * 4, 0) == 0xFFFF;
    int udp_ok = get16(udp + 6) == 0 || sum16(udp, udp_len, sum16(pseudo, 12, 0)) == 0xFFFF;
    kprintf("dhcp: offer to xid ok %s, yiaddr %u.%u.%u.%u, checksums ip %s udp %s\n",
            get16(b + 4) == DHCP_XID >> 16 && get16(b + 6) == (uint16_t)DHCP_XID ? "yes" : "NO",
            b[16], b[17], b[18], b[19], ip_ok ? "ok" : "BAD", udp_ok ? "ok" : "BAD");
    for (size_t i = 240; i + 1 < udp_len - 8 && b[i] != 255;) {
        uint8_t code = b[i], n = b[i + 1];
        const uint8_t *v = b + i + 2;
        if (code == 0) {
            i++;
            continue;
        }
        if (code == 53 && n == 1)
            kprintf("dhcp: message type %u\n", v[0]);
        else if ((code == 1 || code == 3 || code == 6 || code == 54) && n == 4)
            kprintf("dhcp: option %u: %u.%u.%u.%u\n", code, v[0], v[1], v[2], v[3]);
        else if (code == 51 && n == 4)
            kprintf("dhcp: lease %u s\n", (uint32_t)get16(v) << 16 | get16(v + 2));
        i += 2u + n;
    }
    check(ip_ok && udp_ok, "dhcp checksums");
    offer_len = udp_len - 8 < sizeof offer ? udp_len - 8 : sizeof offer;
    memcpy(offer, b, offer_len);
}

static void test_dhcp(void)
{
    device_init(NET_F_MAC | NET_F_STATUS, 0);
    post_rx(4, RX_BUF_LEN);
    int sent = transmit(dhcp_discover(tx_buf + hdr_len));
    uint32_t id, len;
    if (!sent || !receive(&id, &len) || len < hdr_len) {
        kprintf("dhcp: sent %s, no answer\n", sent ? "yes" : "NO");
        check(0, "dhcp");
        return;
    }
    show_offer(rx_buf[id] + hdr_len, len - hdr_len);
    (void)inb(iobase + VIO_ISR);
}

/* 5.1.6.3.2 and 5.1.6.4: with MRG_RXBUF and buffers of 128 bytes, the offer takes several,
 * every one but the last full, and the first header's num_buffers counts them. */
static void test_merged(void)
{
    device_init(NET_F_MAC | NET_F_STATUS | NET_F_MRG_RXBUF, 0);
    post_rx(RX_BUFS, 128);
    int sent = transmit(dhcp_discover(tx_buf + hdr_len));
    unsigned used = 0, full = 1;
    size_t total = 0;
    uint32_t id, len, last = 0;
    while (used < RX_BUFS && vring_wait_used(iobase, &rxq, used ? SPINS_NOTHING : SPINS_DONE, &id, &len)) {
        if (id != used || len > 128) {
            full = 0;
            break;
        }
        memcpy(scratch + total, rx_buf[id], len);
        total += len;
        if (last && last != 128)
            full = 0;
        last = len;
        used++;
    }
    uint16_t num_buffers = (uint16_t)(scratch[10] | scratch[11] << 8);
    const uint8_t *f = scratch + MRG_HDR_BYTES;
    int same = total >= MRG_HDR_BYTES + 42 + offer_len && offer_len &&
               !memcmp(f + 42, offer, offer_len);
    kprintf("mrg_rxbuf: dhcp sent %s; num_buffers %u, %u used, all but the last full %s, "
            "offer as before %s\n", sent ? "yes" : "NO", num_buffers, used, full ? "yes" : "NO",
            same ? "yes" : "NO");
    check(sent && used > 1 && num_buffers == used && full && same, "mrg_rxbuf");
    (void)inb(iobase + VIO_ISR);
}

/* ---- the interrupt ---- */

/* An ARP request for 10.0.2.2 that asks for no interrupt, offered. */
static void start_arp(void)
{
    txq.avail[0] = AVAIL_F_NO_INTERRUPT;
    kick_arp(0);
}

/* The ARP reply's completion raises INTA#, which the PIC delivers on the header's line; the
 * request's completion asks for none (VIRTQ_AVAIL_F_NO_INTERRUPT). */
static void test_interrupt(void)
{
    post_rx(1, RX_BUF_LEN);
    uint8_t isr_in_handler;
    uint32_t taken = vio_interrupt(iobase, irq_line, start_arp, &isr_in_handler);
    uint32_t id, used;
    int tx_done = vring_wait_used(iobase, &txq, SPINS_DONE, &id, &used);
    int rx_done = vring_wait_used(iobase, &rxq, SPINS_NOTHING, &id, &used);
    kprintf("interrupt: %u taken, isr in handler 0x%02x, isr after 0x%02x; tx done %s, rx done %s\n",
            taken, isr_in_handler, inb(iobase + VIO_ISR), tx_done ? "yes" : "no",
            rx_done ? "yes" : "no");
    check(taken == 1 && tx_done && rx_done, "interrupt-driven receive");
    txq.avail[0] = 0;
}

/* ---- malformed chains: the device stops, completes nothing, until the driver resets it ----
 * As for virtio-blk, only what the spec fixes and both devices treat alike (QEMU's
 * virtio_error, ring3's virtio_pci_error): the rules of split virtqueues (2.7), a transmit chain
 * with no readable buffer, a receive chain with no writable one. QEMU 7.2 ignores a writable
 * buffer after the readable ones of a transmit chain, and a readable one before the writable ones
 * of a receive chain, where ring3 stops: neither is tested. */

/* Nothing completes; with (isr), the ISR stays clear too. */
static void expect_stopped(const char *what, const char *then, int isr)
{
    uint32_t id, len;
    int tx = vring_wait_used(iobase, &txq, SPINS_NOTHING, &id, &len);
    int rx = vring_wait_used(iobase, &rxq, SPINS_NOTHING, &id, &len);
    kprintf("%s%s: %s", what, then, tx || rx ? "COMPLETED" : "no completion");
    if (isr)
        kprintf(", isr 0x%02x", inb(iobase + VIO_ISR));
    kprintf("\n");
    check(!tx && !rx, what);
}

static void expect_recovered(const char *what)
{
    device_init(NET_F_MAC | NET_F_STATUS, 0);
    post_rx(4, RX_BUF_LEN);
    int sent = transmit(arp_request(tx_buf + hdr_len, host_ip));
    uint32_t id, len;
    int got = receive(&id, &len) && get16(rx_buf[id] + hdr_len + 20) == 2;
    (void)inb(iobase + VIO_ISR);
    kprintf("%s: after a reset, arp %s\n", what, sent && got ? "ok" : "WRONG");
    check(sent && got, what);
}

/* A transmit chain already in place at (head), whose frame (an ARP request) would go out were
 * the chain not malformed. */
static void bad_tx(const char *what, uint16_t head)
{
    vring_kick(iobase, &txq, head);
    expect_stopped(what, "", 1);
    kick_arp(5);            /* stopped means stopped: a good frame does not go either */
    expect_stopped(what, ", then a good frame", 1);
    expect_recovered(what);
}

static void test_bad_transmits(void)
{
    memset(tx_buf, 0, hdr_len);
    size_t len = hdr_len + arp_request(tx_buf + hdr_len, host_ip);
    vring_desc(&txq, 0, tx_buf, (uint32_t)hdr_len, DESC_F_NEXT, 1);
    vring_desc(&txq, 1, tx_buf + hdr_len, (uint32_t)(len - hdr_len), DESC_F_NEXT, 0);
    bad_tx("tx loop 0->1->0", 0);
    vring_desc(&txq, 0, tx_buf, (uint32_t)hdr_len, DESC_F_NEXT, txq.size);
    bad_tx("tx next index = queue size", 0);
    vring_desc(&txq, 0, tx_buf, (uint32_t)len, 0, 0);
    bad_tx("tx chain head = queue size", txq.size);
    vring_desc(&txq, 0, tx_buf, (uint32_t)hdr_len, DESC_F_NEXT, 1);
    vring_desc(&txq, 1, (const void *)OUTSIDE_RAM, 8192, 0, 0);
    bad_tx("tx buffer beyond ram", 0);
    vring_desc(&txq, 0, scratch, 64, DESC_F_WRITE | DESC_F_NEXT, 1);
    vring_desc(&txq, 1, tx_buf, (uint32_t)len, 0, 0);
    bad_tx("tx readable after writable", 0);
    vring_desc(&txq, 0, tx_buf, (uint32_t)len, DESC_F_WRITE, 0);
    bad_tx("tx only a writable buffer", 0);
}

/* A malformed receive chain at descriptor 0 of a fresh queue: the ARP reply finds it. The
 * request does not complete either: the device stopped before it could. QEMU 7.2 still raises
 * the transmit queue's interrupt then (virtio_notify after a virtqueue_push that a broken device
 * skipped), ring3 does not: the ISR is not compared. */
static void bad_rx(const char *what, const volatile void *addr, uint32_t len, uint16_t flags,
                   uint16_t next)
{
    device_init(NET_F_MAC | NET_F_STATUS, 0);
    vring_desc(&rxq, 0, addr, len, flags, next);
    vring_desc(&rxq, 1, rx_buf[1], 64, DESC_F_WRITE | DESC_F_NEXT, 0);
    vring_kick(iobase, &rxq, 0);
    kick_arp(0);
    expect_stopped(what, "", 0);
    expect_recovered(what);
}

static void test_bad_receives(void)
{
    bad_rx("rx loop 0->1->0", rx_buf[0], 64, DESC_F_WRITE | DESC_F_NEXT, 1);
    bad_rx("rx only a readable buffer", rx_buf[0], RX_BUF_LEN, 0, 0);
    bad_rx("rx buffer beyond ram", (const void *)OUTSIDE_RAM, 8192, DESC_F_WRITE, 0);
    bad_rx("rx next index = queue size", rx_buf[0], 64, DESC_F_WRITE | DESC_F_NEXT, rxq.size);
}

int guest_main(void)
{
    pic_init();
    if (!pci_find(0x1000u << 16 | 0x1AF4, &pci_bdf)) {
        kprintf("pci: no virtio-net (1af4:1000) on bus 0\n");
        return 1;
    }
    test_config_header();
    device_init(NET_F_MAC | NET_F_STATUS, 1);
    test_config_space();
    test_arp("arp");
    test_dhcp();
    test_merged();
    device_init(NET_F_MAC | NET_F_STATUS, 0);
    test_interrupt();
    device_init(NET_F_MAC | NET_F_STATUS, 0);
    test_bad_transmits();
    test_bad_receives();
    outb(iobase + VIO_STATUS, 0);
    return 0;
}

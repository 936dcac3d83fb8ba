/* virtio-blk: a legacy virtio-PCI disk driven by hand: PCI discovery, init, read, GET_ID, flush, INTx, malformed chains. */
#include "guest.h"
#include "virtio.h"

const char guest_name[] = "virtio-blk";

/* The test's disk (tests/test_guests.py makes it): 2048 sectors; sector s
 * starts with s (32-bit little-endian), then byte i holds (s + i) & 0xff. */
#define DISK_SECTORS 2048u
#define SECTOR       512u

static uint32_t pci_bdf;    /* bus 0, device and function of the disk, as CONFIG_ADDRESS bits */

#define BLK_F_SEG_MAX  (1u << 2)
#define BLK_F_RO       (1u << 5)
#define BLK_F_BLK_SIZE (1u << 6)
#define BLK_F_FLUSH    (1u << 9)

#define BLK_T_IN     0
#define BLK_T_OUT    1
#define BLK_T_FLUSH  4
#define BLK_T_GET_ID 8

static uint16_t iobase;
static uint8_t irq_line;

/* The request queue, in the legacy layout (virtio 1.2, 2.7.2). */
#define RING_BYTES 0x8000u
static uint8_t ring_mem[RING_BYTES] __attribute__((aligned(4096)));
static struct vring q;

/* The request: a 16-byte header the device reads, data, a status byte it writes. */
struct blk_hdr {
    uint32_t type;
    uint32_t reserved;
    uint64_t sector;
};

static struct blk_hdr hdr;
static uint8_t data[2 * SECTOR] __attribute__((aligned(16)));
static uint8_t id[20];
static volatile uint8_t status_byte;

#define STATUS_UNTOUCHED 0xEE
#define OUTSIDE_RAM      0xF0000000u    /* beyond the guest's 64 MiB, no device there */

/* ---- PCI discovery ---- */

static int find_disk(void)
{
    return pci_find(0x1001u << 16 | 0x1AF4, &pci_bdf);
}

static void test_config_header(void)
{
    uint32_t class_rev = pci_read(pci_bdf, 0x08);
    uint32_t subsys = pci_read(pci_bdf, 0x2C);
    uint32_t hdr_type = pci_read(pci_bdf, 0x0C) >> 16 & 0x7F;
    uint32_t intr = pci_read(pci_bdf, 0x3C);
    irq_line = (uint8_t)intr;
    kprintf("pci: found 1af4:1001, revision %u, class 0x%06x, header type %u\n",
            class_rev & 0xFF, class_rev >> 8, hdr_type);
    kprintf("pci: subsystem %04x:%04x, interrupt pin %u, line an ISA irq: %s\n", subsys & 0xFFFF,
            subsys >> 16, intr >> 8 & 0xFF, irq_line >= 3 && irq_line < 16 ? "yes" : "no");

    uint32_t bar = pci_read(pci_bdf, 0x10);
    uint16_t cmd = (uint16_t)pci_read(pci_bdf, 0x04);
    /* Size the BAR (PCI 3.0, 6.2.5.1) with decoding off, as firmware does. */
    pci_write16(pci_bdf, 0x04, cmd & ~(PCI_CMD_IO | PCI_CMD_MEM));
    pci_write(pci_bdf, 0x10, 0xFFFFFFFF);
    uint32_t mask = pci_read(pci_bdf, 0x10);
    pci_write(pci_bdf, 0x10, bar);
    uint32_t size = (~(mask & ~3u) + 1) & 0xFFFF;
    kprintf("pci: bar0 is i/o: %s, size %u, assigned: %s\n", bar & 1 ? "yes" : "no", size,
            (bar & ~3u) != 0 ? "yes" : "no");
    iobase = (uint16_t)(bar & 0xFFFC);

    pci_write16(pci_bdf, 0x04, PCI_CMD_IO | PCI_CMD_MASTER);
    kprintf("pci: command after enabling i/o and bus master: 0x%04x\n",
            pci_read(pci_bdf, 0x04) & 0xFFFF);
}

/* ---- device set-up (virtio 1.2, 3.1.2 "Legacy Interface: Device Initialization") ---- */

static void device_reset(void)
{
    outb(iobase + VIO_STATUS, 0);
}

/* Reset, features, queue 0, DRIVER_OK; with (say), prints what it found. */
static void device_init(int say)
{
    uint8_t st0;
    uint32_t accepted, offered = vio_negotiate(iobase, BLK_F_FLUSH, &st0, &accepted);

    outw(iobase + VIO_QUEUE_SEL, 1);
    uint16_t size1 = inw(iobase + VIO_QUEUE_SIZE);
    int pow2 = vring_setup(iobase, &q, 0, ring_mem, sizeof ring_mem) != 0;
    if (!pow2)
        panic("queue 0 has no entries");
    uint32_t pfn_back = inl(iobase + VIO_QUEUE_PFN);
    outb(iobase + VIO_STATUS, ST_ACKNOWLEDGE | ST_DRIVER | ST_DRIVER_OK);
    uint8_t st = inb(iobase + VIO_STATUS);
    if (!say) {
        check(st0 == 0 && st == 7 && pfn_back == (uint32_t)ring_mem >> 12, "re-init");
        return;
    }
    kprintf("virtio: status after reset 0x%02x, isr 0x%02x\n", st0, inb(iobase + VIO_ISR));
    kprintf("virtio: offers seg_max %s, blk_size %s, flush %s, ro %s\n",
            offered & BLK_F_SEG_MAX ? "yes" : "no", offered & BLK_F_BLK_SIZE ? "yes" : "no",
            offered & BLK_F_FLUSH ? "yes" : "no", offered & BLK_F_RO ? "yes" : "no");
    kprintf("virtio: driver features read back 0x%08x\n", accepted);
    kprintf("virtio: queue 0 size a power of 2: %s, queue 1 size %u\n", pow2 ? "yes" : "no", size1);
    kprintf("virtio: queue pfn reads back: %s, status 0x%02x\n",
            pfn_back == (uint32_t)ring_mem >> 12 ? "yes" : "no", st);
}

static void test_config_space(void)
{
    uint32_t cap_lo = inl(iobase + VIO_CONFIG + 0), cap_hi = inl(iobase + VIO_CONFIG + 4);
    uint32_t blk_size = inl(iobase + VIO_CONFIG + 20);
    kprintf("virtio-blk: capacity %u sectors%s, blk_size %u\n", cap_lo,
            cap_hi ? " (+ HIGH BITS)" : "", blk_size);
    check(cap_hi == 0 && cap_lo == DISK_SECTORS, "capacity");
}

/* ---- requests ---- */

/* Offers a request in descriptors (first) on: the header, then (len) bytes
 * at (buf) (written by the device when (in)), then the status byte. */
static void submit(uint16_t first, uint32_t type, uint64_t sector, void *buf, uint32_t len, int in)
{
    hdr = (struct blk_hdr){ type, 0, sector };
    status_byte = STATUS_UNTOUCHED;
    uint16_t n = first;
    vring_desc(&q, n, &hdr, sizeof hdr, DESC_F_NEXT, (uint16_t)(n + 1));
    n++;
    if (len) {
        vring_desc(&q, n, buf, len, DESC_F_NEXT | (in ? DESC_F_WRITE : 0), (uint16_t)(n + 1));
        n++;
    }
    vring_desc(&q, n, &status_byte, 1, DESC_F_WRITE, 0);
    vring_kick(iobase, &q, first);
}

/* A request as submit() makes it. Returns the status, or -1 when nothing completed. */
static int request(uint32_t type, uint64_t sector, void *buf, uint32_t len, int in,
                   uint32_t *used_len)
{
    submit(0, type, sector, buf, len, in);
    uint32_t eid;
    if (!vring_wait_used(iobase, &q, SPINS_DONE, &eid, used_len))
        return -1;
    check(eid == 0, "used element id");
    return status_byte;
}

static int sector_matches(const uint8_t *p, uint32_t s)
{
    for (uint32_t i = 0; i < SECTOR; i++) {
        uint8_t want = i < 4 ? (uint8_t)(s >> 8 * i) : (uint8_t)(s + i);
        if (p[i] != want)
            return 0;
    }
    return 1;
}

/* Reads sectors (s) and (s + 1) and says whether they hold the pattern. */
static int read_ok(uint32_t s)
{
    uint32_t len;
    memset(data, 0, sizeof data);
    int st = request(BLK_T_IN, s, data, sizeof data, 1, &len);
    return st == 0 && len == sizeof data + 1 && sector_matches(data, s) &&
           sector_matches(data + SECTOR, s + 1);
}

static void test_read(void)
{
    uint32_t len;
    memset(data, 0, sizeof data);
    int st = request(BLK_T_IN, 0, data, sizeof data, 1, &len);
    uint32_t sum = 0;
    for (uint32_t i = 0; i < sizeof data; i++)
        sum = sum * 31 + data[i];
    kprintf("read sectors 0-1: status %d, used len %u, first bytes %02x %02x %02x %02x %02x\n",
            st, len, data[0], data[4], data[5], data[SECTOR], data[SECTOR + 4]);
    kprintf("read sectors 0-1: pattern %s, checksum 0x%08x\n",
            sector_matches(data, 0) && sector_matches(data + SECTOR, 1) ? "matches" : "WRONG", sum);
    check(st == 0 && len == sizeof data + 1, "read");
    uint8_t isr = inb(iobase + VIO_ISR);
    kprintf("read: isr 0x%02x, then 0x%02x\n", isr, inb(iobase + VIO_ISR));
}

/* A read of sectors 4 and 5, offered. */
static void start_read(void)
{
    hdr = (struct blk_hdr){ BLK_T_IN, 0, 4 };
    status_byte = STATUS_UNTOUCHED;
    memset(data, 0, sizeof data);
    vring_desc(&q, 0, &hdr, sizeof hdr, DESC_F_NEXT, 1);
    vring_desc(&q, 1, data, sizeof data, DESC_F_NEXT | DESC_F_WRITE, 2);
    vring_desc(&q, 2, &status_byte, 1, DESC_F_WRITE, 0);
    vring_kick(iobase, &q, 0);
}

/* The completion raises INTA#, which the PIC delivers on the line the
 * configuration header names. */
static void test_interrupt(void)
{
    uint8_t isr_in_handler;
    uint32_t taken = vio_interrupt(iobase, irq_line, start_read, &isr_in_handler);
    uint32_t eid, len;
    int done = vring_wait_used(iobase, &q, SPINS_NOTHING, &eid, &len);
    kprintf("interrupt: %u taken, isr in handler 0x%02x, isr after 0x%02x\n", taken,
            isr_in_handler, inb(iobase + VIO_ISR));
    int match = sector_matches(data, 4) && sector_matches(data + SECTOR, 5);
    kprintf("interrupt: request done %s, status %u, sectors 4-5 %s\n", done ? "yes" : "no",
            status_byte, match ? "match" : "WRONG");
    check(taken == 1 && done, "interrupt-driven read");
}

/* The Interrupt Disable bit of the command register keeps INTA# low while
 * the ISR bit stays set; the Interrupt Status bit still shows the ISR (PCI
 * 3.0, 6.2.2 and 6.2.3). The line is level-triggered (ELCR), so the PIC's
 * IRR follows it even while the line is masked. */
static void test_intx_disable(void)
{
    uint16_t irr_bit = (uint16_t)(1u << irq_line);
    pci_write16(pci_bdf, 0x04, PCI_CMD_IO | PCI_CMD_MASTER | PCI_CMD_INTX_DISABLE);
    int ok = read_ok(8);
    uint32_t pstatus = pci_read(pci_bdf, 0x04) >> 16;
    int irr_disabled = (pic_read_irr() & irr_bit) != 0;
    pci_write16(pci_bdf, 0x04, PCI_CMD_IO | PCI_CMD_MASTER);
    int irr_enabled = (pic_read_irr() & irr_bit) != 0;
    uint32_t pstatus_enabled = pci_read(pci_bdf, 0x04) >> 16;
    uint8_t isr = inb(iobase + VIO_ISR);
    int irr_after = (pic_read_irr() & irr_bit) != 0;
    uint32_t pstatus_after = pci_read(pci_bdf, 0x04) >> 16;
    kprintf("intx disabled: read %s, line %s, pci interrupt status %u\n", ok ? "ok" : "WRONG",
            irr_disabled ? "high" : "low", pstatus & PCI_STATUS_INTX ? 1 : 0);
    kprintf("intx enabled again: line %s, pci interrupt status %u\n", irr_enabled ? "high" : "low",
            pstatus_enabled & PCI_STATUS_INTX ? 1 : 0);
    kprintf("isr read 0x%02x: line %s, pci interrupt status %u\n", isr, irr_after ? "high" : "low",
            pstatus_after & PCI_STATUS_INTX ? 1 : 0);
}

/* The driver may move the I/O BAR: the registers answer at the new ports
 * only, and only while the command register's I/O Space bit is set (PCI 3.0,
 * 6.2.2); an unclaimed port reads all ones. The device keeps its state. */
static void test_bar_move(void)
{
    uint16_t old = iobase, moved = 0xD000;
    pci_write16(pci_bdf, 0x04, PCI_CMD_MASTER);
    uint8_t off_status = inb(old + VIO_STATUS);
    pci_write(pci_bdf, 0x10, moved | 1u);
    uint8_t off_new = inb(moved + VIO_STATUS);
    pci_write16(pci_bdf, 0x04, PCI_CMD_IO | PCI_CMD_MASTER);
    kprintf("bar: i/o off: status reads 0x%02x; moved with i/o off: 0x%02x\n", off_status, off_new);
    iobase = moved;
    kprintf("bar: moved to 0x%x: status 0x%02x, old ports read 0x%02x, bar reads 0x%08x\n", moved,
            inb(moved + VIO_STATUS), inb(old + VIO_STATUS), pci_read(pci_bdf, 0x10));
    int ok = read_ok(6);
    (void)inb(iobase + VIO_ISR);
    pci_write(pci_bdf, 0x10, old | 1u);
    iobase = old;
    kprintf("bar: read through the moved ports %s; moved back: status 0x%02x\n",
            ok ? "ok" : "WRONG", inb(iobase + VIO_STATUS));
    check(ok, "read through the moved bar");
}

/* VIRTQ_AVAIL_F_NO_INTERRUPT: the driver asks for no interrupt; the ISR stays clear. */
static void test_no_interrupt(void)
{
    q.avail[0] = AVAIL_F_NO_INTERRUPT;
    int ok = read_ok(10);
    kprintf("no_interrupt: read %s, isr 0x%02x\n", ok ? "ok" : "WRONG", inb(iobase + VIO_ISR));
    q.avail[0] = 0;
}

static void test_other_requests(void)
{
    uint32_t len;
    memset(id, 0xAA, sizeof id);
    int st = request(BLK_T_GET_ID, 0, id, sizeof id, 1, &len);
    kprintf("get-id (20 bytes): status %d, used len %u\n", st, len);

    st = request(BLK_T_FLUSH, 0, NULL, 0, 0, &len);
    kprintf("flush: status %d, used len %u\n", st, len);

    st = request(BLK_T_IN, DISK_SECTORS, data, SECTOR, 1, &len);
    kprintf("read at the capacity: status %d\n", st);
    st = request(BLK_T_IN, DISK_SECTORS - 1, data, 2 * SECTOR, 1, &len);
    kprintf("read across the end: status %d\n", st);
    st = request(BLK_T_IN, 0, data, 100, 1, &len);
    kprintf("read of 100 bytes: status %d\n", st);

    st = request(0x20, 0, NULL, 0, 0, &len);
    kprintf("type 0x20: status %d, used len %u\n", st, len);
    kprintf("after them: isr 0x%02x\n", inb(iobase + VIO_ISR));
}

/* ---- malformed chains: the device stops, completes nothing, writes
 * nothing, until the driver resets it ----
 * QEMU may take a notified chain later, from its main loop, though no
 * later than at the reset: the bad chain is left as it is until then. */

static void expect_stopped(const char *what)
{
    uint32_t eid, len;
    int done = vring_wait_used(iobase, &q, SPINS_NOTHING, &eid, &len);
    uint8_t isr = inb(iobase + VIO_ISR);
    kprintf("%s: %s, isr 0x%02x, status byte %s\n", what, done ? "COMPLETED" : "no completion",
            isr, status_byte == STATUS_UNTOUCHED ? "untouched" : "WRITTEN");
    check(!done && status_byte == STATUS_UNTOUCHED, what);
}

/* After a reset and a new set-up, reads work again. */
#define ISR_READS  50000u     /* with ISR_PAUSES pauses after each: 11 s under qemu, if it never comes */
#define ISR_PAUSES 1000u
static void expect_recovered(const char *what, uint32_t s)
{
    device_init(0);
    int ok = read_ok(s);
    /* Clear the read's interrupt for the next case. A device writes the used ring before it
     * sends the used buffer notification (virtio spec, "Used Buffer Notification"), so the
     * ISR bit may come a moment after read_ok saw the entry (qemu under load, where the next
     * case then read 0x01): wait for it, as reading it clears it. SPINS_DONE reads back to back
     * (0.4 s under qemu TCG on a 2-core Intel Xeon VM) were once not long enough (make test
     * there). With pauses between the reads the wait lasts longer, and qemu's main loop, which
     * raises the bit, may take its big lock between them, which each read of a device
     * register takes too (how qemu came so late is not known). */
    for (uint32_t i = 0; i < ISR_READS && !(inb(iobase + VIO_ISR) & 1); i++)
        for (uint32_t j = 0; j < ISR_PAUSES; j++)
            __asm__ volatile("pause");
    kprintf("%s: after a reset, read %s\n", what, ok ? "ok" : "WRONG");
    check(ok, what);
}

static void malformed_prepare(uint32_t type)
{
    hdr = (struct blk_hdr){ type, 0, 0 };
    status_byte = STATUS_UNTOUCHED;
    memset(data, 0x5A, sizeof data);
}

static void test_loop(void)
{
    malformed_prepare(BLK_T_OUT);
    vring_desc(&q, 0, &hdr, sizeof hdr, DESC_F_NEXT, 1);
    vring_desc(&q, 1, data, SECTOR, DESC_F_NEXT, 0);
    vring_kick(iobase, &q, 0);
    expect_stopped("loop 0->1->0");
    /* Stopped means stopped: a good request is not taken either. */
    submit(2, BLK_T_IN, 0, data, sizeof data, 1);
    expect_stopped("loop 0->1->0, then a good request");
    expect_recovered("loop 0->1->0", 12);
}

static void test_next_beyond(void)
{
    malformed_prepare(BLK_T_OUT);
    vring_desc(&q, 0, &hdr, sizeof hdr, DESC_F_NEXT, q.size);
    vring_kick(iobase, &q, 0);
    expect_stopped("next index = queue size");
    expect_recovered("next index = queue size", 14);
}

static void test_head_beyond(void)
{
    malformed_prepare(BLK_T_OUT);
    vring_desc(&q, 0, &hdr, sizeof hdr, DESC_F_NEXT, 1);
    vring_desc(&q, 1, &status_byte, 1, DESC_F_WRITE, 0);
    vring_kick(iobase, &q, q.size);
    expect_stopped("chain head = queue size");
    expect_recovered("chain head = queue size", 16);
}

/* A write whose data lies beyond RAM. 8 KiB: QEMU maps a buffer outside RAM
 * through one page-sized bounce buffer, so only a longer one fails there. */
static void test_outside_memory(void)
{
    malformed_prepare(BLK_T_OUT);
    vring_desc(&q, 0, &hdr, sizeof hdr, DESC_F_NEXT, 1);
    vring_desc(&q, 1, (const void *)OUTSIDE_RAM, 8192, DESC_F_NEXT, 2);
    vring_desc(&q, 2, &status_byte, 1, DESC_F_WRITE, 0);
    vring_kick(iobase, &q, 0);
    expect_stopped("write from beyond ram");
    expect_recovered("write from beyond ram", 18);
}

/* A writable byte between the header and the data: were the order not
 * checked, a good write of sector 0. */
static void test_readable_after_writable(void)
{
    malformed_prepare(BLK_T_OUT);
    vring_desc(&q, 0, &hdr, sizeof hdr, DESC_F_NEXT, 1);
    vring_desc(&q, 1, &id[0], 1, DESC_F_NEXT | DESC_F_WRITE, 2);
    vring_desc(&q, 2, data, SECTOR, DESC_F_NEXT, 3);
    vring_desc(&q, 3, &status_byte, 1, DESC_F_WRITE, 0);
    vring_kick(iobase, &q, 0);
    expect_stopped("readable after writable");
    expect_recovered("readable after writable", 20);
}

static void test_no_status(void)
{
    malformed_prepare(BLK_T_OUT);
    vring_desc(&q, 0, &hdr, sizeof hdr, DESC_F_NEXT, 1);
    vring_desc(&q, 1, data, SECTOR, 0, 0);
    vring_kick(iobase, &q, 0);
    expect_stopped("no status byte");
    expect_recovered("no status byte", 22);
}

static void test_short_header(void)
{
    malformed_prepare(BLK_T_OUT);
    vring_desc(&q, 0, &hdr, 8, DESC_F_NEXT, 1);
    vring_desc(&q, 1, &status_byte, 1, DESC_F_WRITE, 0);
    vring_kick(iobase, &q, 0);
    expect_stopped("8-byte header");
    expect_recovered("8-byte header", 24);
}

int guest_main(void)
{
    pic_init();
    if (!find_disk()) {
        kprintf("pci: no virtio-blk (1af4:1001) on bus 0\n");
        return 1;
    }
    test_config_header();
    device_init(1);
    test_config_space();
    test_read();
    test_interrupt();
    test_intx_disable();
    test_bar_move();
    test_no_interrupt();
    test_other_requests();

    test_loop();
    test_next_beyond();
    test_head_beyond();
    test_outside_memory();
    test_readable_after_writable();
    test_no_status();
    test_short_header();
    device_reset();
    return 0;
}

/* Unit test of virtio-blk on the legacy virtio-PCI transport: PCI header and BAR, requests, errors, readonly, snapshot, malformed chains, image locks. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "virtio/blk.h"
#include "virtio_driver.h"

/* ---- the machine: fake guest memory, an I/O bus, PCI, INTA# ---- */

#define MEM_BYTES   (1u << 20)
#define SLOT        4
#define PORT        0xC000
#define MOVED_PORT  0xD000
#define IRQ_NUM     11
#define SECTORS     64u
#define SECTOR      512u
#define IMG_BYTES   (SECTORS * SECTOR)

#define F_SEG_MAX  (1u << 2)
#define F_RO       (1u << 5)
#define F_BLK_SIZE (1u << 6)
#define F_FLUSH    (1u << 9)

#define T_IN     0
#define T_OUT    1
#define T_FLUSH  4
#define T_GET_ID 8

#define S_OK     0
#define S_IOERR  1
#define S_UNSUPP 2

/* Guest-physical layout: the queue at page 0x10 (256 entries: the used
 * ring at the next 4096-byte boundary after the available ring, 0x12000),
 * then the request's header, data and status byte. */
#define RING       0x10000u
#define AVAIL      Q_AVAIL(RING)
#define USED       Q_USED(RING)
#define HDR        0x20000u
#define DATA       0x21000u
#define STATUS     0x30000u
#define ITABLE     0x31000u
#define UNTOUCHED  0xEE

static struct pci_bus *pci;
static struct irq_probe irq;
static struct virtio_blk *blk;
static struct drv_queue q0 = { .index = 0, .ring = RING };
static char image_path[4096];
static uint8_t pattern[IMG_BYTES];

/* ---- the image file ---- */

static void make_image(void)
{
    const char *dir = getenv("TMPDIR");
    snprintf(image_path, sizeof image_path, "%s/ring3-vblk-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(image_path);
    CHECK(fd >= 0);
    for (uint32_t i = 0; i < IMG_BYTES; i++)
        pattern[i] = (uint8_t)(i / SECTOR * 3 + i % SECTOR);
    CHECK_EQ(write(fd, pattern, IMG_BYTES), IMG_BYTES);
    close(fd);
}

/* The file holds (want) byte for byte. */
static int file_is(const uint8_t *want)
{
    static uint8_t buf[IMG_BYTES + 1];
    int fd = open(image_path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
    if (fd >= 0)
        close(fd);
    return n == IMG_BYTES && memcmp(buf, want, IMG_BYTES) == 0;
}

static struct disk_image *open_image(bool readonly, bool snapshot)
{
    char err[256] = "";
    const struct disk_spec spec = { .path = image_path, .readonly = readonly, .snapshot = snapshot };
    struct disk_image *d = disk_image_open(&spec, err, sizeof err);
    if (d == NULL)
        fprintf(stderr, "disk_image_open: %s\n", err);
    return d;
}

/* A new machine around the image opened with (readonly) and (snapshot). */
static void machine_up(bool readonly, bool snapshot)
{
    memset(gm.phys, 0, gm.size);
    bus = io_bus_new();
    pci = pci_init(bus);
    irq_probe_init(&irq);
    struct disk_image *d = open_image(readonly, snapshot);
    CHECK(d != NULL);
    blk = virtio_blk_init(pci, bus, &gm, SLOT, PORT, &irq.line, IRQ_NUM, d, NULL, "vda");
    CHECK(blk != NULL);
    port = PORT;
}

static void machine_down(void)
{
    virtio_blk_free(blk);
    pci_free(pci);
    io_bus_free(bus);
}

/* ---- the driver side ---- */

/* Reset, then the legacy initialization (virtio 1.2, 3.1.2) with FLUSH accepted. */
static void driver_init(void)
{
    status_write(0);
    CHECK_EQ(status_read(), 0);
    status_write(1);
    status_write(3);
    io_out(bus, port + VIO_DRIVER_FEATURES, 4, F_FLUSH);
    queue_setup(&q0);
    status_write(7);
    CHECK_EQ(status_read(), 7);
}

static void put_hdr(uint32_t type, uint64_t sector)
{
    uint32_t reserved = 0;
    memcpy(at(HDR), &type, 4);
    memcpy(at(HDR + 4), &reserved, 4);
    memcpy(at(HDR + 8), &sector, 8);
}

/* The header, (len) data bytes at DATA (device-written when (in)), the
 * status byte: returns the status, or -1 when nothing completed; the used
 * length in (*used_len). */
static int request(uint32_t type, uint64_t sector, uint32_t len, bool in, uint32_t *used_len)
{
    put_hdr(type, sector);
    *at(STATUS) = UNTOUCHED;
    unsigned n = 0;
    put_desc(n, HDR, 16, D_NEXT, 1);
    n++;
    if (len) {
        put_desc(n, DATA, len, D_NEXT | (in ? D_WRITE : 0), (uint16_t)(n + 1));
        n++;
    }
    put_desc(n, STATUS, 1, D_WRITE, 0);
    kick(0);
    uint32_t id, ulen;
    if (!take_used(&id, &ulen))
        return -1;
    CHECK_EQ(id, 0);
    if (used_len)
        *used_len = ulen;
    return *at(STATUS);
}

/* Sectors (s)..(s + n - 1) read through the device equal (want). */
static int reads_as(uint32_t s, uint32_t n, const uint8_t *want)
{
    memset(at(DATA), 0, n * SECTOR);
    uint32_t len = 0;
    int st = request(T_IN, s, n * SECTOR, true, &len);
    (void)isr_read();
    return st == S_OK && len == n * SECTOR + 1 && memcmp(at(DATA), want, n * SECTOR) == 0;
}

/* ---- the tests ---- */

static void test_config_header(void)
{
    CHECK_EQ(cfg_read(0x00, 4), 0x10011AF4);
    CHECK_EQ(cfg_read(0x04, 4), 0x00000001);       /* I/O decoding on, as firmware leaves it */
    CHECK_EQ(cfg_read(0x08, 4), 0x01000000);       /* class 01 00 00, revision 0 (legacy) */
    CHECK_EQ(cfg_read(0x0C, 4) >> 16 & 0xFF, 0);   /* header type 0 */
    CHECK_EQ(cfg_read(0x2C, 4), 0x00021AF4);       /* subsystem: virtio type 2, block */
    CHECK_EQ(cfg_read(0x3D, 1), 1);                /* INTA# */
    CHECK_EQ(cfg_read(0x3C, 1), IRQ_NUM);
    CHECK_EQ(cfg_read(0x02, 2), 0x1001);
    CHECK_EQ(cfg_read(0x10, 4), PORT | 1);

    /* The BAR's size (PCI 3.0, 6.2.5.1): 20 bytes of registers and 60 of
     * configuration fit in 128. While it reads the mask it decodes nothing. */
    cfg_write(0x10, 4, 0xFFFFFFFF);
    CHECK_EQ(cfg_read(0x10, 4), 0xFFFFFF81);
    CHECK_EQ(io_in(bus, PORT + VIO_STATUS, 1), 0xFF);
    cfg_write(0x10, 4, PORT | 1);
    CHECK_EQ(io_in(bus, PORT + VIO_STATUS, 1), 0);
    CHECK(io_port_name(bus, PORT) != NULL && io_port_name(bus, PORT + 127) != NULL);
    CHECK(io_port_name(bus, PORT + 128) == NULL);

    /* Only I/O, bus master and Interrupt Disable are writable in the command register. */
    cfg_write(0x04, 2, 0xFFFF);
    CHECK_EQ(cfg_read(0x04, 2), 0x0405);
    cfg_write(0x04, 2, 0x0005);
    /* The interrupt line is a scratch register for the OS. */
    cfg_write(0x3C, 1, 0x05);
    CHECK_EQ(cfg_read(0x3C, 2), 0x0105);
    cfg_write(0x3C, 1, IRQ_NUM);
}

static void test_registers(void)
{
    CHECK_EQ(io_in(bus, PORT + VIO_DEVICE_FEATURES, 4), F_SEG_MAX | F_BLK_SIZE | F_FLUSH);
    CHECK_EQ(io_in(bus, PORT + VIO_CONFIG, 4), SECTORS);            /* capacity */
    CHECK_EQ(io_in(bus, PORT + VIO_CONFIG + 4, 4), 0);
    CHECK_EQ(io_in(bus, PORT + VIO_CONFIG + 12, 4), QSIZE - 2);     /* seg_max */
    CHECK_EQ(io_in(bus, PORT + VIO_CONFIG + 20, 4), SECTOR);        /* blk_size */
    CHECK_EQ(io_in(bus, PORT + VIO_CONFIG + 3, 1), 0);
    /* The driver cannot accept what was not offered, nor write the configuration. */
    io_out(bus, PORT + VIO_DRIVER_FEATURES, 4, 0xFFFFFFFF);
    CHECK_EQ(io_in(bus, PORT + VIO_DRIVER_FEATURES, 4), F_SEG_MAX | F_BLK_SIZE | F_FLUSH);
    io_out(bus, PORT + VIO_CONFIG, 4, 0);
    CHECK_EQ(io_in(bus, PORT + VIO_CONFIG, 4), SECTORS);
    /* One queue: queue 1 has no entries and ignores a PFN. */
    io_out(bus, PORT + VIO_QUEUE_SEL, 2, 1);
    CHECK_EQ(io_in(bus, PORT + VIO_QUEUE_SIZE, 2), 0);
    io_out(bus, PORT + VIO_QUEUE_PFN, 4, 0x40);
    CHECK_EQ(io_in(bus, PORT + VIO_QUEUE_PFN, 4), 0);
    io_out(bus, PORT + VIO_QUEUE_SEL, 2, 0);
    CHECK_EQ(io_in(bus, PORT + VIO_QUEUE_SIZE, 2), QSIZE);
    /* A reset forgets the accepted features. */
    status_write(0);
    CHECK_EQ(io_in(bus, PORT + VIO_DRIVER_FEATURES, 4), 0);
}

static void test_read(void)
{
    driver_init();
    uint32_t len = 0;
    memset(at(DATA), 0, 2 * SECTOR);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(request(T_IN, 1, 2 * SECTOR, true, &len), S_OK);
    CHECK_EQ(len, 2 * SECTOR + 1);
    CHECK(memcmp(at(DATA), pattern + SECTOR, 2 * SECTOR) == 0);
    /* 4.1.4.5: INTA# stays asserted until the driver reads the ISR. */
    CHECK_EQ(irq.level, 1);
    CHECK_EQ(irq.rises, 1);
    CHECK_EQ(cfg_read(0x06, 2) & 0x0008, 0x0008);  /* PCI status: Interrupt Status */
    CHECK_EQ(isr_read(), 1);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(isr_read(), 0);
    CHECK_EQ(cfg_read(0x06, 2) & 0x0008, 0);

    /* Data split over three buffers, one of them odd-sized. */
    put_hdr(T_IN, 5);
    *at(STATUS) = UNTOUCHED;
    put_desc(0, HDR, 16, D_NEXT, 7);
    put_desc(7, DATA, 100, D_NEXT | D_WRITE, 3);
    put_desc(3, DATA + 0x800, 412, D_NEXT | D_WRITE, 9);
    put_desc(9, DATA + 0x1000, 512, D_NEXT | D_WRITE, 2);
    put_desc(2, STATUS, 1, D_WRITE, 0);
    kick(0);
    uint32_t id;
    CHECK(take_used(&id, &len));
    CHECK_EQ(len, 1025);
    CHECK_EQ(*at(STATUS), S_OK);
    CHECK(memcmp(at(DATA), pattern + 5 * SECTOR, 100) == 0);
    CHECK(memcmp(at(DATA + 0x800), pattern + 5 * SECTOR + 100, 412) == 0);
    CHECK(memcmp(at(DATA + 0x1000), pattern + 6 * SECTOR, 512) == 0);
    /* The header split too, with the status byte at the end of a longer buffer. */
    put_hdr(T_IN, 9);
    put_desc(0, HDR, 6, D_NEXT, 1);
    put_desc(1, HDR + 6, 10, D_NEXT, 2);
    put_desc(2, DATA, 513, D_WRITE, 0);
    kick(0);
    CHECK(take_used(&id, &len));
    CHECK_EQ(*at(DATA + 512), S_OK);
    CHECK(memcmp(at(DATA), pattern + 9 * SECTOR, 512) == 0);

    /* Two chains, one notify: both done, one interrupt. */
    irq.rises = 0;
    (void)isr_read();
    put_hdr(T_IN, 0);
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, STATUS, 1, D_WRITE, 0);
    put_desc(4, HDR, 16, D_NEXT, 5);
    put_desc(5, STATUS + 1, 1, D_WRITE, 0);
    wr16(AVAIL + 4 + 2 * (q0.avail_idx % QSIZE), 0);
    wr16(AVAIL + 4 + 2 * ((q0.avail_idx + 1) % QSIZE), 4);
    q0.avail_idx += 2;
    wr16(AVAIL + 2, q0.avail_idx);
    io_out(bus, port + VIO_QUEUE_NOTIFY, 2, 0);
    CHECK(take_used(&id, &len) && id == 0);
    CHECK(take_used(&id, &len) && id == 4);
    CHECK(!take_used(&id, &len));
    CHECK_EQ(irq.rises, 1);
    (void)isr_read();

    /* VIRTQ_AVAIL_F_NO_INTERRUPT: done, but no interrupt. */
    wr16(AVAIL, 1);
    CHECK_EQ(request(T_IN, 0, SECTOR, true, &len), S_OK);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(isr_read(), 0);
    wr16(AVAIL, 0);

    /* GET_ID: "ring3-" and the name, NUL-padded to 20 bytes. */
    memset(at(DATA), 0xAA, 20);
    CHECK_EQ(request(T_GET_ID, 0, 20, true, &len), S_OK);
    CHECK_EQ(len, 21);
    CHECK(memcmp(at(DATA), "ring3-vda\0\0\0\0\0\0\0\0\0\0\0", 20) == 0);
    (void)isr_read();
}

static void test_write(void)
{
    static uint8_t want[IMG_BYTES];
    memcpy(want, pattern, IMG_BYTES);
    driver_init();
    uint32_t len = 0;
    for (uint32_t i = 0; i < 2 * SECTOR; i++)
        at(DATA)[i] = want[3 * SECTOR + i] = (uint8_t)(0xC3 ^ i);
    CHECK_EQ(request(T_OUT, 3, 2 * SECTOR, false, &len), S_OK);
    CHECK_EQ(len, 1);
    CHECK(reads_as(3, 2, want + 3 * SECTOR));
    CHECK(reads_as(2, 1, want + 2 * SECTOR));
    CHECK_EQ(request(T_FLUSH, 0, 0, false, &len), S_OK);
    CHECK_EQ(len, 1);
    CHECK(file_is(want));

    /* Out of range, or not whole sectors: IOERR, and nothing written. */
    memset(at(DATA), 0x77, 2 * SECTOR);
    CHECK_EQ(request(T_OUT, SECTORS, SECTOR, false, &len), S_IOERR);
    CHECK_EQ(request(T_OUT, SECTORS - 1, 2 * SECTOR, false, &len), S_IOERR);
    CHECK_EQ(request(T_OUT, ~0ull, SECTOR, false, &len), S_IOERR);
    CHECK_EQ(request(T_OUT, 0, 100, false, &len), S_IOERR);
    CHECK_EQ(request(T_IN, SECTORS, SECTOR, true, &len), S_IOERR);
    CHECK_EQ(request(T_IN, 0, 100, true, &len), S_IOERR);
    CHECK_EQ(request(T_IN, SECTORS - 1, SECTOR, true, &len), S_OK);
    CHECK_EQ(request(0x20, 0, 0, false, &len), S_UNSUPP);
    CHECK_EQ(len, 1);
    CHECK(file_is(want));
    (void)isr_read();
    memcpy(pattern, want, IMG_BYTES);   /* the image now holds this */
}

static void test_readonly(void)
{
    machine_up(true, false);
    CHECK_EQ(io_in(bus, PORT + VIO_DEVICE_FEATURES, 4), F_SEG_MAX | F_RO | F_BLK_SIZE | F_FLUSH);
    driver_init();
    uint32_t len;
    memset(at(DATA), 0x11, SECTOR);
    CHECK_EQ(request(T_OUT, 0, SECTOR, false, &len), S_IOERR);
    CHECK_EQ(request(T_FLUSH, 0, 0, false, &len), S_OK);
    CHECK(reads_as(0, 2, pattern));
    CHECK(file_is(pattern));
    machine_down();
}

static void test_snapshot(void)
{
    static uint8_t want[IMG_BYTES];
    memcpy(want, pattern, IMG_BYTES);
    machine_up(false, true);
    CHECK_EQ(io_in(bus, PORT + VIO_DEVICE_FEATURES, 4) & F_RO, 0);
    driver_init();
    uint32_t len;
    for (uint32_t i = 0; i < SECTOR; i++)
        at(DATA)[i] = want[7 * SECTOR + i] = (uint8_t)(0x3C + i);
    CHECK_EQ(request(T_OUT, 7, SECTOR, false, &len), S_OK);
    CHECK_EQ(request(T_FLUSH, 0, 0, false, &len), S_OK);
    /* Reads cross from the image to the overlay and back. */
    CHECK(reads_as(6, 3, want + 6 * SECTOR));
    CHECK(file_is(pattern));
    machine_down();
    /* The overlay went with the image. */
    machine_up(false, true);
    driver_init();
    CHECK(reads_as(6, 3, pattern + 6 * SECTOR));
    machine_down();
    CHECK(file_is(pattern));
}

/* A malformed chain: no used element, nothing written, no interrupt, the
 * device stops until reset; then it works again. (build) sets up the
 * descriptors and returns the head. */
static void expect_malformed(const char *what, uint16_t (*build)(void))
{
    driver_init();
    (void)isr_read();
    put_hdr(T_OUT, 0);
    memset(at(DATA), 0x99, 2 * SECTOR);
    *at(STATUS) = UNTOUCHED;
    kick(build());
    uint32_t id, len;
    int done = take_used(&id, &len);
    if (done || *at(STATUS) != UNTOUCHED || irq.level || !file_is(pattern))
        fprintf(stderr, "malformed chain (%s): the device took it\n", what);
    CHECK(!done);
    CHECK_EQ(*at(STATUS), UNTOUCHED);
    CHECK_EQ(irq.level, 0);
    CHECK(file_is(pattern));
    /* The status register keeps the driver's bits: the legacy interface has
     * no NEEDS_RESET (QEMU sets it only for VIRTIO_F_VERSION_1). */
    CHECK_EQ(status_read() & 0x0F, 7);
    /* Stopped: a good request is not taken either. */
    put_desc(20, HDR + 0x100, 16, D_NEXT, 21);
    put_desc(21, STATUS + 1, 1, D_WRITE, 0);
    memset(at(HDR + 0x100), 0, 16);
    *at(STATUS + 1) = UNTOUCHED;
    kick(20);
    CHECK(!take_used(&id, &len));
    CHECK_EQ(*at(STATUS + 1), UNTOUCHED);
    /* After a reset it works again. */
    driver_init();
    CHECK(reads_as(0, 2, pattern));
}

static uint16_t chain_loop(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, DATA, SECTOR, D_NEXT, 0);
    return 0;
}

static uint16_t chain_self_loop(void)
{
    put_desc(0, HDR, 16, D_NEXT, 0);
    return 0;
}

/* Next = the queue size, where the available ring follows the table: its
 * first 16 bytes are made to read as a good status descriptor (address
 * idx << 16 = 0x10000, length ring[2] = 1, flags ring[4] = WRITE), so that
 * only the bounds check can refuse it. */
static uint16_t chain_next_beyond(void)
{
    put_desc(0, HDR, 16, D_NEXT, QSIZE);
    wr16(AVAIL + 4 + 2 * 2, 1);
    wr16(AVAIL + 4 + 2 * 4, D_WRITE);
    return 0;
}

static uint16_t chain_head_beyond(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, STATUS, 1, D_WRITE, 0);
    return QSIZE;
}

static uint16_t chain_outside_memory(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, 0xF0000000u, SECTOR, D_NEXT, 2);
    put_desc(2, STATUS, 1, D_WRITE, 0);
    return 0;
}

/* Starts inside guest memory and runs past its end. */
static uint16_t chain_across_the_end(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, MEM_BYTES - SECTOR / 2, SECTOR, D_NEXT, 2);
    put_desc(2, STATUS, 1, D_WRITE, 0);
    return 0;
}

static uint16_t chain_huge_address(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, 0xFFFFFFFFFFFFFE00ull, SECTOR, D_NEXT, 2);
    put_desc(2, STATUS, 1, D_WRITE, 0);
    return 0;
}

static uint16_t chain_indirect(void)
{
    put_desc(0, ITABLE, 48, D_INDIRECT, 0);
    return 0;
}

/* Were the flag ignored, a good request with its status byte in the table. */
static uint16_t chain_indirect_last(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, ITABLE, 48, D_INDIRECT | D_WRITE, 0);
    return 0;
}

/* A writable byte between the header and the data: were the order not
 * checked, this would be a good write of sector 0. */
static uint16_t chain_readable_after_writable(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, STATUS + 2, 1, D_NEXT | D_WRITE, 2);
    put_desc(2, DATA, SECTOR, D_NEXT, 3);
    put_desc(3, STATUS, 1, D_WRITE, 0);
    return 0;
}

static uint16_t chain_no_status(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, DATA, SECTOR, 0, 0);
    return 0;
}

static uint16_t chain_empty_status(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, STATUS, 0, D_WRITE, 0);
    return 0;
}

static uint16_t chain_short_header(void)
{
    put_desc(0, HDR, 8, D_NEXT, 1);
    put_desc(1, STATUS, 1, D_WRITE, 0);
    return 0;
}

static uint16_t chain_no_header(void)
{
    put_desc(0, STATUS, 1, D_WRITE, 0);
    return 0;
}

/* The available index runs more than a ring ahead of the device. */
static uint16_t chain_avail_ahead(void)
{
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, STATUS, 1, D_WRITE, 0);
    q0.avail_idx = (uint16_t)(q0.avail_idx + QSIZE);
    return 0;
}

static void test_malformed(void)
{
    static const struct {
        const char *what;
        uint16_t (*build)(void);
    } cases[] = {
        { "loop", chain_loop },
        { "self loop", chain_self_loop },
        { "next beyond the table", chain_next_beyond },
        { "head beyond the table", chain_head_beyond },
        { "buffer outside memory", chain_outside_memory },
        { "buffer across the end of memory", chain_across_the_end },
        { "buffer at a 64-bit address", chain_huge_address },
        { "indirect", chain_indirect },
        { "indirect after the header", chain_indirect_last },
        { "readable after writable", chain_readable_after_writable },
        { "no status byte", chain_no_status },
        { "zero-sized status buffer", chain_empty_status },
        { "8-byte header", chain_short_header },
        { "no header", chain_no_header },
        { "available index a ring ahead", chain_avail_ahead },
    };
    /* The indirect table would be a good write, were indirect descriptors offered. */
    const struct { uint64_t a; uint32_t l; uint16_t f, n; } itable[3] = {
        { HDR, 16, D_NEXT, 1 }, { DATA, SECTOR, D_NEXT, 2 }, { STATUS, 1, D_WRITE, 0 },
    };
    memcpy(at(ITABLE), itable, sizeof itable);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_malformed(cases[i].what, cases[i].build);

    /* A queue placed where its rings do not fit in memory: refused, and the device stops. */
    status_write(0);
    status_write(3);
    io_out(bus, port + VIO_QUEUE_PFN, 4, MEM_BYTES >> 12);
    CHECK_EQ(io_in(bus, port + VIO_QUEUE_PFN, 4), 0);
    io_out(bus, port + VIO_QUEUE_PFN, 4, (MEM_BYTES >> 12) - 1);
    CHECK_EQ(io_in(bus, port + VIO_QUEUE_PFN, 4), 0);
    driver_init();
    CHECK(reads_as(0, 1, pattern));
}

/* The driver moves the BAR (PCI 3.0, 6.2.5.1); the I/O Space bit of the
 * command register gates decoding (6.2.2); Interrupt Disable masks INTA#
 * but not the Interrupt Status bit (6.2.3). */
static void test_pci_control(void)
{
    driver_init();
    cfg_write(0x10, 4, MOVED_PORT | 1);
    CHECK_EQ(cfg_read(0x10, 4), MOVED_PORT | 1);
    CHECK_EQ(io_in(bus, PORT + VIO_STATUS, 1), 0xFF);
    CHECK_EQ(io_in(bus, MOVED_PORT + VIO_STATUS, 1), 7);
    CHECK(io_port_name(bus, PORT) == NULL);
    port = MOVED_PORT;
    CHECK(reads_as(2, 1, pattern + 2 * SECTOR));
    /* A notify at the old port reaches nothing. */
    put_hdr(T_IN, 0);
    *at(STATUS) = UNTOUCHED;
    put_desc(0, HDR, 16, D_NEXT, 1);
    put_desc(1, STATUS, 1, D_WRITE, 0);
    wr16(AVAIL + 4 + 2 * (q0.avail_idx % QSIZE), 0);
    wr16(AVAIL + 2, ++q0.avail_idx);
    io_out(bus, PORT + VIO_QUEUE_NOTIFY, 2, 0);
    CHECK_EQ(*at(STATUS), UNTOUCHED);
    io_out(bus, port + VIO_QUEUE_NOTIFY, 2, 0);
    uint32_t id, len;
    CHECK(take_used(&id, &len));
    CHECK_EQ(*at(STATUS), S_OK);
    (void)isr_read();

    /* I/O Space off: nothing decodes, a notify is lost; on again: back. */
    cfg_write(0x04, 2, 0x0004);
    CHECK_EQ(io_in(bus, MOVED_PORT + VIO_STATUS, 1), 0xFF);
    CHECK_EQ(io_in(bus, MOVED_PORT + VIO_DEVICE_FEATURES, 4), 0xFFFFFFFF);
    *at(STATUS) = UNTOUCHED;
    wr16(AVAIL + 4 + 2 * (q0.avail_idx % QSIZE), 0);
    wr16(AVAIL + 2, ++q0.avail_idx);
    io_out(bus, MOVED_PORT + VIO_QUEUE_NOTIFY, 2, 0);
    CHECK_EQ(*at(STATUS), UNTOUCHED);
    cfg_write(0x04, 2, 0x0005);
    CHECK_EQ(io_in(bus, MOVED_PORT + VIO_STATUS, 1), 7);
    io_out(bus, port + VIO_QUEUE_NOTIFY, 2, 0);
    CHECK(take_used(&id, &len));
    CHECK_EQ(*at(STATUS), S_OK);
    (void)isr_read();

    /* Moved back, and onto nothing (BAR 0) while decoding stays on. */
    cfg_write(0x10, 4, 0);
    CHECK(io_port_name(bus, MOVED_PORT) == NULL);
    cfg_write(0x10, 4, PORT | 1);
    port = PORT;
    CHECK_EQ(io_in(bus, PORT + VIO_STATUS, 1), 7);

    /* Interrupt Disable. */
    irq.rises = 0;
    cfg_write(0x04, 2, 0x0405);
    CHECK_EQ(request(T_IN, 0, SECTOR, true, &len), S_OK);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(irq.rises, 0);
    CHECK_EQ(cfg_read(0x06, 2) & 0x0008, 0x0008);  /* the ISR bit is still set */
    cfg_write(0x04, 2, 0x0005);
    CHECK_EQ(irq.level, 1);
    cfg_write(0x04, 2, 0x0405);
    CHECK_EQ(irq.level, 0);
    cfg_write(0x04, 2, 0x0005);
    CHECK_EQ(isr_read(), 1);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(cfg_read(0x06, 2) & 0x0008, 0);
    /* A reset lowers a pending interrupt. */
    CHECK_EQ(request(T_IN, 0, SECTOR, true, &len), S_OK);
    CHECK_EQ(irq.level, 1);
    status_write(0);
    CHECK_EQ(irq.level, 0);
    CHECK_EQ(isr_read(), 0);
}

/* QEMU's image locks (block/file-posix.c), as block/image.c implements
 * them: a writer excludes every other user; readers (readonly=on,
 * snapshot=on) share the image with each other only. */
static void test_locks(void)
{
    struct disk_image *w = open_image(false, false);
    CHECK(w != NULL);
    fprintf(stderr, "(four lock refusals follow)\n");
    struct disk_image *d = open_image(false, false);
    CHECK(d == NULL);
    disk_image_close(d);
    d = open_image(true, false);
    CHECK(d == NULL);
    disk_image_close(d);
    d = open_image(false, true);
    CHECK(d == NULL);
    disk_image_close(d);
    disk_image_close(w);

    struct disk_image *r1 = open_image(true, false);
    struct disk_image *r2 = open_image(false, true);
    CHECK(r1 != NULL && r2 != NULL);
    d = open_image(false, false);
    CHECK(d == NULL);
    disk_image_close(d);
    disk_image_close(r1);
    disk_image_close(r2);

    w = open_image(false, false);
    CHECK(w != NULL);
    disk_image_close(w);

    /* Not whole sectors: refused with a message. */
    char err[256] = "";
    CHECK_EQ(truncate(image_path, IMG_BYTES - 1), 0);
    const struct disk_spec spec = { .path = image_path };
    CHECK(disk_image_open(&spec, err, sizeof err) == NULL);
    CHECK(strstr(err, "multiple of 512") != NULL);
    CHECK_EQ(truncate(image_path, IMG_BYTES), 0);
}

int main(void)
{
    gm = (struct guestmem){ .fd = -1, .phys = calloc(1, MEM_BYTES), .size = MEM_BYTES };
    slot = SLOT;
    port = PORT;
    vq = &q0;
    CHECK(gm.phys != NULL);
    make_image();

    machine_up(false, false);
    test_config_header();
    test_registers();
    test_read();
    test_write();
    test_malformed();
    test_pci_control();
    machine_down();

    test_readonly();
    test_snapshot();
    test_locks();

    unlink(image_path);
    free(gm.phys);
    return check_done();
}

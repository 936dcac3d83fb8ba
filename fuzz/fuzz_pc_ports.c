/* Fuzz target: the whole PC platform (machine/platform.c) driven through its ports, as a guest's
 * `in` and `out` drive it, with one virtio-blk disk and one virtio-net NIC on 1 MiB of RAM.
 *
 * The input is two bytes of set-up (how the disk is opened, what the NIC's peer does) and then a
 * script: port writes and reads (ports of the PC's devices, the virtio BARs wherever PCI writes
 * moved them, any port), writes of guest RAM (rings and descriptor chains for the queues), time
 * passing on a fake clock with platform_update(), the CPU's INTA cycle, platform_io_poll(), the
 * NIC's link, and bytes on COM1's serial line. Beyond "no crash" and no access outside guest RAM
 * (its guard pages fault), after every step: a read gives no more bits than its width and all
 * ones from unmapped ports (an idle ISA bus floats high); the CPU's INTR pin is high exactly while
 * the master 8259A has a request to pass on (8259A datasheet, "Interrupt Sequence"); the next
 * timer deadline is never in the past, and lies in the future once platform_update() has
 * delivered what was due (else the event loop would spin); isa-debug-exit reports what its
 * callback was told; port 0x80 holds the last byte written to it; a reset the i8042 asked for
 * stays asked. After the script: the I/O bus's port map matches its regions, and the disk
 * image keeps its size (and, opened read-only or with an overlay, its bytes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest.h"
#include "machine/platform.h"

#define MEM_BYTES   (1u << 20)
#define IMG_BYTES   (64u * DISK_SECTOR)
#define MAX_STEPS   4096

/* The NIC as platform.c places the first one (attach_nics): slot 8, BAR 0xC400, IRQ 15. */
#define NIC_SLOT    8
#define NIC_PORT    0xC400
#define NIC_IRQ     15
#define NIC_MTU     1500

static const uint16_t ports[] = {
    0x20, 0x21, 0xA0, 0xA1, 0x4D0, 0x4D1,                   /* 8259A pair, ELCR */
    0x40, 0x41, 0x42, 0x43, 0x61,                           /* 8254, port B */
    0x3F8, 0x3F9, 0x3FA, 0x3FB, 0x3FC, 0x3FD, 0x3FE, 0x3FF, /* COM1 */
    0x70, 0x71,                                             /* CMOS RTC */
    0xCF8, 0xCFC, 0xCFD, 0xCFE, 0xCFF,                      /* PCI configuration */
    0x80, 0x60, 0x64, 0xF4, 0xF5,                           /* port 80, i8042, debug-exit */
    0xC000, 0xC010, 0xC012, 0xC013, 0xC014,                 /* virtio-blk where firmware left it */
    0xC400, 0xC404, 0xC410, 0xC412, 0xC413, 0xC414,        /* virtio-net likewise */
    0xCF9, 0x2F8, 0x4D2, 0xF8,                              /* unmapped neighbours */
};

/* ---- the world around the platform: clock, INTR pin, console, debug-exit ---- */

static uint64_t now_ns;
static uint64_t fake_now(void *opaque) { (void)opaque; return now_ns; }
static const struct hw_clock fake_clock = { fake_now, NULL };

static struct irq_line intr;
static int intr_level;
static void intr_set(void *opaque, int irq_num, int level)
{
    (void)opaque, (void)irq_num;
    intr_level = level;
}

static void console_tx(void *opaque, uint8_t byte) { (void)opaque, (void)byte; }

static bool exit_told;
static bool reset_seen;     /* the i8042 pulsed the reset line: the CPU is reset, for good */
static int exit_status;
static void exit_notify(void *opaque, int status)
{
    (void)opaque;
    if (exit_told)
        abort();                /* "told once" (hw/debugexit.h) */
    exit_told = true;
    exit_status = status;
}

/* ---- the NIC's peer: sends each frame back, now or at the next poll ---- */

#define PEER_HELD 8

struct held {
    struct net_hdr h;
    struct iovec iov[VQ_MAX_SIZE];  /* guest RAM, left there (send_chain), or one malloc'd copy */
    unsigned niov;
    size_t len;
    uint32_t id;
    bool chain;
};

static struct peer {
    struct net_backend base;
    bool echo_now;                  /* answer inside send, as libslirp answers an ARP */
    bool blocked;                   /* the NIC had no room: wait for resume */
    unsigned n;
    struct held held[PEER_HELD];
} peer;

static void peer_drop(struct held *f)
{
    if (!f->chain)
        free(f->iov[0].iov_base);
}

static void peer_send(struct net_backend *b, const struct net_hdr *h, const uint8_t *frame,
                      size_t len)
{
    struct peer *p = (struct peer *)b;
    if (len > NET_MAX_FRAME)
        abort();
    if (p->echo_now) {
        p->base.nic.receive(p->base.nic.opaque, h, frame, len);
        return;
    }
    void *copy = p->n < PEER_HELD ? malloc(len ? len : 1) : NULL;
    if (copy == NULL)
        return;                     /* lost */
    memcpy(copy, frame, len);
    p->held[p->n++] = (struct held){ .h = *h, .iov = { { copy, len } }, .niov = 1, .len = len };
}

/* As the IKC switch: the frame stays in guest RAM until (nic.sent)(id). */
static bool peer_send_chain(struct net_backend *b, const struct net_hdr *h,
                            const struct iovec *iov, unsigned niov, size_t len, uint32_t id)
{
    struct peer *p = (struct peer *)b;
    if (p->n == PEER_HELD || niov > VQ_MAX_SIZE)
        return false;
    struct held *f = &p->held[p->n++];
    *f = (struct held){ .h = *h, .niov = niov, .len = len, .id = id, .chain = true };
    memcpy(f->iov, iov, niov * sizeof *iov);
    return true;
}

static void peer_fill(struct net_backend *b, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline)
{
    struct peer *p = (struct peer *)b;
    (void)pfd, (void)n, (void)max;
    if (p->n && !p->blocked)
        *deadline = 0;              /* ready now */
}

static void peer_dispatch(struct net_backend *b)
{
    struct peer *p = (struct peer *)b;
    const struct net_client *c = &p->base.nic;
    unsigned done = 0;
    while (done < p->n && !p->blocked) {
        struct held *f = &p->held[done];
        if (!c->receive_iov(c->opaque, &f->h, f->iov, f->niov, f->len)) {
            p->blocked = true;
            break;
        }
        if (f->chain)
            c->sent(c->opaque, f->id);
        peer_drop(f);
        done++;
    }
    memmove(p->held, p->held + done, (p->n - done) * sizeof p->held[0]);
    p->n -= done;
}

static void peer_resume(struct net_backend *b) { ((struct peer *)b)->blocked = false; }

static void peer_free(struct net_backend *b)
{
    struct peer *p = (struct peer *)b;
    for (unsigned i = 0; i < p->n; i++)
        peer_drop(&p->held[i]);
    p->n = 0;
}

static const struct net_backend_ops peer_copies = {
    .send = peer_send, .fill = peer_fill, .dispatch = peer_dispatch, .resume = peer_resume,
    .free = peer_free,
};
static const struct net_backend_ops peer_holds = {
    .send = peer_send, .send_chain = peer_send_chain, .fill = peer_fill,
    .dispatch = peer_dispatch, .resume = peer_resume, .free = peer_free,
};

/* ---- the disk image: 64 sectors in a memfd, made once ---- */

static int img_fd = -1;
static char img_path[32];
static uint8_t img_pattern[IMG_BYTES];

static void image_make(void)
{
    img_fd = memfd_create("fuzz-pc-ports-disk", 0);
    if (img_fd < 0)
        abort();
    for (unsigned i = 0; i < IMG_BYTES; i++)
        img_pattern[i] = (uint8_t)(i / DISK_SECTOR * 3 + i % DISK_SECTOR);
    snprintf(img_path, sizeof img_path, "/proc/self/fd/%d", img_fd);
}

/* Every input starts from the same bytes, so that a read is the same on every run. */
static void image_restore(void)
{
    if (pwrite(img_fd, img_pattern, IMG_BYTES, 0) != IMG_BYTES || ftruncate(img_fd, IMG_BYTES))
        abort();
}

static void image_check(bool unchanged)
{
    static uint8_t now[IMG_BYTES];
    struct stat st;
    if (fstat(img_fd, &st) || st.st_size != IMG_BYTES)
        abort();
    if (unchanged && (pread(img_fd, now, IMG_BYTES, 0) != IMG_BYTES ||
                      memcmp(now, img_pattern, IMG_BYTES)))
        abort();
}

/* ---- the platform ---- */

static struct platform p;
static struct guestmem gm;

static void machine_init(uint8_t disk_mode, uint8_t peer_mode)
{
    fuzz_guestmem(&gm, MEM_BYTES);
    if (img_fd < 0)
        image_make();
    image_restore();
    now_ns = 1000;
    irq_line_init(&intr, intr_set, NULL, 0);
    intr_level = 0;
    exit_told = false;
    reset_seen = false;
    char err[256];
    const struct disk_spec spec = { .path = img_path, .readonly = disk_mode == 1,
                                    .snapshot = disk_mode == 2 };
    struct platform_config cfg = {
        .mem_bytes = MEM_BYTES, .clock = &fake_clock, .wall_ns = 1700000000ll * 1000000000ll,
        .intr = &intr, .console_tx = console_tx, .exit_notify = exit_notify, .gm = &gm,
        .ndisks = 1,
    };
    cfg.disks[0] = disk_image_open(&spec, err, sizeof err);
    if (cfg.disks[0] == NULL || platform_init(&p, &cfg, err, sizeof err)) {
        fprintf(stderr, "fuzz_pc_ports: %s\n", err);
        abort();
    }
    /* The NIC as attach_nics() adds it, joined to the peer above instead of a host backend;
     * platform_destroy() frees both. */
    static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
    p.nic[0] = virtio_net_init(p.pci, p.io, &gm, NIC_SLOT, NIC_PORT, pic_irq(p.pic, NIC_IRQ),
                               NIC_IRQ, mac, NIC_MTU, "eth0");
    if (p.nic[0] == NULL)
        abort();
    io_out(p.io, PIC_ELCR_BASE + 1, 1, io_in(p.io, PIC_ELCR_BASE + 1, 1) | 1u << (NIC_IRQ - 8));
    peer = (struct peer){ .base = { .ops = peer_mode & 0x20 ? &peer_holds : &peer_copies,
                                    .nic = virtio_net_client(p.nic[0]),
                                    .offloads = peer_mode & 0x0F },
                          .echo_now = peer_mode & 0x10 };
    p.backend[0] = &peer.base;
    virtio_net_attach(p.nic[0], &peer.base);
}

/* ---- the script ---- */

/* A port: one of the table, one in a virtio BAR wherever it is decoded now, or any. */
static uint16_t pick_port(struct fuzz_input *in)
{
    uint8_t sel = fuzz_u8(in);
    if (sel < 0x80)
        return ports[sel % (sizeof ports / sizeof ports[0])];
    if (sel < 0xF0) {
        const struct io_region *bars[2];
        unsigned n = 0;
        for (unsigned i = 0; i < IO_MAX_REGIONS && n < 2; i++)
            if (p.io->region[i].handler && strcmp(p.io->region[i].name, "virtio-pci") == 0)
                bars[n++] = &p.io->region[i];
        uint8_t off = fuzz_u8(in);
        if (n == 0)
            return off;
        const struct io_region *r = bars[sel % n];
        return (uint16_t)(r->base + off % r->len);
    }
    return fuzz_u16(in);
}

static const unsigned widths[4] = { 1, 2, 4, 1 };

static void check_in(uint16_t port, unsigned len, uint32_t v)
{
    uint32_t mask = len == 4 ? 0xFFFFFFFFu : (1u << 8 * len) - 1;
    if (v & ~mask)
        abort();
    bool unmapped = true;
    for (unsigned i = 0; i < len; i++)
        unmapped &= io_port_name(p.io, (uint16_t)(port + i)) == NULL;
    if (unmapped && v != mask)
        abort();
}

/* What must hold between any two steps. */
static void check_step(bool updated)
{
    if (intr_level != pic_intr_pending(p.pic) || intr.level != intr_level)
        abort();
    uint64_t dl = platform_next_deadline(&p, now_ns);
    if (dl < now_ns || (updated && dl == now_ns))
        abort();
    if (reset_seen && !i8042_reset_requested(p.i8042))
        abort();
    reset_seen = i8042_reset_requested(p.i8042);
    int status = -1;
    if (debugexit_requested(p.debugexit, &status) != exit_told ||
        (exit_told && (status != exit_status || (status & 1) == 0 || status > 0xFF)))
        abort();
}

/* The port map and the region table agree: each live region owns exactly its ports, and no
 * other port is mapped (compared with the map the regions imply, in libc's loops). */
static void check_bus(void)
{
    static uint8_t want[0x10000];
    memset(want, 0, sizeof want);
    for (unsigned i = 0; i < IO_MAX_REGIONS; i++) {
        const struct io_region *r = &p.io->region[i];
        if (!r->handler)
            continue;
        if (r->len == 0 || r->base + r->len > 0x10000)
            abort();
        memset(want + r->base, (int)(i + 1), r->len);
    }
    if (memcmp(want, p.io->owner, sizeof want))
        abort();
}

static void step(struct fuzz_input *in)
{
    uint8_t op = fuzz_u8(in);
    unsigned arg = op >> 4;
    bool updated = false;
    switch (op & 0x0F) {
    case 0: case 1: case 2: {
        uint16_t port = pick_port(in);
        unsigned len = widths[arg & 3];
        uint32_t v = fuzz_u32(in);
        io_out(p.io, port, len, v);
        /* A POST card latches the last byte written to 0x80. */
        if (port <= PORT80_BASE && PORT80_BASE < port + len &&
            port80_last(p.port80) != (uint8_t)(v >> 8 * (PORT80_BASE - port)))
            abort();
        break;
    }
    case 3: case 4: case 5: {
        uint16_t port = pick_port(in);
        unsigned len = widths[arg & 3];
        check_in(port, len, io_in(p.io, port, len));
        break;
    }
    case 6: case 7: {
        /* Guest RAM, as the driver fills rings, descriptors and buffers. */
        uint32_t addr = fuzz_u32(in) % MEM_BYTES;
        size_t len = fuzz_u16(in) % 4097;
        if (len > MEM_BYTES - addr)
            len = MEM_BYTES - addr;
        if (len > in->left)
            len = in->left;
        fuzz_bytes(in, gm.phys + addr, len);
        break;
    }
    case 8: {
        /* PCI configuration mechanism #1: address, then data. */
        uint8_t dev = fuzz_u8(in), reg = fuzz_u8(in);
        io_out(p.io, PCI_CONFIG_ADDRESS, 4, 0x80000000u | (dev & 0x1Fu) << 11 | (reg & 0xFCu));
        unsigned len = widths[arg & 3];
        uint16_t data = (uint16_t)(PCI_CONFIG_DATA + (reg & (4 - len)));
        if (arg & 4)
            check_in(data, len, io_in(p.io, data, len));
        else
            io_out(p.io, data, len, fuzz_u32(in));
        break;
    }
    case 9:
        now_ns += (uint64_t)fuzz_u16(in) << 3 * (arg & 7);
        platform_update(&p, now_ns);
        updated = true;
        break;
    case 10: {
        /* The event loop sleeps until the next deadline (within ten seconds). */
        uint64_t dl = platform_next_deadline(&p, now_ns);
        if (dl != PLATFORM_NO_DEADLINE && dl - now_ns <= 10 * NS_PER_SEC)
            now_ns = dl;
        platform_update(&p, now_ns);
        updated = true;
        break;
    }
    case 11:
        /* The CPU takes the interrupt: only while INTR is high (see pic_acknowledge). */
        if (intr_level) {
            int vector = pic_acknowledge(p.pic);
            if (vector < 0 || vector > 0xFF)
                abort();
        }
        break;
    case 12:
        platform_io_poll(&p, hw_clock_now(&hw_clock_monotonic));
        break;
    case 13:
        peer.base.nic.link(peer.base.nic.opaque, arg & 1);
        break;
    case 14: {
        uint8_t bytes[16];
        size_t n = fuzz_bytes(in, bytes, arg + 1u);
        size_t room = uart_rx_room(p.com1);
        if (uart_receive(p.com1, bytes, n) > room)
            abort();
        break;
    }
    default:
        break;
    }
    check_step(updated);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in = { data, size };
    uint8_t disk_mode = fuzz_u8(&in) % 3;     /* writable, readonly=on, snapshot=on */
    machine_init(disk_mode, fuzz_u8(&in));
    check_step(false);
    for (unsigned i = 0; i < MAX_STEPS && in.left; i++)
        step(&in);
    check_bus();
    platform_destroy(&p);
    image_check(disk_mode != 0);
    return 0;
}

/* Fuzz target: virtio-net's transmit path (virtio/net.c), through the backend interface
 * (net/backend.c) and the monitor's own offloads (net/offload.c).
 *
 * The harness is the guest's driver: it negotiates features the input picks, places the transmit
 * queue, and makes chains of a virtio_net_hdr and a frame, both from the input, cut into up to
 * four descriptors scattered over guest RAM (fuzz_guestmem's, fenced by inaccessible pages).
 * Some chains are malformed on purpose: a buffer the device may write, one outside guest RAM,
 * one shorter than the header, a frame over 65550 bytes. The backend takes offloads the input
 * picks, and may take chains as pieces and hold them (as the IKC switch does).
 *
 * Beyond "no crash", each frame the backend gets is checked as it arrives against what
 * net/offload.h promises for its chain: the frame as the guest wrote it where the backend takes
 * its offloads; else the frame with the checksum NEEDS_CSUM asks for (RFC 1071, recomputed
 * here) or its TCP segments (each at most the headers and gso_size bytes of payload, IP lengths,
 * ids, sequence numbers and flags as Linux's tcp_gso_segment sets them, every checksum valid);
 * nothing for a header the frame cannot honour. Each returned chain is one the driver made
 * available, in order, with 0 bytes written (virtio 1.2, 2.7.8); the used index moves by exactly
 * the chains completed, none after a malformed one until a reset (QEMU's virtio_error); the
 * device writes none of the guest's transmit buffers. */
#include <stdlib.h>
#include <string.h>

#include "guest.h"
#include "hw/io.h"
#include "hw/pci.h"
#include "virtio/net.h"

#define MEM_BYTES   (1u << 20)
#define PORT        0xC400
#define SLOT        5
#define TX_RING     0x4000u         /* descriptors, available ring, used ring at +0x2000 */
#define TX_USED     (TX_RING + 0x2000u)
#define BUF_BASE    0x8000u
#define QSIZE       256u            /* the size the device offers (VQ_MAX_SIZE) */
#define MAX_CHAINS  24
#define MAX_DESC    4

/* Legacy registers (virtio 1.2, 4.1.4.8) and feature bits (5.1.3). */
#define R_DRIVER_FEATURES 0x04
#define R_QUEUE_PFN       0x08
#define R_QUEUE_SEL       0x0E
#define R_QUEUE_NOTIFY    0x10
#define R_STATUS          0x12
#define F_DRIVER    ((1u << 0) | (1u << 1) | (1u << 3) | (1u << 5) | (1u << 11) | (1u << 12) | \
                     (1u << 13) | (1u << 16))       /* CSUM ... STATUS, all but MRG_RXBUF */
#define F_MRG_RXBUF (1u << 15)
#define D_NEXT      1
#define D_WRITE     2

static struct guestmem gm;
static struct io_bus *bus;
static struct virtio_net *nic;
static struct net_client client;

/* ---- what the driver made available, and what it expects of each chain ---- */

enum kind { K_NOTHING, K_SAME, K_WHOLE, K_CSUM, K_TSO, K_PIECES };

struct layout {
    bool v6;
    size_t l3, l4, end;
};

struct expect {
    uint16_t head;
    bool malformed, hold;
    enum kind kind;
    const uint8_t *frame;           /* the guest's frame, as staged */
    size_t len;
    struct net_hdr h;               /* the header as the backend may see it */
    struct layout t;
    size_t frames, seen;            /* frames the backend is to get for it, and got */
};

static struct expect chain[MAX_CHAINS];
static unsigned nchains, kick_from, cursor;
static uint8_t staged[MEM_BYTES];           /* each chain's header and frame, contiguous */
struct piece {
    uint64_t gpa;
    size_t len;
    const uint8_t *src;
};
static struct piece piece[MAX_CHAINS * MAX_DESC];
static unsigned npieces;
static uint16_t expect_used[QSIZE];         /* the heads the used ring is to show, in order */
static uint16_t used_expected, used_seen, avail_idx, next_desc;
static bool broken;
static unsigned offloads;
static bool with_chains;
static uint32_t held[MAX_CHAINS];
static unsigned nheld;
static uint16_t epoch;                      /* counts resets: a held id from before is stale */

/* ---- the model: RFC 1071 over big-endian words, and a TCP frame's headers ---- */

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t be32(const uint8_t *p) { return (uint32_t)be16(p) << 16 | be16(p + 2); }

static uint64_t sum_be(const uint8_t *p, size_t len)
{
    uint64_t s = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        s += be16(p + i);
    if (len & 1)
        s += (uint64_t)p[len - 1] << 8;
    return s;
}

static uint16_t fold(uint64_t s)
{
    while (s >> 16)
        s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)s;
}

/* What net_hdr_within() documents: each offload asked for needs the peer's. */
static bool within(const struct net_hdr *h, unsigned o)
{
    unsigned gso = h->gso_type & ~NET_HDR_GSO_ECN;
    return (!(h->flags & NET_HDR_F_NEEDS_CSUM) || (o & NET_OFFLOAD_CSUM)) &&
           (!(h->gso_type & NET_HDR_GSO_ECN) || (o & NET_OFFLOAD_ECN)) &&
           (gso == NET_HDR_GSO_NONE || (gso == NET_HDR_GSO_TCPV4 && (o & NET_OFFLOAD_TSO4)) ||
            (gso == NET_HDR_GSO_TCPV6 && (o & NET_OFFLOAD_TSO6)));
}

/* Ethernet (up to two 802.1Q/802.1ad tags), IPv4 (not a fragment) or IPv6 (hop-by-hop and
 * destination options only), TCP; headers within NET_OFFLOAD_MAX_HEADERS. */
static bool parse_tcp(const uint8_t *f, size_t len, bool v6, struct layout *t)
{
    size_t off = 14;
    if (len < off)
        return false;
    uint16_t type = be16(f + 12);
    for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88A8); tags++, off += 4) {
        if (len < off + 4)
            return false;
        type = be16(f + off + 2);
    }
    t->v6 = v6;
    t->l3 = off;
    if (type != (v6 ? 0x86DD : 0x0800))
        return false;
    if (v6) {
        if (len < off + 40 || f[off] >> 4 != 6)
            return false;
        uint8_t next = f[off + 6];
        size_t p = off + 40;
        while (next == 0 || next == 60) {           /* RFC 8200, 4.3 and 4.6 */
            if (len < p + 8)
                return false;
            next = f[p];
            p += 8 + 8u * f[p + 1];
        }
        if (next != 6)
            return false;
        t->l4 = p;
    } else {
        size_t ihl = (size_t)(f[off] & 15) * 4;
        if (len < off + 20 || f[off] >> 4 != 4 || ihl < 20 || len < off + ihl ||
            f[off + 9] != 6 || (be16(f + off + 6) & 0x3FFF))
            return false;
        t->l4 = off + ihl;
    }
    if (len < t->l4 + 20)
        return false;
    size_t doff = (size_t)(f[t->l4 + 12] >> 4) * 4;
    t->end = t->l4 + doff;
    return doff >= 20 && len >= t->end && t->end <= NET_OFFLOAD_MAX_HEADERS;
}

/* What the backend is to get for a well-formed chain of (len) bytes of frame. */
static void predict(struct expect *e)
{
    unsigned gso = e->h.gso_type & ~NET_HDR_GSO_ECN;
    e->frames = 1;
    if (e->len == 0) {
        e->kind = K_NOTHING;                        /* nothing to send */
        e->frames = 0;
    } else if (with_chains && within(&e->h, offloads)) {
        e->kind = K_PIECES;
    } else if (within(&e->h, offloads)) {
        e->kind = K_SAME;
    } else if (gso == NET_HDR_GSO_NONE) {
        size_t at = (size_t)e->h.csum_start + e->h.csum_offset;
        e->kind = !(e->h.flags & NET_HDR_F_NEEDS_CSUM) ? K_WHOLE :
                  e->h.csum_start < e->len && at + 2 <= e->len ? K_CSUM : K_NOTHING;
    } else if ((gso == NET_HDR_GSO_TCPV4 || gso == NET_HDR_GSO_TCPV6) && e->h.gso_size &&
               parse_tcp(e->frame, e->len, gso == NET_HDR_GSO_TCPV6, &e->t)) {
        size_t payload = e->len - e->t.end;
        size_t first = payload < e->h.gso_size ? payload : e->h.gso_size;
        /* RFC 791: an IPv4 segment's length must fit Total Length's 16 bits: dropped */
        e->kind = !e->t.v6 && e->t.end - e->t.l3 + first > 0xFFFF ? K_NOTHING : K_TSO;
        e->frames = payload ? (payload + e->h.gso_size - 1) / e->h.gso_size : 1;
    } else {
        e->kind = K_NOTHING;                        /* dropped: the header asks the impossible */
    }
    if (e->kind == K_NOTHING)
        e->frames = 0;
}

/* ---- checking what the backend gets ---- */

static void check_same(const struct expect *e, const struct net_hdr *h, const uint8_t *f,
                       size_t len)
{
    if (len != e->len || memcmp(f, e->frame, len) != 0 || memcmp(h, &e->h, sizeof *h) != 0)
        abort();
}

static bool whole(const struct net_hdr *h)
{
    static const struct net_hdr zero;
    return memcmp(h, &zero, sizeof zero) == 0;
}

/* A frame net_offload_apply() had nothing to do to, but the header: none. */
static void check_whole(const struct expect *e, const struct net_hdr *h, const uint8_t *f,
                        size_t len)
{
    if (!whole(h) || len != e->len || memcmp(f, e->frame, len) != 0)
        abort();
}

/* NEEDS_CSUM: the sum from csum_start to the end, over what the field held (Linux leaves the
 * pseudo-header's sum there), stored at csum_start + csum_offset; 0 goes as 0xFFFF. */
static void check_csum(const struct expect *e, const struct net_hdr *h, const uint8_t *f,
                       size_t len)
{
    size_t at = (size_t)e->h.csum_start + e->h.csum_offset;
    uint16_t c = (uint16_t)~fold(sum_be(e->frame + e->h.csum_start, e->len - e->h.csum_start));
    if (c == 0)
        c = 0xFFFF;
    if (!whole(h) || len != e->len || memcmp(f, e->frame, at) != 0 || be16(f + at) != c ||
        memcmp(f + at + 2, e->frame + at + 2, len - at - 2) != 0)
        abort();
}

/* Segment (i) of a TCP frame cut at gso_size bytes of payload. */
static void check_segment(const struct expect *e, size_t i, const struct net_hdr *h,
                          const uint8_t *s, size_t len)
{
    const struct layout *t = &e->t;
    const uint8_t *o = e->frame;
    size_t mss = e->h.gso_size, payload = e->len - t->end, off = i * mss;
    size_t chunk = payload - off < mss ? payload - off : mss;
    bool last = i + 1 == e->frames;
    /* offload.h's bound: the headers (at most 256 bytes) and gso_size bytes of payload */
    if (!whole(h) || len > NET_OFFLOAD_MAX_HEADERS + mss || len != t->end + chunk ||
        memcmp(s, o, t->l3) != 0 || memcmp(s + t->end, o + t->end + off, chunk) != 0)
        abort();
    const uint8_t *ip = s + t->l3, *oip = o + t->l3;
    uint64_t pseudo;
    if (t->v6) {
        if (be16(ip + 4) != len - t->l3 - 40 || memcmp(ip, oip, 4) != 0 ||
            memcmp(ip + 6, oip + 6, t->l4 - t->l3 - 6) != 0)
            abort();
        pseudo = sum_be(ip + 8, 32);
    } else {
        size_t ihl = t->l4 - t->l3;
        /* RFC 791: total length, an id counting up, a valid header checksum */
        if (be16(ip + 2) != len - t->l3 || be16(ip + 4) != (uint16_t)(be16(oip + 4) + i) ||
            memcmp(ip, oip, 2) != 0 || memcmp(ip + 6, oip + 6, 4) != 0 ||
            memcmp(ip + 12, oip + 12, ihl - 12) != 0 || fold(sum_be(ip, ihl)) != 0xFFFF)
            abort();
        pseudo = sum_be(ip + 12, 8);
    }
    const uint8_t *tcp = s + t->l4, *otcp = o + t->l4;
    uint8_t flags = otcp[13];
    if (!last)
        flags &= (uint8_t)~0x09;                    /* FIN and PSH on the last only */
    if (i > 0)
        flags &= (uint8_t)~0x80;                    /* CWR on the first only */
    size_t tcp_len = len - t->l4;
    pseudo += (tcp_len >> 16) + (tcp_len & 0xFFFF) + 6;
    if (memcmp(tcp, otcp, 4) != 0 || be32(tcp + 4) != be32(otcp + 4) + (uint32_t)off ||
        memcmp(tcp + 8, otcp + 8, 5) != 0 || tcp[13] != flags ||
        memcmp(tcp + 14, otcp + 14, 2) != 0 ||
        memcmp(tcp + 18, otcp + 18, t->end - t->l4 - 18) != 0 ||
        fold(pseudo + sum_be(tcp, tcp_len)) != 0xFFFF)
        abort();
}

/* The chain the next frame belongs to: the first of this kick's not yet complete. */
static struct expect *next_expected(void)
{
    while (cursor < nchains && chain[cursor].seen == chain[cursor].frames)
        cursor++;
    if (cursor == nchains)
        abort();                                    /* a frame no chain accounts for */
    return &chain[cursor];
}

static bool in_guest_ram(const void *p, size_t len)
{
    const uint8_t *b = p;
    return b >= gm.phys && len <= gm.size && (size_t)(b - gm.phys) <= gm.size - len;
}

/* ---- the backend ---- */

static struct net_backend backend;

static void b_send(struct net_backend *b, const struct net_hdr *h, const uint8_t *frame,
                   size_t len)
{
    (void)b;
    struct expect *e = next_expected();
    if (len > NET_MAX_FRAME)
        abort();
    switch (e->kind) {
    case K_SAME: check_same(e, h, frame, len); break;
    case K_WHOLE: check_whole(e, h, frame, len); break;
    case K_CSUM: check_csum(e, h, frame, len); break;
    case K_TSO:  check_segment(e, e->seen, h, frame, len); break;
    default:     abort();
    }
    e->seen++;
}

static bool b_send_chain(struct net_backend *b, const struct net_hdr *h, const struct iovec *iov,
                         unsigned niov, size_t len, uint32_t id)
{
    (void)b;
    static uint8_t gathered[NET_MAX_FRAME];
    struct expect *e = next_expected();
    size_t got = 0;
    for (unsigned i = 0; i < niov; i++) {
        if (!in_guest_ram(iov[i].iov_base, iov[i].iov_len) || iov[i].iov_len > len - got)
            abort();
        memcpy(gathered + got, iov[i].iov_base, iov[i].iov_len);
        got += iov[i].iov_len;
    }
    if (e->kind != K_PIECES || got != len || (uint16_t)id != e->head || id >> 16 != epoch)
        abort();
    check_same(e, h, gathered, len);
    e->seen++;
    if (e->hold)
        held[nheld++] = id;
    return e->hold;
}

static void b_nothing(struct net_backend *b) { (void)b; }
static void b_fill(struct net_backend *b, struct pollfd *pfd, unsigned *n, unsigned max,
                   uint64_t *deadline)
{
    (void)b, (void)pfd, (void)n, (void)max, (void)deadline;
}

static const struct net_backend_ops copying = {
    .send = b_send, .fill = b_fill, .dispatch = b_nothing, .free = b_nothing,
};
static const struct net_backend_ops holding = {
    .send = b_send, .send_chain = b_send_chain, .fill = b_fill, .dispatch = b_nothing,
    .free = b_nothing,
};

/* ---- the driver ---- */

static uint32_t features;

static size_t hdr_bytes(void)
{
    return features & F_MRG_RXBUF ? 12 : 10;
}

/* Reset, negotiate, place the transmit queue, DRIVER_OK (virtio 1.2, 3.1.1). */
static void driver_init(void)
{
    io_out(bus, PORT + R_STATUS, 1, 0);
    io_out(bus, PORT + R_STATUS, 1, 1);
    io_out(bus, PORT + R_STATUS, 1, 3);
    io_out(bus, PORT + R_DRIVER_FEATURES, 4, features);
    memset(gm.phys + TX_RING, 0, 0x3000);
    io_out(bus, PORT + R_QUEUE_SEL, 2, 1);
    io_out(bus, PORT + R_QUEUE_PFN, 4, TX_RING >> 12);
    io_out(bus, PORT + R_STATUS, 1, 7);
    avail_idx = used_expected = used_seen = 0;
    next_desc = 0;
    kick_from = cursor = nchains;                   /* chains made but not notified are gone */
    broken = false;
    epoch++;                                        /* as the device's own count of resets */
}

static void put_desc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
    uint8_t d[16];
    memcpy(d, &addr, 8);
    memcpy(d + 8, &len, 4);
    memcpy(d + 12, &flags, 2);
    memcpy(d + 14, &next, 2);
    memcpy(gm.phys + TX_RING + 16 * i, d, 16);
}

/* Every returned chain since the last look is the next one expected, with 0 bytes written;
 * the index is exactly where the completions put it. */
static void check_used(void)
{
    uint16_t idx;
    memcpy(&idx, gm.phys + TX_USED + 2, 2);
    if (idx != used_expected)
        abort();
    for (; used_seen != idx; used_seen++) {
        uint32_t elem[2];
        memcpy(elem, gm.phys + TX_USED + 4 + 8 * (used_seen % QSIZE), 8);
        if (elem[0] != expect_used[used_seen % QSIZE] || elem[1] != 0)
            abort();
    }
}

static void returned(uint16_t head)
{
    expect_used[used_expected++ % QSIZE] = head;
}

/* Notify the transmit queue, then check what the backend got and what came back. */
static void kick(void)
{
    cursor = kick_from;
    io_out(bus, PORT + R_QUEUE_NOTIFY, 2, 1);
    for (unsigned i = kick_from; i < nchains; i++) {
        struct expect *e = &chain[i];
        if (broken || e->malformed) {
            broken = true;                          /* this chain and the later ones stay */
            e->frames = 0;
        }
        if (e->seen != e->frames)
            abort();
        if (!broken && !(e->kind == K_PIECES && e->hold))
            returned(e->head);
    }
    kick_from = nchains;
    check_used();
    for (unsigned i = 0; i < npieces; i++)          /* the device only reads them */
        if (memcmp(gm.phys + piece[i].gpa, piece[i].src, piece[i].len) != 0)
            abort();
}

/* The backend is done with the chains it held: each completes, unless the device broke. */
static void complete_held(bool reverse)
{
    for (unsigned k = 0; k < nheld; k++) {
        uint32_t id = held[reverse ? nheld - 1 - k : k];
        client.sent(client.opaque, id);
        if (!broken && id >> 16 == epoch)
            returned((uint16_t)id);
    }
    nheld = 0;
    check_used();
}

/* One chain from the input: a header and a frame, cut into descriptors over guest RAM. */
static bool make_chain(struct fuzz_input *in, uint64_t *buf_at, uint8_t ctl)
{
    struct expect *e = &chain[nchains];
    unsigned ndesc = 1 + (ctl & 3);
    if (nchains == MAX_CHAINS || next_desc + ndesc > QSIZE)
        return false;
    /* (head) bytes from the input, header included (fewer than the header: malformed), then
     * (fill) bytes of a pattern, for long frames from short inputs */
    size_t hl = hdr_bytes(), head = fuzz_u16(in) % 2048, fill = ctl & 4 ? fuzz_u16(in) : 0;
    uint8_t pattern = fuzz_u8(in);
    size_t total = head + fill;
    uint64_t gap_room = 64ull * MAX_DESC;
    if (*buf_at + total + gap_room > MEM_BYTES)
        return false;
    uint8_t *s = staged + (*buf_at - BUF_BASE);
    fuzz_bytes(in, s, head);
    for (size_t i = 0; i < fill; i++)
        s[head + i] = (uint8_t)(pattern + i * 7);
    *e = (struct expect){ .head = next_desc, .hold = ctl & 0x20 };
    /* cut points, then the pieces, each after a gap */
    size_t cut[MAX_DESC + 1] = { 0 };
    for (unsigned k = 1; k < ndesc; k++)
        cut[k] = fuzz_u16(in) % (total + 1);
    cut[ndesc] = total;
    for (unsigned k = 1; k < ndesc; k++)            /* in order */
        for (unsigned j = k; j > 1 && cut[j - 1] > cut[j]; j--) {
            size_t x = cut[j];
            cut[j] = cut[j - 1];
            cut[j - 1] = x;
        }
    unsigned bad = ctl & 0x08 ? fuzz_u8(in) % ndesc : MAX_DESC;     /* device-writable */
    unsigned outside = ctl & 0x10 ? fuzz_u8(in) % ndesc : MAX_DESC; /* beyond guest RAM */
    uint8_t *dst = gm.phys;
    for (unsigned k = 0; k < ndesc; k++) {
        size_t len = cut[k + 1] - cut[k];
        *buf_at += fuzz_u8(in) % 64;
        uint64_t gpa = *buf_at;
        memcpy(dst + gpa, s + cut[k], len);
        piece[npieces++] = (struct piece){ gpa, len, s + cut[k] };
        *buf_at += len;
        if (k == outside) {
            uint8_t o = fuzz_u8(in);
            gpa = o & 1 ? UINT64_MAX - o : MEM_BYTES - o / 2;
            len = len > o ? len : (size_t)o + 1;    /* over the end, or wrapping */
        }
        put_desc(next_desc + k, gpa, (uint32_t)len, (uint16_t)((k + 1 < ndesc ? D_NEXT : 0) |
                 (k == bad ? D_WRITE : 0)), (uint16_t)(next_desc + k + 1));
    }
    /* 2.7.4.2, 5.1.6.2, and the 65550-byte limit: the device stops at such a chain */
    e->malformed = bad < MAX_DESC || outside < MAX_DESC || total < hl ||
                   total - hl > NET_MAX_FRAME;
    if (!e->malformed) {
        e->frame = s + hl;
        e->len = total - hl;
        e->h = net_hdr_load(s);
        e->h.flags &= NET_HDR_F_NEEDS_CSUM;         /* 5.1.6.2.1: the device ignores the rest */
        predict(e);
    }
    next_desc = (uint16_t)(next_desc + ndesc);
    uint16_t slot = avail_idx % QSIZE;
    memcpy(gm.phys + TX_RING + 16 * QSIZE + 4 + 2 * slot, &e->head, 2);
    avail_idx++;
    memcpy(gm.phys + TX_RING + 16 * QSIZE + 2, &avail_idx, 2);
    nchains++;
    return true;
}

static void setup(void)
{
    static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
    static struct irq_line irq;
    bus = io_bus_new();
    struct pci_bus *pci = pci_init(bus);
    nic = virtio_net_init(pci, bus, &gm, SLOT, PORT, &irq, 11, mac, 1500, "eth0");
    if (nic == NULL)
        abort();
    client = virtio_net_client(nic);
    backend.nic = client;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in = { data, size };
    fuzz_guestmem(&gm, MEM_BYTES);
    if (nic == NULL)
        setup();
    uint8_t cfg = fuzz_u8(&in);
    offloads = cfg & 15;
    with_chains = cfg & 16;
    backend.ops = with_chains ? &holding : &copying;
    backend.offloads = offloads;
    virtio_net_attach(nic, &backend);
    features = fuzz_u32(&in) & (F_DRIVER | F_MRG_RXBUF);
    nchains = 0;
    driver_init();
    uint64_t buf_at = BUF_BASE;
    npieces = nchains = nheld = 0;
    /* Each control byte: a chain (its shape in the low bits), then maybe a kick, the backend
     * completing what it holds, or a reset. */
    while (in.left) {
        uint8_t ctl = fuzz_u8(&in);
        if (!make_chain(&in, &buf_at, ctl))
            break;
        if (ctl & 0x40 || !in.left)
            kick();
        if (ctl & 0x80) {
            uint8_t op = fuzz_u8(&in);
            if (op & 1)
                complete_held(op & 2);
            if (op & 4)
                driver_init();                      /* held chains are stale from here on */
        }
    }
    kick();
    complete_held(false);
    return 0;
}

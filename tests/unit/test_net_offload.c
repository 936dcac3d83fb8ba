/* Unit test of net/offload.c: checksum completion (NEEDS_CSUM) and TCP segmentation (GSO TCPV4,
 * TCPV6, ECN) of frames as Linux's virtio_net driver hands them over. Each segment's Ethernet, IP
 * and TCP headers are checked field by field against the frame it was cut from, and its
 * checksums against a computation of this file's own (RFC 1071 over big-endian words, summed a
 * word at a time, with the pseudo-headers written out); the payloads, put back together, must
 * give the original. Headers that ask what the frame cannot give emit nothing. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net/offload.h"

#define MAX_SEGMENTS 1024

/* ---- an independent Internet checksum ---- */

static uint32_t words(const uint8_t *p, size_t len)
{
    uint32_t s = 0;
    for (size_t i = 0; i < len; i += 2)
        s += (uint32_t)p[i] << 8 | (i + 1 < len ? p[i + 1] : 0);
    return s;
}

static uint16_t fold_ref(uint32_t s)
{
    while (s > 0xFFFF)
        s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)s;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) << 16 | rd16(p + 2); }
static void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void wr32(uint8_t *p, uint32_t v) { wr16(p, (uint16_t)(v >> 16)); wr16(p + 2, (uint16_t)v); }

/* The sum of an IPv4 or IPv6 pseudo-header (RFC 793, RFC 8200 8.1) for (proto) and (len). */
static uint32_t pseudo(const uint8_t *ip, bool v6, uint8_t proto, size_t len)
{
    uint8_t p[40] = { 0 };
    size_t n;
    if (v6) {
        memcpy(p, ip + 8, 32);
        wr32(p + 32, (uint32_t)len);
        p[39] = proto;
        n = 40;
    } else {
        memcpy(p, ip + 12, 8);
        p[9] = proto;
        wr16(p + 10, (uint16_t)len);
        n = 12;
    }
    return words(p, n);
}

/* A transport segment at (l4) of (len) bytes checks out: its sum with the pseudo-header is 0xFFFF. */
static bool transport_ok(const uint8_t *ip, bool v6, uint8_t proto, const uint8_t *l4, size_t len)
{
    return fold_ref(pseudo(ip, v6, proto, len) + words(l4, len)) == 0xFFFF;
}

/* ---- frames as the guest's driver builds them ---- */

struct shape {
    bool v6;
    unsigned vlan_tags;             /* 0, 1 or 2 */
    unsigned ip_options;            /* IPv4: 4-byte words of options; IPv6: 8-byte option headers */
    unsigned tcp_options;           /* 4-byte words */
    size_t payload;
    uint8_t flags;                  /* TCP flags of the whole segment */
};

#define TCP_FIN 0x01
#define TCP_PSH 0x08
#define TCP_ACK 0x10
#define TCP_CWR 0x80

struct frame {
    uint8_t b[70000];
    size_t len, l3, l4, end;
};

static const uint32_t SEQ = 0xFFFFF000u;    /* wraps inside the frame */
static const uint16_t IP_ID = 0xFFFE;       /* wraps too */

static void build(struct frame *f, const struct shape *s)
{
    memset(f, 0, sizeof *f);
    uint8_t *b = f->b;
    memcpy(b, "\x52\x54\x00\x12\x34\x57\x52\x54\x00\x12\x34\x56", 12);
    size_t off = 12;
    for (unsigned i = 0; i < s->vlan_tags; i++, off += 4) {
        wr16(b + off, i == 0 && s->vlan_tags == 2 ? 0x88A8 : 0x8100);
        wr16(b + off + 2, (uint16_t)(100 + i));
    }
    wr16(b + off, s->v6 ? 0x86DD : 0x0800);
    f->l3 = off + 2;
    uint8_t *ip = b + f->l3;
    if (s->v6) {
        ip[0] = 0x60;
        ip[6] = s->ip_options ? 0 : 6;                  /* hop-by-hop options, or TCP */
        ip[7] = 64;
        for (int i = 0; i < 32; i++)
            ip[8 + i] = (uint8_t)(0x20 + i);
        f->l4 = f->l3 + 40;
        for (unsigned i = 0; i < s->ip_options; i++) {  /* hop-by-hop, then destination options */
            b[f->l4] = i + 1 == s->ip_options ? 6 : 60; /* what comes next */
            b[f->l4 + 1] = 0;                           /* 8 bytes: a PadN option */
            b[f->l4 + 2] = 1;
            b[f->l4 + 3] = 4;
            f->l4 += 8;
        }
    } else {
        ip[0] = (uint8_t)(0x45 + s->ip_options);
        wr16(ip + 4, IP_ID);
        wr16(ip + 6, 0x4000);                           /* DF */
        ip[8] = 64;
        ip[9] = 6;
        memcpy(ip + 12, "\x0a\x00\x02\x0f\x0a\x00\x02\x02", 8);
        for (unsigned i = 0; i < 4 * s->ip_options; i++)
            ip[20 + i] = 1;                             /* NOPs */
        f->l4 = f->l3 + 20 + 4 * s->ip_options;
    }
    uint8_t *tcp = b + f->l4;
    wr16(tcp, 40000);
    wr16(tcp + 2, 5201);
    wr32(tcp + 4, SEQ);
    wr32(tcp + 8, 0x12345678);
    tcp[12] = (uint8_t)((5 + s->tcp_options) << 4);
    tcp[13] = s->flags;
    wr16(tcp + 14, 0xFAF0);
    wr16(tcp + 16, 0xBEEF);                             /* whatever the driver left */
    for (unsigned i = 0; i < 4 * s->tcp_options; i++)
        tcp[20 + i] = (uint8_t)(i % 4 == 0 ? 8 : 0x40 + i);
    f->end = f->l4 + 20 + 4 * s->tcp_options;
    for (size_t i = 0; i < s->payload; i++)
        b[f->end + i] = (uint8_t)(i * 7 + i / 251);
    f->len = f->end + s->payload;
    if (s->v6)
        wr16(ip + 4, (uint16_t)(f->len - f->l3 - 40));
    else
        wr16(ip + 2, (uint16_t)(f->len - f->l3));
}

/* ---- what net_offload_apply emits ---- */

static struct {
    unsigned n;
    size_t len[MAX_SEGMENTS];
    uint8_t *seg[MAX_SEGMENTS];
} out;

static void collect(void *opaque, const uint8_t *frame, size_t len)
{
    (void)opaque;
    CHECK(out.n < MAX_SEGMENTS);
    if (out.n >= MAX_SEGMENTS)
        return;
    out.seg[out.n] = malloc(len);
    memcpy(out.seg[out.n], frame, len);
    out.len[out.n++] = len;
}

static void out_clear(void)
{
    for (unsigned i = 0; i < out.n; i++)
        free(out.seg[i]);
    out.n = 0;
}

/* ---- segmentation ---- */

static void check_segments(const struct frame *orig, const struct shape *s, uint16_t mss)
{
    size_t hdr = orig->end;
    unsigned want = s->payload == 0 ? 1 : (unsigned)((s->payload + mss - 1) / mss);
    CHECK_EQ(out.n, want);
    size_t at = 0;
    for (unsigned i = 0; i < out.n; i++) {
        const uint8_t *g = out.seg[i], *ip = g + orig->l3, *tcp = g + orig->l4;
        const uint8_t *oip = orig->b + orig->l3, *otcp = orig->b + orig->l4;
        bool last = i + 1 == out.n;
        size_t chunk = out.len[i] - hdr;
        CHECK_EQ(chunk, last ? s->payload - at : mss);
        CHECK(memcmp(g, orig->b, orig->l3) == 0);                       /* Ethernet, tags */
        if (s->v6) {
            CHECK(memcmp(ip, oip, 4) == 0 && memcmp(ip + 6, oip + 6, 34) == 0);
            CHECK_EQ(rd16(ip + 4), out.len[i] - orig->l3 - 40);
            CHECK(memcmp(ip + 40, oip + 40, orig->l4 - orig->l3 - 40) == 0);
        } else {
            size_t ihl = (size_t)(ip[0] & 0xF) * 4;
            CHECK_EQ(rd16(ip + 2), out.len[i] - orig->l3);
            CHECK_EQ(rd16(ip + 4), (uint16_t)(IP_ID + i));
            CHECK(memcmp(ip + 6, oip + 6, 4) == 0);                     /* DF, TTL, protocol */
            CHECK(memcmp(ip + 12, oip + 12, ihl - 12) == 0);            /* addresses, options */
            CHECK_EQ(fold_ref(words(ip, ihl)), 0xFFFF);
        }
        CHECK(memcmp(tcp, otcp, 4) == 0);                               /* ports */
        CHECK_EQ(rd32(tcp + 4), (uint32_t)(SEQ + at));
        CHECK(memcmp(tcp + 8, otcp + 8, 5) == 0);                       /* ack, data offset */
        uint8_t flags = otcp[13];
        if (!last)
            flags &= (uint8_t)~(TCP_FIN | TCP_PSH);
        if (i > 0)
            flags &= (uint8_t)~TCP_CWR;
        CHECK_EQ(tcp[13], flags);
        CHECK(memcmp(tcp + 14, otcp + 14, 2) == 0);                     /* window */
        CHECK(memcmp(tcp + 18, otcp + 18, hdr - orig->l4 - 18) == 0);   /* urgent, options */
        CHECK(transport_ok(ip, s->v6, 6, tcp, out.len[i] - orig->l4));
        CHECK(memcmp(g + hdr, orig->b + orig->end + at, chunk) == 0);
        at += chunk;
    }
    CHECK_EQ(at, s->payload);
}

static void segment(const struct shape *s, uint16_t mss)
{
    static struct frame orig, work;
    build(&orig, s);
    work = orig;
    struct net_hdr h = { NET_HDR_F_NEEDS_CSUM,
                         (uint8_t)((s->v6 ? NET_HDR_GSO_TCPV6 : NET_HDR_GSO_TCPV4) |
                                   (s->flags & TCP_CWR ? NET_HDR_GSO_ECN : 0)),
                         0 /* hdr_len: a hint the device may not rely on */, mss,
                         (uint16_t)orig.l4, 16 };
    const char *why = NULL;
    int n = net_offload_apply(&h, work.b, work.len, collect, NULL, &why);
    CHECK_EQ(n, (int)out.n);
    CHECK(why == NULL);
    check_segments(&orig, s, mss);
    out_clear();
}

static void test_segmentation(void)
{
    uint8_t all = TCP_ACK | TCP_PSH | TCP_FIN | TCP_CWR;
    segment(&(struct shape){ .payload = 65000, .tcp_options = 3, .flags = TCP_ACK | TCP_PSH }, 1448);
    segment(&(struct shape){ .payload = 4 * 1448, .flags = all }, 1448);        /* a whole multiple */
    segment(&(struct shape){ .payload = 1000, .flags = all }, 1448);            /* one segment */
    segment(&(struct shape){ .payload = 0, .flags = TCP_ACK | TCP_FIN }, 1448);
    segment(&(struct shape){ .payload = 3001, .ip_options = 2, .flags = all }, 536);
    segment(&(struct shape){ .payload = 9000, .vlan_tags = 2, .flags = all }, 1448);
    segment(&(struct shape){ .payload = 5000, .flags = all }, 7);               /* mss below the headers */
    segment(&(struct shape){ .v6 = true, .payload = 64000, .tcp_options = 3, .flags = all }, 1428);
    segment(&(struct shape){ .v6 = true, .ip_options = 2, .vlan_tags = 1, .payload = 2999,
                             .flags = TCP_ACK }, 1000);
}

/* ---- NEEDS_CSUM alone ---- */

/* A UDP datagram over IPv4 with its checksum left partial as Linux leaves it: the folded sum of
 * the pseudo-header in the field (udp4_hwcsum: ~csum_tcpudp_magic(..., 0)). */
static size_t udp_frame(uint8_t *b, size_t payload)
{
    memset(b, 0, 42 + payload);
    wr16(b + 12, 0x0800);
    uint8_t *ip = b + 14, *udp = b + 34;
    ip[0] = 0x45;
    wr16(ip + 2, (uint16_t)(28 + payload));
    ip[8] = 64;
    ip[9] = 17;
    memcpy(ip + 12, "\x0a\x00\x02\x0f\x0a\x00\x02\x03", 8);
    wr16(udp, 5353);
    wr16(udp + 2, 53);
    wr16(udp + 4, (uint16_t)(8 + payload));
    for (size_t i = 0; i < payload; i++)
        udp[8 + i] = (uint8_t)(i * 13 + 5);
    wr16(udp + 6, fold_ref(pseudo(ip, false, 17, 8 + payload)));
    return 42 + payload;
}

static void test_checksum_only(void)
{
    static uint8_t b[2000];
    const struct net_hdr h = { NET_HDR_F_NEEDS_CSUM, NET_HDR_GSO_NONE, 0, 0, 34, 6 };
    const char *why = NULL;
    for (size_t payload = 0; payload < 40; payload += 13) {     /* even and odd lengths */
        size_t len = udp_frame(b, payload);
        CHECK_EQ(net_offload_apply(&h, b, len, collect, NULL, &why), 1);
        CHECK_EQ(out.n, 1);
        CHECK_EQ(out.len[0], len);
        CHECK(transport_ok(out.seg[0] + 14, false, 17, out.seg[0] + 34, len - 34));
        CHECK(memcmp(out.seg[0], b, 40) == 0 && memcmp(out.seg[0] + 42, b + 42, payload) == 0);
        out_clear();
    }
    /* a sum of 0xFFFF complements to 0, which UDP reserves for "no checksum": stored as 0xFFFF
     * (RFC 768; Linux's skb_checksum_help does the same) */
    size_t len = udp_frame(b, 20);
    uint16_t c = (uint16_t)~fold_ref(words(b + 34, len - 34));  /* what the device would store */
    uint16_t w = rd16(b + 42);
    wr16(b + 42, fold_ref((uint32_t)w + c));        /* adding the checksum makes the sum 0xFFFF */
    CHECK_EQ(net_offload_apply(&h, b, len, collect, NULL, &why), 1);
    CHECK_EQ(rd16(out.seg[0] + 40), 0xFFFF);
    CHECK(transport_ok(out.seg[0] + 14, false, 17, out.seg[0] + 34, len - 34));
    out_clear();
    /* without NEEDS_CSUM the frame goes as it is */
    len = udp_frame(b, 10);
    const struct net_hdr none = { 0 };
    CHECK_EQ(net_offload_apply(&none, b, len, collect, NULL, &why), 1);
    CHECK(out.n == 1 && memcmp(out.seg[0], b, len) == 0);
    out_clear();
    /* the library's own checksum agrees with the reference */
    uint16_t mine = net_checksum(b + 14, 20);
    uint8_t bytes[2];
    memcpy(bytes, &mine, 2);
    CHECK_EQ(rd16(bytes), (uint16_t)~fold_ref(words(b + 14, 20)));
}

/* ---- what cannot be done ---- */

static void refused(const struct net_hdr *h, const uint8_t *frame, size_t len, const char *what)
{
    static uint8_t work[70000];
    memcpy(work, frame, len);
    const char *why = NULL;
    int n = net_offload_apply(h, work, len, collect, NULL, &why);
    CHECK_EQ(n, -1);
    CHECK_EQ(out.n, 0);
    CHECK(why != NULL && strstr(why, what) != NULL);
    if (why == NULL || strstr(why, what) == NULL)
        fprintf(stderr, "  wanted '%s', got '%s'\n", what, why ? why : "(null)");
    out_clear();
}

static void test_refused(void)
{
    static struct frame f;
    static uint8_t u[100];
    size_t ulen = udp_frame(u, 10);
    refused(&(struct net_hdr){ NET_HDR_F_NEEDS_CSUM, 0, 0, 0, (uint16_t)ulen, 0 }, u, ulen, "beyond");
    refused(&(struct net_hdr){ NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 34, (uint16_t)(ulen - 35) }, u, ulen,
            "beyond");
    refused(&(struct net_hdr){ NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 60000, 6 }, u, ulen, "beyond");

    build(&f, &(struct shape){ .payload = 3000, .flags = TCP_ACK });
    struct net_hdr tso = { NET_HDR_F_NEEDS_CSUM, NET_HDR_GSO_TCPV4, 0, 1448, (uint16_t)f.l4, 16 };
    refused(&(struct net_hdr){ .gso_type = NET_HDR_GSO_UDP, .gso_size = 1448 }, f.b, f.len,
            "other than TCP");
    refused(&(struct net_hdr){ .gso_type = 2, .gso_size = 1448 }, f.b, f.len, "other than TCP");
    refused(&(struct net_hdr){ .gso_type = NET_HDR_GSO_TCPV4 }, f.b, f.len, "gso_size of 0");
    refused(&(struct net_hdr){ .gso_type = NET_HDR_GSO_TCPV6, .gso_size = 1448 }, f.b, f.len,
            "not IPv6");
    refused(&tso, f.b, 13, "not IPv4");                                 /* no EtherType */
    refused(&tso, f.b, f.l3 + 19, "malformed IPv4");
    refused(&tso, f.b, f.l4 + 19, "truncated TCP");

    f.b[f.l3] = 0x44;                                                   /* IHL 4 */
    refused(&tso, f.b, f.len, "malformed IPv4");
    f.b[f.l3] = 0x45;
    f.b[f.l3 + 9] = 17;
    refused(&tso, f.b, f.len, "does not carry TCP");
    f.b[f.l3 + 9] = 6;
    wr16(f.b + f.l3 + 6, 0x2000);                                       /* more fragments */
    refused(&tso, f.b, f.len, "fragment");
    wr16(f.b + f.l3 + 6, 0x4000);
    f.b[f.l4 + 12] = 0x40;                                              /* data offset 4 */
    refused(&tso, f.b, f.len, "truncated TCP");
    f.b[f.l4 + 12] = 0xF0;                                              /* 60, beyond a short frame */
    refused(&tso, f.b, f.l4 + 40, "truncated TCP");
    /* headers over 256 bytes: 60 of IP, 60 of TCP and 14 of Ethernet are 134, so 2 tags and
     * 15 options words are not enough; an IPv6 option header of 2 KiB is */
    build(&f, &(struct shape){ .v6 = true, .ip_options = 1, .payload = 3000, .flags = TCP_ACK });
    struct net_hdr tso6 = { NET_HDR_F_NEEDS_CSUM, NET_HDR_GSO_TCPV6, 0, 1448, 0, 16 };
    f.b[f.l3 + 40 + 1] = 255;                                          /* 2048 bytes long */
    f.b[f.l3 + 40 + 2048 + 12] = 0x50;                                  /* a TCP header after it */
    refused(&tso6, f.b, f.len, "over 256 bytes");
    f.b[f.l3 + 40 + 1] = 0;
    f.b[f.l3 + 40] = 17;                                                /* then UDP */
    refused(&tso6, f.b, f.len, "does not carry TCP");
    f.b[f.l3 + 40] = 43;                                                /* then a routing header */
    refused(&tso6, f.b, f.len, "does not carry TCP");
    f.b[f.l3] = 0x40;
    refused(&tso6, f.b, f.len, "malformed IPv6");
}

/* ---- the header itself ---- */

static void test_header(void)
{
    const uint8_t wire[10] = { 1, 0x81, 0x42, 0, 0xa8, 5, 34, 0, 16, 0 };
    struct net_hdr h = net_hdr_load(wire);
    CHECK(h.flags == 1 && h.gso_type == 0x81 && h.hdr_len == 0x42 && h.gso_size == 1448 &&
          h.csum_start == 34 && h.csum_offset == 16);
    uint8_t back[10];
    net_hdr_store(&h, back);
    CHECK(memcmp(back, wire, 10) == 0);

    const unsigned all = NET_OFFLOAD_CSUM | NET_OFFLOAD_TSO4 | NET_OFFLOAD_TSO6 | NET_OFFLOAD_ECN;
    CHECK(net_hdr_within(&(struct net_hdr){ 0 }, 0));
    CHECK(net_hdr_within(&(struct net_hdr){ .flags = NET_HDR_F_DATA_VALID }, 0));
    CHECK(!net_hdr_within(&(struct net_hdr){ .flags = NET_HDR_F_NEEDS_CSUM }, 0));
    CHECK(net_hdr_within(&(struct net_hdr){ .flags = NET_HDR_F_NEEDS_CSUM }, NET_OFFLOAD_CSUM));
    CHECK(!net_hdr_within(&(struct net_hdr){ .gso_type = NET_HDR_GSO_TCPV4 }, NET_OFFLOAD_TSO6));
    CHECK(net_hdr_within(&(struct net_hdr){ .gso_type = NET_HDR_GSO_TCPV4 }, NET_OFFLOAD_TSO4));
    CHECK(!net_hdr_within(&(struct net_hdr){ .gso_type = NET_HDR_GSO_TCPV6 }, NET_OFFLOAD_TSO4));
    CHECK(!net_hdr_within(&(struct net_hdr){ .gso_type = NET_HDR_GSO_TCPV4 | NET_HDR_GSO_ECN },
                          NET_OFFLOAD_TSO4));
    CHECK(net_hdr_within(&(struct net_hdr){ .gso_type = NET_HDR_GSO_TCPV4 | NET_HDR_GSO_ECN }, all));
    CHECK(!net_hdr_within(&(struct net_hdr){ .gso_type = NET_HDR_GSO_UDP }, all));
}

int main(void)
{
    test_header();
    test_checksum_only();
    test_segmentation();
    test_refused();
    return check_done();
}

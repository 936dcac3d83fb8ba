/* Checksum completion and TCP segmentation, done by the monitor for a frame whose virtio-net
 * header asks for them (virtio 1.2, 5.1.6.2: VIRTIO_NET_F_CSUM, HOST_TSO4, HOST_TSO6, HOST_ECN)
 * when its peer takes only whole, checksummed frames: libslirp, a stream.
 *
 * Everything here reads a frame the guest wrote: every offset it gives or the frame holds is
 * checked against the frame's length before use, and hdr_len is not used at all (5.1.6.2.2: "The
 * device MUST NOT rely on hdr_len to be correct"); the headers are found by parsing Ethernet, IP
 * and TCP. The checksums are RFC 1071's, summed over little-endian loads and stored the same
 * way, which gives the same bytes as a big-endian sum (RFC 1071, 2(B): byte order independence).
 */
#include "offload.h"

#include <string.h>

#define ETH_HEADER      14
#define ETH_P_IPV4      0x0800
#define ETH_P_IPV6      0x86DD
#define ETH_P_8021Q     0x8100
#define ETH_P_8021AD    0x88A8
#define MAX_VLAN_TAGS   2
#define IPV4_MIN        20
#define IPV6_HEADER     40
#define IP_P_TCP        6
#define TCP_MIN         20
#define TCP_FIN         0x01
#define TCP_PSH         0x08
#define TCP_CWR         0x80

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static void put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

struct net_hdr net_hdr_load(const uint8_t *p)
{
    return (struct net_hdr){ p[0], p[1], le16(p + 2), le16(p + 4), le16(p + 6), le16(p + 8) };
}

void net_hdr_store(const struct net_hdr *h, uint8_t *p)
{
    p[0] = h->flags;
    p[1] = h->gso_type;
    put_le16(p + 2, h->hdr_len);
    put_le16(p + 4, h->gso_size);
    put_le16(p + 6, h->csum_start);
    put_le16(p + 8, h->csum_offset);
}

bool net_hdr_within(const struct net_hdr *h, unsigned offloads)
{
    if ((h->flags & NET_HDR_F_NEEDS_CSUM) && !(offloads & NET_OFFLOAD_CSUM))
        return false;
    if ((h->gso_type & NET_HDR_GSO_ECN) && !(offloads & NET_OFFLOAD_ECN))
        return false;
    switch (h->gso_type & ~NET_HDR_GSO_ECN) {
    case NET_HDR_GSO_NONE:  return true;
    case NET_HDR_GSO_TCPV4: return offloads & NET_OFFLOAD_TSO4;
    case NET_HDR_GSO_TCPV6: return offloads & NET_OFFLOAD_TSO6;
    default:                return false;
    }
}

/* ---- the Internet checksum ---- */

/* The one's-complement sum of (len) bytes at (p) as 16-bit little-endian words, not yet folded.
 * Four sums of 32-bit words side by side (which the compiler turns into vector adds): a frame's
 * 16 Ki words cannot carry out of 64 bits. */
static uint64_t sum(const uint8_t *p, size_t len)
{
    uint64_t a = 0, b = 0, c = 0, d = 0, x, y;
    for (; len >= 16; p += 16, len -= 16) {
        memcpy(&x, p, 8);
        memcpy(&y, p + 8, 8);
        a += (uint32_t)x;
        b += x >> 32;
        c += (uint32_t)y;
        d += y >> 32;
    }
    uint64_t s = a + b + c + d;
    uint32_t w;
    for (; len >= 4; p += 4, len -= 4) {
        memcpy(&w, p, 4);
        s += w;
    }
    if (len >= 2) {
        s += le16(p);
        p += 2;
        len -= 2;
    }
    if (len)
        s += p[0];              /* an odd byte is the high byte of a word padded with zero */
    return s;
}

static uint16_t fold(uint64_t s)
{
    while (s >> 16)
        s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)s;
}

uint16_t net_checksum(const void *p, size_t len)
{
    return (uint16_t)~fold(sum(p, len));
}

/* ---- parsing the frame ---- */

/* Where a TCP frame's headers are, from its own bytes. */
struct layout {
    bool v6;
    size_t l3, l4, end;          /* IP header, TCP header, payload */
};

/* Past the 802.1Q and 802.1ad tags to the EtherType: the IP header's offset, or 0. */
static size_t network_offset(const uint8_t *f, size_t len, uint16_t *type)
{
    size_t off = ETH_HEADER;
    if (len < off)
        return 0;
    *type = be16(f + 12);
    for (int tags = 0; (*type == ETH_P_8021Q || *type == ETH_P_8021AD) && tags < MAX_VLAN_TAGS; tags++) {
        if (len < off + 4)
            return 0;
        *type = be16(f + off + 2);
        off += 4;
    }
    return off;
}

/* IPv6's option headers that may come before TCP (RFC 8200, 4.3 and 4.6: hop-by-hop and
 * destination options, each 8 + 8 * its second byte long). The TCP header's offset, or 0 when
 * something else comes first (a routing header would change the pseudo-header's destination). */
static size_t ipv6_transport(const uint8_t *f, size_t len, size_t l3)
{
    uint8_t next = f[l3 + 6];
    size_t off = l3 + IPV6_HEADER;
    while (next == 0 || next == 60) {
        if (len < off + 8)
            return 0;
        next = f[off];
        off += 8 + 8u * f[off + 1];
    }
    return next == IP_P_TCP ? off : 0;
}

/* The layout of a TCP segment over IPv4 (v6 false) or IPv6; NULL, or what is wrong. */
static const char *parse_tcp(const uint8_t *f, size_t len, bool v6, struct layout *t)
{
    uint16_t type = 0;
    t->v6 = v6;
    t->l3 = network_offset(f, len, &type);
    if (t->l3 == 0 || type != (v6 ? ETH_P_IPV6 : ETH_P_IPV4))
        return v6 ? "TCP segmentation of a frame that is not IPv6" :
                    "TCP segmentation of a frame that is not IPv4";
    const uint8_t *ip = f + t->l3;
    if (v6) {
        if (len < t->l3 + IPV6_HEADER || ip[0] >> 4 != 6)
            return "TCP segmentation of a malformed IPv6 header";
        t->l4 = ipv6_transport(f, len, t->l3);
        if (t->l4 == 0)
            return "TCP segmentation of an IPv6 packet that does not carry TCP";
    } else {
        size_t ihl = (size_t)(ip[0] & 0xF) * 4;
        if (len < t->l3 + IPV4_MIN || ip[0] >> 4 != 4 || ihl < IPV4_MIN || len < t->l3 + ihl)
            return "TCP segmentation of a malformed IPv4 header";
        if (ip[9] != IP_P_TCP)
            return "TCP segmentation of an IPv4 packet that does not carry TCP";
        if (be16(ip + 6) & 0x3FFF)
            return "TCP segmentation of an IPv4 fragment";
        t->l4 = t->l3 + ihl;
    }
    if (len < t->l4 + TCP_MIN)
        return "TCP segmentation of a truncated TCP header";
    size_t doff = (size_t)(f[t->l4 + 12] >> 4) * 4;
    t->end = t->l4 + doff;
    if (doff < TCP_MIN || len < t->end)
        return "TCP segmentation of a truncated TCP header";
    if (t->end > NET_OFFLOAD_MAX_HEADERS)
        return "TCP segmentation of a frame whose headers are over 256 bytes";
    return NULL;
}

/* ---- checksums and segments ---- */

/* The checksum NEEDS_CSUM asks for: from csum_start to the end, over what the field holds (the
 * pseudo-header's sum, as Linux leaves it), stored at csum_start + csum_offset. Linux's
 * skb_checksum_help stores 0xFFFF for a sum of 0, which UDP needs (RFC 768) and TCP allows. */
static const char *complete_checksum(const struct net_hdr *h, uint8_t *f, size_t len)
{
    size_t at = (size_t)h->csum_start + h->csum_offset;
    if (h->csum_start >= len || at + 2 > len)
        return "a checksum to be done beyond the frame's end";
    uint16_t c = net_checksum(f + h->csum_start, len - h->csum_start);
    if (c == 0)
        c = 0xFFFF;
    memcpy(f + at, &c, 2);
    return NULL;
}

/* The TCP checksum of segment (s) of (len) bytes, with the pseudo-header of RFC 793 (IPv4) or
 * RFC 8200, 8.1 (IPv6) for its addresses and length. */
static void tcp_checksum(uint8_t *s, size_t len, const struct layout *t)
{
    uint8_t pseudo[4];
    const uint8_t *ip = s + t->l3;
    size_t tcp_len = len - t->l4;
    put_be16(pseudo, (uint16_t)(tcp_len >> 16));
    put_be16(pseudo + 2, (uint16_t)tcp_len);
    uint64_t total = t->v6 ? sum(ip + 8, 32) : sum(ip + 12, 8);
    total += sum(pseudo, 4) + ((uint64_t)IP_P_TCP << 8);   /* 0x0006 as a little-endian load */
    memset(s + t->l4 + 16, 0, 2);
    total += sum(s + t->l4, tcp_len);
    uint16_t c = (uint16_t)~fold(total);
    memcpy(s + t->l4 + 16, &c, 2);
}

/* Segment (i) of (s, len): its IP length and id, its TCP sequence number and flags. */
static void fix_headers(uint8_t *s, size_t len, const struct layout *t, unsigned i, bool last,
                        uint16_t id, uint32_t seq)
{
    uint8_t *ip = s + t->l3, *tcp = s + t->l4;
    if (t->v6) {
        put_be16(ip + 4, (uint16_t)(len - t->l3 - IPV6_HEADER));
    } else {
        size_t ihl = (size_t)(ip[0] & 0xF) * 4;
        put_be16(ip + 2, (uint16_t)(len - t->l3));
        put_be16(ip + 4, (uint16_t)(id + i));
        memset(ip + 10, 0, 2);
        uint16_t c = net_checksum(ip, ihl);
        memcpy(ip + 10, &c, 2);
    }
    tcp[4] = (uint8_t)(seq >> 24);
    tcp[5] = (uint8_t)(seq >> 16);
    tcp[6] = (uint8_t)(seq >> 8);
    tcp[7] = (uint8_t)seq;
    if (!last)
        tcp[13] &= (uint8_t)~(TCP_FIN | TCP_PSH);
    if (i > 0)
        tcp[13] &= (uint8_t)~TCP_CWR;
    tcp_checksum(s, len, t);
}

int net_offload_apply(const struct net_hdr *h, uint8_t *frame, size_t len, net_emit_fn *emit,
                      void *opaque, const char **why)
{
    uint8_t gso = h->gso_type & (uint8_t)~NET_HDR_GSO_ECN;
    if (gso == NET_HDR_GSO_NONE) {
        if ((h->flags & NET_HDR_F_NEEDS_CSUM) && (*why = complete_checksum(h, frame, len)))
            return -1;
        emit(opaque, frame, len);
        return 1;
    }
    if (gso != NET_HDR_GSO_TCPV4 && gso != NET_HDR_GSO_TCPV6) {
        *why = "a segmentation type other than TCP";
        return -1;
    }
    if (h->gso_size == 0) {
        *why = "TCP segmentation with a gso_size of 0";
        return -1;
    }
    struct layout t;
    if ((*why = parse_tcp(frame, len, gso == NET_HDR_GSO_TCPV6, &t)))
        return -1;
    /* RFC 791: an IPv4 packet's Total Length is 16 bits. A frame of 65550 bytes with gso_size
     * over its payload would be one segment of 65536: its length field would wrap to 0. */
    size_t first = len - t.end < h->gso_size ? len - t.end : h->gso_size;
    if (!t.v6 && t.end - t.l3 + first > 0xFFFF) {
        *why = "TCP segmentation into IPv4 packets over 65535 bytes";
        return -1;
    }

    /* Segment i is built at i * mss: its copy of the headers goes just before its payload,
     * over the end of segment i - 1, which was emitted. */
    uint8_t headers[NET_OFFLOAD_MAX_HEADERS];
    memcpy(headers, frame, t.end);
    size_t mss = h->gso_size, payload = len - t.end;
    uint16_t id = be16(frame + t.l3 + 4);
    uint32_t seq = (uint32_t)be16(frame + t.l4 + 4) << 16 | be16(frame + t.l4 + 6);
    unsigned n = 0;
    for (size_t off = 0; n == 0 || off < payload; off += mss, n++) {
        size_t chunk = payload - off < mss ? payload - off : mss;
        uint8_t *s = frame + off;
        if (n > 0)
            memcpy(s, headers, t.end);
        fix_headers(s, t.end + chunk, &t, n, off + chunk >= payload, id, seq + (uint32_t)off);
        emit(opaque, s, t.end + chunk);
    }
    return (int)n;
}

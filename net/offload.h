/* A frame's offloads (the virtio-net header), and the monitor's own checksums and TCP segmentation
 * for peers that take only whole, checksummed frames. */
#ifndef RING3_NET_OFFLOAD_H
#define RING3_NET_OFFLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* struct virtio_net_hdr (virtio 1.2, 5.1.6) in host order: what a frame asks of its receiver
 * beyond its bytes. All zero: a whole frame with its checksums done. */
struct net_hdr {
    uint8_t flags;              /* NET_HDR_F_* */
    uint8_t gso_type;           /* NET_HDR_GSO_*, maybe with NET_HDR_GSO_ECN */
    uint16_t hdr_len;           /* a hint only: the device must not rely on it (5.1.6.2.2) */
    uint16_t gso_size;          /* the payload of each segment */
    uint16_t csum_start;        /* NEEDS_CSUM: sum from here to the end of the frame... */
    uint16_t csum_offset;       /* ...and store it this far after csum_start */
};

#define NET_HDR_BYTES           10      /* its size on the wire (legacy, without MRG_RXBUF) */
#define NET_HDR_F_NEEDS_CSUM    1u      /* the transport checksum is still to be done */
#define NET_HDR_F_DATA_VALID    2u      /* the sender checked the checksums (receive only) */
#define NET_HDR_GSO_NONE        0u
#define NET_HDR_GSO_TCPV4       1u
#define NET_HDR_GSO_UDP         3u
#define NET_HDR_GSO_TCPV6       4u
#define NET_HDR_GSO_ECN         0x80u   /* the first segment carries TCP's CWR */

/* What a peer takes, or a guest: partial checksums, and TCP segments up to 64 KiB. */
#define NET_OFFLOAD_CSUM        1u
#define NET_OFFLOAD_TSO4        2u
#define NET_OFFLOAD_TSO6        4u
#define NET_OFFLOAD_ECN         8u

/* The longest headers (Ethernet with two VLAN tags, IP, TCP) net_offload_apply() segments. */
#define NET_OFFLOAD_MAX_HEADERS 256u

/* (h) from / to the 10 bytes of its little-endian form on the wire (the legacy layout is the
 * guest's byte order, and TAP's is the host's: both little-endian here). */
struct net_hdr net_hdr_load(const uint8_t *p);
void net_hdr_store(const struct net_hdr *h, uint8_t *p);

/* True when (h) asks for nothing beyond (offloads): a partial checksum needs NET_OFFLOAD_CSUM,
 * a TCP segment over IPv4 NET_OFFLOAD_TSO4 (and so on). A frame that asks nothing passes. */
bool net_hdr_within(const struct net_hdr *h, unsigned offloads);

/* Each frame (h) and (frame, len) stand for, whole and checksummed, to (emit): the frame itself
 * with its checksum done where NEEDS_CSUM asks, or its TCP segments of gso_size bytes of payload
 * where gso_type asks (as Linux's tcp_gso_segment cuts them: IPv4 ids counting up, FIN and PSH on
 * the last segment only, CWR on the first only, every checksum computed again). (frame) is
 * overwritten: the segments are built in place, each after the previous one was emitted, so
 * (emit) must copy what it keeps. Returns how many frames were emitted, or -1 with nothing
 * emitted when (h) asks what the frame cannot give (a checksum beyond its end, segmentation of
 * something other than TCP, a gso_size of 0); (*why) then says which. */
typedef void net_emit_fn(void *opaque, const uint8_t *frame, size_t len);
int net_offload_apply(const struct net_hdr *h, uint8_t *frame, size_t len, net_emit_fn *emit,
                      void *opaque, const char **why);

/* The Internet checksum (RFC 1071) of (len) bytes at (p), complemented, as the bytes to store. */
uint16_t net_checksum(const void *p, size_t len);

#endif

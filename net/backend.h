/* Network backends: where a NIC's Ethernet frames go, and where the frames for it come from. */
#ifndef RING3_NET_BACKEND_H
#define RING3_NET_BACKEND_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ikc/channel.h"
#include "memory/guestmem.h"

#include "offload.h"

#define NET_MAX_FRAME   65550u      /* QEMU's limit on a frame (NET_BUFSIZE less its slack) */
#define NET_MAX_MTU     65520u      /* libslirp's largest (and slirp4netns's choice) */
#define NET_MIN_MTU     68u         /* IPv4's smallest (RFC 791) */
#define NET_MAX_HOSTFWD 8
#define NET_PATH_BYTES  108         /* sizeof sun_path */

/* The NIC as a backend sees it. The backend calls it from net_backend_dispatch()
 * and net_backend_resume() only. */
struct net_client {
    /* A frame for the NIC, with what (h) says of it: all zero from a backend without offloads,
     * or NET_HDR_F_DATA_VALID where its checksums are known good. False: the NIC has no room for
     * it now, and the backend keeps it (or drops it, if it cannot) until net_backend_resume(). */
    bool (*receive)(void *opaque, const struct net_hdr *h, const uint8_t *frame, size_t len);
    /* The link went up or down: a stream's peer came or went. */
    void (*link)(void *opaque, bool up);
    void *opaque;
    /* receive() of a frame in pieces, (len) bytes in all: another guest's buffers, copied
     * straight into this guest's (ikc). */
    bool (*receive_iov)(void *opaque, const struct net_hdr *h, const struct iovec *iov,
                        unsigned niov, size_t len);
    /* A frame that net_backend_send_chain() took is done with: its transmit (id) completes. */
    void (*sent)(void *opaque, uint32_t id);
};

/* One hostfwd=tcp::HOSTPORT-:GUESTPORT (or udp), as qemu spells it. */
struct net_hostfwd {
    int udp;
    uint32_t host_addr;             /* network order; 0: every address (qemu's default) */
    uint16_t host_port;
    uint32_t guest_addr;            /* network order; 0: the address DHCP gives, 10.0.2.15 */
    uint16_t guest_port;
};

/* What --net user gives. */
struct net_user_options {
    int restrict_;                  /* restrict=on: the guest reaches nothing but the forwards */
    uint16_t mtu;                   /* libslirp's MTU and MRU: the NIC's */
    unsigned nhostfwd;
    struct net_hostfwd hostfwd[NET_MAX_HOSTFWD];
};

/* What --net stream gives: a UNIX socket (path) or TCP (host, port), as the
 * server that waits for its peer or as the client that connects to it. */
struct net_stream_options {
    bool server;
    char path[NET_PATH_BYTES];      /* "": TCP */
    char host[64];
    uint16_t port;
};

/* What --net tap gives: the host's TAP device by name. */
struct net_tap_options {
    char ifname[16];                /* IFNAMSIZ */
};

/* What --net ikc gives: the group whose switch the NIC is on. */
struct net_ikc_options {
    char group[IKC_NAME_BYTES];
};

/* A NIC as the options give it: its address and what it is joined to. */
enum net_kind { NET_USER, NET_STREAM, NET_TAP, NET_IKC };
struct net_spec {
    enum net_kind kind;
    uint8_t mac[6];
    uint16_t mtu;                   /* the guest's: 65520 on user, else Ethernet's 1500 */
    struct net_user_options user;
    struct net_stream_options stream;
    struct net_tap_options tap;
    struct net_ikc_options ikc;
};

/* "user", "stream", "tap", "ikc": the kind as --net spells it. */
const char *net_kind_name(enum net_kind kind);

/* --net's value for NIC number (index) into (spec), its MAC qemu's
 * 52:54:00:12:34:56 plus (index) unless given. Returns 0, or 2 after one line
 * on stderr. "none" is the caller's. */
int net_spec_parse(const char *arg, unsigned index, struct net_spec *spec);

/* A backend: each kind's struct starts with this one. */
struct net_backend;
struct net_backend_ops {
    /* A frame for the peer; (h) asks for nothing beyond the backend's (offloads). */
    void (*send)(struct net_backend *b, const struct net_hdr *h, const uint8_t *frame, size_t len);
    /* The same frame as pieces of the guest's RAM, left there until (nic.sent)(id): true when
     * the backend took it so, false when it is done with it already (sent or lost). May be
     * NULL: send() is used. */
    bool (*send_chain)(struct net_backend *b, const struct net_hdr *h, const struct iovec *iov,
                       unsigned niov, size_t len, uint32_t id);
    void (*flush)(struct net_backend *b);           /* may be NULL */
    void (*fill)(struct net_backend *b, struct pollfd *pfd, unsigned *n, unsigned max,
                 uint64_t *deadline_ns);
    void (*dispatch)(struct net_backend *b);
    void (*resume)(struct net_backend *b);          /* may be NULL */
    /* The offloads the guest takes in what it receives; may be NULL */
    void (*guest_offloads)(struct net_backend *b, unsigned offloads);
    void (*free)(struct net_backend *b);
};
struct net_backend {
    const struct net_backend_ops *ops;
    struct net_client nic;
    /* NET_OFFLOAD_* the peer takes with a frame, and may give with one: a TAP device with vnet
     * headers. 0: whole, checksummed frames both ways (libslirp, a stream). */
    unsigned offloads;
};

/* The backend (spec) asks for, joined to (nic) of the guest with RAM (gm). Returns NULL with
 * (err) filled when it cannot start (a forwarded port taken, no peer listening). */
struct net_backend *net_backend_new(const struct net_spec *spec, const struct net_client *nic,
                                    const struct guestmem *gm, char *err, size_t errlen);

/* User-mode networking through libslirp, as qemu's -netdev user: the guest
 * is 10.0.2.15 by DHCP, the host 10.0.2.2, DNS 10.0.2.3. */
struct net_backend *net_user_new(const struct net_user_options *o, const struct net_client *nic,
                                 char *err, size_t errlen);

/* QEMU's -netdev stream: each frame as a 4-byte big-endian length and the
 * frame, over a UNIX or TCP socket. The link is up while a peer is connected. */
struct net_backend *net_stream_new(const struct net_stream_options *o, const struct net_client *nic,
                                   char *err, size_t errlen);

/* A TAP device of the host (IFF_TAP, IFF_NO_PI), as qemu's -netdev tap,ifname=. */
struct net_backend *net_tap_new(const struct net_tap_options *o, const struct net_client *nic,
                                char *err, size_t errlen);

/* A frame from the NIC (the guest sent it), with its offloads (h). Where the peer does not take
 * them, the frame's checksum is done and its TCP segments are cut here (net_offload_apply),
 * in place in (frame). Returns 0, or -1 when (h) asks what the frame cannot give ((*why) says
 * which): the frame is dropped. */
int net_backend_send(struct net_backend *b, const struct net_hdr *h, uint8_t *frame, size_t len,
                     const char **why);

/* A frame as pieces (iov) of the guest's RAM, its transmit (id) completed by (nic.sent) later.
 * Returns 1 when the backend took it so, 0 when it is done with it now (sent or lost), -1 when
 * the NIC is to gather it and call net_backend_send() (a backend without send_chain, or
 * offloads it does not take). */
int net_backend_send_chain(struct net_backend *b, const struct net_hdr *h,
                            const struct iovec *iov, unsigned niov, size_t len, uint32_t id);

/* A --net ikc,group=NAME NIC: a port of the group's Ethernet switch (net/ikc.c). */
struct net_backend *net_ikc_new(const struct net_ikc_options *o, const uint8_t mac[6],
                                const struct net_client *nic, const struct guestmem *gm,
                                char *err, size_t errlen);

/* The frames sent so far leave now (a stream writes its buffer once for a batch of them). */
void net_backend_flush(struct net_backend *b);

/* The guest's driver takes (offloads) (NET_OFFLOAD_*) in the frames it receives: a backend with
 * offloads gives no others from now on. */
void net_backend_guest_offloads(struct net_backend *b, unsigned offloads);

/* Add the descriptors the backend waits on to (pfd), from (*n) on, at most
 * (max) in all, and lower (*deadline_ns) (monotonic) to its next timer. */
void net_backend_fill(struct net_backend *b, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns);

/* After poll() on the array net_backend_fill() added to (still the same
 * array): read and write what is ready, run the timers that are due, and
 * pass the frames for the guest to the NIC. */
void net_backend_dispatch(struct net_backend *b);

/* The NIC has room again: the frames the backend kept may come now. */
void net_backend_resume(struct net_backend *b);

void net_backend_free(struct net_backend *b);

/* Bytes [skip, skip + len) of a frame in pieces (iov, niov) into (dst); as many as there are.
 * The pieces and (dst) may overlap: a frame that stays in guest RAM (the IKC switch) can be
 * received into buffers of the same guest RAM, which its driver may place over the frame. */
void net_iov_read(const struct iovec *iov, unsigned niov, size_t skip, uint8_t *dst, size_t len);

#endif

/* Network backends: where a NIC's Ethernet frames go, and where the frames for it come from. */
#ifndef RING3_NET_BACKEND_H
#define RING3_NET_BACKEND_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#define NET_MAX_FRAME   65550u      /* QEMU's limit on a frame (NET_BUFSIZE less its slack) */
#define NET_MAX_HOSTFWD 8

/* A frame for the NIC: the backend calls it, from net_backend_dispatch() only. */
typedef void net_receive_fn(void *opaque, const uint8_t *frame, size_t len);

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
    unsigned nhostfwd;
    struct net_hostfwd hostfwd[NET_MAX_HOSTFWD];
};

/* A NIC as the options give it: its address and what it is joined to. */
enum net_kind { NET_USER };
struct net_spec {
    enum net_kind kind;
    uint8_t mac[6];
    struct net_user_options user;
};

/* --net's value (user[,hostfwd=...][,restrict=on][,mac=...]) for NIC number
 * (index) into (spec), its MAC qemu's 52:54:00:12:34:56 plus (index) unless
 * given. Returns 0, or 2 after one line on stderr. "none" is the caller's. */
int net_spec_parse(const char *arg, unsigned index, struct net_spec *spec);

struct net_backend;

/* User-mode networking through libslirp, as qemu's -netdev user: the guest
 * is 10.0.2.15 by DHCP, the host 10.0.2.2, DNS 10.0.2.3. Returns NULL with
 * (err) filled when libslirp refuses (a forwarded port already taken). */
struct net_backend *net_user_new(const struct net_user_options *o, net_receive_fn *rx,
                                 void *rx_opaque, char *err, size_t errlen);

/* A frame from the NIC (the guest sent it). */
void net_backend_send(struct net_backend *b, const uint8_t *frame, size_t len);

/* Add the descriptors the backend waits on to (pfd), from (*n) on, at most
 * (max) in all, and lower (*deadline_ns) (monotonic) to its next timer. */
void net_backend_fill(struct net_backend *b, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns);

/* After poll() on the array net_backend_fill() added to (still the same
 * array): read and write what is ready, run the timers that are due, and
 * pass the frames for the guest to the receive function. */
void net_backend_dispatch(struct net_backend *b);

void net_backend_free(struct net_backend *b);

#endif

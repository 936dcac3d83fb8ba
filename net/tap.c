/* --net tap,ifname=NAME: the guest's frames through a TAP device of the host kernel, as qemu's
 * -netdev tap,ifname=NAME,script=no,vnet_hdr=on. Each read of the device is one frame for the
 * guest, each write one frame from it (IFF_NO_PI: no packet-information prefix), both behind a
 * virtio-net header (IFF_VNET_HDR; TUNSETVNETHDRSZ: the 10 bytes of struct virtio_net_hdr).
 *
 * With the header the host kernel takes the guest's frames as the guest left them: checksums to
 * be done and TCP segments of up to 64 KiB, which it finishes (or never needs to, for a socket of
 * its own). The other way, TUNSETOFFLOAD tells it what the guest's driver takes, and it
 * checksums and segments the rest before the read (Documentation/networking/tuntap.rst).
 *
 * No root is needed for a persistent TAP device that its owner made for the user
 * (ip tuntap add dev NAME mode tap user USER); with CAP_NET_ADMIN a missing one is made, and
 * goes when ring3 ends. The device's own address and routes are the host's business.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backend.h"

#define TAP_FRAME_BYTES (NET_MAX_FRAME + 1)  /* a read that fills it was cut short */
#define READS_PER_PASS  64              /* then the guest runs again */

struct tap {
    struct net_backend base;
    int fd;
    int slot;                           /* where the last fill put fd in (pfd), else -1 */
    struct pollfd *pfd;
    size_t held;                        /* a frame the NIC had no room for, in (frame) */
    struct net_hdr held_hdr;            /* and its header */
    uint8_t hdr[NET_HDR_BYTES];
    uint8_t frame[TAP_FRAME_BYTES];
};

static void tap_send(struct net_backend *base, const struct net_hdr *h, const uint8_t *frame,
                     size_t len)
{
    struct tap *t = (struct tap *)base;
    uint8_t hdr[NET_HDR_BYTES];
    net_hdr_store(h, hdr);
    struct iovec iov[2] = { { hdr, sizeof hdr }, { (void *)frame, len } };
    /* The device queues up to its txqueuelen; beyond that the frame is lost, as on a wire. A
     * header the host kernel finds wrong (virtio_net_hdr_to_skb) drops the frame: EINVAL. */
    (void)writev(t->fd, iov, 2);
}

/* The held frame to the NIC. True when it went (or there was none). */
static bool deliver(struct tap *t)
{
    if (t->held == 0)
        return true;
    if (!t->base.nic.receive(t->base.nic.opaque, &t->held_hdr, t->frame, t->held))
        return false;
    t->held = 0;
    return true;
}

/* NET_OFFLOAD_* as TUNSETOFFLOAD's TUN_F_* (the host kernel takes no TSO without CSUM). */
static void tap_guest_offloads(struct net_backend *base, unsigned offloads)
{
    struct tap *t = (struct tap *)base;
    unsigned long f = 0;
    if (offloads & NET_OFFLOAD_CSUM) {
        f = TUN_F_CSUM | (offloads & NET_OFFLOAD_TSO4 ? TUN_F_TSO4 : 0) |
            (offloads & NET_OFFLOAD_TSO6 ? TUN_F_TSO6 : 0);
        if (f & (TUN_F_TSO4 | TUN_F_TSO6) && offloads & NET_OFFLOAD_ECN)
            f |= TUN_F_TSO_ECN;
    }
    /* A kernel that refuses them gives whole frames, as with 0; the NIC copes with either. */
    if (ioctl(t->fd, TUNSETOFFLOAD, f) < 0)
        (void)ioctl(t->fd, TUNSETOFFLOAD, 0ul);
}

static void tap_fill(struct net_backend *base, struct pollfd *pfd, unsigned *n, unsigned max,
                     uint64_t *deadline_ns)
{
    struct tap *t = (struct tap *)base;
    (void)deadline_ns;
    t->pfd = pfd;
    t->slot = -1;
    if (t->held == 0 && *n < max) {
        pfd[*n] = (struct pollfd){ t->fd, POLLIN, 0 };
        t->slot = (int)(*n)++;
    }
}

static void tap_dispatch(struct net_backend *base)
{
    struct tap *t = (struct tap *)base;
    bool ready = t->slot >= 0 && (t->pfd[t->slot].revents & POLLIN);
    t->pfd = NULL;
    t->slot = -1;
    for (int i = 0; ready && i < READS_PER_PASS && deliver(t); i++) {
        struct iovec iov[2] = { { t->hdr, sizeof t->hdr }, { t->frame, sizeof t->frame } };
        ssize_t k = readv(t->fd, iov, 2);
        if (k <= (ssize_t)sizeof t->hdr)
            break;
        if ((size_t)k - sizeof t->hdr > NET_MAX_FRAME)
            continue;                   /* longer than any NIC takes: lost */
        t->held_hdr = net_hdr_load(t->hdr);
        t->held = (size_t)k - sizeof t->hdr;
    }
    deliver(t);             /* the last one read; if the NIC has no room, at net_backend_resume() */
}

static void tap_resume(struct net_backend *base)
{
    deliver((struct tap *)base);
}

static void tap_free(struct net_backend *base)
{
    struct tap *t = (struct tap *)base;
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}

static const struct net_backend_ops tap_ops = {
    .send = tap_send,
    .fill = tap_fill,
    .dispatch = tap_dispatch,
    .resume = tap_resume,
    .guest_offloads = tap_guest_offloads,
    .free = tap_free,
};

struct net_backend *net_tap_new(const struct net_tap_options *o, const struct net_client *nic,
                                char *err, size_t errlen)
{
    struct tap *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->base = (struct net_backend){ &tap_ops, *nic,
                                    NET_OFFLOAD_CSUM | NET_OFFLOAD_TSO4 | NET_OFFLOAD_TSO6 |
                                    NET_OFFLOAD_ECN };
    t->slot = -1;
    t->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", o->ifname);
    int hdr_bytes = NET_HDR_BYTES;
    if (t->fd < 0 || ioctl(t->fd, TUNSETIFF, &ifr) < 0 ||
        ioctl(t->fd, TUNSETVNETHDRSZ, &hdr_bytes) < 0 || ioctl(t->fd, TUNSETOFFLOAD, 0ul) < 0) {
        int e = errno;
        if (e == EPERM || e == EACCES)
            snprintf(err, errlen, "cannot open TAP device %s: %s (make it yours first: sudo ip "
                     "tuntap add dev %s mode tap user $USER)", o->ifname, strerror(e), o->ifname);
        else if (e == EBUSY)
            snprintf(err, errlen, "TAP device %s is held by another process", o->ifname);
        else
            snprintf(err, errlen, "cannot open TAP device %s: %s", o->ifname, strerror(e));
        tap_free(&t->base);
        return NULL;
    }
    return &t->base;
}

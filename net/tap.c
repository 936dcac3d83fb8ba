/* --net tap,ifname=NAME: the guest's frames through a TAP device of the host kernel, as qemu's
 * -netdev tap,ifname=NAME,script=no. Each read of the device is one frame for the guest, each
 * write one frame from it (IFF_NO_PI: no packet-information prefix).
 *
 * No root is needed for a persistent TAP device that its owner made for the user
 * (ip tuntap add dev NAME mode tap user USER); with CAP_NET_ADMIN a missing one is made, and
 * goes when ring3 ends. The device's own address and routes are the host's business. No vnet
 * header is asked for: the NIC offers no offloads yet, so frames are whole and checksummed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backend.h"

#define TAP_FRAME_BYTES 65536u          /* a read never gives more (an IP packet's limit) */
#define READS_PER_PASS  64              /* then the guest runs again */

struct tap {
    struct net_backend base;
    int fd;
    int slot;                           /* where the last fill put fd in (pfd), else -1 */
    struct pollfd *pfd;
    size_t held;                        /* a frame the NIC had no room for, in (frame) */
    uint8_t frame[TAP_FRAME_BYTES];
};

static void tap_send(struct net_backend *base, const uint8_t *frame, size_t len)
{
    struct tap *t = (struct tap *)base;
    /* The device queues up to its txqueuelen; beyond that the frame is lost, as on a wire. */
    (void)write(t->fd, frame, len);
}

/* The held frame to the NIC. True when it went (or there was none). */
static bool deliver(struct tap *t)
{
    if (t->held == 0)
        return true;
    if (!t->base.nic.receive(t->base.nic.opaque, t->frame, t->held))
        return false;
    t->held = 0;
    return true;
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
        ssize_t k = read(t->fd, t->frame, sizeof t->frame);
        if (k <= 0)
            break;
        t->held = (size_t)k;
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
    t->base = (struct net_backend){ &tap_ops, *nic };
    t->slot = -1;
    t->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", o->ifname);
    if (t->fd < 0 || ioctl(t->fd, TUNSETIFF, &ifr) < 0) {
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

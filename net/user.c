/* --net user: the guest's frames through libslirp, a TCP/IP stack in this process that turns
 * them into the host's own sockets, as qemu's -netdev user does.
 *
 * Single-threaded like the rest of the monitor: the event loop asks for the descriptors
 * and the next timer (net_backend_fill), polls them with its own, and hands the result
 * back (net_backend_dispatch); libslirp then reads and writes its sockets, runs its
 * timers, and gives the frames for the guest to the receive function.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <slirp/libslirp.h>

#include "backend.h"

#define SLIRP_NET       "10.0.2.0"
#define SLIRP_MASK      "255.255.255.0"
#define SLIRP_HOST      "10.0.2.2"
#define SLIRP_DNS       "10.0.2.3"
#define SLIRP_GUEST     "10.0.2.15"     /* the first address DHCP gives */

struct slirp_timer {
    SlirpTimerCb cb;
    void *cb_opaque;
    int64_t expire_ms;                  /* -1: not armed */
    struct slirp_timer *next;
};

struct user {
    struct net_backend base;
    Slirp *slirp;
    struct slirp_timer *timers;
    /* What the last net_backend_fill() added, for the get_revents callback. */
    struct pollfd *pfd;
    unsigned first, end, max;
    uint64_t slirp_deadline;            /* when libslirp's own TCP timers want a call */
};

static int64_t clock_ns(void *opaque)
{
    (void)opaque;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static ssize_t send_to_guest(const void *buf, size_t len, void *opaque)
{
    /* libslirp made every checksum of its frames itself (ip_output, tcp_output, udp_output):
     * the guest need not check them (virtio 1.2, 5.1.6.4: VIRTIO_NET_HDR_F_DATA_VALID) */
    static const struct net_hdr checked = { .flags = NET_HDR_F_DATA_VALID };
    struct user *b = opaque;
    /* libslirp cannot keep a frame back: one the NIC has no room for is lost, as on a
     * wire, and TCP sends it again */
    b->base.nic.receive(b->base.nic.opaque, &checked, buf, len);
    return (ssize_t)len;
}

static void guest_error(const char *msg, void *opaque)
{
    (void)opaque;
    fprintf(stderr, "ring3: net user: %s\n", msg);
}

static void *timer_new(SlirpTimerCb cb, void *cb_opaque, void *opaque)
{
    struct user *b = opaque;
    struct slirp_timer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    *t = (struct slirp_timer){ cb, cb_opaque, -1, b->timers };
    b->timers = t;
    return t;
}

static void timer_free(void *timer, void *opaque)
{
    struct user *b = opaque;
    for (struct slirp_timer **p = &b->timers; *p; p = &(*p)->next) {
        if (*p == timer) {
            *p = ((struct slirp_timer *)timer)->next;
            free(timer);
            return;
        }
    }
}

static void timer_mod(void *timer, int64_t expire_ms, void *opaque)
{
    (void)opaque;
    ((struct slirp_timer *)timer)->expire_ms = expire_ms;
}

static void no_fd_change(int fd, void *opaque)
{
    (void)fd;
    (void)opaque;
}

static void no_notify(void *opaque)
{
    (void)opaque;
}

static const SlirpCb callbacks = {
    .send_packet = send_to_guest,
    .guest_error = guest_error,
    .clock_get_ns = clock_ns,
    .timer_new = timer_new,
    .timer_free = timer_free,
    .timer_mod = timer_mod,
    .register_poll_fd = no_fd_change,
    .unregister_poll_fd = no_fd_change,
    .notify = no_notify,
};

static const struct net_backend_ops user_ops;

struct net_backend *net_user_new(const struct net_user_options *o, const struct net_client *nic,
                                 char *err, size_t errlen)
{
    struct user *b = calloc(1, sizeof *b);
    if (b == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    b->base = (struct net_backend){ &user_ops, *nic, 0 };
    SlirpConfig cfg = { .version = 1, .restricted = o->restrict_, .in_enabled = true,
                        .if_mtu = o->mtu, .if_mru = o->mtu };
    inet_pton(AF_INET, SLIRP_NET, &cfg.vnetwork);
    inet_pton(AF_INET, SLIRP_MASK, &cfg.vnetmask);
    inet_pton(AF_INET, SLIRP_HOST, &cfg.vhost);
    inet_pton(AF_INET, SLIRP_GUEST, &cfg.vdhcp_start);
    inet_pton(AF_INET, SLIRP_DNS, &cfg.vnameserver);
    b->slirp = slirp_new(&cfg, &callbacks, b);
    if (b->slirp == NULL) {
        snprintf(err, errlen, "libslirp could not start");
        free(b);
        return NULL;
    }
    struct in_addr guest;
    inet_pton(AF_INET, SLIRP_GUEST, &guest);
    for (unsigned i = 0; i < o->nhostfwd; i++) {
        const struct net_hostfwd *f = &o->hostfwd[i];
        struct in_addr host = { f->host_addr }, to = { f->guest_addr ? f->guest_addr : guest.s_addr };
        if (slirp_add_hostfwd(b->slirp, f->udp, host, f->host_port, to, f->guest_port) < 0) {
            snprintf(err, errlen, "cannot forward host %s port %u (is it in use?)",
                     f->udp ? "UDP" : "TCP", f->host_port);
            net_backend_free(&b->base);
            return NULL;
        }
    }
    return &b->base;
}

static void user_send(struct net_backend *base, const struct net_hdr *h, const uint8_t *frame,
                      size_t len)
{
    struct user *b = (struct user *)base;
    (void)h;                            /* asks for nothing: offloads is 0 */
    slirp_input(b->slirp, frame, (int)len);
}

static int add_poll(int fd, int events, void *opaque)
{
    struct user *b = opaque;
    if (b->end == b->max)
        return -1;                      /* not polled this round; libslirp tries again next time */
    short ev = (short)((events & SLIRP_POLL_IN ? POLLIN : 0) | (events & SLIRP_POLL_OUT ? POLLOUT : 0) |
                       (events & SLIRP_POLL_PRI ? POLLPRI : 0));
    b->pfd[b->end] = (struct pollfd){ fd, ev, 0 };
    return (int)b->end++;
}

static int get_revents(int idx, void *opaque)
{
    struct user *b = opaque;
    if (idx < (int)b->first || idx >= (int)b->end)
        return 0;
    short r = b->pfd[idx].revents;
    return (r & POLLIN ? SLIRP_POLL_IN : 0) | (r & POLLOUT ? SLIRP_POLL_OUT : 0) |
           (r & POLLPRI ? SLIRP_POLL_PRI : 0) | (r & POLLERR ? SLIRP_POLL_ERR : 0) |
           (r & POLLHUP ? SLIRP_POLL_HUP : 0);
}

static void user_fill(struct net_backend *base, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns)
{
    struct user *b = (struct user *)base;
    b->pfd = pfd;
    b->first = b->end = *n;
    b->max = max;
    uint32_t timeout_ms = UINT32_MAX;
    slirp_pollfds_fill(b->slirp, &timeout_ms, add_poll, b);
    *n = b->end;
    uint64_t now = (uint64_t)clock_ns(NULL);
    b->slirp_deadline = timeout_ms == UINT32_MAX ? UINT64_MAX : now + timeout_ms * 1000000ull;
    if (b->slirp_deadline < *deadline_ns)
        *deadline_ns = b->slirp_deadline;
    for (const struct slirp_timer *t = b->timers; t; t = t->next) {
        uint64_t at = t->expire_ms < 0 ? UINT64_MAX : (uint64_t)t->expire_ms * 1000000ull;
        if (at < *deadline_ns)
            *deadline_ns = at;
    }
}

static void user_dispatch(struct net_backend *base)
{
    struct user *b = (struct user *)base;
    slirp_pollfds_poll(b->slirp, 0, get_revents, b);
    int64_t now_ms = clock_ns(NULL) / 1000000;
    /* A callback may arm, disarm or free timers: one due timer per pass, from the top. */
    for (bool again = true; again;) {
        again = false;
        for (struct slirp_timer *t = b->timers; t; t = t->next) {
            if (t->expire_ms >= 0 && t->expire_ms <= now_ms) {
                t->expire_ms = -1;
                t->cb(t->cb_opaque);
                again = true;
                break;
            }
        }
    }
    b->pfd = NULL;
    b->first = b->end = b->max = 0;
}

static void user_free(struct net_backend *base)
{
    struct user *b = (struct user *)base;
    if (b->slirp)
        slirp_cleanup(b->slirp);
    while (b->timers)
        timer_free(b->timers, b);
    free(b);
}

static const struct net_backend_ops user_ops = {
    .send = user_send,
    .fill = user_fill,
    .dispatch = user_dispatch,
    .free = user_free,
};

/* The network backends behind one interface (backend.h): each kind's operations. */
#include <stdio.h>
#include <string.h>

#include "backend.h"

struct net_backend *net_backend_new(const struct net_spec *spec, const struct net_client *nic,
                                    const struct guestmem *gm, char *err, size_t errlen)
{
    switch (spec->kind) {
    case NET_USER:
        return net_user_new(&spec->user, nic, err, errlen);
    case NET_STREAM:
        return net_stream_new(&spec->stream, nic, err, errlen);
    case NET_TAP:
        return net_tap_new(&spec->tap, nic, err, errlen);
    case NET_IKC:
        return net_ikc_new(&spec->ikc, spec->mac, nic, gm, err, errlen);
    }
    snprintf(err, errlen, "no such backend");
    return NULL;
}

const char *net_kind_name(enum net_kind kind)
{
    static const char *const names[] = { [NET_USER] = "user", [NET_STREAM] = "stream",
                                          [NET_TAP] = "tap", [NET_IKC] = "ikc" };
    return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* net_offload_apply's emit: one whole, checksummed frame. */
static void send_whole(void *opaque, const uint8_t *frame, size_t len)
{
    static const struct net_hdr whole;
    struct net_backend *b = opaque;
    b->ops->send(b, &whole, frame, len);
}

int net_backend_send(struct net_backend *b, const struct net_hdr *h, uint8_t *frame, size_t len,
                     const char **why)
{
    if (net_hdr_within(h, b->offloads)) {
        b->ops->send(b, h, frame, len);
        return 0;
    }
    return net_offload_apply(h, frame, len, send_whole, b, why) < 0 ? -1 : 0;
}

int net_backend_send_chain(struct net_backend *b, const struct net_hdr *h,
                           const struct iovec *iov, unsigned niov, size_t len, uint32_t id)
{
    if (!b->ops->send_chain || !net_hdr_within(h, b->offloads))
        return -1;
    return b->ops->send_chain(b, h, iov, niov, len, id) ? 1 : 0;
}

void net_backend_flush(struct net_backend *b)
{
    if (b->ops->flush)
        b->ops->flush(b);
}

void net_backend_guest_offloads(struct net_backend *b, unsigned offloads)
{
    if (b->ops->guest_offloads)
        b->ops->guest_offloads(b, offloads);
}

void net_backend_fill(struct net_backend *b, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns)
{
    b->ops->fill(b, pfd, n, max, deadline_ns);
}

void net_backend_dispatch(struct net_backend *b)
{
    b->ops->dispatch(b);
}

void net_backend_resume(struct net_backend *b)
{
    if (b->ops->resume)
        b->ops->resume(b);
}

void net_backend_free(struct net_backend *b)
{
    if (b)
        b->ops->free(b);
}

void net_iov_read(const struct iovec *iov, unsigned niov, size_t skip, uint8_t *dst, size_t len)
{
    for (unsigned i = 0; i < niov && len; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - skip < len ? iov[i].iov_len - skip : len;
        memmove(dst, (const uint8_t *)iov[i].iov_base + skip, k);   /* both may be guest RAM (below) */
        dst += k;
        len -= k;
        skip = 0;
    }
}

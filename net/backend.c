/* The network backends behind one interface (backend.h): each kind's operations. */
#include <stdio.h>

#include "backend.h"

struct net_backend *net_backend_new(const struct net_spec *spec, const struct net_client *nic,
                                    char *err, size_t errlen)
{
    switch (spec->kind) {
    case NET_USER:
        return net_user_new(&spec->user, nic, err, errlen);
    case NET_STREAM:
        return net_stream_new(&spec->stream, nic, err, errlen);
    case NET_TAP:
        return net_tap_new(&spec->tap, nic, err, errlen);
    }
    snprintf(err, errlen, "no such backend");
    return NULL;
}

const char *net_kind_name(enum net_kind kind)
{
    static const char *const names[] = { [NET_USER] = "user", [NET_STREAM] = "stream",
                                          [NET_TAP] = "tap" };
    return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

void net_backend_send(struct net_backend *b, const uint8_t *frame, size_t len)
{
    b->ops->send(b, frame, len);
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

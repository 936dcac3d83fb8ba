/* --net stream: the guest's frames over a UNIX or TCP socket in QEMU's -netdev stream format
 * (also its -netdev socket's over TCP, and passt's): each frame as a 4-byte big-endian
 * length and then the frame. The peer is another ring3, a QEMU, or passt.
 *
 * One peer at a time. As the server, the backend listens from the start and takes the next
 * peer when one leaves; as the client, it connects at the start (an error if nothing
 * listens) and again each second after its peer has gone. The link is up while a peer is
 * connected. The socket never blocks the monitor: frames for the peer wait in an output
 * buffer (and are lost, as on a wire, when it is full or no peer is there); frames for the
 * guest wait in the input buffer while the NIC has no room, and the socket is not read.
 *
 * Everything the peer sends is untrusted. A frame of zero bytes or shorter than an
 * Ethernet header is dropped and counted; a length over NET_MAX_FRAME leaves nothing to
 * frame the stream by, and the connection is closed, as is one that ends inside a frame.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hw/clock.h"

#include "backend.h"

#define LEN_BYTES       4
#define ETH_HEADER      14              /* destination, source, type (IEEE 802.3) */
#define IN_BYTES        (256u << 10)    /* more than a frame and its length */
#define OUT_BYTES       (1u << 20)
#define RECONNECT_NS    1000000000ull
#define READS_PER_PASS  8               /* then the guest runs again */

struct stream {
    struct net_backend base;
    struct net_stream_options o;
    char who[NET_PATH_BYTES + 80];      /* "net stream PATH" for messages */
    int listener;                       /* the server's listening socket, else -1 */
    bool unlink_path;                   /* the server made the UNIX socket's file */
    int fd;                             /* the peer's connection, else -1 */
    bool connecting;                    /* the client's connect() is under way on fd */
    uint64_t retry_ns;                  /* the client's next connect() */
    bool stalled;                       /* the NIC had no room: frames wait in (in) */
    int slot_listener, slot_fd;         /* where the last fill put them in (pfd), else -1 */
    struct pollfd *pfd;
    uint64_t bad;                       /* frames from the peer dropped for their framing */
    size_t in_len, out_off, out_len;
    uint8_t in[IN_BYTES];
    uint8_t out[OUT_BYTES];
};

static uint64_t now_ns(void)
{
    return hw_clock_now(&hw_clock_monotonic);
}

/* ---- the socket's address ---- */

struct address {
    struct sockaddr_storage sa;
    socklen_t len;
};

static int resolve(const struct net_stream_options *o, struct address *a, char *err, size_t errlen)
{
    *a = (struct address){ 0 };
    if (o->path[0]) {
        struct sockaddr_un *un = (struct sockaddr_un *)&a->sa;
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, o->path, sizeof un->sun_path);
        a->len = sizeof *un;
        return 0;
    }
    char port[8];
    snprintf(port, sizeof port, "%u", o->port);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = o->server ? AI_PASSIVE : 0 };
    struct addrinfo *res = NULL;
    int e = getaddrinfo(o->host, port, &hints, &res);
    if (e != 0) {
        snprintf(err, errlen, "host '%s': %s", o->host, gai_strerror(e));
        return -1;
    }
    memcpy(&a->sa, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static int new_socket(const struct address *a)
{
    return socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

/* A UNIX socket's file that nothing listens on any more (its server was killed). */
static bool stale(const struct address *a, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
        return false;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool refused = fd >= 0 && connect(fd, (const struct sockaddr *)&a->sa, a->len) < 0 &&
                   errno == ECONNREFUSED;
    if (fd >= 0)
        close(fd);
    return refused;
}

static int listen_on(struct stream *s, const struct address *a, char *err, size_t errlen)
{
    s->listener = new_socket(a);
    if (s->listener < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    if (a->sa.ss_family != AF_UNIX)
        setsockopt(s->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int r = bind(s->listener, (const struct sockaddr *)&a->sa, a->len);
    if (r < 0 && errno == EADDRINUSE && a->sa.ss_family == AF_UNIX && stale(a, s->o.path)) {
        unlink(s->o.path);
        r = bind(s->listener, (const struct sockaddr *)&a->sa, a->len);
    }
    if (r < 0 || listen(s->listener, 1) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s%s", s->who + strlen("net stream "),
                 strerror(errno), errno == EADDRINUSE ? " (another server has it)" : "");
        return -1;
    }
    s->unlink_path = a->sa.ss_family == AF_UNIX;
    return 0;
}

/* ---- the connection ---- */

static void set_link(struct stream *s, bool up)
{
    s->base.nic.link(s->base.nic.opaque, up);
}

static void connected(struct stream *s)
{
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);     /* fails on UNIX: fine */
    s->connecting = false;               /* the buffers are empty: new, or emptied by disconnect() */
    set_link(s, true);
}

static void disconnect(struct stream *s)
{
    if (s->fd < 0)
        return;
    close(s->fd);
    s->fd = -1;
    bool was_up = !s->connecting;
    s->connecting = false;
    s->in_len = s->out_off = s->out_len = 0;
    s->stalled = false;
    s->retry_ns = now_ns() + RECONNECT_NS;
    if (was_up)
        set_link(s, false);
}

/* The client's next attempt, without waiting: done, under way, or failed (retry later). */
static void try_connect(struct stream *s)
{
    struct address a;
    char err[160];
    s->retry_ns = now_ns() + RECONNECT_NS;
    if (resolve(&s->o, &a, err, sizeof err) < 0 || (s->fd = new_socket(&a)) < 0)
        return;
    if (connect(s->fd, (const struct sockaddr *)&a.sa, a.len) == 0) {
        connected(s);
    } else if (errno == EINPROGRESS) {
        s->connecting = true;
    } else {
        close(s->fd);
        s->fd = -1;
    }
}

static void finish_connect(struct stream *s)
{
    int e = 0;
    socklen_t len = sizeof e;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0 || e != 0)
        disconnect(s);
    else
        connected(s);
}

static void drop(struct stream *s, uint32_t len)
{
    if (s->bad++ == 0)
        fprintf(stderr, "ring3: %s: dropped a frame of %u bytes from the peer, shorter than an "
                "Ethernet header (more such frames are only counted)\n", s->who, len);
}

/* The peer's stream can no longer be framed, or ended inside a frame: drop the connection. */
static void broken(struct stream *s, const char *what)
{
    s->bad++;
    fprintf(stderr, "ring3: %s: %s: the connection is closed (%llu bad frames in all)\n",
            s->who, what, (unsigned long long)s->bad);
    disconnect(s);
}

/* The whole frames in (in) to the NIC, as far as it takes them. */
static void deliver(struct stream *s)
{
    static const struct net_hdr whole;          /* the stream format carries no offloads */
    size_t off = 0;
    s->stalled = false;
    while (s->in_len - off >= LEN_BYTES) {
        const uint8_t *p = s->in + off;
        uint32_t len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (len > NET_MAX_FRAME) {
            char what[96];
            snprintf(what, sizeof what, "the peer sent a frame length of %u, over 65550", len);
            broken(s, what);
            return;
        }
        if (s->in_len - off - LEN_BYTES < len)
            break;
        if (len < ETH_HEADER) {
            drop(s, len);
        } else if (!s->base.nic.receive(s->base.nic.opaque, &whole, p + LEN_BYTES, len)) {
            s->stalled = true;
            break;
        }
        off += LEN_BYTES + len;
    }
    memmove(s->in, s->in + off, s->in_len - off);
    s->in_len -= off;
}

static void read_peer(struct stream *s)
{
    for (int i = 0; i < READS_PER_PASS && s->fd >= 0 && !s->stalled; i++) {
        ssize_t k = recv(s->fd, s->in + s->in_len, sizeof s->in - s->in_len, 0);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (k <= 0) {
            if (s->in_len)
                broken(s, "the peer left in the middle of a frame");
            else
                disconnect(s);
            return;
        }
        s->in_len += (size_t)k;
        deliver(s);
    }
}

static void write_peer(struct stream *s)
{
    while (s->fd >= 0 && s->out_off < s->out_len) {
        ssize_t k = send(s->fd, s->out + s->out_off, s->out_len - s->out_off, MSG_NOSIGNAL);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (k < 0) {
            disconnect(s);
            return;
        }
        s->out_off += (size_t)k;
    }
    s->out_off = s->out_len = 0;
}

/* ---- the backend's operations ---- */

/* The frame joins the output buffer; stream_flush() writes it, once for a batch of frames. */
static void stream_send(struct net_backend *base, const struct net_hdr *h, const uint8_t *frame,
                        size_t len)
{
    struct stream *s = (struct stream *)base;
    (void)h;                            /* asks for nothing: offloads is 0 */
    if (s->out_len + LEN_BYTES + len > sizeof s->out)
        write_peer(s);                  /* a long batch: what the peer takes makes room */
    if (s->fd < 0 || s->connecting)
        return;                         /* no peer: lost, as on a wire */
    if (s->out_off && s->out_len + LEN_BYTES + len > sizeof s->out) {
        memmove(s->out, s->out + s->out_off, s->out_len - s->out_off);
        s->out_len -= s->out_off;
        s->out_off = 0;
    }
    if (s->out_len + LEN_BYTES + len > sizeof s->out)
        return;                         /* the peer reads too slowly: lost, as on a wire */
    uint8_t *p = s->out + s->out_len;
    p[0] = (uint8_t)(len >> 24);
    p[1] = (uint8_t)(len >> 16);
    p[2] = (uint8_t)(len >> 8);
    p[3] = (uint8_t)len;
    memcpy(p + LEN_BYTES, frame, len);
    s->out_len += LEN_BYTES + len;
}

static void stream_flush(struct net_backend *base)
{
    write_peer((struct stream *)base);
}

static int add(struct pollfd *pfd, unsigned *n, unsigned max, int fd, short events)
{
    if (*n == max)
        return -1;
    pfd[*n] = (struct pollfd){ fd, events, 0 };
    return (int)(*n)++;
}

static void stream_fill(struct net_backend *base, struct pollfd *pfd, unsigned *n, unsigned max,
                        uint64_t *deadline_ns)
{
    struct stream *s = (struct stream *)base;
    s->pfd = pfd;
    s->slot_listener = s->slot_fd = -1;
    if (s->fd >= 0) {
        short ev = s->connecting ? POLLOUT
                                 : (short)((s->stalled ? 0 : POLLIN) | (s->out_len ? POLLOUT : 0));
        s->slot_fd = add(pfd, n, max, s->fd, ev);           /* POLLHUP comes whatever (ev) says */
    } else if (s->listener >= 0) {
        s->slot_listener = add(pfd, n, max, s->listener, POLLIN);
    } else if (s->retry_ns < *deadline_ns) {
        *deadline_ns = s->retry_ns;
    }
}

static void stream_dispatch(struct net_backend *base)
{
    struct stream *s = (struct stream *)base;
    short ready = s->slot_fd >= 0 ? s->pfd[s->slot_fd].revents : 0;
    if (s->slot_listener >= 0 && s->pfd[s->slot_listener].revents) {
        s->fd = accept4(s->listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (s->fd >= 0)
            connected(s);
    } else if (s->fd >= 0 && s->connecting) {
        if (ready)
            finish_connect(s);
    } else if (s->fd >= 0) {
        if (ready & POLLOUT)
            write_peer(s);
        if (ready & (POLLIN | POLLHUP | POLLERR))
            read_peer(s);
    } else if (s->listener < 0 && now_ns() >= s->retry_ns) {
        try_connect(s);
    }
    s->pfd = NULL;
    s->slot_listener = s->slot_fd = -1;
}

static void stream_resume(struct net_backend *base)
{
    struct stream *s = (struct stream *)base;
    if (s->stalled && s->fd >= 0)
        deliver(s);
}

static void stream_free(struct net_backend *base)
{
    struct stream *s = (struct stream *)base;
    if (s->fd >= 0)
        close(s->fd);
    if (s->listener >= 0)
        close(s->listener);
    if (s->unlink_path)
        unlink(s->o.path);
    free(s);
}

static const struct net_backend_ops stream_ops = {
    .send = stream_send,
    .flush = stream_flush,
    .fill = stream_fill,
    .dispatch = stream_dispatch,
    .resume = stream_resume,
    .free = stream_free,
};

struct net_backend *net_stream_new(const struct net_stream_options *o, const struct net_client *nic,
                                   char *err, size_t errlen)
{
    struct stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->base = (struct net_backend){ &stream_ops, *nic, 0 };
    s->o = *o;
    s->listener = s->fd = s->slot_listener = s->slot_fd = -1;
    if (o->path[0])
        snprintf(s->who, sizeof s->who, "net stream %s", o->path);
    else
        snprintf(s->who, sizeof s->who, "net stream %s:%u", o->host, o->port);
    struct address a;
    if (resolve(o, &a, err, errlen) < 0) {
        free(s);
        return NULL;
    }
    if (o->server) {
        if (listen_on(s, &a, err, errlen) < 0) {
            stream_free(&s->base);
            return NULL;
        }
        set_link(s, false);             /* until a peer connects */
        return &s->base;
    }
    /* The first connection is made before the guest starts, as qemu's is: nothing
     * listening is the user's mistake to hear of now. */
    s->fd = socket(a.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0 || connect(s->fd, (const struct sockaddr *)&a.sa, a.len) < 0) {
        snprintf(err, errlen, "cannot connect to %s: %s (start its server first, or give "
                 "server=on)", s->who + strlen("net stream "), strerror(errno));
        stream_free(&s->base);
        return NULL;
    }
    fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
    connected(s);
    return &s->base;
}

/* Fuzz target: the framing of what a peer sends a network backend: QEMU's stream format
 * (net/stream.c: a 4-byte big-endian length, then the frame) and the IKC switch's packets
 * (net/ikc.c, net/ikc_frames.h: frames as pieces of the sender's RAM, or copies in bulk units).
 *
 * The first byte picks the backend. A stream backend is a client of a UNIX socket the harness
 * listens on (one per process), made and freed per input; the harness is its peer, and writes
 * the input's bytes, and frames of a pattern for long ones, in chunks, while the NIC (a fake that
 * records what it gets) now and then has no room. The IKC port and a bare member playing its
 * hostile peer join one group per process, each with its own sealed memfd of RAM; the peer sends
 * IKC_FRAME, IKC_FRAME_COPY, answers to nothing and junk, with fields from the input.
 *
 * Beyond "no crash": the frames the NIC gets are exactly, in order and byte for byte, the ones
 * whose framing is valid as recomputed here (a length of 14 to 65550 bytes, wholly sent; pieces
 * that add up to the length, each inside the sender's RAM, in a list in the sender's own units);
 * after a length over 65550 nothing more comes, the link goes down and the connection is closed,
 * as stream.c documents; a peer that leaves inside a frame closes it too. Each IKC_FRAME is
 * answered, the units the receiver is to free are free, a malformed packet is counted, a good
 * one is not. The backend's socket is closed when it is freed, and ASan's leak check is on. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "guest.h"
#include "ikc/layout.h"
#include "net/backend.h"
#include "net/ikc_frames.h"

#define ETH_HEADER  14
#define MODEL_BYTES (512u << 10)        /* the stream an input writes, at most */

/* ---- the NIC ---- */

static struct nic {
    bool room;
    int link;                           /* -1: not told */
    bool link_went_down;
    bool link_came_back;                /* the client's reconnection, a second after */
    unsigned frames;
} nic;

static bool check_stream_frame(const uint8_t *frame, size_t len);
static bool check_ikc_frame(const struct net_hdr *h, const struct iovec *iov, unsigned niov,
                            size_t len);

static bool nic_receive(void *opaque, const struct net_hdr *h, const uint8_t *frame, size_t len)
{
    static const struct net_hdr zero;
    (void)opaque;
    if (memcmp(h, &zero, sizeof zero) != 0)     /* the stream format carries no offloads */
        abort();
    if (!nic.room)
        return false;
    nic.frames++;
    return check_stream_frame(frame, len);
}

static bool nic_receive_iov(void *opaque, const struct net_hdr *h, const struct iovec *iov,
                            unsigned niov, size_t len)
{
    (void)opaque;
    if (!nic.room)
        return false;
    nic.frames++;
    return check_ikc_frame(h, iov, niov, len);
}

static void nic_link(void *opaque, bool up)
{
    (void)opaque;
    if (!up)
        nic.link_went_down = true;
    else if (nic.link_went_down)
        nic.link_came_back = true;
    nic.link = up;
}

static void nic_sent(void *opaque, uint32_t id)
{
    (void)opaque, (void)id;
    abort();                            /* the NIC sent nothing: no transmit completes */
}

static const struct net_client client = { nic_receive, nic_link, NULL, nic_receive_iov, nic_sent };

static void pump(struct net_backend *b)
{
    struct pollfd pfd[40];
    unsigned n = 0;
    uint64_t deadline = UINT64_MAX;
    net_backend_fill(b, pfd, &n, 40, &deadline);
    poll(pfd, n, 0);
    net_backend_dispatch(b);
}

/* ---- the stream ---- */

static char sock_dir[64], sock_path[96];
static int listener = -1;

static void stream_cleanup(void)
{
    close(listener);
    unlink(sock_path);
    rmdir(sock_dir);
}

static void stream_setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(sock_dir, sizeof sock_dir, "%s/ring3-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(sock_dir) == NULL)
        abort();
    snprintf(sock_path, sizeof sock_path, "%s/s", sock_dir);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(listener, 4) < 0)
        abort();
    atexit(stream_cleanup);
}

/* What the peer wrote (the part the socket took), and how far the NIC has had it. */
static uint8_t model[MODEL_BYTES];
static size_t model_len, model_at;

/* The next frame the stream holds from (*at) on, past the runts stream.c drops: 1 with its
 * length, 0 when it is not all there yet, -1 at a length over 65550. */
static int model_next(size_t *at, uint32_t *len)
{
    for (;;) {
        if (model_len - *at < 4)
            return 0;
        const uint8_t *p = model + *at;
        *len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (*len > NET_MAX_FRAME)
            return -1;
        if (model_len - *at - 4 < *len)
            return 0;
        if (*len >= ETH_HEADER)
            return 1;
        *at += 4 + *len;
    }
}

static bool check_stream_frame(const uint8_t *frame, size_t len)
{
    uint32_t want;
    if (model_next(&model_at, &want) != 1 || len != want ||
        memcmp(frame, model + model_at + 4, len) != 0)
        abort();
    model_at += 4 + len;
    return true;
}

/* (len) bytes to the backend: as many as the socket takes, the backend reading meanwhile. */
static void peer_write(struct net_backend *b, int fd, const uint8_t *p, size_t len)
{
    if (len > MODEL_BYTES - model_len)
        len = MODEL_BYTES - model_len;
    for (int tries = 0; len && tries < 64; tries++) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            memcpy(model + model_len, p, (size_t)k);
            model_len += (size_t)k;
            p += k;
            len -= (size_t)k;
        } else if (k < 0 && errno != EAGAIN) {
            return;                             /* the backend closed the connection */
        } else {
            pump(b);
        }
    }
}

static int unread(int fd)
{
    int n = 0;
    return ioctl(fd, SIOCOUTQ, &n) < 0 ? 0 : n;
}

static void fuzz_stream(struct fuzz_input *in)
{
    if (listener < 0)
        stream_setup();
    for (int stale; (stale = accept4(listener, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
        close(stale);                           /* a reconnection a slow input left behind */
    struct net_stream_options o = { .server = false };
    snprintf(o.path, sizeof o.path, "%s", sock_path);
    char err[200];
    struct net_backend *b = net_stream_new(&o, &client, err, sizeof err);
    int peer = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (b == NULL || peer < 0 || nic.link != 1)
        abort();
    model_len = model_at = 0;
    bool closed = false;
    static uint8_t buf[NET_MAX_FRAME + 8];
    while (in->left && !closed) {
        uint8_t op = fuzz_u8(in);
        switch (op & 7) {
        case 0: case 1: case 2: {               /* bytes of the input, framing and all */
            size_t n = fuzz_bytes(in, buf, op >> 3 ? (op >> 3) * 8u : fuzz_u16(in));
            peer_write(b, peer, buf, n);
            break;
        }
        case 3: {                               /* a frame of a pattern, its length given */
            uint32_t len = op & 0x80 ? fuzz_u32(in) : fuzz_u16(in);
            uint8_t fill = fuzz_u8(in);
            buf[0] = (uint8_t)(len >> 24), buf[1] = (uint8_t)(len >> 16);
            buf[2] = (uint8_t)(len >> 8), buf[3] = (uint8_t)len;
            size_t body = len <= NET_MAX_FRAME ? len : 0;
            if (op & 0x40 && body)
                body = fuzz_u16(in) % body;     /* cut short */
            for (size_t i = 0; i < body; i++)
                buf[4 + i] = (uint8_t)(fill + i);
            peer_write(b, peer, buf, 4 + body);
            break;
        }
        case 4:
        case 5:
            pump(b);
            break;
        case 6:                                 /* the NIC's room comes or goes */
            nic.room = !nic.room;
            if (nic.room)
                net_backend_resume(b);
            break;
        case 7:                                 /* the peer leaves */
            close(peer);
            peer = -1;
            closed = true;
            break;
        }
    }
    /* Everything written is read and framed, the NIC taking all. */
    nic.room = true;
    net_backend_resume(b);
    for (int i = 0; i < 1000 && nic.link == 1 && (closed || unread(peer) > 0); i++)
        pump(b);
    pump(b);
    size_t at = model_at;
    uint32_t len;
    int next = model_next(&at, &len);
    if (next == 1)
        abort();                                /* a whole frame that never came */
    /* a length over 65550, or an end inside a frame: closed; else the link stays. (An input
     * that ran a second past the close, on a busy machine, sees the client connect again.) */
    bool broken = next < 0 || closed;
    if (broken != nic.link_went_down || nic.link != (!broken || nic.link_came_back))
        abort();
    net_backend_free(b);
    if (peer >= 0) {
        char c;
        ssize_t k;
        while ((k = recv(peer, &c, 1, MSG_DONTWAIT)) > 0)
            ;
        if (k < 0 && errno == EAGAIN)
            abort();                            /* freed, but its end is still open */
        close(peer);
    }
}

/* ---- the IKC switch ---- */

#define IKC_RAM     (1u << 20)
#define MAX_PACKETS 48

static struct net_backend *port;
static struct ikc_group *evil;
static uint8_t *evil_ram;
static unsigned victim, self;
static uint8_t *seen_base;                      /* the port's mapping of the peer's RAM */

struct sent_frame {
    bool good;                                  /* to reach the NIC */
    uint64_t len;
    unsigned n;
    struct ikc_piece piece[IKC_PIECES_PER_UNIT + 1];
    const uint8_t *copy;                        /* IKC_FRAME_COPY: its bytes, as written */
    uint8_t hdr[16];
};

static struct sent_frame frames[MAX_PACKETS];
static unsigned nframes, frames_seen;
static uint64_t answers_due[MAX_PACKETS];
static unsigned nanswers_due, answered, units_kept;

static bool check_ikc_frame(const struct net_hdr *h, const struct iovec *iov, unsigned niov,
                            size_t len)
{
    while (frames_seen < nframes && !frames[frames_seen].good)
        frames_seen++;
    if (frames_seen == nframes)
        abort();                                /* a frame nothing good accounts for */
    const struct sent_frame *f = &frames[frames_seen++];
    struct net_hdr want = net_hdr_load(f->hdr);
    want.flags &= NET_HDR_F_NEEDS_CSUM;
    if (len != f->len || memcmp(h, &want, sizeof want) != 0)
        abort();
    if (f->copy) {
        if (niov != 1 || iov[0].iov_len != len || memcmp(iov[0].iov_base, f->copy, len) != 0)
            abort();
        return true;
    }
    if (niov != f->n)
        abort();
    for (unsigned i = 0; i < niov; i++) {
        /* each piece where the peer's RAM is mapped here, at its own address */
        uint8_t *base = (uint8_t *)iov[i].iov_base - f->piece[i].gpa;
        if (seen_base == NULL)
            seen_base = base;
        if (base != seen_base || iov[i].iov_len != f->piece[i].len ||
            memcmp(iov[i].iov_base, evil_ram + f->piece[i].gpa, iov[i].iov_len) != 0)
            abort();
    }
    return true;
}

static void ikc_cleanup(void)
{
    ikc_leave(evil);
    net_backend_free(port);
}

static void ikc_setup(void)
{
    char group[32], err[200];
    snprintf(group, sizeof group, "fuzz-%d", (int)getpid());
    static uint8_t *ram;
    static struct guestmem gm;
    gm = (struct guestmem){ .fd = fuzz_sealed_ram(IKC_RAM, &ram), .phys = ram, .size = IKC_RAM };
    struct net_ikc_options o;
    snprintf(o.group, sizeof o.group, "%s", group);
    static const uint8_t mac[6] = { 0x52, 0x54, 0x01, 1, 2, 3 };
    port = net_ikc_new(&o, mac, &client, &gm, err, sizeof err);
    int evil_fd = port ? fuzz_sealed_ram(IKC_RAM, &evil_ram) : -1;
    evil = port ? ikc_join(group, evil_fd, IKC_RAM, 0, "peer", err, sizeof err) : NULL;
    if (evil == NULL) {
        fprintf(stderr, "fuzz_net_rx: %s\n", err);
        abort();
    }
    self = ikc_self(evil);
    victim = self == 0 ? 1 : 0;
    for (int i = 0; i < 1000 && !ikc_peer(evil, victim, IKC_DEV_NET); i++) {
        struct pollfd pfd[40];
        unsigned n = 0;
        uint64_t deadline = UINT64_MAX;
        net_backend_fill(port, pfd, &n, 20, &deadline);
        ikc_fill(evil, 1u << IKC_Q_NET_DONE, pfd, &n, 40, &deadline);
        poll(pfd, n, 5);
        net_backend_dispatch(port);
        ikc_dispatch(evil);
    }
    if (!ikc_peer(evil, victim, IKC_DEV_NET))
        abort();
    /* Both have it mapped: the name can go, so that no run leaves it in /dev/shm. */
    char path[80];
    ikc_shm_name(group, path, sizeof path);
    shm_unlink(path);
    atexit(ikc_cleanup);
}

/* Units the peer holds. */
static unsigned peer_units(void)
{
    unsigned k = 0;
    for (unsigned u = 0; u < IKC_UNITS; u++)
        k += evil->sh->unit_owner[u] == self + 1;
    return k;
}

/* (bytes) of bulk data in the peer's own units, or an offset the input picks that can never
 * be the peer's: off a unit, or past the area. (Aligned free units could become the peer's
 * before the port reads the packet, when a later packet of the input takes them.) */
static uint64_t peer_bulk(struct fuzz_input *in, uint64_t bytes, uint8_t how, bool *own)
{
    long off = bytes && bytes <= (uint64_t)IKC_UNITS * IKC_UNIT && !(how & 0x40) ?
               ikc_bulk_alloc(evil, bytes) : -1;
    *own = off >= 0;
    if (off >= 0)
        return (uint64_t)off;
    uint64_t at = fuzz_u32(in) % (IKC_UNITS * IKC_UNIT + 4096);
    return at < (uint64_t)IKC_UNITS * IKC_UNIT ? at | 1 : at;
}

static bool pieces_ok(const struct sent_frame *f)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < f->n; i++) {
        if (f->piece[i].gpa > IKC_RAM || f->piece[i].len > IKC_RAM - f->piece[i].gpa)
            return false;
        total += f->piece[i].len;
    }
    return total == f->len;
}

/* One packet from the peer: true when it is malformed (the port is to count it). */
static bool peer_packet(struct fuzz_input *in, uint8_t op)
{
    struct sent_frame *f = &frames[nframes];
    *f = (struct sent_frame){ 0 };
    struct ikc_packet pk = { .cmd = op & 3 };
    bool own, bad;
    fuzz_bytes(in, f->hdr, sizeof f->hdr);
    memcpy(&pk.param[2], f->hdr, 16);
    f->len = op & 4 ? fuzz_u32(in) : fuzz_u16(in) % 2048;
    if (pk.cmd == IKC_FRAME) {
        unsigned want = fuzz_u8(in);
        f->n = want % (IKC_PIECES_PER_UNIT + 2);      /* 0 and one too many too */
        uint64_t left = f->len;
        for (unsigned i = 0; i < f->n && i < IKC_PIECES_PER_UNIT; i++) {
            uint8_t shape = fuzz_u8(in);
            uint64_t len = i + 1 == f->n ? left : fuzz_u16(in) % (left + 1);
            if (shape & 0x80)
                len = fuzz_u32(in);
            uint64_t gpa = shape & 0x40 ? (uint64_t)fuzz_u32(in) << (shape & 0x20 ? 32 : 0)
                                        : fuzz_u16(in) * 16u;
            f->piece[i] = (struct ikc_piece){ gpa, len };
            left -= len <= left ? len : left;
        }
        uint64_t list = (uint64_t)f->n * sizeof(struct ikc_piece);
        pk.data = peer_bulk(in, list, op, &own);
        if (own) {
            memcpy(ikc_bulk(evil, self, pk.data, list), f->piece, list);
            units_kept += f->n > IKC_PIECES_PER_UNIT ? 2 : 0;   /* the port cannot free them */
        }
        pk.param[0] = fuzz_u32(in);
        pk.param[1] = f->len;
        pk.param[4] = f->n;
        f->good = own && f->n > 0 && f->n <= IKC_PIECES_PER_UNIT && f->len <= NET_MAX_FRAME &&
                  pieces_ok(f) && f->len >= ETH_HEADER;
        bad = !f->good;
    } else if (pk.cmd == IKC_FRAME_COPY) {
        pk.data = peer_bulk(in, f->len, op, &own);
        if (own) {
            uint8_t *dst = ikc_bulk(evil, self, pk.data, f->len);
            for (uint64_t i = 0; i < f->len; i++)
                dst[i] = (uint8_t)(i * 13 + op);
            f->copy = dst;
            if (f->len > NET_MAX_FRAME)                     /* nor these */
                units_kept += (unsigned)((f->len + IKC_UNIT - 1) / IKC_UNIT);
        }
        pk.param[1] = f->len;
        f->good = own && f->len >= ETH_HEADER && f->len <= NET_MAX_FRAME;
        bad = !f->good;
    } else {
        pk.cmd = op & 8 ? IKC_DONE : fuzz_u32(in);    /* an answer to nothing, or junk */
        pk.param[0] = fuzz_u32(in);
        if (pk.cmd == IKC_FRAME || pk.cmd == IKC_FRAME_COPY)
            pk.cmd = 0;
        bad = true;
    }
    bool done_queue = pk.cmd == IKC_DONE;
    if (ikc_send(evil, victim, done_queue ? IKC_Q_NET_DONE : IKC_Q_NET, &pk) != 0)
        abort();                                /* an input sends fewer than a ring holds */
    if (pk.cmd == IKC_FRAME)
        answers_due[nanswers_due++] = pk.param[0];
    nframes++;
    return bad;
}

static void take_answers(void)
{
    struct ikc_packet p;
    while (ikc_recv(evil, victim, IKC_Q_NET_DONE, &p)) {
        if (p.cmd != IKC_DONE || answered >= nanswers_due || p.param[0] != answers_due[answered])
            abort();
        answered++;
    }
}

static void fuzz_ikc(struct fuzz_input *in)
{
    if (port == NULL)
        ikc_setup();
    nframes = frames_seen = nanswers_due = answered = units_kept = 0;
    take_answers();
    uint64_t bad_before = evil->sh->member[victim].bad;
    bool any_bad = false;
    while (in->left && nframes < MAX_PACKETS) {
        uint8_t op = fuzz_u8(in);
        if ((op & 0x30) == 0x30) {
            nic.room = !nic.room;
            if (nic.room)
                net_backend_resume(port);
        } else if ((op & 0x30) == 0x20) {
            pump(port);
        } else {
            any_bad |= peer_packet(in, op);
        }
        take_answers();
    }
    nic.room = true;
    net_backend_resume(port);
    struct ikc_ring *r = &evil->sh->ring[self][victim][IKC_Q_NET];
    for (int i = 0; i < 100 && atomic_load(&r->tail) != atomic_load(&r->head); i++)
        pump(port);
    pump(port);
    take_answers();
    /* every good frame came, every IKC_FRAME was answered */
    while (frames_seen < nframes && !frames[frames_seen].good)
        frames_seen++;
    if (frames_seen != nframes || atomic_load(&r->tail) != atomic_load(&r->head) ||
        answered != nanswers_due)
        abort();
    /* a malformed packet is counted, a good one is not */
    if ((evil->sh->member[victim].bad > bad_before) != any_bad)
        abort();
    /* the units the port was to free are free; the peer frees the rest */
    if (peer_units() != units_kept)
        abort();
    for (unsigned u = 0; u < IKC_UNITS; u++)
        if (evil->sh->unit_owner[u] == self + 1)
            ikc_bulk_free(evil, self, (uint64_t)u * IKC_UNIT, IKC_UNIT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in = { data, size };
    nic = (struct nic){ .room = true, .link = -1 };
    if (fuzz_u8(&in) & 1)
        fuzz_ikc(&in);
    else
        fuzz_stream(&in);
    return 0;
}

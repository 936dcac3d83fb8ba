/* --net ikc,group=NAME: a port of an Ethernet switch shared by the members of an IKC group
 * (ikc/channel.h), SHIMOS's virtual network device.
 *
 * There is no switch process: each member's port does the switching for the frames its guest
 * sends. As a learning bridge (IEEE 802.1D, 7.8), a port learns which member a source address
 * sits behind from the frames it receives, sends a frame for a learnt unicast address to that
 * member only, and floods broadcast, multicast and unknown destinations to every member with a
 * NIC on the switch. Entries age out after 300 s (802.1D's default), and with their member.
 *
 * Page transfer, one copy: a frame is not copied by its sender. Its port hands each receiver the
 * guest-physical pieces of the transmit chain (a list in one bulk unit); the receiver's monitor
 * copies them from the sender's RAM, which it has mapped, straight into its own guest's receive
 * buffers, and answers DONE; when every receiver has answered (or died), the sender's transmit
 * completes. A frame in more pieces than a bulk unit lists is copied into bulk units instead and
 * completes at once. The offloads pass through untouched: a 64 KiB TCP segment with a partial
 * checksum goes from guest to guest as one frame, and a receiving NIC whose driver did not take
 * them has the monitor finish them.
 *
 * Everything from a peer is checked: a packet's command, length and piece count, its bulk
 * offsets (the sender's own units), and each piece against the sender's RAM. A frame that fails
 * is dropped, counted and still answered, so that its sender never waits for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/clock.h"

#include "backend.h"
#include "ikc_frames.h"

#define FDB_SIZE        256
#define FDB_AGE_NS      (300ull * 1000000000ull)
#define MAX_PENDING     256u    /* transmits in flight: a queue's size at most (VQ_MAX_SIZE) */
#define RECV_PER_PASS   64                      /* frames from one peer, then the guest runs */
#define ETH_HEADER      14

struct fdb_entry {
    uint8_t mac[6];
    uint8_t member;
    bool used;
    uint64_t seen_ns;
};

/* A transmit some receivers still copy from. */
struct pending {
    uint32_t id;
    uint32_t waiting_on;                        /* members, one bit each */
};

struct ikc_port {
    struct net_backend base;
    struct ikc_group *g;
    const struct guestmem *gm;
    char who[64];
    bool stalled[IKC_MAX_MEMBERS];              /* its next frame found no room in the NIC */
    struct fdb_entry fdb[FDB_SIZE];
    struct pending pending[MAX_PENDING];
    struct iovec iov[IKC_PIECES_PER_UNIT];
};

static uint64_t now_ns(void)
{
    return hw_clock_now(&hw_clock_monotonic);
}

/* ---- the forwarding database ---- */

static struct fdb_entry *fdb_find(struct ikc_port *p, const uint8_t *mac)
{
    uint64_t now = now_ns();
    for (unsigned i = 0; i < FDB_SIZE; i++) {
        struct fdb_entry *e = &p->fdb[i];
        if (e->used && now - e->seen_ns > FDB_AGE_NS)
            e->used = false;
        if (e->used && !memcmp(e->mac, mac, 6))
            return e;
    }
    return NULL;
}

static void fdb_learn(struct ikc_port *p, const uint8_t *mac, unsigned member)
{
    if (mac[0] & 1)
        return;                                 /* a group address is never a source */
    struct fdb_entry *e = fdb_find(p, mac), *oldest = &p->fdb[0];
    if (e == NULL) {
        for (unsigned i = 0; i < FDB_SIZE && (e == NULL); i++) {
            if (!p->fdb[i].used)
                e = &p->fdb[i];
            else if (p->fdb[i].seen_ns < oldest->seen_ns)
                oldest = &p->fdb[i];
        }
        if (e == NULL)
            e = oldest;
    }
    memcpy(e->mac, mac, 6);
    e->member = (uint8_t)member;
    e->used = true;
    e->seen_ns = now_ns();
}

/* ---- sending ---- */

static struct pending *pending_slot(struct ikc_port *p, uint32_t id)
{
    return &p->pending[(id & 0xFFFF) % MAX_PENDING];
}

/* The frame as one copy in bulk units, for a chain in too many pieces. */
static bool send_copy(struct ikc_port *p, unsigned to, const uint8_t hdr[16],
                      const struct iovec *iov, unsigned niov, size_t len)
{
    long off = ikc_bulk_alloc(p->g, len);
    if (off < 0)
        return false;
    uint8_t *dst = ikc_bulk(p->g, ikc_self(p->g), (uint64_t)off, len);
    for (unsigned i = 0; i < niov; i++) {
        memcpy(dst, iov[i].iov_base, iov[i].iov_len);
        dst += iov[i].iov_len;
    }
    struct ikc_packet pk = { .cmd = IKC_FRAME_COPY, .param = { 0, len }, .data = (uint64_t)off };
    memcpy(&pk.param[2], hdr, 16);
    if (ikc_send(p->g, to, IKC_Q_NET, &pk) == 0)
        return true;
    ikc_bulk_free(p->g, ikc_self(p->g), (uint64_t)off, len);
    return false;
}

/* The frame's pieces to member (to): true when it went (and will be answered). */
static bool send_pieces(struct ikc_port *p, unsigned to, const uint8_t hdr[16],
                        const struct iovec *iov, unsigned niov, size_t len, uint32_t id)
{
    long off = ikc_piece_list(p->g, p->gm->phys, iov, niov);
    if (off < 0)
        return false;
    struct ikc_packet pk = { .cmd = IKC_FRAME, .param = { id, len, 0, 0, niov },
                             .data = (uint64_t)off };
    memcpy(&pk.param[2], hdr, 16);
    if (ikc_send(p->g, to, IKC_Q_NET, &pk) == 0)
        return true;
    ikc_bulk_free(p->g, ikc_self(p->g), (uint64_t)off, niov * sizeof(struct ikc_piece));
    return false;
}

static bool port_send_chain(struct net_backend *b, const struct net_hdr *h,
                            const struct iovec *iov, unsigned niov, size_t len, uint32_t id)
{
    struct ikc_port *p = (struct ikc_port *)b;
    uint8_t eth[ETH_HEADER];
    if (len < ETH_HEADER)
        return false;                           /* a runt: lost */
    net_iov_read(iov, niov, 0, eth, ETH_HEADER);
    uint8_t hdr[16] = { 0 };
    net_hdr_store(h, hdr);
    struct fdb_entry *e = (eth[0] & 1) ? NULL : fdb_find(p, eth);
    uint32_t targets = 0;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        if (ikc_peer(p->g, m, IKC_DEV_NET) && (e == NULL || e->member == m))
            targets |= 1u << m;
    if (targets == 0 && e != NULL) {            /* learnt behind a member that left: flood */
        e->used = false;
        for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
            if (ikc_peer(p->g, m, IKC_DEV_NET))
                targets |= 1u << m;
    }
    uint32_t waiting = 0;
    bool copy = niov > IKC_PIECES_PER_UNIT;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        if (!(targets & (1u << m)))
            continue;
        if (copy)
            send_copy(p, m, hdr, iov, niov, len);
        else if (send_pieces(p, m, hdr, iov, niov, len, id))
            waiting |= 1u << m;
    }
    if (waiting == 0)
        return false;                           /* copied, or lost (nobody there, rings full) */
    *pending_slot(p, id) = (struct pending){ id, waiting };
    return true;
}

/* A whole frame: one that net_offload_apply() made of a transmit whose offloads the switch does
 * not carry (UDP segmentation), copied to every port through bulk units. */
static void port_send(struct net_backend *b, const struct net_hdr *h, const uint8_t *frame,
                      size_t len)
{
    struct iovec iov = { (void *)frame, len };
    struct ikc_port *p = (struct ikc_port *)b;
    uint8_t hdr[16] = { 0 };
    net_hdr_store(h, hdr);
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        if (ikc_peer(p->g, m, IKC_DEV_NET))
            send_copy(p, m, hdr, &iov, 1, len);
}

/* Member (m) copied transmit (id), or will never: one receiver fewer to wait for. */
static void done(struct ikc_port *p, unsigned m, uint32_t id)
{
    struct pending *pd = pending_slot(p, id);
    if (pd->id != id || !(pd->waiting_on & (1u << m))) {
        ikc_count_bad(p->g);                           /* an answer to nothing of ours */
        return;
    }
    pd->waiting_on &= ~(1u << m);
    if (pd->waiting_on == 0)
        p->base.nic.sent(p->base.nic.opaque, id);
}

/* ---- receiving ---- */

static void answer(struct ikc_port *p, unsigned to, uint64_t id)
{
    struct ikc_packet pk = { .cmd = IKC_DONE, .param = { id } };
    ikc_send(p->g, to, IKC_Q_NET_DONE, &pk);   /* a DONE ring holds every transmit in flight */
}

/* Packet (pk) from member (from) as a frame in pieces: (iov) filled from its checked pieces.
 * Returns the count, or -1 when a check fails. */
static int frame_pieces(struct ikc_port *p, unsigned from, const struct ikc_packet *pk)
{
    uint64_t n = pk->param[4], len = pk->param[1], total;
    if (n == 0 || n > IKC_PIECES_PER_UNIT || len > NET_MAX_FRAME ||
        ikc_pieces(p->g, from, pk->data, n, p->iov, &total))
        return -1;
    return total == len ? (int)n : -1;
}

/* The frame (pk) from (from) into the NIC. False when the NIC has no room: it stays in the ring. */
static bool take_frame(struct ikc_port *p, unsigned from, const struct ikc_packet *pk)
{
    int niov = -1;
    uint64_t len = pk->param[1];
    uint8_t *copy = NULL;
    if (pk->cmd == IKC_FRAME) {
        niov = frame_pieces(p, from, pk);
    } else if (pk->cmd == IKC_FRAME_COPY && len && len <= NET_MAX_FRAME) {
        copy = ikc_bulk(p->g, from, pk->data, len);
        if (copy) {
            p->iov[0] = (struct iovec){ copy, len };
            niov = 1;
        }
    }
    if (niov > 0 && len >= ETH_HEADER) {
        uint8_t hdr_bytes[16];
        memcpy(hdr_bytes, &pk->param[2], 16);
        struct net_hdr h = net_hdr_load(hdr_bytes);
        h.flags &= NET_HDR_F_NEEDS_CSUM;        /* what a sender may ask; the rest is the NIC's */
        uint8_t src[6];                         /* the source address, bytes 6..11 */
        net_iov_read(p->iov, (unsigned)niov, 6, src, sizeof src);
        if (!p->base.nic.receive_iov(p->base.nic.opaque, &h, p->iov, (unsigned)niov, len))
            return false;
        fdb_learn(p, src, from);
    } else {
        ikc_count_bad(p->g);
    }
    if (pk->cmd == IKC_FRAME) {
        if (pk->param[4] && pk->param[4] <= IKC_PIECES_PER_UNIT)
            ikc_bulk_free(p->g, from, pk->data, pk->param[4] * sizeof(struct ikc_piece));
        answer(p, from, pk->param[0]);
    } else if (copy) {
        ikc_bulk_free(p->g, from, pk->data, len);
    }
    return true;
}

static void receive_from(struct ikc_port *p, unsigned m)
{
    struct ikc_packet pk;
    /* a ring's worth of answers at most a pass: a peer that keeps writing them keeps no one */
    for (unsigned i = 0; i < IKC_RING_SLOTS && ikc_recv(p->g, m, IKC_Q_NET_DONE, &pk); i++)
        if (pk.cmd == IKC_DONE)
            done(p, m, (uint32_t)pk.param[0]);
        else
            ikc_count_bad(p->g);
    p->stalled[m] = false;
    for (unsigned i = 0; i < RECV_PER_PASS && ikc_peek(p->g, m, IKC_Q_NET, &pk); i++) {
        if (!take_frame(p, m, &pk)) {
            p->stalled[m] = true;
            return;
        }
        ikc_recv(p->g, m, IKC_Q_NET, &pk);
    }
}

/* ---- the backend ---- */

static void port_fill(struct net_backend *b, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns)
{
    struct ikc_port *p = (struct ikc_port *)b;
    bool stalled = false;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        stalled |= p->stalled[m];
    /* a stalled NIC is woken by its driver (resume), not by more frames it cannot take */
    unsigned mask = 1u << IKC_Q_NET_DONE | (stalled ? 0 : 1u << IKC_Q_NET);
    ikc_fill(p->g, mask, pfd, n, max, deadline_ns);
}

static void port_dispatch(struct net_backend *b)
{
    struct ikc_port *p = (struct ikc_port *)b;
    ikc_dispatch(p->g);
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        if (ikc_peer(p->g, m, 0))
            receive_from(p, m);
}

/* After the guest's transmits: it is running, so its answers and the frames for it are taken
 * now, not at the next timer tick. A transmit completes here as soon as its receivers copied it,
 * which keeps TCP's small-queue limit from stalling a busy sender until its next tick. */
static void port_flush(struct net_backend *b)
{
    struct ikc_port *p = (struct ikc_port *)b;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        if (ikc_peer(p->g, m, 0))
            receive_from(p, m);
}

static void port_resume(struct net_backend *b)
{
    struct ikc_port *p = (struct ikc_port *)b;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        if (p->stalled[m] && ikc_peer(p->g, m, 0))
            receive_from(p, m);
}

/* A peer came or went. One that went answers nothing more: its transmits are done, what was
 * learnt behind it is forgotten. */
static void peer_changed(void *opaque, unsigned m, bool up)
{
    struct ikc_port *p = opaque;
    p->stalled[m] = false;
    if (up)
        return;
    for (unsigned i = 0; i < FDB_SIZE; i++)
        if (p->fdb[i].used && p->fdb[i].member == m)
            p->fdb[i].used = false;
    for (unsigned i = 0; i < MAX_PENDING; i++) {
        struct pending *pd = &p->pending[i];
        if (pd->waiting_on & (1u << m)) {
            pd->waiting_on &= ~(1u << m);
            if (pd->waiting_on == 0)
                p->base.nic.sent(p->base.nic.opaque, pd->id);
        }
    }
}

static void port_free(struct net_backend *b)
{
    struct ikc_port *p = (struct ikc_port *)b;
    ikc_leave(p->g);
    free(p);
}

static const struct net_backend_ops ops = {
    .send = port_send,
    .send_chain = port_send_chain,
    .flush = port_flush,
    .fill = port_fill,
    .dispatch = port_dispatch,
    .resume = port_resume,
    .free = port_free,
};

struct net_backend *net_ikc_new(const struct net_ikc_options *o, const uint8_t mac[6],
                                const struct net_client *nic, const struct guestmem *gm,
                                char *err, size_t errlen)
{
    if (nic->receive_iov == NULL || nic->sent == NULL || gm == NULL) {
        snprintf(err, errlen, "this NIC cannot join a switch");
        return NULL;
    }
    struct ikc_port *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    char desc[IKC_DESC_BYTES];
    snprintf(desc, sizeof desc, "net %02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2],
             mac[3], mac[4], mac[5]);
    uint64_t ram = gm->high_size ? GM_4GIB + gm->high_size : gm->size;
    p->g = ikc_join(o->group, gm->fd, ram, IKC_DEV_NET, desc, err, errlen);
    if (p->g == NULL) {
        free(p);
        return NULL;
    }
    p->base.ops = &ops;
    p->base.nic = *nic;
    /* a peer's guest takes what this one sends as it is, or its NIC finishes it */
    p->base.offloads = NET_OFFLOAD_CSUM | NET_OFFLOAD_TSO4 | NET_OFFLOAD_TSO6 | NET_OFFLOAD_ECN;
    p->gm = gm;
    for (unsigned i = 0; i < MAX_PENDING; i++)
        p->pending[i].id = UINT32_MAX;
    ikc_watch(p->g, peer_changed, p);
    return &p->base;
}

/* Fuzz target: the disks one instance serves another over IKC (block/served.h): the serving side
 * (block/export.c) under hostile users, the using side (block/remote.c) under a hostile server,
 * and the rings between them (ikc/ring.c) under a member that writes garbage into their indices.
 *
 * One group per process, each member with its own sealed memfd of RAM: two exports, "rw" (a
 * writable image) and "ro" (a read-only one); a remote that attached "srv"; and two bare
 * members, `evil` (the exports' user, and the server of "srv") and `other` (a second would-be
 * user). An input is a list of steps: evil and other send ATTACH (the right name, a wrong one,
 * to write or not), READ and WRITE (offset, length, piece count, pieces inside and outside their
 * RAM, lengths that do or do not add up, the list in their own bulk units, in another member's or
 * at an offset of no one's), FLUSH and raw packets; the remote submits requests, and evil reads
 * them and answers (an id in flight, one done, any id, junk commands, any errno); evil writes
 * junk into every slot of a ring it produces and moves its head anywhere, or moves the tail of
 * a ring it reads anywhere.
 *
 * Beyond "no crash", against a model: an export answers each request of its user once, in
 * order, with the errno export.c's rules give (EINVAL when malformed, EROFS for a write on a
 * read-only attach, else 0), attaches and refuses as they say, answers nothing else, and counts
 * exactly the malformed packets; a good READ leaves the image's bytes in the user's pieces and
 * the rest of its RAM as it was, a good WRITE changes the image (read back) as the model does, a
 * bad one changes nothing; a piece list the export could read is freed and no other unit is. The
 * remote sends what was submitted (or refuses as it says), calls back once for each id in flight
 * that a DONE names, with the errno it carries, never for anything else, and counts every other
 * answer. A ring whose head is more than a ring ahead is dropped and counted once, one in range
 * yields exactly its slots (forged ones dropped and counted), and its reader ends at the head; a
 * tail more than a ring behind (or ahead) makes the writer see a full ring: the answer is lost,
 * the request refused. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "block/served.h"
#include "guest.h"
#include "ikc/layout.h"

#define RAM_BYTES   (256u << 10)        /* each member's guest RAM */
#define RW_BYTES    (64u << 10)
#define RO_BYTES    (32u << 10)
#define SRV_BYTES   (1u << 20)          /* the size evil answers for "srv" */
#define MAX_STEPS   64
#define MAX_PKTS    (2 * MAX_STEPS + 8) /* packets a queue of the model holds */
#define FEW_PIECES  8                   /* pieces past these are empty */
#define AREA        ((uint64_t)IKC_UNITS * IKC_UNIT)

/* ---- the members ---- */

struct member {
    struct ikc_group *g;
    unsigned no;
    int fd;                             /* its RAM */
    uint8_t *ram;
};

static struct member evil, other;
static char group[32];

/* The units of the bulk area as the model has them: 0 free, else evil's or other's number + 1
 * (the remote's units are counted apart). */
static uint8_t owner_want[IKC_UNITS];

static uint64_t fuzz_u64(struct fuzz_input *in)
{
    uint64_t high = fuzz_u32(in);
    return high << 32 | fuzz_u32(in);
}

static void mark_units(uint64_t off, uint64_t bytes, uint8_t owner)
{
    for (uint64_t u = off / IKC_UNIT; u < (off + bytes + IKC_UNIT - 1) / IKC_UNIT; u++)
        owner_want[u] = owner;
}

/* channel.h: a range is a member's when it starts on a unit in the area and each of its units
 * is that member's. */
static bool model_owned(unsigned m, uint64_t off, uint64_t bytes)
{
    if (bytes == 0 || off % IKC_UNIT || off >= AREA || bytes > AREA - off)
        return false;
    for (uint64_t u = off / IKC_UNIT; u < (off + bytes + IKC_UNIT - 1) / IKC_UNIT; u++)
        if (owner_want[u] != m + 1)
            return false;
    return true;
}

/* ---- the serving side ---- */

struct served {
    const char *name;
    uint64_t size;
    bool writable;
    struct disk_export *e;
    unsigned no;
    int ram_fd;
    int fd;                             /* the image: a memfd */
    uint8_t *pattern;                   /* its bytes at the start of an input */
    uint8_t *want;                      /* and as the model has them */
    bool dirty, evil_writes;
    struct { unsigned from; bool lost; struct ikc_packet p; } pending[MAX_PKTS];
    unsigned npending;
    struct ikc_packet owed[2][MAX_PKTS];    /* the answers due to evil [0] and other [1] */
    unsigned nowed[2];
    uint64_t bad_before, bad_want;
};

static struct served rw = { .name = "rw", .size = RW_BYTES, .writable = true };
static struct served ro = { .name = "ro", .size = RO_BYTES };
static uint8_t ram_pattern[RAM_BYTES], ram_want[RAM_BYTES];    /* evil's RAM */
static bool ram_dirty;

static void send_blk(struct member *from, struct served *s, const struct ikc_packet *p, bool lost)
{
    if (s->npending == MAX_PKTS || ikc_send(from->g, s->no, IKC_Q_BLK, p) != 0)
        abort();                        /* an input sends fewer than a ring holds */
    s->pending[s->npending].from = from == &other;
    s->pending[s->npending].lost = lost;
    s->pending[s->npending++].p = *p;
}

/* An ATTACH from evil (from 0) or other, as export.c answers it. */
static struct ikc_packet model_attach(struct served *s, unsigned from, const struct ikc_packet *p)
{
    char name[IKC_NAME_BYTES] = { 0 };
    memcpy(name, p->param, sizeof name - 1);
    bool writes = p->param[4] == 1;
    struct ikc_packet a = { .cmd = SERVED_REFUSED, .param = { SERVED_NO_DISK } };
    if (strcmp(name, s->name) != 0)
        return a;
    if (from != 0) {                    /* evil is the user, and stays */
        a.param[0] = SERVED_BUSY;
        a.param[1] = evil.no;
        a.param[2] = (uint64_t)getpid();
    } else if (writes && !s->writable) {
        a.param[0] = SERVED_READONLY;
    } else {
        s->evil_writes = writes;
        a = (struct ikc_packet){ .cmd = SERVED_ATTACHED, .param = { s->size, writes } };
    }
    return a;
}

/* A READ or WRITE of evil's, as export.c's rules have it: its errno, (*bad) when it is
 * malformed (to be counted). */
static uint64_t model_transfer(struct served *s, const struct ikc_packet *p, bool *bad)
{
    uint64_t off = p->param[1], len = p->param[2], n = p->param[3];
    *bad = true;
    if (n == 0 || n > SERVED_MAX_PIECES ||
        !model_owned(evil.no, p->data, n * sizeof(struct ikc_piece)))
        return EINVAL;
    struct ikc_piece piece[SERVED_MAX_PIECES];
    memcpy(piece, &evil.g->sh->bulk[0][0] + p->data, n * sizeof *piece);
    mark_units(p->data, n * sizeof *piece, 0);     /* read: the list is freed, good or not */
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (piece[i].gpa > RAM_BYTES || piece[i].len > RAM_BYTES - piece[i].gpa)
            return EINVAL;
        total += piece[i].len;
    }
    if (total != len || len % DISK_SECTOR || off % DISK_SECTOR || off > s->size ||
        len > s->size - off)
        return EINVAL;
    *bad = false;
    if (p->cmd == SERVED_WRITE && !s->evil_writes)
        return EROFS;
    for (uint64_t i = 0, at = off; i < n; at += piece[i++].len) {
        if (p->cmd == SERVED_READ)
            memcpy(ram_want + piece[i].gpa, s->want + at, piece[i].len);
        else
            memcpy(s->want + at, ram_want + piece[i].gpa, piece[i].len);
    }
    ram_dirty |= p->cmd == SERVED_READ && len;
    s->dirty |= p->cmd == SERVED_WRITE && len;
    return 0;
}

/* What the export did with the packets sent since the last pump, in order. */
static void model_apply(struct served *s)
{
    for (unsigned i = 0; i < s->npending; i++) {
        unsigned from = s->pending[i].from;
        const struct ikc_packet *p = &s->pending[i].p;
        struct ikc_packet a = { 0 };
        bool bad = false;
        if (p->cmd == SERVED_ATTACH) {
            a = model_attach(s, from, p);
        } else if ((p->cmd == SERVED_READ || p->cmd == SERVED_WRITE ||
                    p->cmd == SERVED_FLUSH) && from == 0) {
            uint64_t err = p->cmd == SERVED_FLUSH ? 0 : model_transfer(s, p, &bad);
            a = (struct ikc_packet){ .cmd = SERVED_DONE, .param = { p->param[0], err } };
        } else {
            bad = true;                 /* not a request, or not from the user */
        }
        s->bad_want += bad;
        if (a.cmd && !s->pending[i].lost)
            s->owed[from][s->nowed[from]++] = a;
    }
    s->npending = 0;
}

static void take_answers(struct served *s)
{
    struct member *to[2] = { &evil, &other };
    for (unsigned k = 0; k < 2; k++) {
        struct ikc_packet p;
        unsigned i = 0;
        while (ikc_recv(to[k]->g, s->no, IKC_Q_BLK_DONE, &p)) {
            const struct ikc_packet *want = &s->owed[k][i++];
            if (i > s->nowed[k] || p.cmd != want->cmd || p.data != want->data ||
                memcmp(p.param, want->param, sizeof p.param) != 0)
                abort();
        }
        if (i != s->nowed[k])
            abort();                    /* an answer that never came */
        s->nowed[k] = 0;
    }
}

static void pump_exports(void)
{
    struct pollfd pfd[40];
    unsigned n = 0;
    uint64_t deadline = UINT64_MAX;
    disk_export_fill(rw.e, pfd, &n, 40, &deadline);
    disk_export_fill(ro.e, pfd, &n, 40, &deadline);
    poll(pfd, n, 0);
    disk_export_dispatch(rw.e);
    disk_export_dispatch(ro.e);
    model_apply(&rw);
    model_apply(&ro);
    take_answers(&rw);
    take_answers(&ro);
}

static void send_attach(struct fuzz_input *in, struct member *from, struct served *s)
{
    uint8_t how = fuzz_u8(in);
    char name[32] = { 0 };
    if ((how & 3) == 3)
        fuzz_bytes(in, name, sizeof name);
    else
        snprintf(name, sizeof name, "%s",
                 (how & 3) == 1 ? (s == &rw ? ro.name : rw.name) : s->name);
    if ((how & 3) == 2)
        fuzz_bytes(in, name + 3, sizeof name - 3);  /* after the name's NUL */
    struct ikc_packet p = { .cmd = SERVED_ATTACH };
    memcpy(p.param, name, sizeof name);
    p.param[4] = how & 4 ? fuzz_u32(in) : how >> 3 & 1;
    send_blk(from, s, &p, false);
}

/* Where the list of (n) pieces goes: (where) 0 the sender's own units, 1 an aligned offset the
 * input picks, 2 the other bare member's units, 3 any offset. */
static uint64_t list_at(struct fuzz_input *in, struct member *from, unsigned where,
                        const struct ikc_piece *piece, uint64_t n)
{
    struct member *owner = where == 2 ? (from == &evil ? &other : &evil) : from;
    uint64_t bytes = n * sizeof *piece;
    long off = (where == 0 || where == 2) && n && n <= SERVED_MAX_PIECES ?
               ikc_bulk_alloc(owner->g, bytes) : -1;
    if (off < 0)
        return fuzz_u16(in) % (IKC_UNITS + 8) * (uint64_t)IKC_UNIT + (where == 3 ? fuzz_u8(in) : 0);
    memcpy(ikc_bulk(owner->g, owner->no, (uint64_t)off, bytes), piece, bytes);
    mark_units((uint64_t)off, bytes, (uint8_t)(owner->no + 1));
    return (uint64_t)off;
}

static void send_transfer(struct fuzz_input *in, struct member *from, struct served *s,
                          bool write)
{
    uint8_t shape = fuzz_u8(in);
    uint64_t sectors = s->size / DISK_SECTOR;
    uint64_t off = fuzz_u8(in) % (sectors + 2) * DISK_SECTOR;
    uint64_t len = fuzz_u8(in) % 17 * DISK_SECTOR;
    if (shape & 1)
        off += fuzz_u8(in) | 1u;                        /* off a sector */
    if (shape & 2)
        len += fuzz_u8(in) | 1u;
    if (shape & 4)
        off = fuzz_u64(in);
    uint64_t n = 1 + fuzz_u8(in) % FEW_PIECES;
    if (shape & 8) {
        static const uint64_t odd[] = { 0, 255, 256, 257, 4096 };
        n = odd[fuzz_u8(in) % 5];
    }
    static struct ikc_piece piece[SERVED_MAX_PIECES];
    memset(piece, 0, sizeof piece);
    uint64_t few = n < FEW_PIECES ? n : FEW_PIECES, left = len;
    for (uint64_t i = 0; i < few; i++) {
        uint64_t cut = i + 1 == few ? left : fuzz_u8(in) * 16u;
        cut = cut < left ? cut : left;
        piece[i] = (struct ikc_piece){ fuzz_u16(in) * 4u, cut };
        left -= cut;
    }
    if (shape & 0x10 && few) {                          /* outside its RAM, mostly */
        struct ikc_piece *one = &piece[fuzz_u8(in) % few];
        one->gpa = fuzz_u64(in);
    }
    if (shape & 0x20 && few) {                          /* not adding up */
        struct ikc_piece *one = &piece[fuzz_u8(in) % few];
        one->len += fuzz_u8(in) + 1u;
    }
    struct ikc_packet p = { .cmd = write ? SERVED_WRITE : SERVED_READ,
                            .param = { fuzz_u32(in), off, len, n } };
    p.data = list_at(in, from, shape >> 6, piece, n <= SERVED_MAX_PIECES ? n : 0);
    send_blk(from, s, &p, false);
}

/* Anything else, or anything at all: the model takes any command. */
static void send_raw(struct fuzz_input *in, struct member *from, struct served *s)
{
    struct ikc_packet p = { .cmd = fuzz_u32(in) };
    fuzz_bytes(in, p.param, sizeof p.param);
    p.data = fuzz_u16(in) * (uint64_t)IKC_UNIT;
    send_blk(from, s, &p, false);
}

/* Bytes of evil's RAM, between two pumps (nothing in flight reads or writes it meanwhile). */
static void poke(struct fuzz_input *in)
{
    pump_exports();
    uint64_t at = fuzz_u16(in) * 4u;
    uint8_t buf[64];
    size_t k = fuzz_bytes(in, buf, fuzz_u8(in) % sizeof buf);
    k = k < RAM_BYTES - at ? k : RAM_BYTES - at;
    memcpy(evil.ram + at, buf, k);
    memcpy(ram_want + at, buf, k);
    ram_dirty = true;
}

/* ---- the using side ---- */

struct request {
    unsigned cmd;
    uint32_t id;
    uint64_t off, len;
    unsigned n;
    struct ikc_piece piece[FEW_PIECES];
};

static struct disk_remote *remote;
static unsigned remote_no;
static int remote_fd;
static uint8_t *remote_ram;
static struct request sent[MAX_PKTS];   /* submitted, in order; evil has read (nread) */
static unsigned nsent, nread;
static uint32_t in_flight[MAX_PKTS], done_ids[MAX_PKTS];
static unsigned nin_flight, ndone;
static struct ikc_packet answers[MAX_PKTS];     /* evil's, not yet pumped */
static unsigned nanswers;
static struct { uint32_t id; int err; } calls[MAX_PKTS];
static unsigned ncalls, called;
static unsigned units_kept;             /* the remote's units evil has not freed */
static uint64_t remote_bad_before, remote_bad_want;

static void remote_done(void *opaque, uint32_t id, int err)
{
    (void)opaque;
    if (called == ncalls || calls[called].id != id || calls[called].err != err)
        abort();                        /* a callback the model does not expect */
    called++;
}

static int flight_index(uint64_t id)
{
    for (unsigned i = 0; i < nin_flight; i++)
        if (in_flight[i] == id)
            return (int)i;
    return -1;
}

/* A submit, as the real caller (virtio/blk.c) makes them; (ring_full): the request ring is. */
static void submit(struct fuzz_input *in, bool ring_full)
{
    static const unsigned cmds[] = { SERVED_READ, SERVED_WRITE, SERVED_FLUSH };
    struct request q = { .cmd = cmds[fuzz_u8(in) % 3] };
    uint8_t how = fuzz_u8(in);
    q.id = how & 0x80 ? fuzz_u32(in) : (how & 0x3fu) | (how & 0x40 ? 0x100u : 0);
    q.off = fuzz_u16(in) * (uint64_t)DISK_SECTOR;
    q.n = q.cmd == SERVED_FLUSH ? 0 : 1 + how % FEW_PIECES;
    if (how & 0x20 && q.cmd != SERVED_FLUSH)
        q.n = (const unsigned[]){ 0, 256, 257 }[fuzz_u8(in) % 3];
    static struct iovec iov[SERVED_MAX_PIECES + 1];
    for (unsigned i = 0; i < q.n; i++) {
        uint64_t gpa = i < FEW_PIECES ? fuzz_u16(in) * 4u : 0;
        uint64_t len = i < FEW_PIECES ? fuzz_u8(in) * 16u : 0;
        len = len < RAM_BYTES - gpa ? len : RAM_BYTES - gpa;
        if (i < FEW_PIECES)
            q.piece[i] = (struct ikc_piece){ gpa, len };
        iov[i] = (struct iovec){ remote_ram + gpa, len };
        q.len += len;
    }
    /* served.h: 0, or an errno now; an id whose slot (remote.c: the id modulo 256) is taken,
     * too many pieces, or a full ring is EIO; no list (none to write) is EAGAIN */
    int want = 0;
    for (unsigned i = 0; i < nin_flight; i++)
        if (in_flight[i] % 256 == q.id % 256)
            want = EIO;
    if (!want && q.n > SERVED_MAX_PIECES)
        want = EIO;
    else if (!want && q.cmd != SERVED_FLUSH && q.n == 0)
        want = EAGAIN;
    else if (!want && ring_full)
        want = EIO;
    if (disk_remote_submit(remote, q.cmd, q.off, q.len, iov, q.n, q.id) != want)
        abort();
    if (want == 0 && nsent < MAX_PKTS) {
        in_flight[nin_flight++] = q.id;
        sent[nsent++] = q;
    } else if (want == 0) {
        abort();
    }
}

/* Evil reads the requests: each is what was submitted, its list in the remote's units. */
static void serve(bool free_lists)
{
    struct ikc_packet p;
    while (ikc_recv(evil.g, remote_no, IKC_Q_BLK, &p)) {
        if (nread == nsent)
            abort();                    /* a request never submitted */
        const struct request *q = &sent[nread++];
        if (p.cmd != q->cmd || p.param[0] != q->id || p.param[1] != q->off ||
            p.param[2] != q->len || p.param[3] != q->n || p.param[4] || p.param[5])
            abort();
        if (q->cmd == SERVED_FLUSH) {
            if (p.data != 0)
                abort();
            continue;
        }
        uint64_t bytes = q->n * sizeof(struct ikc_piece);
        const struct ikc_piece *list = (const void *)ikc_bulk(evil.g, remote_no, p.data, bytes);
        if (list == NULL)
            abort();
        for (unsigned i = 0; i < q->n; i++) {
            struct ikc_piece want = i < FEW_PIECES ? q->piece[i] : (struct ikc_piece){ 0, 0 };
            if (list[i].gpa != want.gpa || list[i].len != want.len)
                abort();
        }
        if (free_lists)
            ikc_bulk_free(evil.g, remote_no, p.data, bytes);
        else
            units_kept += (unsigned)((bytes + IKC_UNIT - 1) / IKC_UNIT);
    }
}

static void send_answer(const struct ikc_packet *p)
{
    if (nanswers == MAX_PKTS || ikc_send(evil.g, remote_no, IKC_Q_BLK_DONE, p) != 0)
        abort();
    answers[nanswers++] = *p;
}

static void answer(struct fuzz_input *in, bool junk)
{
    uint8_t how = fuzz_u8(in);
    struct ikc_packet p = { .cmd = junk ? fuzz_u32(in) : SERVED_DONE };
    uint64_t id;
    switch (how & 3) {
    case 0:                                             /* one in flight */
        id = nin_flight ? in_flight[fuzz_u8(in) % nin_flight] : fuzz_u32(in);
        break;
    case 1:                                             /* one done already */
        id = ndone ? done_ids[fuzz_u8(in) % ndone] : fuzz_u32(in);
        break;
    case 2:
        id = fuzz_u32(in);
        break;
    default:                                            /* one in flight, its high half not 0 */
        id = (nin_flight ? in_flight[fuzz_u8(in) % nin_flight] : 0) |
             (uint64_t)(fuzz_u8(in) | 1u) << 32;
        break;
    }
    p.param[0] = id;
    switch (how >> 2 & 3) {                             /* 0, an errno, maybe, or none */
    case 1: p.param[1] = fuzz_u8(in); break;
    case 2: p.param[1] = fuzz_u16(in); break;
    case 3: p.param[1] = fuzz_u64(in); break;
    }
    if (how & 0x10)
        fuzz_bytes(in, &p.param[2], 4 * sizeof p.param[2]);
    send_answer(&p);
}

/* What remote.c makes of an answer's errno: 0, an errno, or EIO for what is none. */
static int answered_err(uint64_t v)
{
    return v == 0 ? 0 : v < 4096 ? (int)v : EIO;
}

static void pump_remote(void)
{
    ncalls = called = 0;
    for (unsigned i = 0; i < nanswers; i++) {
        const struct ikc_packet *a = &answers[i];
        int k = flight_index(a->param[0]);
        if (a->cmd == SERVED_DONE && k >= 0) {
            calls[ncalls].id = in_flight[k];
            calls[ncalls++].err = answered_err(a->param[1]);
            if (ndone < MAX_PKTS)
                done_ids[ndone++] = in_flight[k];
            in_flight[k] = in_flight[--nin_flight];
        } else {
            remote_bad_want++;          /* an answer to nothing asked */
        }
    }
    nanswers = 0;
    struct pollfd pfd[40];
    unsigned n = 0;
    uint64_t deadline = UINT64_MAX;
    disk_remote_fill(remote, pfd, &n, 40, &deadline);
    poll(pfd, n, 0);
    disk_remote_dispatch(remote);
    if (called != ncalls)
        abort();                        /* a callback that never came */
}

/* ---- the rings ---- */

/* Evil fills every slot of a ring it writes with junk (or packets that name another sender) and
 * moves its head: more than a ring ahead, the reader drops them and counts once; else it reads
 * each and counts each. Either way it ends at the head. */
static void corrupt_head(struct fuzz_input *in, uint8_t op)
{
    bool to_remote = op & 0x10;
    unsigned to = to_remote ? remote_no : op & 0x20 ? ro.no : rw.no;
    enum ikc_queue q = to_remote ? IKC_Q_BLK_DONE : IKC_Q_BLK;
    if (to_remote)
        pump_remote();
    else
        pump_exports();
    struct ikc_ring *r = &evil.g->sh->ring[evil.no][to][q];
    uint32_t head = evil.g->peer[to].head[q];
    if (atomic_load(&r->tail) != head)
        abort();
    uint8_t forge = fuzz_u8(in);
    for (unsigned i = 0; i < IKC_RING_SLOTS; i++) {
        bool forged = forge >> (i & 7) & 1;
        struct ikc_packet p = { .cmd = 0x100 + i, .sender = evil.no };
        if (forged)                     /* what would be a good packet, from someone else */
            p = (struct ikc_packet){ .cmd = to_remote ? SERVED_DONE : SERVED_FLUSH,
                                     .sender = evil.no + 1 + i,
                                     .param = { nin_flight ? in_flight[i % nin_flight] : i } };
        r->slot[i] = p;
    }
    uint32_t delta = op & 0x40 ? fuzz_u32(in) : fuzz_u16(in) % (IKC_RING_SLOTS + 4);
    atomic_store(&r->head, head + delta);
    uint64_t bad = delta > IKC_RING_SLOTS ? 1 : delta;
    if (to_remote) {
        remote_bad_want += bad;
        pump_remote();
    } else {
        (to == rw.no ? &rw : &ro)->bad_want += bad;
        pump_exports();
    }
    if (atomic_load(&r->tail) != head + delta)
        abort();
    evil.g->peer[to].head[q] = head + delta;    /* evil goes on from there */
}

/* Evil moves the tail of a ring it reads: the writer must see it full when it is more than a
 * ring behind (or ahead), and lose the answer or refuse the request. */
static void corrupt_tail(struct fuzz_input *in, uint8_t op)
{
    bool from_remote = op & 0x10;
    unsigned from = from_remote ? remote_no : rw.no;
    enum ikc_queue q = from_remote ? IKC_Q_BLK : IKC_Q_BLK_DONE;
    if (from_remote)
        serve(true);
    else
        pump_exports();
    struct ikc_ring *r = &evil.g->sh->ring[from][evil.no][q];
    uint32_t head = atomic_load(&r->head);
    uint32_t tail = op & 0x40 ? fuzz_u32(in) : head - fuzz_u16(in) % (IKC_RING_SLOTS + 4);
    atomic_store(&r->tail, tail);
    bool full = head - tail >= IKC_RING_SLOTS;
    if (from_remote) {
        submit(in, full);
    } else {
        struct ikc_packet p = { .cmd = SERVED_FLUSH, .param = { fuzz_u32(in) } };
        send_blk(&evil, &rw, &p, full);
        pump_exports();
    }
    atomic_store(&r->tail, evil.g->peer[from].tail[q]);    /* where evil really is */
}

/* ---- set-up ---- */

static void image_make(struct served *s, unsigned seed)
{
    s->fd = memfd_create("fuzz-ikc-disk-image", MFD_CLOEXEC);
    s->pattern = malloc(s->size);
    s->want = malloc(s->size);
    if (s->fd < 0 || s->pattern == NULL || s->want == NULL)
        abort();
    for (uint64_t i = 0; i < s->size; i++)
        s->pattern[i] = (uint8_t)(i / DISK_SECTOR * seed + i % 251);
    memcpy(s->want, s->pattern, s->size);
    if (pwrite(s->fd, s->pattern, s->size, 0) != (ssize_t)s->size)
        abort();
    char path[64], err[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", s->fd);
    struct disk_spec spec = { .path = path, .readonly = !s->writable };
    struct disk_image *d = disk_image_open(&spec, err, sizeof err);
    uint8_t *ram;
    s->ram_fd = fuzz_sealed_ram(RAM_BYTES, &ram);
    struct guestmem gm = { .fd = s->ram_fd, .phys = ram, .size = RAM_BYTES };
    s->e = d ? disk_export_new(group, s->name, d, &gm, err, sizeof err) : NULL;
    if (s->e == NULL) {
        fprintf(stderr, "fuzz_ikc_disk: %s\n", err);
        abort();
    }
}

static void member_join(struct member *m, const char *desc)
{
    char err[256];
    m->fd = fuzz_sealed_ram(RAM_BYTES, &m->ram);
    m->g = ikc_join(group, m->fd, RAM_BYTES, 0, desc, err, sizeof err);
    if (m->g == NULL) {
        fprintf(stderr, "fuzz_ikc_disk: %s\n", err);
        abort();
    }
    m->no = ikc_self(m->g);
}

/* Evil answers the remote's ATTACH while disk_remote_open waits for it. */
static void *serve_attach(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4000; i++) {
        struct pollfd pfd[40];
        unsigned n = 0;
        uint64_t deadline = UINT64_MAX;
        ikc_fill(evil.g, 1u << IKC_Q_BLK, pfd, &n, 40, &deadline);
        poll(pfd, n, 5);
        ikc_dispatch(evil.g);
        struct ikc_packet p;
        for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
            while (ikc_recv(evil.g, m, IKC_Q_BLK, &p)) {
                if (p.cmd != SERVED_ATTACH || memcmp(p.param, "srv", 4) != 0)
                    continue;
                p = (struct ikc_packet){ .cmd = SERVED_ATTACHED, .param = { SRV_BYTES, 1 } };
                ikc_send(evil.g, m, IKC_Q_BLK_DONE, &p);
                remote_no = m;
                return NULL;
            }
        }
    }
    return NULL;
}

static void cleanup(void)
{
    disk_remote_free(remote);
    disk_export_free(rw.e);
    disk_export_free(ro.e);
    ikc_leave(evil.g);
    ikc_leave(other.g);
}

static void setup(void)
{
    snprintf(group, sizeof group, "fuzzdisk-%d", (int)getpid());
    image_make(&rw, 7);
    image_make(&ro, 13);
    member_join(&evil, "evil");
    rw.no = (unsigned)ikc_find(evil.g, rw.name);
    ro.no = (unsigned)ikc_find(evil.g, ro.name);
    if (ikc_offer(evil.g, "srv") != 0)
        abort();
    remote_fd = fuzz_sealed_ram(RAM_BYTES, &remote_ram);
    static struct guestmem gm;          /* the remote keeps it, as run.c's */
    gm = (struct guestmem){ .fd = remote_fd, .phys = remote_ram, .size = RAM_BYTES };
    char err[256];
    pthread_t t;
    if (pthread_create(&t, NULL, serve_attach, NULL) != 0)
        abort();
    remote = disk_remote_open(group, "srv", false, &gm, err, sizeof err);
    pthread_join(t, NULL);
    if (remote == NULL) {
        fprintf(stderr, "fuzz_ikc_disk: %s\n", err);
        abort();
    }
    disk_remote_attach(remote, remote_done, NULL);
    /* Last: group.c keeps 4 handles a process to share, the exports', evil's and the remote's. */
    member_join(&other, "other");
    /* Every member sees every other. The exports' and the remote's views are their handles,
     * which ikc_join gives a second device on the same RAM too. */
    struct ikc_group *view[5] = { evil.g, other.g };
    int fds[3] = { rw.ram_fd, ro.ram_fd, remote_fd };
    unsigned nos[3] = { rw.no, ro.no, remote_no };
    for (unsigned i = 0; i < 3; i++) {
        view[2 + i] = ikc_join(group, fds[i], RAM_BYTES, 0, "", err, sizeof err);
        if (view[2 + i] == NULL || ikc_self(view[2 + i]) != nos[i])
            abort();                    /* not the handle shared (group.c keeps 4 a process) */
    }
    bool all = false;
    for (int i = 0; i < 2000 && !all; i++) {
        struct pollfd pfd[80];
        unsigned n = 0;
        uint64_t deadline = UINT64_MAX;
        disk_export_fill(rw.e, pfd, &n, 80, &deadline);
        disk_export_fill(ro.e, pfd, &n, 80, &deadline);
        disk_remote_fill(remote, pfd, &n, 80, &deadline);
        ikc_fill(evil.g, 0, pfd, &n, 80, &deadline);
        ikc_fill(other.g, 0, pfd, &n, 80, &deadline);
        poll(pfd, n, 5);
        disk_export_dispatch(rw.e);
        disk_export_dispatch(ro.e);
        disk_remote_dispatch(remote);
        ikc_dispatch(evil.g);
        ikc_dispatch(other.g);
        all = true;
        for (unsigned a = 0; a < 5; a++)
            for (unsigned b = 0; b < 5; b++)
                all &= a == b || ikc_peer(view[a], ikc_self(view[b]), 0);
    }
    if (!all)
        abort();
    for (unsigned i = 2; i < 5; i++)
        ikc_leave(view[i]);             /* the second handle only */
    /* All have it mapped: the name can go, so that no run leaves it in /dev/shm. */
    char path[80];
    ikc_shm_name(group, path, sizeof path);
    shm_unlink(path);
    atexit(cleanup);
    for (unsigned i = 0; i < RAM_BYTES; i++)
        ram_pattern[i] = (uint8_t)(i * 31 + (i >> 12));
    memcpy(evil.ram, ram_pattern, RAM_BYTES);
    memcpy(ram_want, ram_pattern, RAM_BYTES);
    /* evil is the user of both: writing "rw", reading "ro" */
    struct ikc_packet p = { .cmd = SERVED_ATTACH, .param = { [4] = 1 } };
    memcpy(p.param, rw.name, strlen(rw.name));
    send_blk(&evil, &rw, &p, false);
    p = (struct ikc_packet){ .cmd = SERVED_ATTACH };
    memcpy(p.param, ro.name, strlen(ro.name));
    send_blk(&evil, &ro, &p, false);
    pump_exports();
    if (!rw.evil_writes)
        abort();
}

/* ---- one input ---- */

static void begin(void)
{
    struct ikc_shared *sh = evil.g->sh;
    for (unsigned u = 0; u < IKC_UNITS; u++)
        if (sh->unit_owner[u] != 0)
            abort();                    /* the last input freed them all */
    sh->bulk_hint = 0;                  /* the same offsets on every run */
    rw.bad_before = sh->member[rw.no].bad;
    ro.bad_before = sh->member[ro.no].bad;
    remote_bad_before = sh->member[remote_no].bad;
    rw.bad_want = ro.bad_want = remote_bad_want = 0;
}

static void free_units(unsigned m)
{
    for (unsigned u = 0; u < IKC_UNITS; u++)
        if (evil.g->sh->unit_owner[u] == m + 1)
            ikc_bulk_free(evil.g, m, (uint64_t)u * IKC_UNIT, IKC_UNIT);
}

static void finish(void)
{
    struct ikc_shared *sh = evil.g->sh;
    /* the remote: every request read and answered, its lists as evil left them */
    serve(true);
    for (unsigned i = 0; i < nin_flight; i++)
        send_answer(&(struct ikc_packet){ .cmd = SERVED_DONE, .param = { in_flight[i] } });
    pump_remote();
    if (nin_flight != 0 || nread != nsent)
        abort();
    unsigned kept = 0;
    for (unsigned u = 0; u < IKC_UNITS; u++)
        kept += sh->unit_owner[u] == remote_no + 1;
    if (kept != units_kept || sh->member[remote_no].bad - remote_bad_before != remote_bad_want)
        abort();
    free_units(remote_no);
    nsent = nread = ndone = units_kept = 0;
    /* the exports: everything answered; RAM, image, units as modelled; evil writes "rw" again */
    pump_exports();
    if (!rw.evil_writes) {
        struct ikc_packet p = { .cmd = SERVED_ATTACH, .param = { [4] = 1 } };
        memcpy(p.param, rw.name, strlen(rw.name));
        send_blk(&evil, &rw, &p, false);
    }
    pump_exports();
    static uint8_t image[RW_BYTES];
    if (!rw.evil_writes || memcmp(evil.ram, ram_want, RAM_BYTES) != 0 ||
        pread(rw.fd, image, RW_BYTES, 0) != RW_BYTES || memcmp(image, rw.want, RW_BYTES) != 0)
        abort();
    for (unsigned u = 0; u < IKC_UNITS; u++)
        if ((sh->unit_owner[u] == evil.no + 1) != (owner_want[u] == evil.no + 1) ||
            (sh->unit_owner[u] == other.no + 1) != (owner_want[u] == other.no + 1))
            abort();
    if (sh->member[rw.no].bad - rw.bad_before != rw.bad_want ||
        sh->member[ro.no].bad - ro.bad_before != ro.bad_want)
        abort();
    free_units(evil.no);
    free_units(other.no);
    memset(owner_want, 0, sizeof owner_want);
    if (ram_dirty) {
        memcpy(evil.ram, ram_pattern, RAM_BYTES);
        memcpy(ram_want, ram_pattern, RAM_BYTES);
        ram_dirty = false;
    }
    if (rw.dirty) {
        if (pwrite(rw.fd, rw.pattern, RW_BYTES, 0) != RW_BYTES)
            abort();
        memcpy(rw.want, rw.pattern, RW_BYTES);
        rw.dirty = false;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (remote == NULL)
        setup();
    struct fuzz_input in = { data, size };
    begin();
    for (unsigned step = 0; in.left && step < MAX_STEPS; step++) {
        uint8_t op = fuzz_u8(&in);
        struct member *from = op & 0x80 ? &other : &evil;
        struct served *to = op & 0x40 ? &ro : &rw;
        switch (op & 15) {
        case 0: send_attach(&in, from, to); break;
        case 1: send_transfer(&in, from, to, false); break;
        case 2: send_transfer(&in, from, to, true); break;
        case 3: send_blk(from, to, &(struct ikc_packet){ .cmd = SERVED_FLUSH,
                                                         .param = { fuzz_u32(&in) } }, false);
                break;
        case 4: send_raw(&in, from, to); break;
        case 5: pump_exports(); break;
        case 6: poke(&in); break;
        case 7: case 8: submit(&in, false); break;
        case 9: serve(op & 0x10); break;
        case 10: answer(&in, false); break;
        case 11: answer(&in, true); break;
        case 12: pump_remote(); break;
        case 13: corrupt_head(&in, op); break;
        case 14: corrupt_tail(&in, op); break;
        case 15: pump_exports(); pump_remote(); break;
        }
    }
    finish();
    return 0;
}

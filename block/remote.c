/* --disk ikc:NAME: a disk another member of the IKC group serves (served.h), as this guest's
 * virtio disk. Requests go as pieces of this guest's RAM, and the server's answers come back on
 * their own ring. When the server goes, every request in flight ends with EIO, as on a disk
 * that was pulled, and so do the ones after.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/clock.h"

#include "served.h"

#define FIND_NS     (3ull * 1000000000ull)     /* for a member that serves the name to join */
#define ATTACH_NS   (10ull * 1000000000ull)    /* for it to answer */
#define MAX_IDS     256u                /* requests in flight: a queue's worth (VQ_MAX_SIZE) */

struct disk_remote {
    struct ikc_group *g;
    const struct guestmem *gm;
    int server;                         /* the member that serves it; -1 once it is gone */
    uint64_t size;
    bool writable;
    disk_remote_done_fn *done;
    void *opaque;
    bool in_flight[MAX_IDS];            /* by id modulo MAX_IDS: what the server still owes */
    uint32_t id[MAX_IDS];
};

static uint64_t now_ns(void)
{
    return hw_clock_now(&hw_clock_monotonic);
}

/* The server went: what it owed ends with EIO. */
static void server_gone(struct disk_remote *r)
{
    r->server = -1;
    for (unsigned i = 0; i < MAX_IDS; i++) {
        if (r->in_flight[i]) {
            r->in_flight[i] = false;
            if (r->done)
                r->done(r->opaque, r->id[i], EIO);
        }
    }
}

static void peer_changed(void *opaque, unsigned m, bool up)
{
    struct disk_remote *r = opaque;
    if (!up && r->server == (int)m)
        server_gone(r);
}

/* One turn of the channel while the monitor waits for the server at start-up. */
static void pump(struct disk_remote *r)
{
    struct pollfd pfd[IKC_MAX_MEMBERS + 1];
    unsigned n = 0;
    uint64_t deadline = UINT64_MAX;
    ikc_fill(r->g, 1u << IKC_Q_BLK_DONE, pfd, &n, IKC_MAX_MEMBERS + 1, &deadline);
    poll(pfd, n, deadline == 0 ? 0 : 10);
    ikc_dispatch(r->g);
}

/* ATTACH, and its answer. 0, or -1 with (err). */
static int attach(struct disk_remote *r, const char *group, const char *name, bool readonly,
                  char *err, size_t errlen)
{
    uint64_t start = now_ns(), until = start + ATTACH_NS;
    while (r->server < 0 || !ikc_peer(r->g, (unsigned)r->server, 0)) {
        r->server = ikc_find(r->g, name);
        if (r->server < 0 && now_ns() > start + FIND_NS) {
            snprintf(err, errlen, "no member of group '%s' serves a disk '%s' (`ring3 ikc list "
                     "%s` shows what they serve)", group, name, group);
            return -1;
        }
        if (now_ns() > until) {
            snprintf(err, errlen, "member %d of group '%s', which serves '%s', does not answer",
                     r->server, group, name);
            return -1;
        }
        pump(r);
    }
    struct ikc_packet p = { .cmd = SERVED_ATTACH, .param = { [4] = !readonly } };
    memcpy(p.param, name, strnlen(name, IKC_NAME_BYTES - 1));
    if (ikc_send(r->g, (unsigned)r->server, IKC_Q_BLK, &p)) {
        snprintf(err, errlen, "member %d of group '%s' takes no request", r->server, group);
        return -1;
    }
    while (now_ns() < until && ikc_peer(r->g, (unsigned)r->server, 0)) {
        if (!ikc_recv(r->g, (unsigned)r->server, IKC_Q_BLK_DONE, &p)) {
            pump(r);
            continue;
        }
        if (p.cmd == SERVED_ATTACHED && p.param[0] % DISK_SECTOR == 0) {
            r->size = p.param[0];
            r->writable = p.param[1] == 1;
            return 0;
        }
        if (p.cmd != SERVED_REFUSED)
            continue;
        if (p.param[0] == SERVED_BUSY)
            snprintf(err, errlen, "disk '%s' is in use by member %llu (pid %llu) of group '%s'; "
                     "a served disk has one user at a time", name,
                     (unsigned long long)p.param[1], (unsigned long long)p.param[2], group);
        else if (p.param[0] == SERVED_READONLY)
            snprintf(err, errlen, "disk '%s' is served read-only; add readonly=on", name);
        else
            snprintf(err, errlen, "member %d of group '%s' serves no disk '%s'", r->server,
                     group, name);
        return -1;
    }
    snprintf(err, errlen, "member %d of group '%s', which serves '%s', did not answer in 10 s",
             r->server, group, name);
    return -1;
}

struct disk_remote *disk_remote_open(const char *group, const char *name, bool readonly,
                                     const struct guestmem *gm, char *err, size_t errlen)
{
    struct disk_remote *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->gm = gm;
    r->server = -1;
    char desc[IKC_DESC_BYTES];
    snprintf(desc, sizeof desc, "disk ikc:%s", name);
    uint64_t ram = gm->high_size ? GM_4GIB + gm->high_size : gm->size;
    r->g = ikc_join(group, gm->fd, ram, 0, desc, err, errlen);
    if (r->g == NULL) {
        free(r);
        return NULL;
    }
    ikc_watch(r->g, peer_changed, r);
    if (attach(r, group, name, readonly, err, errlen)) {
        ikc_leave(r->g);
        free(r);
        return NULL;
    }
    return r;
}

int disk_remote_server(const struct disk_remote *r)
{
    return r->server;
}

uint64_t disk_remote_size(const struct disk_remote *r)
{
    return r->size;
}

bool disk_remote_writable(const struct disk_remote *r)
{
    return r->writable;
}

void disk_remote_attach(struct disk_remote *r, disk_remote_done_fn *done, void *opaque)
{
    r->done = done;
    r->opaque = opaque;
}

int disk_remote_submit(struct disk_remote *r, unsigned cmd, uint64_t off, uint64_t len,
                       const struct iovec *iov, unsigned n, uint32_t id)
{
    unsigned slot = id % MAX_IDS;
    if (r->server < 0 || r->in_flight[slot] || n > SERVED_MAX_PIECES)
        return EIO;
    struct ikc_packet p = { .cmd = cmd, .param = { id, off, len, n } };
    long list = -1;
    if (cmd != SERVED_FLUSH) {
        list = ikc_piece_list(r->g, r->gm->phys, iov, n);
        if (list < 0)
            return EAGAIN;
        p.data = (uint64_t)list;
    }
    if (ikc_send(r->g, (unsigned)r->server, IKC_Q_BLK, &p)) {
        if (list >= 0)
            ikc_bulk_free(r->g, ikc_self(r->g), (uint64_t)list, n * sizeof(struct ikc_piece));
        return EIO;
    }
    r->in_flight[slot] = true;
    r->id[slot] = id;
    return 0;
}

void disk_remote_fill(struct disk_remote *r, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns)
{
    ikc_fill(r->g, 1u << IKC_Q_BLK_DONE, pfd, n, max, deadline_ns);
}

void disk_remote_dispatch(struct disk_remote *r)
{
    ikc_dispatch(r->g);
    struct ikc_packet p;
    /* A ring's worth at most, as export.c takes: a server that writes answers as fast as they
     * are read keeps the run loop no longer than that. */
    for (unsigned k = 0; k < IKC_RING_SLOTS && r->server >= 0 &&
                         ikc_recv(r->g, (unsigned)r->server, IKC_Q_BLK_DONE, &p); k++) {
        /* param[0] is the id as sent (served.h), all 64 bits of it: one whose high half is not 0
         * names no request, and must not complete the one its low half names */
        unsigned slot = (uint32_t)p.param[0] % MAX_IDS;
        if (p.cmd != SERVED_DONE || !r->in_flight[slot] || r->id[slot] != p.param[0]) {
            ikc_count_bad(r->g);            /* an answer to nothing asked */
            continue;
        }
        r->in_flight[slot] = false;
        int err = p.param[1] == 0 ? 0 : p.param[1] < 4096 ? (int)p.param[1] : EIO;
        if (r->done)
            r->done(r->opaque, r->id[slot], err);
    }
}

void disk_remote_free(struct disk_remote *r)
{
    if (r == NULL)
        return;
    ikc_leave(r->g);
    free(r);
}

/* --disk FILE,export=NAME: an image served to one user in an IKC group (served.h).
 *
 * Each request is done when it arrives, between two slices of this monitor's own guest, with
 * preadv/pwritev between the image and the user's guest RAM. Everything in a request is checked
 * before any byte moves: that it comes from the attached user, its piece count and pieces (the
 * user's RAM, ikc_pieces), that they add up to its length, and that the range is whole sectors
 * inside the image. A request that fails is answered EINVAL and counted; a malformed packet of
 * another kind is dropped and counted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "served.h"

struct disk_export {
    struct ikc_group *g;
    struct disk_image *image;
    char name[IKC_NAME_BYTES];
    int user;                           /* the attached member, or -1 */
    bool user_writes;
    struct iovec iov[SERVED_MAX_PIECES];
};

static void reply(struct disk_export *e, unsigned to, const struct ikc_packet *p)
{
    ikc_send(e->g, to, IKC_Q_BLK_DONE, p);  /* a user has at most a queue's worth in flight */
}

static void attach(struct disk_export *e, unsigned from, const struct ikc_packet *p)
{
    char name[IKC_NAME_BYTES] = { 0 };
    memcpy(name, p->param, sizeof name - 1);
    bool writes = p->param[4] == 1;
    struct ikc_packet r = { .cmd = SERVED_REFUSED };
    if (strcmp(name, e->name)) {
        r.param[0] = SERVED_NO_DISK;
    } else if (e->user >= 0 && e->user != (int)from && ikc_peer(e->g, (unsigned)e->user, 0)) {
        r.param[0] = SERVED_BUSY;
        r.param[1] = (uint64_t)e->user;
        r.param[2] = (uint64_t)ikc_member_pid(e->g, (unsigned)e->user);
    } else if (writes && !disk_image_writable(e->image)) {
        r.param[0] = SERVED_READONLY;
    } else {
        e->user = (int)from;
        e->user_writes = writes;
        r = (struct ikc_packet){ .cmd = SERVED_ATTACHED,
                                 .param = { disk_image_size(e->image), writes } };
    }
    reply(e, from, &r);
}

/* A read or a write, checked, then done. Returns 0 or an errno for the answer. */
static int transfer(struct disk_export *e, unsigned from, const struct ikc_packet *p)
{
    uint64_t off = p->param[1], len = p->param[2], n = p->param[3], total;
    bool write = p->cmd == SERVED_WRITE;
    if (n == 0 || n > SERVED_MAX_PIECES) {
        ikc_count_bad(e->g);    /* a request that fails is counted (above), as ikc_pieces does */
        return EINVAL;
    }
    /* The list is freed once read, a bad piece in it or not (ikc_piece_list: the reader frees
     * it); one that is not the user's is neither read nor freed, and counted once. */
    uint64_t list_len = n * sizeof(struct ikc_piece);
    if (!ikc_bulk(e->g, from, p->data, list_len))
        return EINVAL;
    int bad = ikc_pieces(e->g, from, p->data, n, e->iov, &total);
    ikc_bulk_free(e->g, from, p->data, list_len);
    if (bad)
        return EINVAL;
    uint64_t size = disk_image_size(e->image);
    if (total != len || len % DISK_SECTOR || off % DISK_SECTOR || off > size || len > size - off) {
        ikc_count_bad(e->g);
        return EINVAL;
    }
    if (write && !e->user_writes)
        return EROFS;
    int r = write ? disk_image_write(e->image, e->iov, (int)n, off, len)
                  : disk_image_read(e->image, e->iov, (int)n, off, len);
    return r < 0 ? -r : 0;
}

static void request(struct disk_export *e, unsigned from, const struct ikc_packet *p)
{
    if (p->cmd == SERVED_ATTACH) {
        attach(e, from, p);
        return;
    }
    if ((p->cmd != SERVED_READ && p->cmd != SERVED_WRITE && p->cmd != SERVED_FLUSH) ||
        e->user != (int)from) {
        ikc_count_bad(e->g);                /* not a request, or not from the user */
        return;
    }
    int err = p->cmd == SERVED_FLUSH ? -disk_image_flush(e->image) : transfer(e, from, p);
    struct ikc_packet r = { .cmd = SERVED_DONE, .param = { p->param[0], (uint64_t)err } };
    reply(e, from, &r);
}

/* The user went (died or left): the disk is free for the next. */
static void peer_changed(void *opaque, unsigned m, bool up)
{
    struct disk_export *e = opaque;
    if (!up && e->user == (int)m)
        e->user = -1;
}

struct disk_export *disk_export_new(const char *group, const char *name, struct disk_image *image,
                                    const struct guestmem *gm, char *err, size_t errlen)
{
    struct disk_export *e = calloc(1, sizeof *e);
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(e->name, sizeof e->name, "%s", name);
    e->image = image;
    e->user = -1;
    char desc[IKC_DESC_BYTES];
    snprintf(desc, sizeof desc, "disk export %s (%llu MiB%s)", name,
             (unsigned long long)(disk_image_size(image) >> 20),
             disk_image_writable(image) ? "" : ", read-only");
    uint64_t ram = gm->high_size ? GM_4GIB + gm->high_size : gm->size;
    e->g = ikc_join(group, gm->fd, ram, 0, desc, err, errlen);
    if (e->g == NULL) {
        free(e);
        return NULL;
    }
    if (ikc_find(e->g, name) >= 0 || ikc_offer(e->g, name)) {
        snprintf(err, errlen, "group '%s' has a disk '%s' already, or this member serves %u",
                 group, name, IKC_MAX_OFFERS);
        ikc_leave(e->g);
        free(e);
        return NULL;
    }
    ikc_watch(e->g, peer_changed, e);
    return e;
}

void disk_export_fill(struct disk_export *e, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns)
{
    ikc_fill(e->g, 1u << IKC_Q_BLK, pfd, n, max, deadline_ns);
}

void disk_export_dispatch(struct disk_export *e)
{
    ikc_dispatch(e->g);
    struct ikc_packet p;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        for (unsigned k = 0; k < IKC_RING_SLOTS && ikc_recv(e->g, m, IKC_Q_BLK, &p); k++)
            request(e, m, &p);
}

void disk_export_free(struct disk_export *e)
{
    if (e == NULL)
        return;
    ikc_leave(e->g);
    disk_image_close(e->image);
    free(e);
}

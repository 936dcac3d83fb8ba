/* Bulk data: SHIMOS's allocator of 1 KiB units in the shared area, under one lock.
 *
 * Each unit records its owner, the member that allocated it. The reader of a packet that names a
 * run of units frees them once it has the data; a run is only ever read or freed as the sender's
 * (ikc_bulk and ikc_bulk_free check that every unit of it is), so an offset or a length from a
 * malformed packet can neither reach outside the bulk area nor free another member's units. The
 * lock is a robust, process-shared mutex: when its holder dies, the next locker takes it over
 * (EOWNERDEAD) and the owner table is still whole, since a unit's owner is one byte written
 * after the search. A dead member's units are reclaimed with its slot.
 */
#include <errno.h>

#include "layout.h"

int ikc_bulk_init(struct ikc_shared *sh)
{
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) || pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST))
        return -1;
    int r = pthread_mutex_init(&sh->bulk_lock, &a);
    pthread_mutexattr_destroy(&a);
    return r ? -1 : 0;
}

static void bulk_lock(struct ikc_shared *sh)
{
    if (pthread_mutex_lock(&sh->bulk_lock) == EOWNERDEAD)
        pthread_mutex_consistent(&sh->bulk_lock);
}

static void bulk_unlock(struct ikc_shared *sh)
{
    pthread_mutex_unlock(&sh->bulk_lock);
}

void ikc_bulk_reclaim(struct ikc_shared *sh, unsigned m)
{
    bulk_lock(sh);
    for (unsigned u = 0; u < IKC_UNITS; u++)
        if (sh->unit_owner[u] == m + 1)
            sh->unit_owner[u] = 0;
    bulk_unlock(sh);
}

long ikc_bulk_alloc(struct ikc_group *g, size_t bytes)
{
    struct ikc_shared *sh = g->sh;
    size_t want = (bytes + IKC_UNIT - 1) / IKC_UNIT;
    if (want == 0 || want > IKC_UNITS)
        return -1;
    long found = -1;
    bulk_lock(sh);
    unsigned start = sh->bulk_hint % IKC_UNITS, run = 0;
    /* first fit from the hint on, wrapping once; a run does not wrap */
    for (unsigned i = 0; i < 2 * IKC_UNITS && found < 0; i++) {
        unsigned u = (start + i) % IKC_UNITS;
        if (u == 0)
            run = 0;
        run = sh->unit_owner[u] ? 0 : run + 1;
        if (run == want)
            found = (long)(u + 1 - want);
    }
    if (found >= 0) {
        for (size_t u = 0; u < want; u++)
            sh->unit_owner[found + (long)u] = (uint8_t)(g->self + 1);
        sh->bulk_hint = (uint32_t)((size_t)found + want) % IKC_UNITS;
    }
    bulk_unlock(sh);
    return found < 0 ? -1 : found * (long)IKC_UNIT;
}

/* Whether [off, off+len) lies in the bulk area, starts on a unit and is (owner)'s throughout. */
static bool owned(const struct ikc_shared *sh, unsigned owner, uint64_t off, uint64_t len)
{
    if (owner >= IKC_MAX_MEMBERS || len == 0 || off % IKC_UNIT ||
        off >= (uint64_t)IKC_UNITS * IKC_UNIT || len > (uint64_t)IKC_UNITS * IKC_UNIT - off)
        return false;
    for (uint64_t u = off / IKC_UNIT; u < (off + len + IKC_UNIT - 1) / IKC_UNIT; u++)
        if (sh->unit_owner[u] != owner + 1)
            return false;
    return true;
}

uint8_t *ikc_bulk(struct ikc_group *g, unsigned owner, uint64_t off, uint64_t len)
{
    if (!owned(g->sh, owner, off, len)) {
        ikc_count_bad(g);
        return NULL;
    }
    return &g->sh->bulk[0][0] + off;
}

void ikc_bulk_free(struct ikc_group *g, unsigned owner, uint64_t off, uint64_t len)
{
    struct ikc_shared *sh = g->sh;
    bulk_lock(sh);
    if (owned(sh, owner, off, len)) {
        for (uint64_t u = off / IKC_UNIT; u < (off + len + IKC_UNIT - 1) / IKC_UNIT; u++)
            sh->unit_owner[u] = 0;
    } else {
        ikc_count_bad(g);
    }
    bulk_unlock(sh);
}

long ikc_piece_list(struct ikc_group *g, const uint8_t *ram, const struct iovec *iov, unsigned n)
{
    long off = ikc_bulk_alloc(g, n * sizeof(struct ikc_piece));
    if (off < 0)
        return -1;
    struct ikc_piece *p = (struct ikc_piece *)(&g->sh->bulk[0][0] + off);
    for (unsigned i = 0; i < n; i++)
        p[i] = (struct ikc_piece){ (uint64_t)((const uint8_t *)iov[i].iov_base - ram),
                                   iov[i].iov_len };
    return off;
}

int ikc_pieces(struct ikc_group *g, unsigned m, uint64_t off, uint64_t n, struct iovec *iov,
               uint64_t *len)
{
    *len = 0;
    if (n == 0 || n > IKC_UNITS * IKC_PIECES_PER_UNIT) {
        ikc_count_bad(g);
        return -1;
    }
    const struct ikc_piece *list = (const struct ikc_piece *)ikc_bulk(g, m, off,
                                                                     n * sizeof *list);
    if (list == NULL)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        struct ikc_piece one = list[i];     /* read once: the sender could still write it */
        uint8_t *ram = ikc_peer_ram(g, m, one.gpa, one.len);
        if (ram == NULL) {
            ikc_count_bad(g);
            return -1;
        }
        iov[i] = (struct iovec){ ram, one.len };
        *len += one.len;
    }
    return 0;
}

/* The rings: one producer and one consumer each, lock-free, as SHIMOS's.
 *
 * The producer writes a slot, then publishes it by moving (head) with release order; the
 * consumer reads (head) with acquire order, copies the slot out once, and moves (tail). Each
 * side keeps its own index in its own memory and takes the other's from the shared area only as
 * a bound: a peer that writes garbage into a ring's indices gets its packets dropped and
 * counted, never a read outside the ring.
 *
 * Notification (SHIMOS's flag): a consumer about to sleep sets (waiting) and looks at the ring
 * once more; a producer that finds (waiting) set after publishing clears it and sends one
 * notification. Both sides order their store before their load with a full fence, so one of
 * them always sees the other's: no packet is left unseen by a sleeper, and a consumer that is
 * running is never sent a notification it does not need.
 */
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "layout.h"

void ikc_ring_reset(struct ikc_shared *sh, unsigned m)
{
    for (unsigned o = 0; o < IKC_MAX_MEMBERS; o++) {
        for (unsigned q = 0; q < IKC_QUEUES; q++) {
            struct ikc_ring *r[2] = { &sh->ring[m][o][q], &sh->ring[o][m][q] };
            for (int i = 0; i < 2; i++) {
                atomic_store(&r[i]->head, 0);
                atomic_store(&r[i]->tail, 0);
                atomic_store(&r[i]->waiting, 0);
            }
        }
    }
}

/* A notification to member (to): one byte on its socket. A full socket already holds one. */
static void kick(struct ikc_group *g, unsigned to)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    size_t len;
    ikc_socket_name(g->name, to, a.sun_path, &len);
    static const char k = 'k';
    sendto(g->sock, &k, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
}

bool ikc_peer(const struct ikc_group *g, unsigned m, unsigned devices)
{
    return m < IKC_MAX_MEMBERS && m != g->self && g->peer[m].up &&
           (g->sh->member[m].devices & devices) == devices;
}

int ikc_send(struct ikc_group *g, unsigned to, enum ikc_queue queue, const struct ikc_packet *p)
{
    if (!ikc_peer(g, to, 0) || (unsigned)queue >= IKC_QUEUES)
        return -1;
    struct ikc_ring *r = &g->sh->ring[g->self][to][queue];
    uint32_t head = g->peer[to].head[queue];
    uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (head - tail >= IKC_RING_SLOTS)
        return -1;          /* full (or a tail out of range: nothing goes in until it is sane) */
    struct ikc_packet *s = &r->slot[head % IKC_RING_SLOTS];
    *s = *p;
    s->sender = g->self;
    g->peer[to].head[queue] = head + 1;
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&r->waiting, memory_order_relaxed) &&
        atomic_exchange(&r->waiting, 0))
        kick(g, to);
    return 0;
}

/* The ring from (from) on (queue), and how many packets wait in it; NULL when its head is out of
 * range (the packets are dropped and counted, and the ring starts over at its head). */
static struct ikc_ring *incoming(struct ikc_group *g, unsigned from, enum ikc_queue queue,
                                 uint32_t *waiting)
{
    *waiting = 0;
    if (!ikc_peer(g, from, 0) || (unsigned)queue >= IKC_QUEUES)
        return NULL;
    struct ikc_ring *r = &g->sh->ring[from][g->self][queue];
    uint32_t tail = g->peer[from].tail[queue];
    uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    if (head - tail > IKC_RING_SLOTS) {
        ikc_count_bad(g);
        g->peer[from].tail[queue] = head;
        atomic_store_explicit(&r->tail, head, memory_order_release);
        return NULL;
    }
    *waiting = head - tail;
    return r;
}

bool ikc_peek(struct ikc_group *g, unsigned from, enum ikc_queue queue, struct ikc_packet *p)
{
    /* At most a ring's worth of forged packets a call: a peer that forges as fast as they are
     * dropped keeps no reader here (the rest are still there for the next call). */
    for (unsigned k = 0; k < IKC_RING_SLOTS; k++) {
        uint32_t n;
        struct ikc_ring *r = incoming(g, from, queue, &n);
        if (r == NULL || n == 0)
            return false;
        uint32_t tail = g->peer[from].tail[queue];
        memcpy(p, &r->slot[tail % IKC_RING_SLOTS], sizeof *p);
        if (p->sender == from)
            return true;
        /* forged: not (from)'s packet; dropped */
        ikc_count_bad(g);
        g->peer[from].tail[queue] = tail + 1;
        atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
    }
    return false;
}

bool ikc_recv(struct ikc_group *g, unsigned from, enum ikc_queue queue, struct ikc_packet *p)
{
    if (!ikc_peek(g, from, queue, p))
        return false;
    struct ikc_ring *r = &g->sh->ring[from][g->self][queue];
    uint32_t tail = ++g->peer[from].tail[queue];
    atomic_store_explicit(&r->tail, tail, memory_order_release);
    return true;
}

/* ikc_fill's half: raise the flag on each ring this member reads; true when one already holds a
 * packet (no sleep then). */
bool ikc_rings_arm(struct ikc_group *g, unsigned queue_mask)
{
    bool ready = false;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        if (!ikc_peer(g, m, 0))
            continue;
        for (unsigned q = 0; q < IKC_QUEUES; q++)
            if (queue_mask & (1u << q))
                atomic_store(&g->sh->ring[m][g->self][q].waiting, 1);
    }
    atomic_thread_fence(memory_order_seq_cst);
    for (unsigned m = 0; m < IKC_MAX_MEMBERS && !ready; m++) {
        for (unsigned q = 0; q < IKC_QUEUES && !ready; q++) {
            uint32_t n;
            if ((queue_mask & (1u << q)) && incoming(g, m, q, &n) && n)
                ready = true;
        }
    }
    return ready;
}

/* ikc_dispatch's half: awake again, no notifications wanted. */
void ikc_rings_disarm(struct ikc_group *g, unsigned queue_mask)
{
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        if (!ikc_peer(g, m, 0))
            continue;
        for (unsigned q = 0; q < IKC_QUEUES; q++)
            if (queue_mask & (1u << q))
                atomic_store_explicit(&g->sh->ring[m][g->self][q].waiting, 0,
                                      memory_order_relaxed);
    }
}

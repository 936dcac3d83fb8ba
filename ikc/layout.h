/* The group's shared object as every member maps it, and one member's own view of the group.
 * Private to ikc/. */
#ifndef RING3_IKC_LAYOUT_H
#define RING3_IKC_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "hw/clock.h"

#include "channel.h"

#define IKC_MAGIC   0x314b434933474e52ull   /* "RNG3IKC1" */
#define IKC_VERSION 2u

enum { IKC_FREE = 0, IKC_LIVE = 1 };

/* One ring: the producer moves (head), the consumer (tail), each on its own cache line. Both
 * run free and are taken modulo IKC_RING_SLOTS. (waiting): the consumer is about to sleep and
 * wants a notification for the next packet. */
struct ikc_ring {
    _Atomic uint32_t head;
    uint8_t pad0[60];
    _Atomic uint32_t tail;
    _Atomic uint32_t waiting;
    uint8_t pad1[56];
    struct ikc_packet slot[IKC_RING_SLOTS];
};

struct ikc_member {
    _Atomic uint32_t state;             /* IKC_FREE or IKC_LIVE */
    uint32_t gen;                       /* counts the slot's members */
    int32_t pid;
    uint32_t devices;                   /* IKC_DEV_* */
    uint64_t ram_bytes;
    int64_t joined_ns;                  /* CLOCK_REALTIME */
    uint64_t bad;                       /* what it dropped as malformed (ikc_count_bad) */
    char desc[IKC_DESC_BYTES];
    char offers[IKC_MAX_OFFERS][IKC_NAME_BYTES];    /* ikc_offer */
};

struct ikc_shared {
    uint64_t magic;                     /* written last by the creator */
    uint32_t version, members;
    uint64_t bytes;                     /* sizeof (struct ikc_shared): the layout */
    pthread_mutex_t bulk_lock;          /* robust and process-shared: its holder may die */
    uint32_t bulk_hint;                 /* where the next search for free units starts */
    struct ikc_member member[IKC_MAX_MEMBERS];
    uint8_t unit_owner[IKC_UNITS];      /* 0: free, else the member's number + 1 */
    struct ikc_ring ring[IKC_MAX_MEMBERS][IKC_MAX_MEMBERS][IKC_QUEUES];     /* [from][to][q] */
    _Alignas(4096) uint8_t bulk[IKC_UNITS][IKC_UNIT];
};

/* A peer as this member sees it. */
struct ikc_peer {
    bool up;                            /* its RAM is mapped and the watchers were told */
    uint32_t gen;
    pid_t pid;
    int pidfd;
    uint8_t *ram;
    uint64_t ram_bytes;
    uint32_t head[IKC_QUEUES];          /* rings to it: the heads this member wrote */
    uint32_t tail[IKC_QUEUES];          /* rings from it: the tails this member moved to */
};

/* One group handle serves every device of a monitor in that group: up to 4 disks (local or
 * served by another), 4 exports and 4 NICs (machine/platform.h), each watching its peers. */
#define IKC_MAX_WATCHERS 12

struct ikc_group {
    char name[IKC_NAME_BYTES];
    int shm_fd;
    struct ikc_shared *sh;
    unsigned self;
    uint32_t gen;
    int sock;                           /* this member's datagram socket */
    int ram_fd;
    uint64_t ram_bytes;
    struct ikc_peer peer[IKC_MAX_MEMBERS];
    struct { ikc_watch_fn *fn; void *opaque; } watcher[IKC_MAX_WATCHERS];
    unsigned nwatchers;
    unsigned users;                     /* devices of this guest that joined (ikc_join) */
    bool filled;                        /* ikc_fill ran and ikc_dispatch has not yet */
    unsigned queue_mask;                /* the rings ikc_fill asked to be woken for */
    struct pollfd *pfd;                 /* the last fill's array, and where it put what */
    int slot_sock, slot_pidfd[IKC_MAX_MEMBERS];
    uint64_t next_scan_ns;
    uint64_t bad;
};

/* ikc/group.c: the lock on membership (flock on the shared object: the kernel drops it for a
 * member that dies holding it), and a dead or departed member's slot made free. */
void ikc_lock(struct ikc_group *g);
void ikc_unlock(struct ikc_group *g);
void ikc_reclaim_locked(struct ikc_group *g, unsigned m);
/* The group's shared area's name, for shm_open: "/ring3-ikc.UID.NAME". */
void ikc_shm_name(const char *group, char *out, size_t len);
void ikc_socket_name(const char *group, unsigned m, char *out, size_t *len);

/* ikc/peers.c: peer (m) is gone here (died, left, or its slot was taken again). */
void ikc_peer_down(struct ikc_group *g, unsigned m);
/* ikc/peers.c: tell every live member this one's RAM (at the join, and again while a member
 * has not answered). */
void ikc_announce(struct ikc_group *g);

/* ikc/ring.c: rings from and to member (m) emptied (a slot that changes hands); the flags that
 * ask for a notification raised before a sleep (true: a packet already waits) and lowered after. */
void ikc_ring_reset(struct ikc_shared *sh, unsigned m);
bool ikc_rings_arm(struct ikc_group *g, unsigned queue_mask);
void ikc_rings_disarm(struct ikc_group *g, unsigned queue_mask);

/* ikc/bulk.c */
int ikc_bulk_init(struct ikc_shared *sh);
void ikc_bulk_reclaim(struct ikc_shared *sh, unsigned m);

#endif

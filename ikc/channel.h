/* The channel between ring3 instances (SHIMOS's inter-kernel communication, IKC): a group of
 * monitors run by one user on one host, joined by name, sharing one memory object.
 *
 * As in SHIMOS:
 *   - one shared area, seen by every member (POSIX shared memory, /dev/shm/ring3-ikc.UID.NAME);
 *   - per ordered pair of members and per queue, a single-producer/single-consumer ring of
 *     fixed 64-byte packets {cmd, sender, param[6], data};
 *   - an allocator of 1 KiB units for bulk data in the shared area, under one lock;
 *   - a notification per member (there an IPI, here a datagram on the member's socket) that a
 *     per-ring flag suppresses unless the receiver is about to sleep;
 *   - page transfer: each member maps the others' guest RAM (the memfd, passed over the
 *     member sockets with SCM_RIGHTS), so that a device moves data between two guests' buffers
 *     with one copy.
 *
 * The trust model is SHIMOS's: members trust each other's monitors. Still, nothing read from
 * the shared area is used unchecked: a ring's indices, a packet's sender, a bulk offset and a
 * guest-physical range are all checked here, and a packet that fails is dropped and counted.
 * A member that dies is noticed through its pidfd (within a second: the monitor looks at each
 * timer tick and while it sleeps); its rings and bulk units are reclaimed, and a new member may
 * take its place.
 */
#ifndef RING3_IKC_CHANNEL_H
#define RING3_IKC_CHANNEL_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define IKC_MAX_MEMBERS 16
#define IKC_NAME_BYTES  33              /* a group's name: 1 to 32 of [A-Za-z0-9_.-] */
#define IKC_DESC_BYTES  96              /* what a member serves, for `ring3 ikc list` */
#define IKC_RING_SLOTS  256             /* packets per ring: a power of 2 */
#define IKC_UNIT        1024u           /* the bulk allocator's unit, as SHIMOS's */
#define IKC_UNITS       4096u           /* 4 MiB of bulk data per group */

/* The queues between each ordered pair of members: a request and its answer never share a ring,
 * so an answer is never stuck behind a request its reader cannot take yet. */
enum ikc_queue {
    IKC_Q_NET,                          /* frames for the peer's switch port */
    IKC_Q_NET_DONE,                     /* frames the peer has copied (their transmit is done) */
    IKC_Q_BLK,                          /* requests for a served disk */
    IKC_Q_BLK_DONE,                     /* their completions */
    IKC_QUEUES
};

/* What a member offers the group (struct ikc_member.devices). */
#define IKC_DEV_NET     1u              /* a NIC on the group's switch */

/* One packet, SHIMOS's format. (sender) is set by ikc_send and checked by ikc_recv. */
struct ikc_packet {
    uint32_t cmd;
    uint32_t sender;
    uint64_t param[6];
    uint64_t data;                      /* usually a bulk offset (ikc_bulk) */
};
_Static_assert(sizeof(struct ikc_packet) == 64, "a packet is one cache line");

/* Page transfer: one piece of a buffer in a member's guest RAM, at guest-physical (gpa). A packet
 * that names a buffer in pieces puts their list in its bulk units (ikc_piece_list). */
struct ikc_piece {
    uint64_t gpa, len;
};
#define IKC_PIECES_PER_UNIT (IKC_UNIT / sizeof(struct ikc_piece))

#define IKC_MAX_OFFERS  4               /* services (a served disk) per member */

struct ikc_group;

/* Whether (name) can name a group: 1 to 32 of A-Z a-z 0-9 _ . - */
bool ikc_name_ok(const char *name);

/* Join group (name), creating it if no member is left, as a member whose guest RAM is the
 * memfd (ram_fd) of (ram_bytes), offering (devices) described by (desc). Returns NULL with
 * (err) filled: a bad name, a full group, an object of another user or another layout. */
struct ikc_group *ikc_join(const char *name, int ram_fd, uint64_t ram_bytes, unsigned devices,
                           const char *desc, char *err, size_t errlen);

/* Leave the group: the slot is free and the others reclaim it at once. The last member out
 * removes the shared object. */
void ikc_leave(struct ikc_group *g);

/* This member's number, 0 to IKC_MAX_MEMBERS - 1. */
unsigned ikc_self(const struct ikc_group *g);

/* Whether (m) is another member whose RAM is mapped here and which offers (devices). */
bool ikc_peer(const struct ikc_group *g, unsigned m, unsigned devices);

/* The process of member (m), as the group's table has it (0: none), for messages. */
int ikc_member_pid(const struct ikc_group *g, unsigned m);

/* Told when peer (m) comes (its RAM is mapped: packets may flow) or goes (died or left: its
 * packets and the work waiting on it are to be dropped). One watcher per queue pair user. */
typedef void ikc_watch_fn(void *opaque, unsigned m, bool up);
int ikc_watch(struct ikc_group *g, ikc_watch_fn *fn, void *opaque);

/* Packet (p) to member (to) on (queue), with a notification if (to) sleeps. 0, or -1 when the
 * ring is full or (to) is not a peer. */
int ikc_send(struct ikc_group *g, unsigned to, enum ikc_queue queue, const struct ikc_packet *p);

/* The next packet from member (from) on (queue) into (*p), taken off the ring; false when there
 * is none. A packet whose sender is forged is dropped and counted, as are indices out of range. */
bool ikc_recv(struct ikc_group *g, unsigned from, enum ikc_queue queue, struct ikc_packet *p);

/* The same without taking it off the ring, for a reader that may have to leave it there (its
 * device has no room now); the ikc_recv that follows takes it. */
bool ikc_peek(struct ikc_group *g, unsigned from, enum ikc_queue queue, struct ikc_packet *p);

/* Host pointer to (len) bytes of peer (m)'s guest RAM at guest-physical (gpa), or NULL when
 * any of them lie outside it. */
uint8_t *ikc_peer_ram(const struct ikc_group *g, unsigned m, uint64_t gpa, uint64_t len);

/* Offer service (name) to the group (a served disk's name): 0, or -1 when this member offers
 * IKC_MAX_OFFERS already. ikc_find: the member that offers (name), or -1. */
int ikc_offer(struct ikc_group *g, const char *name);
int ikc_find(const struct ikc_group *g, const char *name);

/* The list of the (n) pieces (iov) of this member's guest RAM (mapped here at (ram)), written
 * into new bulk units: their offset, or -1 when none are free. The reader frees them. */
long ikc_piece_list(struct ikc_group *g, const uint8_t *ram, const struct iovec *iov, unsigned n);

/* The pieces (n of them, at most IKC_PIECES_PER_UNIT * (units)) of a buffer of peer (m), from the
 * list at bulk offset (off) it allocated, each checked against its RAM, as host pointers into
 * (iov); their total in (*len). Returns 0, or -1 (counted) when the list or a piece is bad. */
int ikc_pieces(struct ikc_group *g, unsigned m, uint64_t off, uint64_t n, struct iovec *iov,
               uint64_t *len);

/* Bulk data: (bytes) in whole units, owned by this member until the reader frees them. Returns
 * the offset, or -1 when no run of units is free. */
long ikc_bulk_alloc(struct ikc_group *g, size_t bytes);
/* Host pointer to (len) bytes at (off) that member (owner) allocated, or NULL when the range is
 * outside the bulk area or not wholly (owner)'s. */
uint8_t *ikc_bulk(struct ikc_group *g, unsigned owner, uint64_t off, uint64_t len);
/* Units [off, off+len) of (owner) are free again (a range not wholly its is left, counted). */
void ikc_bulk_free(struct ikc_group *g, unsigned owner, uint64_t off, uint64_t len);

/* Add the member's socket and its peers' pidfds to (pfd), from (*n) on, at most (max); raise
 * the flag that asks for a notification on every ring this member reads (queues in
 * (queue_mask)), and bring (*deadline_ns) to 0 when a packet is already waiting. */
void ikc_fill(struct ikc_group *g, unsigned queue_mask, struct pollfd *pfd, unsigned *n,
              unsigned max, uint64_t *deadline_ns);

/* After poll() on that array: the member socket's messages (peers' RAM arriving), peers that
 * died, and the flags lowered again. */
void ikc_dispatch(struct ikc_group *g);

/* Packets and ranges dropped as malformed, since the join; a user of the channel counts its
 * own with ikc_count_bad. `ring3 ikc list` shows each member's count. */
uint64_t ikc_bad(const struct ikc_group *g);
void ikc_count_bad(struct ikc_group *g);

/* `ring3 ikc list NAME`: the members of group (name) and what they serve, on stdout. Returns
 * 0, or 2 after one line (no such group). */
int ikc_list(const char *name);

#endif

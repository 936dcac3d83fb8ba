/* Unit test of the IKC channel (ikc/) and its switch port (net/ikc.c), with a hostile member.
 *
 * One process holds two members of a fresh group: a switch port with a fake NIC (the victim),
 * and a bare member (the attacker) that sends it a good frame, then garbage: indices past the
 * end of a ring, lengths over the buffer, pieces outside its RAM, bulk offsets outside the area
 * or not its own, a forged sender, answers to nothing, and a packet storm. The port must drop
 * and count each (the count `ring3 ikc list` shows), answer every frame so that no transmit
 * waits forever, never hand the NIC a byte from outside the attacker's RAM, and still carry a
 * good frame afterwards. Last, a member killed with SIGKILL is noticed within a second and its
 * slot is free again.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ikc/layout.h"
#include "net/backend.h"
#include "net/ikc_frames.h"

#define RAM_BYTES   (1u << 20)
#define FRAME_GPA   0x1000u

/* ---- the victim's NIC ---- */

static struct {
    unsigned frames, sent;
    size_t len;
    uint8_t frame[128];
    uint32_t last_sent;
} nic;

static bool nic_receive(void *opaque, const struct net_hdr *h, const uint8_t *frame, size_t len)
{
    (void)opaque, (void)h, (void)frame, (void)len;
    CHECK(!"the port gives frames in pieces");
    return true;
}

static bool nic_receive_iov(void *opaque, const struct net_hdr *h, const struct iovec *iov,
                            unsigned niov, size_t len)
{
    (void)opaque, (void)h;
    nic.frames++;
    nic.len = len;
    size_t got = 0;
    for (unsigned i = 0; i < niov; i++) {
        size_t k = iov[i].iov_len;
        if (got + k > sizeof nic.frame)
            k = sizeof nic.frame - got;
        memcpy(nic.frame + got, iov[i].iov_base, k);
        got += k;
    }
    return true;
}

static void nic_link(void *opaque, bool up)
{
    (void)opaque, (void)up;
}

static void nic_sent(void *opaque, uint32_t id)
{
    (void)opaque;
    nic.sent++;
    nic.last_sent = id;
}

static const struct net_client client = { nic_receive, nic_link, NULL, nic_receive_iov, nic_sent };

/* ---- set-up ---- */

static int sealed_ram(uint8_t **map)
{
    int fd = memfd_create("test-ikc-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK(fd >= 0 && ftruncate(fd, RAM_BYTES) == 0 &&
          fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
    *map = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(*map != MAP_FAILED);
    return fd;
}

static struct net_backend *port;
static struct ikc_group *evil;
static uint8_t *evil_ram;
static unsigned victim;

/* One turn of both members' event loops. */
static void pump(void)
{
    struct pollfd pfd[64];
    unsigned n = 0;
    uint64_t deadline = UINT64_MAX;
    net_backend_fill(port, pfd, &n, 32, &deadline);
    ikc_fill(evil, 1u << IKC_Q_NET_DONE, pfd, &n, 64, &deadline);
    poll(pfd, n, 5);
    net_backend_dispatch(port);
    ikc_dispatch(evil);
}

static uint64_t victim_bad(void)
{
    return evil->sh->member[victim].bad;
}

/* The answers the attacker got since the last call. */
static unsigned answers(uint64_t *last_id)
{
    unsigned k = 0;
    struct ikc_packet p;
    while (ikc_recv(evil, victim, IKC_Q_NET_DONE, &p)) {
        CHECK_EQ(p.cmd, IKC_DONE);
        *last_id = p.param[0];
        k++;
    }
    return k;
}

/* A frame of (len) bytes at FRAME_GPA of the attacker's RAM, as IKC_FRAME with (pieces). */
static int send_frame(uint64_t id, uint64_t len, const struct ikc_piece *pieces, unsigned n,
                      long bulk)
{
    if (bulk < 0) {
        bulk = ikc_bulk_alloc(evil, n * sizeof *pieces);
        CHECK(bulk >= 0);
        memcpy(ikc_bulk(evil, ikc_self(evil), (uint64_t)bulk, n * sizeof *pieces), pieces,
               n * sizeof *pieces);
    }
    struct ikc_packet p = { .cmd = IKC_FRAME, .param = { id, len, 0, 0, n }, .data = (uint64_t)bulk };
    return ikc_send(evil, victim, IKC_Q_NET, &p);
}

/* A good frame goes through: it reaches the NIC whole and is answered. */
static void check_good_frame(uint64_t id)
{
    static const uint8_t eth[60] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x01, 9, 9, 9,
                                     0x08, 0x06, 'h', 'e', 'l', 'l', 'o' };
    memcpy(evil_ram + FRAME_GPA, eth, sizeof eth);
    /* in two pieces, split inside the Ethernet header */
    struct ikc_piece pieces[2] = { { FRAME_GPA, 8 }, { FRAME_GPA + 8, sizeof eth - 8 } };
    unsigned before = nic.frames;
    uint64_t last = 0;
    CHECK_EQ(send_frame(id, sizeof eth, pieces, 2, -1), 0);
    pump();
    CHECK_EQ(nic.frames, before + 1);
    CHECK_EQ(nic.len, sizeof eth);
    CHECK(!memcmp(nic.frame, eth, sizeof eth));
    CHECK_EQ(answers(&last), 1);
    CHECK_EQ(last, id);
}

/* A malformed frame: dropped, counted, answered, and never at the NIC. */
static void check_bad_frame(uint64_t len, const struct ikc_piece *pieces, unsigned n, long bulk)
{
    unsigned frames = nic.frames;
    uint64_t bad = victim_bad(), last = 0;
    CHECK_EQ(send_frame(77, len, pieces, n, bulk), 0);
    pump();
    CHECK_EQ(nic.frames, frames);
    CHECK(victim_bad() > bad);
    CHECK_EQ(answers(&last), 1);
    CHECK_EQ(last, 77);
}

static void test_garbage(void)
{
    check_good_frame(1);

    /* lengths over the buffer, and lengths that do not add up */
    struct ikc_piece one = { FRAME_GPA, 60 };
    check_bad_frame(NET_MAX_FRAME + 1, &one, 1, -1);
    check_bad_frame(61, &one, 1, -1);
    struct ikc_piece huge = { FRAME_GPA, UINT64_MAX };
    check_bad_frame(60, &huge, 1, -1);
    /* pieces outside its RAM, one of them wrapping around */
    struct ikc_piece out = { RAM_BYTES - 10, 60 }, wrap = { UINT64_MAX - 10, 60 };
    check_bad_frame(60, &out, 1, -1);
    check_bad_frame(60, &wrap, 1, -1);
    /* piece counts of 0 and beyond a unit's list */
    long unit = ikc_bulk_alloc(evil, IKC_UNIT);
    check_bad_frame(60, &one, 0, unit);
    check_bad_frame(60, &one, (unsigned)IKC_PIECES_PER_UNIT + 1, unit);
    /* bulk offsets outside the area, off a unit, and in units that are not its own */
    check_bad_frame(60, &one, 1, (long)IKC_UNITS * IKC_UNIT);
    check_bad_frame(60, &one, 1, unit + 8);
    check_bad_frame(60, &one, 1, (long)(IKC_UNITS - 1) * IKC_UNIT);    /* free, nobody's */

    /* IKC_FRAME_COPY with a length over the buffer, and one beyond its units */
    uint64_t bad = victim_bad();
    struct ikc_packet p = { .cmd = IKC_FRAME_COPY, .param = { 0, NET_MAX_FRAME + 1 }, .data = 0 };
    CHECK_EQ(ikc_send(evil, victim, IKC_Q_NET, &p), 0);
    long two = ikc_bulk_alloc(evil, 100);
    p.param[1] = 5000;                          /* 5 units from a run of 1 */
    p.data = (uint64_t)two;
    CHECK_EQ(ikc_send(evil, victim, IKC_Q_NET, &p), 0);
    /* an unknown command, and an answer to nothing */
    p = (struct ikc_packet){ .cmd = 0xdead };
    CHECK_EQ(ikc_send(evil, victim, IKC_Q_NET, &p), 0);
    p = (struct ikc_packet){ .cmd = IKC_DONE, .param = { 12345 } };
    CHECK_EQ(ikc_send(evil, victim, IKC_Q_NET_DONE, &p), 0);
    pump();
    CHECK(victim_bad() >= bad + 4);
    CHECK_EQ(nic.frames, 1);

    /* a forged sender: written straight into the ring with the victim's own number */
    struct ikc_ring *r = &evil->sh->ring[ikc_self(evil)][victim][IKC_Q_NET];
    uint32_t head = atomic_load(&r->head);
    r->slot[head % IKC_RING_SLOTS] = (struct ikc_packet){ .cmd = IKC_FRAME, .sender = victim };
    atomic_store(&r->head, head + 1);
    evil->peer[victim].head[IKC_Q_NET] = head + 1;
    bad = victim_bad();
    pump();
    CHECK_EQ(victim_bad(), bad + 1);

    /* a head index past the end of the ring */
    head = atomic_load(&r->head);
    atomic_store(&r->head, head + 100000);
    bad = victim_bad();
    pump();
    CHECK_EQ(victim_bad(), bad + 1);
    CHECK_EQ(nic.frames, 1);
    /* the ring started over at that head: the attacker's next packets are read again */
    evil->peer[victim].head[IKC_Q_NET] = head + 100000;

    /* a storm: the ring fills, sends fail, nothing breaks */
    unsigned refused = 0;
    for (unsigned i = 0; i < 100000; i++) {
        p = (struct ikc_packet){ .cmd = 0xbad, .param = { i } };
        refused += ikc_send(evil, victim, IKC_Q_NET, &p) != 0;
        if (i % 1000 == 0)
            pump();
    }
    CHECK(refused > 0);
    for (int i = 0; i < 10; i++)
        pump();
    CHECK(victim_bad() > 5000);

    /* and the switch still carries a good frame */
    uint64_t last;
    answers(&last);
    check_good_frame(2);
}

/* A member that dies (SIGKILL): noticed within a second, its slot free again. */
static void test_kill(const char *group)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t child = fork();
    if (child == 0) {
        uint8_t *ram;
        int fd = sealed_ram(&ram);
        char err[200];
        struct ikc_group *g = ikc_join(group, fd, RAM_BYTES, IKC_DEV_NET, "child", err, sizeof err);
        unsigned slot = g ? ikc_self(g) : 99;
        if (write(fds[1], &slot, sizeof slot) != sizeof slot)
            _exit(1);
        for (;;) {                              /* a member that answers, until killed */
            struct pollfd pfd[32];
            unsigned n = 0;
            uint64_t d = UINT64_MAX;
            ikc_fill(g, 0, pfd, &n, 32, &d);
            poll(pfd, n, 10);
            ikc_dispatch(g);
        }
    }
    unsigned slot = 99;
    CHECK(read(fds[0], &slot, sizeof slot) == sizeof slot);
    CHECK(slot < IKC_MAX_MEMBERS);
    struct ikc_group *g = evil;                 /* the others see it go as the port does */
    for (int i = 0; i < 200 && !ikc_peer(g, slot, IKC_DEV_NET); i++)
        pump();
    CHECK(ikc_peer(g, slot, IKC_DEV_NET));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double waited = 0;
    while (ikc_peer(g, slot, 0) && waited < 2.0) {
        pump();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    }
    CHECK(!ikc_peer(g, slot, 0));
    CHECK(waited < 1.0);
    CHECK_EQ(atomic_load(&g->sh->member[slot].state), IKC_FREE);
}

int main(void)
{
    char group[32];
    snprintf(group, sizeof group, "unit-%d", (int)getpid());
    uint8_t *ram;
    int fd = sealed_ram(&ram);
    struct guestmem gm = { .fd = fd, .phys = ram, .size = RAM_BYTES };
    struct net_ikc_options o;
    snprintf(o.group, sizeof o.group, "%s", group);
    static const uint8_t mac[6] = { 0x52, 0x54, 0x01, 1, 2, 3 };
    char err[200];
    port = net_ikc_new(&o, mac, &client, &gm, err, sizeof err);
    CHECK(port != NULL);
    int evil_fd = sealed_ram(&evil_ram);
    evil = ikc_join(group, evil_fd, RAM_BYTES, 0, "attacker", err, sizeof err);
    CHECK(evil != NULL);
    if (port == NULL || evil == NULL)
        return check_done();
    victim = ikc_self(evil) == 0 ? 1 : 0;
    for (int i = 0; i < 200 && !ikc_peer(evil, victim, IKC_DEV_NET); i++)
        pump();
    CHECK(ikc_peer(evil, victim, IKC_DEV_NET));
    /* a bad group name is one line */
    CHECK(ikc_join("no/slash", evil_fd, RAM_BYTES, 0, "", err, sizeof err) == NULL);
    CHECK(strstr(err, "is not 1 to 32") != NULL);

    test_garbage();
    test_kill(group);

    ikc_leave(evil);
    net_backend_free(port);
    char path[80];
    snprintf(path, sizeof path, "/dev/shm/ring3-ikc.%u.%s", (unsigned)getuid(), group);
    CHECK(access(path, F_OK) != 0 && errno == ENOENT);     /* the last one out removed it */
    return check_done();
}

/* The other members: their guest RAM (page transfer), their deaths, and the member socket.
 *
 * A joining member sends HELLO with its RAM's memfd (SCM_RIGHTS) to every live member; each
 * answers WELCOME with its own. A message counts only when the kernel's credentials on it
 * (SO_PASSCRED) show this user and the process the shared table names for that slot and
 * generation, and a memfd only when it is sealed against shrinking and as long as the table
 * says: a peer's RAM mapped here can then never turn into a SIGBUS under a copy. A peer comes up
 * once its RAM is mapped and its pidfd open; the pidfd becomes readable when it dies. Every
 * second the table is read again, which catches a HELLO that was lost and a slot that was taken
 * over behind our back.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "layout.h"

#define MSG_MAGIC 0x434b4933u   /* "3IKC" */
enum { MSG_KICK = 'k', MSG_HELLO = 1, MSG_WELCOME = 2 };

struct msg {
    uint32_t magic, type, slot, gen;
};

#define SCAN_NS 1000000000ull

static void tell(struct ikc_group *g, unsigned m, bool up)
{
    for (unsigned i = 0; i < g->nwatchers; i++)
        g->watcher[i].fn(g->watcher[i].opaque, m, up);
}

void ikc_peer_down(struct ikc_group *g, unsigned m)
{
    struct ikc_peer *p = &g->peer[m];
    if (p->up) {
        p->up = false;
        tell(g, m, false);
    }
    if (p->ram)
        munmap(p->ram, p->ram_bytes);
    if (p->pidfd >= 0)
        close(p->pidfd);
    *p = (struct ikc_peer){ .pidfd = -1 };
}

/* Send (type) with this member's memfd to member (m). */
static void send_ram(struct ikc_group *g, unsigned m, uint32_t type)
{
    struct msg msg = { MSG_MAGIC, type, g->self, g->gen };
    struct iovec iov = { &msg, sizeof msg };
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } c = { 0 };
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    size_t len;
    ikc_socket_name(g->name, m, a.sun_path, &len);
    struct msghdr mh = { .msg_name = &a,
                         .msg_namelen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len),
                         .msg_iov = &iov, .msg_iovlen = 1,
                         .msg_control = c.buf, .msg_controllen = sizeof c.buf };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &g->ram_fd, sizeof(int));
    /* The socket is non-blocking; a peer's full queue is tried again by the next scan. */
    sendmsg(g->sock, &mh, MSG_NOSIGNAL);
}

void ikc_announce(struct ikc_group *g)
{
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        if (m != g->self && atomic_load(&g->sh->member[m].state) == IKC_LIVE)
            send_ram(g, m, MSG_HELLO);
    g->next_scan_ns = hw_clock_now(&hw_clock_monotonic) + SCAN_NS;
}

/* Peer (slot, gen) as the table has it, with its RAM (fd): mapped, its pidfd opened, up. */
static void peer_up(struct ikc_group *g, unsigned slot, uint32_t gen, pid_t pid, int fd)
{
    struct ikc_peer *p = &g->peer[slot];
    if (p->up && p->gen == gen)
        return;                             /* a second HELLO or WELCOME */
    ikc_peer_down(g, slot);
    const struct ikc_member *mb = &g->sh->member[slot];
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    uint64_t bytes = mb->ram_bytes;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != bytes ||
        bytes == 0 || seals < 0 || !(seals & F_SEAL_SHRINK)) {
        ikc_count_bad(g);
        return;
    }
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return;                             /* gone already */
    void *ram = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (ram == MAP_FAILED) {
        close(pidfd);
        return;
    }
    *p = (struct ikc_peer){ .up = true, .gen = gen, .pid = pid, .pidfd = pidfd, .ram = ram,
                            .ram_bytes = bytes };
    /* the rings from and to it start where the table has them (the joiner emptied them) */
    for (unsigned q = 0; q < IKC_QUEUES; q++) {
        p->head[q] = atomic_load(&g->sh->ring[g->self][slot][q].head);
        p->tail[q] = atomic_load(&g->sh->ring[slot][g->self][q].tail);
    }
    tell(g, slot, true);
}

/* One message from the socket; false when none is left. */
static bool receive_one(struct ikc_group *g)
{
    struct msg msg;
    struct iovec iov = { &msg, sizeof msg };
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } c;
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
                         .msg_controllen = sizeof c.buf };
    ssize_t n = recvmsg(g->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return errno == EINTR;
    struct ucred cred = { .pid = 0 };
    int fd = -1;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
            cm->cmsg_len == CMSG_LEN(sizeof cred)) {
            memcpy(&cred, CMSG_DATA(cm), sizeof cred);
        } else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            /* keep the first, close any other: nothing received is left open */
            size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int f;
                memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
                if (fd < 0)
                    fd = f;
                else
                    close(f);
            }
        }
    }
    if (n == (ssize_t)sizeof msg && msg.magic == MSG_MAGIC && fd >= 0 &&
        (msg.type == MSG_HELLO || msg.type == MSG_WELCOME) && msg.slot < IKC_MAX_MEMBERS &&
        msg.slot != g->self && cred.uid == getuid()) {
        const struct ikc_member *mb = &g->sh->member[msg.slot];
        if (atomic_load(&mb->state) == IKC_LIVE && mb->gen == msg.gen && mb->pid == cred.pid) {
            peer_up(g, msg.slot, msg.gen, cred.pid, fd);
            if (msg.type == MSG_HELLO)
                send_ram(g, msg.slot, MSG_WELCOME);
        } else {
            ikc_count_bad(g);
        }
    } else if (!(n == 1 && fd < 0)) {
        ikc_count_bad(g);                           /* a kick is one byte; anything else is garbage */
    }
    if (fd >= 0)
        close(fd);
    return true;
}

/* A peer the table no longer shows as the one we mapped: gone. */
static void check_peer(struct ikc_group *g, unsigned m)
{
    struct ikc_peer *p = &g->peer[m];
    const struct ikc_member *mb = &g->sh->member[m];
    if (p->up && (atomic_load(&mb->state) != IKC_LIVE || mb->gen != p->gen || mb->pid != p->pid))
        ikc_peer_down(g, m);
}

/* Peer (m) died: its slot is reclaimed (by the first member to see it), and it is gone here. */
static void peer_died(struct ikc_group *g, unsigned m)
{
    struct ikc_peer *p = &g->peer[m];
    ikc_lock(g);
    const struct ikc_member *mb = &g->sh->member[m];
    if (atomic_load(&mb->state) == IKC_LIVE && mb->gen == p->gen && mb->pid == p->pid)
        ikc_reclaim_locked(g, m);
    ikc_unlock(g);
    ikc_peer_down(g, m);
}

/* Once a second: members that came without a HELLO reaching us, and ones that went. */
static void scan(struct ikc_group *g)
{
    uint64_t now = hw_clock_now(&hw_clock_monotonic);
    if (now < g->next_scan_ns)
        return;
    g->next_scan_ns = now + SCAN_NS;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        if (m == g->self)
            continue;
        check_peer(g, m);
        if (!g->peer[m].up && atomic_load(&g->sh->member[m].state) == IKC_LIVE)
            send_ram(g, m, MSG_HELLO);
    }
}

void ikc_fill(struct ikc_group *g, unsigned queue_mask, struct pollfd *pfd, unsigned *n,
              unsigned max, uint64_t *deadline_ns)
{
    if (g->filled && g->pfd == pfd) {
        /* a second device of this guest on the group: its rings too, the descriptors once */
        g->queue_mask |= queue_mask;
        if (ikc_rings_arm(g, queue_mask))
            *deadline_ns = 0;
        return;
    }
    g->filled = true;
    g->pfd = pfd;
    g->queue_mask = queue_mask;
    g->slot_sock = -1;
    if (*n < max) {
        g->slot_sock = (int)*n;
        pfd[(*n)++] = (struct pollfd){ .fd = g->sock, .events = POLLIN };
    }
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        g->slot_pidfd[m] = -1;
        if (g->peer[m].up && *n < max) {
            g->slot_pidfd[m] = (int)*n;
            pfd[(*n)++] = (struct pollfd){ .fd = g->peer[m].pidfd, .events = POLLIN };
        }
    }
    if (g->next_scan_ns < *deadline_ns)
        *deadline_ns = g->next_scan_ns;
    if (ikc_rings_arm(g, queue_mask))
        *deadline_ns = 0;
}

void ikc_dispatch(struct ikc_group *g)
{
    if (!g->filled) {
        scan(g);                            /* the second device's call, or no fill before */
        return;
    }
    g->filled = false;
    ikc_rings_disarm(g, g->queue_mask);
    if (g->pfd && g->slot_sock >= 0 && g->pfd[g->slot_sock].revents)
        while (receive_one(g))
            ;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        int s = g->pfd ? g->slot_pidfd[m] : -1;
        if (s >= 0 && g->peer[m].up && (g->pfd[s].revents & (POLLIN | POLLHUP | POLLERR)))
            peer_died(g, m);
    }
    g->pfd = NULL;
    scan(g);
}

uint8_t *ikc_peer_ram(const struct ikc_group *g, unsigned m, uint64_t gpa, uint64_t len)
{
    if (m >= IKC_MAX_MEMBERS || !g->peer[m].up)
        return NULL;
    const struct ikc_peer *p = &g->peer[m];
    if (gpa > p->ram_bytes || len > p->ram_bytes - gpa)
        return NULL;
    return p->ram + gpa;
}

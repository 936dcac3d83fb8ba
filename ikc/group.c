/* A group's shared object and its membership: join, leave, the slot of a dead member reclaimed,
 * and `ring3 ikc list`.
 *
 * The object is /dev/shm/ring3-ikc.UID.NAME, mode 0600, and must belong to this user. Changes of
 * membership happen under flock() on it, which the kernel drops when its holder dies, so a
 * member killed mid-join never wedges the group. The first member creates and lays out the
 * object under that lock; the last one to leave removes it, and a joiner that finds the name
 * gone from under its descriptor opens it again.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/fail.h"

#include "layout.h"

bool ikc_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= IKC_NAME_BYTES)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
            return false;
    return true;
}

void ikc_shm_name(const char *group, char *out, size_t len)
{
    snprintf(out, len, "/ring3-ikc.%u.%s", (unsigned)getuid(), group);
}

/* Member (m)'s socket, in the abstract namespace (nothing on disk to clean up after a kill -9;
 * the name goes with its last descriptor). The sender's credentials are checked on each
 * message that matters. */
void ikc_socket_name(const char *group, unsigned m, char *out, size_t *len)
{
    int k = snprintf(out + 1, 100, "ring3-ikc.%u.%s.%u", (unsigned)getuid(), group, m);
    out[0] = '\0';
    *len = 1 + (size_t)k;
}

void ikc_lock(struct ikc_group *g)
{
    while (flock(g->shm_fd, LOCK_EX) < 0 && errno == EINTR)
        ;
}

void ikc_unlock(struct ikc_group *g)
{
    flock(g->shm_fd, LOCK_UN);
}

void ikc_reclaim_locked(struct ikc_group *g, unsigned m)
{
    struct ikc_member *mb = &g->sh->member[m];
    atomic_store(&mb->state, IKC_FREE);
    memset(mb->offers, 0, sizeof mb->offers);
    ikc_ring_reset(g->sh, m);
    ikc_bulk_reclaim(g->sh, m);
}

/* A member whose process is gone (killed before anyone noticed) no longer holds its slot. */
static bool member_dead(const struct ikc_member *mb)
{
    return mb->pid <= 0 || (kill(mb->pid, 0) < 0 && errno == ESRCH);
}

static int layout(struct ikc_group *g)
{
    struct ikc_shared *sh = g->sh;
    sh->version = IKC_VERSION;
    sh->members = IKC_MAX_MEMBERS;
    sh->bytes = sizeof *sh;
    if (ikc_bulk_init(sh))
        return -1;
    atomic_thread_fence(memory_order_release);
    sh->magic = IKC_MAGIC;
    return 0;
}

/* Open (and lock) the group's object, creating and laying it out when it is new. */
static int open_locked(struct ikc_group *g, char *err, size_t errlen)
{
    char path[80];
    ikc_shm_name(g->name, path, sizeof path);
    for (int tries = 0; tries < 100; tries++) {
        int fd = shm_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        struct stat st, now;
        if (fd < 0 || fstat(fd, &st) < 0) {
            snprintf(err, errlen, "cannot open /dev/shm%s: %s", path, strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        if (st.st_uid != getuid() || (st.st_mode & 077)) {
            snprintf(err, errlen, "/dev/shm%s belongs to another user or is open to others; "
                     "choose another group name", path);
            close(fd);
            return -1;
        }
        g->shm_fd = fd;
        ikc_lock(g);
        /* The last member may have removed the name between our open and our lock. */
        int sfd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
        bool same = sfd >= 0 && fstat(fd, &st) == 0 && fstat(sfd, &now) == 0 &&
                    st.st_ino == now.st_ino && st.st_dev == now.st_dev;
        if (sfd >= 0)
            close(sfd);
        if (!same) {
            close(fd);          /* drops the lock */
            g->shm_fd = -1;
            continue;
        }
        bool fresh = st.st_size == 0;
        if (fresh && ftruncate(fd, (off_t)sizeof *g->sh) < 0) {
            snprintf(err, errlen, "cannot size /dev/shm%s: %s", path, strerror(errno));
            return -1;
        }
        if (!fresh && st.st_size != (off_t)sizeof *g->sh) {
            snprintf(err, errlen, "/dev/shm%s was made by another version of ring3; end its "
                     "members or remove it", path);
            return -1;
        }
        g->sh = mmap(NULL, sizeof *g->sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (g->sh == MAP_FAILED) {
            g->sh = NULL;
            snprintf(err, errlen, "cannot map /dev/shm%s: %s", path, strerror(errno));
            return -1;
        }
        if (fresh && layout(g)) {
            snprintf(err, errlen, "cannot set up the lock of /dev/shm%s", path);
            return -1;
        }
        if (g->sh->magic != IKC_MAGIC || g->sh->version != IKC_VERSION ||
            g->sh->bytes != sizeof *g->sh || g->sh->members != IKC_MAX_MEMBERS) {
            snprintf(err, errlen, "/dev/shm%s was made by another version of ring3; end its "
                     "members or remove it", path);
            return -1;
        }
        return 0;
    }
    snprintf(err, errlen, "/dev/shm%s keeps disappearing", path);
    return -1;
}

/* A free slot whose socket name this process could take. -1: none. */
static int take_slot(struct ikc_group *g)
{
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        struct ikc_member *mb = &g->sh->member[m];
        if (atomic_load(&mb->state) == IKC_LIVE && member_dead(mb))
            ikc_reclaim_locked(g, m);
    }
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        if (atomic_load(&g->sh->member[m].state) != IKC_FREE)
            continue;
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        size_t len;
        ikc_socket_name(g->name, m, a.sun_path, &len);
        if (bind(g->sock, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) == 0)
            return (int)m;
        /* EADDRINUSE: a departing member still holds the name; try the next slot */
    }
    return -1;
}

/* The groups this process is a member of, for a second device of the same guest (the same RAM)
 * in the same group: it shares the membership. */
#define MAX_JOINED 4
static struct ikc_group *joined[MAX_JOINED];

static struct ikc_group *joined_already(const char *name, int ram_fd, unsigned devices,
                                        const char *desc)
{
    for (unsigned i = 0; i < MAX_JOINED; i++) {
        struct ikc_group *g = joined[i];
        if (g == NULL || g->ram_fd != ram_fd || strcmp(g->name, name))
            continue;
        ikc_lock(g);
        struct ikc_member *mb = &g->sh->member[g->self];
        mb->devices |= devices;
        size_t used = strnlen(mb->desc, sizeof mb->desc);
        if (desc && *desc && used + 2 < sizeof mb->desc)
            snprintf(mb->desc + used, sizeof mb->desc - used, "%s%s", used ? "; " : "", desc);
        ikc_unlock(g);
        g->users++;
        return g;
    }
    return NULL;
}

static void remember(struct ikc_group *g, bool keep)
{
    for (unsigned i = 0; i < MAX_JOINED; i++) {
        if (keep && joined[i] == NULL) {
            joined[i] = g;
            return;
        }
        if (!keep && joined[i] == g)
            joined[i] = NULL;
    }
}

struct ikc_group *ikc_join(const char *name, int ram_fd, uint64_t ram_bytes, unsigned devices,
                           const char *desc, char *err, size_t errlen)
{
    if (!ikc_name_ok(name)) {
        snprintf(err, errlen, "the group name '%s' is not 1 to 32 of A-Z a-z 0-9 _ . -", name);
        return NULL;
    }
    struct ikc_group *g = joined_already(name, ram_fd, devices, desc);
    if (g)
        return g;
    g = calloc(1, sizeof *g);
    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(g->name, sizeof g->name, "%s", name);
    g->shm_fd = g->sock = -1;
    g->ram_fd = ram_fd;
    g->ram_bytes = ram_bytes;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        g->peer[m].pidfd = -1;
    int one = 1;
    g->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (g->sock < 0 || setsockopt(g->sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0) {
        snprintf(err, errlen, "cannot make its socket: %s", strerror(errno));
        goto fail;
    }
    if (open_locked(g, err, errlen))
        goto fail_locked;
    int m = take_slot(g);
    if (m < 0) {
        snprintf(err, errlen, "group '%s' is full (%u members)", name, IKC_MAX_MEMBERS);
        goto fail_locked;
    }
    g->self = (unsigned)m;
    struct ikc_member *mb = &g->sh->member[m];
    ikc_reclaim_locked(g, g->self);         /* whatever the slot's last member left */
    mb->gen++;
    g->gen = mb->gen;
    mb->pid = getpid();
    mb->devices = devices;
    mb->ram_bytes = ram_bytes;
    mb->bad = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    mb->joined_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    snprintf(mb->desc, sizeof mb->desc, "%s", desc ? desc : "");
    atomic_store(&mb->state, IKC_LIVE);
    ikc_unlock(g);
    ikc_announce(g);
    g->users = 1;
    remember(g, true);
    return g;
fail_locked:
    if (g->shm_fd >= 0)
        ikc_unlock(g);
fail:
    if (g->sh)
        munmap(g->sh, sizeof *g->sh);
    if (g->shm_fd >= 0)
        close(g->shm_fd);
    if (g->sock >= 0)
        close(g->sock);
    free(g);
    return NULL;
}

void ikc_leave(struct ikc_group *g)
{
    if (g == NULL || --g->users > 0)
        return;
    remember(g, false);
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        ikc_peer_down(g, m);
    ikc_lock(g);
    struct ikc_member *mb = &g->sh->member[g->self];
    if (atomic_load(&mb->state) == IKC_LIVE && mb->pid == getpid() && mb->gen == g->gen)
        ikc_reclaim_locked(g, g->self);
    bool last = true;
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
        if (atomic_load(&g->sh->member[m].state) == IKC_LIVE && !member_dead(&g->sh->member[m]))
            last = false;
    if (last) {
        char path[80];
        ikc_shm_name(g->name, path, sizeof path);
        shm_unlink(path);
    }
    ikc_unlock(g);
    munmap(g->sh, sizeof *g->sh);
    close(g->shm_fd);
    close(g->sock);
    free(g);
}

unsigned ikc_self(const struct ikc_group *g)
{
    return g->self;
}

int ikc_member_pid(const struct ikc_group *g, unsigned m)
{
    return m < IKC_MAX_MEMBERS && atomic_load(&g->sh->member[m].state) == IKC_LIVE
           ? g->sh->member[m].pid : 0;
}

int ikc_watch(struct ikc_group *g, ikc_watch_fn *fn, void *opaque)
{
    if (g->nwatchers == IKC_MAX_WATCHERS)
        return -1;
    g->watcher[g->nwatchers].fn = fn;
    g->watcher[g->nwatchers++].opaque = opaque;
    return 0;
}

uint64_t ikc_bad(const struct ikc_group *g)
{
    return g->bad;
}

void ikc_count_bad(struct ikc_group *g)
{
    g->sh->member[g->self].bad = ++g->bad;
}

int ikc_list(const char *name)
{
    if (!ikc_name_ok(name))
        return bad_input("ikc: the group name '%s' is not 1 to 32 of A-Z a-z 0-9 _ . -", name);
    char path[80];
    ikc_shm_name(name, path, sizeof path);
    int fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size != (off_t)sizeof(struct ikc_shared)) {
        if (fd >= 0)
            close(fd);
        return bad_input("ikc: no group '%s' is running (`ring3 run --ikc %s` starts one)",
                         name, name);
    }
    const struct ikc_shared *sh = mmap(NULL, sizeof *sh, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (sh == MAP_FAILED || sh->magic != IKC_MAGIC || sh->version != IKC_VERSION)
        return bad_input("ikc: /dev/shm%s was made by another version of ring3", path);
    printf("group %s\n%-6s %-8s %-9s %-19s %-8s %s\n", name, "member", "pid", "RAM", "joined",
           "dropped", "devices");
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        const struct ikc_member *mb = &sh->member[m];
        if (atomic_load(&mb->state) != IKC_LIVE || member_dead(mb))
            continue;
        time_t t = (time_t)(mb->joined_ns / 1000000000);
        char when[32];
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&t));
        char desc[IKC_DESC_BYTES];
        memcpy(desc, mb->desc, sizeof desc);        /* a peer's string: ended here */
        desc[sizeof desc - 1] = '\0';
        char ram[32];
        snprintf(ram, sizeof ram, "%llu MiB", (unsigned long long)(mb->ram_bytes >> 20));
        printf("%-6u %-8d %-9s %-19s %-8llu %s\n", m, mb->pid, ram, when,
               (unsigned long long)mb->bad, desc[0] ? desc : "-");
    }
    munmap((void *)sh, sizeof *sh);
    return 0;
}

int ikc_offer(struct ikc_group *g, const char *name)
{
    int r = -1;
    ikc_lock(g);
    struct ikc_member *mb = &g->sh->member[g->self];
    for (unsigned i = 0; i < IKC_MAX_OFFERS && r < 0; i++) {
        if (mb->offers[i][0] == '\0') {
            snprintf(mb->offers[i], sizeof mb->offers[i], "%s", name);
            r = 0;
        }
    }
    ikc_unlock(g);
    return r;
}

int ikc_find(const struct ikc_group *g, const char *name)
{
    for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++) {
        const struct ikc_member *mb = &g->sh->member[m];
        if (atomic_load(&mb->state) != IKC_LIVE || m == g->self)
            continue;
        for (unsigned i = 0; i < IKC_MAX_OFFERS; i++)
            if (!strncmp(mb->offers[i], name, sizeof mb->offers[i]))
                return (int)m;
    }
    return -1;
}

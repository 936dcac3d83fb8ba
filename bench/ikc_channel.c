/* The IKC channel alone (ikc/), between two processes that join one group as two ring3 monitors
 * do: SHIMOS's Table 4, its round trip and its packets per second. With --stream, the same
 * 64-byte packets over what the stream backend (net/stream.c) uses instead: a UNIX stream
 * socket, each packet behind its 4-byte big-endian length.
 *
 *   build/bench/ikc-channel [--stream] [ROUNDS [PACKETS]]
 *
 * prints one line per figure, "NAME VALUE UNIT":
 *   rtt_spin   a packet there and its answer back, both sides polling their rings (the
 *              median of ROUNDS, default 100000, each timed alone);
 *   rtt_sleep  the same with both sides asleep in poll() between packets, woken by the
 *              channel's notification (the flag raised, a datagram on the member socket), or
 *              by the socket;
 *   pps        PACKETS (default 1000000) one way as fast as the receiver takes them, the
 *              sender spinning on a full ring, in millions per second.
 */
#include <fcntl.h>
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ikc/channel.h"
#include "ikc/layout.h"             /* ikc_shm_name */

#define RAM_BYTES (1u << 20)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct ikc_group *join(const char *name, const char *desc)
{
    int fd = memfd_create("bench-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, RAM_BYTES) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
        perror("ikc-channel: memfd");
        exit(1);
    }
    char err[256];
    struct ikc_group *g = ikc_join(name, fd, RAM_BYTES, 0, desc, err, sizeof err);
    if (g == NULL) {
        fprintf(stderr, "ikc-channel: %s\n", err);
        exit(1);
    }
    return g;
}

/* One turn of the member's event loop; (sleep): wait in poll() for the next notification. */
static void turn(struct ikc_group *g, bool sleep)
{
    struct pollfd pfd[32];
    unsigned n = 0;
    uint64_t deadline = UINT64_MAX;
    ikc_fill(g, 1u << IKC_Q_NET, pfd, &n, 32, &deadline);
    poll(pfd, n, sleep && deadline != 0 ? 1000 : 0);
    ikc_dispatch(g);
}

static void wait_for_peer(struct ikc_group *g, unsigned *peer)
{
    for (;;) {
        for (unsigned m = 0; m < IKC_MAX_MEMBERS; m++)
            if (ikc_peer(g, m, 0)) {
                *peer = m;
                return;
            }
        turn(g, true);
    }
}

/* One end: a member of the group and its peer, or one end of a stream socket. */
struct end {
    struct ikc_group *g;
    unsigned peer;
    int fd;                                     /* --stream */
    size_t have;
    uint8_t in[1 << 16];
};

#define FRAME (4 + sizeof(struct ikc_packet))

/* Take the next packet, spinning or sleeping until there is one. */
static void take(struct end *e, bool sleep, struct ikc_packet *p)
{
    if (e->g) {
        while (!ikc_recv(e->g, e->peer, IKC_Q_NET, p))
            if (sleep)
                turn(e->g, true);
        return;
    }
    while (e->have < FRAME) {
        ssize_t n = recv(e->fd, e->in + e->have, sizeof e->in - e->have, sleep ? 0 : MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            perror("ikc-channel: recv");
            exit(1);
        }
        if (n > 0)
            e->have += (size_t)n;
    }
    uint32_t len;
    memcpy(&len, e->in, 4);
    if (ntohl(len) != sizeof *p) {
        fprintf(stderr, "ikc-channel: a frame of %u bytes\n", ntohl(len));
        exit(1);
    }
    memcpy(p, e->in + 4, sizeof *p);
    memmove(e->in, e->in + FRAME, e->have - FRAME);
    e->have -= FRAME;
}

static void put(struct end *e, const struct ikc_packet *p)
{
    if (e->g) {
        while (ikc_send(e->g, e->peer, IKC_Q_NET, p) != 0)
            ;
        return;
    }
    uint8_t frame[FRAME];
    uint32_t len = htonl(sizeof *p);
    memcpy(frame, &len, 4);
    memcpy(frame + 4, p, sizeof *p);
    for (size_t done = 0; done < FRAME; ) {
        ssize_t n = send(e->fd, frame + done, FRAME - done, MSG_NOSIGNAL);
        if (n < 0 && errno != EINTR) {
            perror("ikc-channel: send");
            exit(1);
        }
        done += n > 0 ? (size_t)n : 0;
    }
}

/* This side's end: a member of group (name), or stream socket (fd). */
static struct end *open_end(const char *name, int fd, const char *desc)
{
    struct end *e = calloc(1, sizeof *e);
    if (fd >= 0) {
        e->fd = fd;
        return e;
    }
    e->g = join(name, desc);
    wait_for_peer(e->g, &e->peer);
    return e;
}

enum { CMD_PING = 1, CMD_FLOOD, CMD_END };

/* The other monitor: answers pings, swallows the flood. */
static void echo(const char *name, int fd, long rounds, long packets)
{
    struct end *e = open_end(name, fd, "echo");
    struct ikc_packet p;
    for (int sleep = 0; sleep < 2; sleep++)
        for (long i = 0; i < rounds; i++) {
            take(e, sleep, &p);
            put(e, &p);
        }
    for (long i = 0; i < packets; i++)
        take(e, false, &p);
    put(e, &p);                                 /* the last one back: all arrived */
    if (e->g)
        ikc_leave(e->g);
    _exit(0);
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    bool stream = argc > 1 && !strcmp(argv[1], "--stream");
    argc -= stream;
    argv += stream;
    long rounds = argc > 1 ? atol(argv[1]) : 100000, packets = argc > 2 ? atol(argv[2]) : 1000000;
    if (rounds <= 0 || packets <= 0) {
        fprintf(stderr, "usage: ikc-channel [--stream] [ROUNDS [PACKETS]]\n");
        return 2;
    }
    char name[32];
    snprintf(name, sizeof name, "bench-%d", (int)getpid());
    int sv[2] = { -1, -1 };
    if (stream && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("ikc-channel: socketpair");
        return 1;
    }
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);       /* a killed run leaves no echo spinning */
        if (getppid() == 1)
            _exit(1);
        echo(name, sv[1], rounds, packets);
    }
    struct end *e = open_end(name, sv[0], "measure");
    if (e->g) {
        /* Both ends have the group mapped: its name can go now, so that a run killed before
         * ikc_leave leaves nothing in /dev/shm. */
        char path[80];
        ikc_shm_name(name, path, sizeof path);
        shm_unlink(path);
    }
    uint64_t *t = calloc((size_t)rounds, sizeof *t);
    struct ikc_packet p = { .cmd = CMD_PING };
    for (int sleep = 0; sleep < 2; sleep++) {
        for (long i = 0; i < rounds; i++) {
            uint64_t t0 = now_ns();
            p.param[0] = (uint64_t)i;
            put(e, &p);
            take(e, sleep, &p);
            t[i] = now_ns() - t0;
        }
        qsort(t, (size_t)rounds, sizeof *t, cmp);
        printf("%s %.3f us\n", sleep ? "rtt_sleep" : "rtt_spin", (double)t[rounds / 2] / 1000);
    }
    p.cmd = CMD_FLOOD;
    uint64_t t0 = now_ns();
    for (long i = 0; i < packets; i++)
        put(e, &p);
    take(e, false, &p);
    double s = (double)(now_ns() - t0) / 1e9;
    printf("pps %.3f M/s\n", (double)packets / s / 1e6);
    int status;
    waitpid(child, &status, 0);
    if (e->g)
        ikc_leave(e->g);
    free(t);
    free(e);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

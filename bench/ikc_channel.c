/* The IKC channel alone (ikc/), between two processes that join one group as two ring3 monitors
 * do: SHIMOS's Table 4, its round trip and its packets per second.
 *
 *   build/bench/ikc-channel [ROUNDS [PACKETS]]
 *
 * prints one line per figure, "NAME VALUE UNIT":
 *   rtt_spin   a packet there and its answer back, both sides polling their rings (the
 *              median of ROUNDS, default 100000, each timed alone);
 *   rtt_sleep  the same with both sides asleep in poll() between packets, woken by the
 *              channel's notification (the flag raised, a datagram on the member socket);
 *   pps        PACKETS (default 1000000) one way as fast as the receiver takes them, the
 *              sender spinning on a full ring, in millions per second.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ikc/channel.h"

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

/* Take the next packet from (peer), spinning or sleeping until there is one. */
static void take(struct ikc_group *g, unsigned peer, bool sleep, struct ikc_packet *p)
{
    while (!ikc_recv(g, peer, IKC_Q_NET, p))
        if (sleep)
            turn(g, true);
}

static void put(struct ikc_group *g, unsigned peer, const struct ikc_packet *p)
{
    while (ikc_send(g, peer, IKC_Q_NET, p) != 0)
        ;
}

enum { CMD_PING = 1, CMD_FLOOD, CMD_END };

/* The other monitor: answers pings, swallows the flood. */
static void echo(const char *name, long rounds, long packets)
{
    struct ikc_group *g = join(name, "echo");
    unsigned peer;
    wait_for_peer(g, &peer);
    struct ikc_packet p;
    for (int sleep = 0; sleep < 2; sleep++)
        for (long i = 0; i < rounds; i++) {
            take(g, peer, sleep, &p);
            put(g, peer, &p);
        }
    for (long i = 0; i < packets; i++)
        take(g, peer, false, &p);
    put(g, peer, &p);                           /* the last one back: all arrived */
    ikc_leave(g);
    _exit(0);
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100000, packets = argc > 2 ? atol(argv[2]) : 1000000;
    if (rounds <= 0 || packets <= 0) {
        fprintf(stderr, "usage: ikc-channel [ROUNDS [PACKETS]]\n");
        return 2;
    }
    char name[32];
    snprintf(name, sizeof name, "bench-%d", (int)getpid());
    pid_t child = fork();
    if (child == 0)
        echo(name, rounds, packets);
    struct ikc_group *g = join(name, "measure");
    unsigned peer;
    wait_for_peer(g, &peer);
    uint64_t *t = calloc((size_t)rounds, sizeof *t);
    struct ikc_packet p = { .cmd = CMD_PING };
    for (int sleep = 0; sleep < 2; sleep++) {
        for (long i = 0; i < rounds; i++) {
            uint64_t t0 = now_ns();
            p.param[0] = (uint64_t)i;
            put(g, peer, &p);
            take(g, peer, sleep, &p);
            t[i] = now_ns() - t0;
        }
        qsort(t, (size_t)rounds, sizeof *t, cmp);
        printf("%s %.3f us\n", sleep ? "rtt_sleep" : "rtt_spin", (double)t[rounds / 2] / 1000);
    }
    p.cmd = CMD_FLOOD;
    uint64_t t0 = now_ns();
    for (long i = 0; i < packets; i++)
        put(g, peer, &p);
    take(g, peer, false, &p);
    double s = (double)(now_ns() - t0) / 1e9;
    printf("pps %.3f M/s\n", (double)packets / s / 1e6);
    int status;
    waitpid(child, &status, 0);
    ikc_leave(g);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

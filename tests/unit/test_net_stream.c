/* Unit test of --net stream (net/stream.c): qemu's framing both ways, a hostile peer's bad
 * frames, the link as peers come and go (server and client), a NIC with no room, stale
 * socket files. The test plays the peer on real UNIX sockets. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net/backend.h"

/* ---- the NIC the backend feeds ---- */

#define MAX_FRAMES 16

static struct nic {
    bool room;
    int link;                       /* -1: never told */
    unsigned nframes;
    size_t len[MAX_FRAMES];
    uint8_t frame[MAX_FRAMES][256];
} nic;

static bool nic_receive(void *opaque, const struct net_hdr *h, const uint8_t *frame, size_t len)
{
    (void)opaque;
    CHECK(h->flags == 0 && h->gso_type == 0);           /* the stream format carries no offloads */
    if (!nic.room)
        return false;
    if (nic.nframes < MAX_FRAMES) {
        nic.len[nic.nframes] = len;
        memcpy(nic.frame[nic.nframes], frame, len < 256 ? len : 256);
        nic.nframes++;
    }
    return true;
}

static void nic_link(void *opaque, bool up)
{
    (void)opaque;
    nic.link = up;
}

static const struct net_client client = { nic_receive, nic_link, NULL, NULL, NULL };

static void nic_reset(void)
{
    nic = (struct nic){ .room = true, .link = -1 };
}

/* ---- driving the backend as the monitor's event loop does ---- */

/* A whole frame from the guest, sent at once, as the NIC does after a batch. */
static void send_whole(struct net_backend *b, uint8_t *frame, size_t len)
{
    static const struct net_hdr whole;
    const char *why = NULL;
    CHECK_EQ(net_backend_send(b, &whole, frame, len, &why), 0);
    net_backend_flush(b);
}

static void pump_once(struct net_backend *b, int timeout_ms)
{
    struct pollfd pfd[8];
    unsigned n = 0;
    uint64_t deadline = UINT64_MAX;
    net_backend_fill(b, pfd, &n, 8, &deadline);
    poll(pfd, n, timeout_ms);
    net_backend_dispatch(b);
}

/* Pump until (*watch) equals (want) or (ms) pass. */
static void pump_until(struct net_backend *b, const int *watch, int want, int ms)
{
    for (int i = 0; i < ms / 10 && *watch != want; i++)
        pump_once(b, 10);
}

static void pump_frames(struct net_backend *b, unsigned want)
{
    for (int i = 0; i < 100 && nic.nframes < want; i++)
        pump_once(b, 10);
}

/* ---- the peer ---- */

static struct sockaddr_un unix_addr(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    return a;
}

static int peer_connect(const char *path)
{
    struct sockaddr_un a = unix_addr(path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void peer_frame(int fd, uint32_t len, uint8_t fill)
{
    uint8_t buf[4 + 256];
    buf[0] = (uint8_t)(len >> 24);
    buf[1] = (uint8_t)(len >> 16);
    buf[2] = (uint8_t)(len >> 8);
    buf[3] = (uint8_t)len;
    memset(buf + 4, fill, sizeof buf - 4);
    CHECK_EQ(write(fd, buf, 4 + (len < 256 ? len : 0)), 4 + (len < 256 ? len : 0));
}

/* The backend closed the connection: the peer reads the end of the stream. */
static bool peer_sees_close(int fd)
{
    struct pollfd p = { fd, POLLIN, 0 };
    char c;
    return poll(&p, 1, 2000) == 1 && read(fd, &c, 1) == 0;
}

/* ---- the server ---- */

static void test_server(const char *path)
{
    nic_reset();
    struct net_stream_options o = { .server = true };
    snprintf(o.path, sizeof o.path, "%s", path);
    char err[200] = "";
    struct net_backend *b = net_stream_new(&o, &client, err, sizeof err);
    CHECK(b != NULL);
    if (b == NULL) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK_EQ(nic.link, 0);                  /* no peer yet */

    int fd = peer_connect(path);
    CHECK(fd >= 0);
    pump_until(b, &nic.link, 1, 1000);
    CHECK_EQ(nic.link, 1);

    /* good frames, and the bad ones that keep the stream framed: dropped, not closed */
    peer_frame(fd, 60, 0xA1);
    peer_frame(fd, 0, 0);
    peer_frame(fd, 5, 0xEE);
    peer_frame(fd, 14, 0xA2);
    pump_frames(b, 2);
    CHECK_EQ(nic.nframes, 2);
    CHECK_EQ(nic.len[0], 60);
    CHECK_EQ(nic.frame[0][59], 0xA1);
    CHECK_EQ(nic.len[1], 14);
    CHECK_EQ(nic.frame[1][0], 0xA2);
    CHECK_EQ(nic.link, 1);

    /* the guest's frame to the peer: its length, big-endian, then the frame */
    uint8_t out[100], got[4 + 100];
    memset(out, 0x5A, sizeof out);
    send_whole(b, out, sizeof out);
    CHECK_EQ(read(fd, got, sizeof got), sizeof got);
    CHECK(got[0] == 0 && got[1] == 0 && got[2] == 0 && got[3] == 100 && got[4] == 0x5A && got[103] == 0x5A);

    /* a NIC without room: the frame waits, the next one behind it, until resume */
    nic.room = false;
    peer_frame(fd, 20, 0xB1);
    peer_frame(fd, 21, 0xB2);
    for (int i = 0; i < 10; i++)
        pump_once(b, 10);
    nic.room = true;
    CHECK_EQ(nic.nframes, 2);
    net_backend_resume(b);
    CHECK_EQ(nic.nframes, 4);
    CHECK_EQ(nic.len[2], 20);
    CHECK_EQ(nic.len[3], 21);

    /* a length no frame has: the stream cannot be framed, the connection goes, the link too */
    peer_frame(fd, 65551, 0);
    pump_until(b, &nic.link, 0, 1000);
    CHECK_EQ(nic.link, 0);
    CHECK(peer_sees_close(fd));
    close(fd);

    /* the next peer is taken; its garbage ("GET " is 0x47455420 bytes long) closes it too */
    fd = peer_connect(path);
    pump_until(b, &nic.link, 1, 1000);
    CHECK_EQ(nic.link, 1);
    CHECK_EQ(write(fd, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    pump_until(b, &nic.link, 0, 1000);
    CHECK_EQ(nic.link, 0);
    CHECK(peer_sees_close(fd));
    close(fd);

    /* a peer that leaves inside a frame: the part is not delivered */
    unsigned before = nic.nframes;
    fd = peer_connect(path);
    pump_until(b, &nic.link, 1, 1000);
    uint8_t part[4 + 10] = { 0, 0, 0, 60 };
    CHECK_EQ(write(fd, part, sizeof part), sizeof part);
    close(fd);
    pump_until(b, &nic.link, 0, 1000);
    CHECK_EQ(nic.link, 0);
    CHECK_EQ(nic.nframes, before);

    /* frames for no peer are lost, not kept */
    send_whole(b, out, sizeof out);
    fd = peer_connect(path);
    pump_until(b, &nic.link, 1, 1000);
    struct pollfd p = { fd, POLLIN, 0 };
    CHECK_EQ(poll(&p, 1, 50), 0);
    close(fd);

    net_backend_free(b);
    struct stat st;
    CHECK(stat(path, &st) < 0 && errno == ENOENT);     /* the server's socket file went */
}

/* A socket file whose server died is taken over; a file that is no socket is left alone. */
static void test_stale_and_foreign_files(const char *path)
{
    nic_reset();
    struct sockaddr_un a = unix_addr(path);
    int dead = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(dead, (struct sockaddr *)&a, sizeof a) == 0);
    close(dead);
    struct net_stream_options o = { .server = true };
    snprintf(o.path, sizeof o.path, "%s", path);
    char err[200] = "";
    struct net_backend *b = net_stream_new(&o, &client, err, sizeof err);
    CHECK(b != NULL);
    net_backend_free(b);

    FILE *f = fopen(path, "w");
    fputs("precious", f);
    fclose(f);
    b = net_stream_new(&o, &client, err, sizeof err);
    CHECK(b == NULL);
    CHECK(strstr(err, "cannot listen on") != NULL);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 8);
    unlink(path);
}

/* ---- the client ---- */

static void test_client(const char *path)
{
    nic_reset();
    struct net_stream_options o = { .server = false };
    snprintf(o.path, sizeof o.path, "%s", path);
    char err[200] = "";
    CHECK(net_stream_new(&o, &client, err, sizeof err) == NULL);
    CHECK(strstr(err, "cannot connect to") != NULL);

    struct sockaddr_un a = unix_addr(path);
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(listener, (struct sockaddr *)&a, sizeof a) == 0 && listen(listener, 1) == 0);
    struct net_backend *b = net_stream_new(&o, &client, err, sizeof err);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    CHECK_EQ(nic.link, 1);
    int fd = accept(listener, NULL, NULL);
    peer_frame(fd, 64, 0xC1);
    pump_frames(b, 1);
    CHECK_EQ(nic.nframes, 1);

    /* the peer goes: link down; the client connects again within about a second */
    close(fd);
    pump_until(b, &nic.link, 0, 1000);
    CHECK_EQ(nic.link, 0);
    pump_until(b, &nic.link, 1, 3000);
    CHECK_EQ(nic.link, 1);
    fd = accept(listener, NULL, NULL);
    peer_frame(fd, 64, 0xC2);
    pump_frames(b, 2);
    CHECK_EQ(nic.nframes, 2);
    CHECK_EQ(nic.frame[1][0], 0xC2);
    close(fd);
    close(listener);
    net_backend_free(b);
    unlink(path);
}

/* Over TCP, two backends are each other's peer: a frame from one reaches the other whole. */
static void test_tcp_pair(void)
{
    nic_reset();
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    bind(probe, (struct sockaddr *)&a, sizeof a);
    getsockname(probe, (struct sockaddr *)&a, &len);
    close(probe);
    struct net_stream_options o = { .server = true, .host = "127.0.0.1", .port = ntohs(a.sin_port) };
    char err[200] = "";
    struct net_backend *server = net_stream_new(&o, &client, err, sizeof err);
    CHECK(server != NULL);
    if (server == NULL) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    o.server = false;
    struct net_backend *other = net_stream_new(&o, &client, err, sizeof err);
    CHECK(other != NULL);
    if (other == NULL) {
        net_backend_free(server);
        return;
    }
    pump_until(server, &nic.link, 1, 1000);
    uint8_t frame[1514];
    for (size_t i = 0; i < sizeof frame; i++)
        frame[i] = (uint8_t)i;
    send_whole(other, frame, sizeof frame);
    pump_frames(server, 1);
    CHECK_EQ(nic.nframes, 1);
    CHECK_EQ(nic.len[0], sizeof frame);
    CHECK(memcmp(nic.frame[0], frame, 256) == 0);
    net_backend_free(other);
    net_backend_free(server);
}

int main(void)
{
    char dir[] = "/tmp/ring3-stream-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char path[64];
    snprintf(path, sizeof path, "%s/lan.sock", dir);
    test_server(path);
    test_stale_and_foreign_files(path);
    test_client(path);
    test_tcp_pair();
    rmdir(dir);
    return check_done();
}

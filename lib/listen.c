/* A listening stream socket at an address the user gave (listen.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "listen.h"

static bool parse_tcp(const char *spec, struct sockaddr_in *a)
{
    /* The prefix first: a spec shorter than "tcp:" has no (spec + 4) to search. */
    if (strncmp(spec, "tcp:", 4))
        return false;
    const char *rest = spec + 4, *colon = strrchr(rest, ':');
    char host[64] = "127.0.0.1", *end;
    if (!colon || colon - rest >= (long)sizeof host)
        return false;
    if (colon > rest) {
        memcpy(host, rest, (size_t)(colon - rest));
        host[colon - rest] = 0;
    }
    long port = strtol(colon + 1, &end, 10);
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    return *end == 0 && port > 0 && port < 65536 && inet_pton(AF_INET, host, &a->sin_addr) == 1;
}

bool listen_spec_valid(const char *spec, bool tcp)
{
    struct sockaddr_in a;
    if (!strncmp(spec, "unix:", 5))
        return spec[5] && strlen(spec + 5) < sizeof ((struct sockaddr_un *)0)->sun_path;
    return tcp && parse_tcp(spec, &a);
}

int listen_on(const char *spec)
{
    struct sockaddr_in in;
    struct sockaddr_un un = { .sun_family = AF_UNIX };
    bool unix_socket = !strncmp(spec, "unix:", 5);
    if (unix_socket) {
        snprintf(un.sun_path, sizeof un.sun_path, "%s", spec + 5);
        unlink(un.sun_path);
    } else if (!parse_tcp(spec, &in)) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(unix_socket ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd >= 0 && !unix_socket)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 &&
        (bind(fd, unix_socket ? (struct sockaddr *)&un : (struct sockaddr *)&in,
              unix_socket ? sizeof un : sizeof in) < 0 || listen(fd, 1) < 0)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

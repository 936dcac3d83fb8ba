/* Sending a whole buffer on a stream socket (sendall.h). */
#include <errno.h>
#include <sys/socket.h>

#include "sendall.h"

bool send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Sending a whole buffer on a stream socket (sendall.c). */
#ifndef RING3_LIB_SENDALL_H
#define RING3_LIB_SENDALL_H

#include <stdbool.h>
#include <stddef.h>

/* Sends all (n) bytes of (buf) on (fd), waiting as the socket needs, without SIGPIPE if the
 * peer is gone. False when the connection failed or closed. */
bool send_all(int fd, const void *buf, size_t n);

#endif

/* A listening stream socket at an address the user gave (listen.c): the monitor's doors for gdb
 * (--gdb) and for the monitor prompt (--monitor). */
#ifndef RING3_LIB_LISTEN_H
#define RING3_LIB_LISTEN_H

#include <stdbool.h>

/* Whether (spec) is unix:PATH (a path that fits a socket address) or, when (tcp), also
 * tcp:[HOST]:PORT (HOST an IPv4 address, 127.0.0.1 when empty; PORT 1 to 65535). */
bool listen_spec_valid(const char *spec, bool tcp);

/* A socket listening at the valid (spec), non-blocking and close-on-exec, for one client at a
 * time. A UNIX socket's path is unlinked first. Returns it, or -1 with errno set. */
int listen_on(const char *spec);

#endif

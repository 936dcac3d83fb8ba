/* The host's kernel settings under /proc/sys, read as numbers. */
#ifndef RING3_LIB_SYSCTL_H
#define RING3_LIB_SYSCTL_H

/* The number in /proc/sys/(path) (e.g. "vm/max_map_count"), or (fallback) when it cannot be
 * read. */
unsigned long long sysctl_number(const char *path, unsigned long long fallback);

#endif

/* Option values in qemu's comma syntax (-drive, -nic): FIRST[,KEY=VALUE]..., and their numbers. */
#ifndef RING3_LIB_OPTLIST_H
#define RING3_LIB_OPTLIST_H

#include <stdbool.h>
#include <stddef.h>

/* One ",KEY=VALUE" of such a list. */
struct opt_flag {
    const char *text;           /* the flag as given (without its comma), for messages */
    int len;                    /* its bytes */
    char key[160];              /* KEY, NUL-terminated */
    const char *value;          /* VALUE, in (key)'s buffer; NULL without '=' or when too long */
};

/* The flag after the comma at (*p) into (f), and (*p) past it; false when (*p) is not at a comma
 * (the end of the list). */
bool opt_next_flag(const char **p, struct opt_flag *f);

/* A decimal number from (lo) to (hi), all of (s), into (*out): 0, or -1. */
int opt_decimal(const char *s, unsigned long lo, unsigned long hi, unsigned long *out);

#endif

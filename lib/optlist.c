/* Option values in qemu's comma syntax (optlist.h). */
#include "optlist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool opt_next_flag(const char **p, struct opt_flag *f)
{
    if (**p != ',')
        return false;
    f->text = *p + 1;
    size_t len = strcspn(f->text, ",");
    f->len = (int)len;
    *p = f->text + len;
    snprintf(f->key, sizeof f->key, "%.*s", f->len, f->text);
    char *eq = strchr(f->key, '=');
    f->value = NULL;
    if (eq != NULL && len < sizeof f->key) {
        *eq = '\0';
        f->value = eq + 1;
    }
    return true;
}

int opt_decimal(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
    char *end;
    unsigned long n = strtoul(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || n < lo || n > hi)
        return -1;
    *out = n;
    return 0;
}

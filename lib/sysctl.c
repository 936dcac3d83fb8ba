/* The host's kernel settings under /proc/sys (sysctl.h). */
#include "sysctl.h"

#include <stdio.h>

unsigned long long sysctl_number(const char *path, unsigned long long fallback)
{
    char name[128];
    unsigned long long v = fallback;
    snprintf(name, sizeof name, "/proc/sys/%s", path);
    FILE *f = fopen(name, "re");
    if (f) {
        if (fscanf(f, "%llu", &v) != 1)
            v = fallback;
        fclose(f);
    }
    return v;
}

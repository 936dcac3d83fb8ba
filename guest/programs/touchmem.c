/* touchmem [MIB]: write a distinct word to every 4 KiB page of MIB MiB (default 64), then check them all. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64, pages = mib << 8, bad = 0;
    uint32_t *mem = malloc(mib << 20);

    if (!mem) {
        printf("touchmem: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    for (size_t p = 0; p < pages; p++)
        mem[p * 1024 + p % 1024] = (uint32_t)(p * 2654435761u);
    for (size_t p = 0; p < pages; p++)
        bad += mem[p * 1024 + p % 1024] != (uint32_t)(p * 2654435761u);
    if (bad) {
        printf("touchmem: %zu of %zu pages lost their value\n", bad, pages);
        return 1;
    }
    printf("touchmem: %zu MiB ok\n", mib);
    return 0;
}

/* touchmem [MIB]: fill every 4 KiB page of MIB MiB (default 64) with a pattern of its own, then
 * check every word: a page mapped twice, lost or swapped with another shows as a wrong value. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define PAGE_WORDS (4096 / sizeof(uint32_t))

/* Distinct for every word of the area: a multiplication by an odd constant is a bijection of
 * the 32-bit words. */
static uint32_t pattern(size_t word)
{
    return (uint32_t)word * 2654435761u;
}

int main(int argc, char **argv)
{
    unsigned long mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;

    if (mib == 0 || mib >= SIZE_MAX >> 20) {
        fprintf(stderr, "usage: touchmem [MIB], 1 to %zu\n", (SIZE_MAX >> 20) - 1);
        return 2;
    }
    size_t words = (size_t)mib << 18, bad = 0, first_bad = 0;
    uint32_t *mem = malloc(words * sizeof *mem);
    if (!mem) {
        printf("touchmem: cannot allocate %lu MiB\n", mib);
        return 1;
    }
    for (size_t w = 0; w < words; w++)
        mem[w] = pattern(w);
    for (size_t w = 0; w < words; w++) {
        if (mem[w] != pattern(w) && !bad++)
            first_bad = w;
    }
    if (bad) {
        printf("touchmem: %zu of %zu words wrong, the first in page %zu of %zu\n", bad, words,
               first_bad / PAGE_WORDS, words / PAGE_WORDS);
        return 1;
    }
    printf("touchmem: %lu MiB ok\n", mib);
    return 0;
}

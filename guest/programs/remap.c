/* remap [ROUNDS]: pages whose translation the kernel drops one at a time (invlpg), then uses
 * again: on the same frame, on another one, and on thousands of distinct pages in turn. Each
 * line says what a process reads back; any stale translation shows as a wrong value. The host
 * runs it too (it is a static i386 program), and what it prints is what the guest must print.
 *
 * Linux drops the translations of a small range with one invlpg a page (flush_tlb_mm_range,
 * below tlb_single_page_flush_ceiling: 33 pages), of a larger one with a CR3 write; ring3
 * closes the pages of the first kind where they are and gives back the second
 * (monitor/mmu/mmu.c, close_page). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096u
#define RUN 16u                         /* pages a round maps: one invlpg each when unmapped */

static uint32_t pattern(uint32_t round, uint32_t page)
{
    return (round * 2654435761u) ^ (page * 40503u) ^ 0x5a5a0000u;
}

static void fill(uint32_t *p, uint32_t pages, uint32_t round)
{
    for (uint32_t i = 0; i < pages; i++)
        for (uint32_t w = 0; w < PAGE / 4; w += 256)
            p[i * PAGE / 4 + w] = pattern(round, i) + w;
}

/* The pages whose words differ from round's pattern (or from zero, when round is ~0). */
static unsigned wrong(const uint32_t *p, uint32_t pages, uint32_t round)
{
    unsigned bad = 0;
    for (uint32_t i = 0; i < pages; i++)
        for (uint32_t w = 0; w < PAGE / 4; w += 256)
            if (p[i * PAGE / 4 + w] != (round == ~0u ? 0 : pattern(round, i) + w)) {
                bad++;
                break;
            }
    return bad;
}

static void *map_at(void *at, uint32_t pages)
{
    void *p = mmap(at, pages * PAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
    if (p == MAP_FAILED) {
        perror("remap: mmap");
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 600;
    if (rounds < 1 || rounds > 4096) {
        fprintf(stderr, "usage: remap [ROUNDS], 1 to 4096\n");
        return 2;
    }

    /* The same frame: mprotect takes write access away and gives it back, one page at a time. */
    uint32_t *p = map_at(NULL, RUN);
    fill(p, RUN, 1);
    unsigned bad = 0;
    for (unsigned r = 0; r < 200; r++) {
        uint32_t i = r % RUN;
        mprotect((char *)p + i * PAGE, PAGE, PROT_READ);
        bad += p[i * PAGE / 4] != pattern(1, i);
        mprotect((char *)p + i * PAGE, PAGE, PROT_READ | PROT_WRITE);
        p[i * PAGE / 4 + 256] = pattern(1, i) + 256;     /* a write again: the same value */
    }
    printf("same frame: %u of 200 reads wrong, %u pages wrong after\n", bad, wrong(p, RUN, 1));

    /* Another frame at the same address: the old contents must be gone. */
    bad = 0;
    for (unsigned r = 0; r < 200; r++) {
        fill(p, RUN, r + 2);
        munmap(p, RUN * PAGE);
        map_at(p, RUN);
        bad += wrong(p, RUN, ~0u);
    }
    printf("new frames: %u pages of %u still showed the old contents\n", bad, 200 * RUN);

    /* Thousands of distinct pages, each mapped, written, checked and unmapped in turn. */
    char *area = mmap(NULL, rounds * RUN * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        perror("remap: mmap");
        return 1;
    }
    bad = 0;
    for (unsigned r = 0; r < rounds; r++) {
        uint32_t *q = map_at(area + r * RUN * PAGE, RUN);
        bad += wrong(q, RUN, ~0u);
        fill(q, RUN, r);
        bad += wrong(q, RUN, r);
        munmap(q, RUN * PAGE);
    }
    /* ... and every one of them again, which must all be new. */
    for (unsigned r = 0; r < rounds; r++) {
        uint32_t *q = map_at(area + r * RUN * PAGE, RUN);
        bad += wrong(q, RUN, ~0u);
        fill(q, RUN, r + 7);
        bad += wrong(q, RUN, r + 7);
        munmap(q, RUN * PAGE);
    }
    printf("distinct pages: %u, %u wrong\n", 2 * rounds * RUN, bad);
    return 0;
}

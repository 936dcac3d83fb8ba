/* manymaps [PAGES]: a process that touches more pages, one host mapping each, than the host lets
 * one process have mappings (vm.max_map_count, 65530 by default). Each line says what the
 * process reads back; the host runs it too (it is a static i386 program), and what it prints is
 * what the guest must print.
 *
 * - Reading fresh anonymous memory maps the kernel's zero page at each page, one frame for all:
 *   no two neighbours can share one host mapping.
 * - Writing the pages from the last to the first gives each a frame of its own, taken in the
 *   order the writes come: neighbours' frames run backwards, again one host mapping each.
 * ring3 keeps a host mapping for every guest page a process touched (its TLB), so it must drop
 * some when the host refuses another (monitor/mmu/mmu.c, evict), as a TLB drops entries. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define PAGE 4096u

static uint32_t pattern(uint32_t page)
{
    return page * 2654435761u ^ 0x3c3c0000u;
}

int main(int argc, char **argv)
{
    unsigned long pages = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    if (pages < 1 || pages > 200000) {
        fprintf(stderr, "usage: manymaps [PAGES], 1 to 200000\n");
        return 2;
    }
    volatile uint32_t *p = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        perror("manymaps: mmap");
        return 1;
    }
    uint32_t sum = 0;
    for (unsigned long i = 0; i < pages; i++)
        sum |= p[i * PAGE / 4 + i % (PAGE / 4)];
    printf("read %lu fresh pages: %s\n", pages, sum ? "not all zero" : "all zero");

    for (unsigned long i = pages; i-- > 0;)
        p[i * PAGE / 4 + i % (PAGE / 4)] = pattern((uint32_t)i);
    unsigned long wrong = 0;
    for (unsigned long i = 0; i < pages; i++)
        if (p[i * PAGE / 4 + i % (PAGE / 4)] != pattern((uint32_t)i) || p[i * PAGE / 4 + (i + 1) % (PAGE / 4)])
            wrong++;
    printf("wrote %lu pages from the last: %lu read back wrong\n", pages, wrong);

    if (munmap((void *)p, pages * PAGE)) {
        perror("manymaps: munmap");
        return 1;
    }
    printf("unmapped\n");
    return 0;
}

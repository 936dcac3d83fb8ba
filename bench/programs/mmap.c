/* mmap COUNT: map 1 MiB of anonymous memory, write every page, check it, unmap; us per
 * iteration. */
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"

#define SIZE (1 << 20)

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv), page = sysconf(_SC_PAGESIZE);

    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        unsigned char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            bench_fail("mmap: iteration %ld: mmap failed", i);
        for (long off = 0; off < SIZE; off += page)
            p[off] = (unsigned char)(off / page + i);
        for (long off = 0; off < SIZE; off += page)
            if (p[off] != (unsigned char)(off / page + i))
                bench_fail("mmap: iteration %ld: page at %ld lost its byte", i, off);
        if (munmap(p, SIZE))
            bench_fail("mmap: iteration %ld: munmap failed", i);
    }
    double t1 = bench_now();
    bench_result("mmap", (t1 - t0) / n, "us");
    return 0;
}

/* loop COUNT: the paper's CPU-bound figure, increments of a volatile variable; ns per iteration. */
#include "bench.h"

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv);
    volatile long counter = 0;

    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        counter++;
    double t1 = bench_now();
    if (counter != n)
        bench_fail("loop: counted %ld of %ld", (long)counter, n);
    bench_result("loop", (t1 - t0) / n, "ns");
    return 0;
}

/* What every benchmark program shares: its count argument, the clock, the RESULT line, failure. */
#ifndef BENCH_H
#define BENCH_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The iteration count: argv[1], a positive integer; anything else ends the program. */
static inline long bench_count(int argc, char **argv)
{
    char *end;
    long n = argc == 2 ? strtol(argv[1], &end, 10) : 0;

    if (n < 1 || *end) {
        fprintf(stderr, "usage: %s COUNT (a positive integer)\n", argv[0]);
        exit(2);
    }
    return n;
}

static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The one line the harness reads (bench/table.py): RESULT NAME VALUE UNIT. */
static inline void bench_result(const char *name, double seconds_per_iteration, const char *unit)
{
    double scale = unit[0] == 'n' ? 1e9 : unit[0] == 'u' ? 1e6 : 1e3;   /* ns, us or ms */
    printf("RESULT %s %.6g %s\n", name, seconds_per_iteration * scale, unit);
}

/* A wrong result: a FAIL line on stdout, where the harness reads, and exit status 1. */
__attribute__((format(printf, 1, 2), noreturn))
static inline void bench_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL ", stdout);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
    exit(1);
}

#endif

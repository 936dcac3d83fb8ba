/* getpid [N]: ns per getpid through libc (the vDSO's __kernel_vsyscall) and through int $0x80. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    double t0 = now();
    for (long i = 0; i < n; i++)
        syscall(SYS_getpid);
    double t1 = now();
    for (long i = 0; i < n; i++) {
        long r;
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(SYS_getpid) : "memory");
    }
    double t2 = now();
    printf("getpid: %ld calls, libc %.0f ns, int80 %.0f ns per call\n", n, (t1 - t0) / n * 1e9,
           (t2 - t1) / n * 1e9);
    return 0;
}

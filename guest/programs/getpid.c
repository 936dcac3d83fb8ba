/* getpid [N]: the time of one getpid system call made N times through libc (syscall(), which
 * enters through the vDSO's __kernel_vsyscall and caches nothing) and N times by int $0x80. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000, pid = getpid(), bad = 0;

    if (n < 1) {
        fprintf(stderr, "usage: getpid [N>0]\n");
        return 2;
    }
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        bad += syscall(SYS_getpid) != pid;
    double t1 = now_ns();
    for (long i = 0; i < n; i++) {
        long r;
        __asm__ volatile("int $0x80" : "=a"(r) : "0"((long)SYS_getpid) : "memory");
        bad += r != pid;
    }
    double t2 = now_ns();
    if (bad) {
        printf("getpid: %ld of %ld calls returned a pid other than %ld\n", bad, 2 * n, pid);
        return 1;
    }
    printf("getpid: %ld calls, libc %.0f ns, int $0x80 %.0f ns per call\n", n, (t1 - t0) / n,
           (t2 - t1) / n);
    return 0;
}

/* getpid COUNT: one system call, made through libc's syscall() (which enters by the vDSO's
 * __kernel_vsyscall and caches nothing) and by a raw int $0x80; us per call, two results. */
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv), pid = getpid();

    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        if (syscall(SYS_getpid) != pid)
            bench_fail("getpid: libc call %ld did not return %ld", i, pid);
    double t1 = bench_now();
    for (long i = 0; i < n; i++) {
        long r;
#ifdef __i386__
        __asm__ volatile("int $0x80" : "=a"(r) : "0"((long)SYS_getpid) : "memory");
#else
        /* x86-64 (User Mode Linux): the 64-bit entry, the native one there. */
        __asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_getpid) : "rcx", "r11", "memory");
#endif
        if (r != pid)
            bench_fail("getpid: raw call %ld returned %ld, not %ld", i, r, pid);
    }
    double t2 = bench_now();
    bench_result("getpid_libc", (t1 - t0) / n, "us");
    bench_result("getpid_raw", (t2 - t1) / n, "us");
    return 0;
}

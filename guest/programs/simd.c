/* simd [N]: two processes keep their own values in xmm0-7 (and the upper ymm halves when AVX is usable)
 * across N yields each, checking them every time: the guest kernel must save the vector state. */
#include <cpuid.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int avx_usable(void)
{
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || !(c & (1u << 28)))
        return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}

/* Fill xmm0-7 (or ymm0-7) from (v), yield, and compare them with (v) again. */
static int round_trip(const uint8_t *v, int avx)
{
    uint8_t out[8 * 32];
    if (avx) {
        __asm__ volatile("vmovdqu 0(%0), %%ymm0; vmovdqu 32(%0), %%ymm1; vmovdqu 64(%0), %%ymm2;"
                         "vmovdqu 96(%0), %%ymm3; vmovdqu 128(%0), %%ymm4; vmovdqu 160(%0), %%ymm5;"
                         "vmovdqu 192(%0), %%ymm6; vmovdqu 224(%0), %%ymm7" : : "r"(v) : "memory");
    } else {
        __asm__ volatile("movdqu 0(%0), %%xmm0; movdqu 32(%0), %%xmm1; movdqu 64(%0), %%xmm2;"
                         "movdqu 96(%0), %%xmm3; movdqu 128(%0), %%xmm4; movdqu 160(%0), %%xmm5;"
                         "movdqu 192(%0), %%xmm6; movdqu 224(%0), %%xmm7" : : "r"(v) : "memory");
    }
    /* A raw system call: libc code between here and the check could use the registers. */
    __asm__ volatile("int $0x80" : : "a"(158) : "memory");     /* sched_yield */
    if (avx) {
        __asm__ volatile("vmovdqu %%ymm0, 0(%0); vmovdqu %%ymm1, 32(%0); vmovdqu %%ymm2, 64(%0);"
                         "vmovdqu %%ymm3, 96(%0); vmovdqu %%ymm4, 128(%0); vmovdqu %%ymm5, 160(%0);"
                         "vmovdqu %%ymm6, 192(%0); vmovdqu %%ymm7, 224(%0); vzeroupper" : : "r"(out) : "memory");
    } else {
        __asm__ volatile("movdqu %%xmm0, 0(%0); movdqu %%xmm1, 32(%0); movdqu %%xmm2, 64(%0);"
                         "movdqu %%xmm3, 96(%0); movdqu %%xmm4, 128(%0); movdqu %%xmm5, 160(%0);"
                         "movdqu %%xmm6, 192(%0); movdqu %%xmm7, 224(%0)" : : "r"(out) : "memory");
    }
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < (avx ? 32 : 16); i++)
            if (out[r * 32 + i] != v[r * 32 + i])
                return 0;
    return 1;
}

static int worker(int id, int iterations, int avx)
{
    uint8_t v[8 * 32];
    for (int it = 0; it < iterations; it++) {
        for (int i = 0; i < (int)sizeof v; i++)
            v[i] = (uint8_t)(id * 101 + it * 7 + i);
        if (!round_trip(v, 0) || (avx && !round_trip(v, 1)))
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? atoi(argv[1]) : 2000, avx = avx_usable(), failed = 0;
    pid_t pid[2];
    for (int id = 0; id < 2; id++)
        if ((pid[id] = fork()) == 0)
            _exit(worker(id + 1, iterations, avx));
    for (int id = 0; id < 2; id++) {
        int st;
        if (waitpid(pid[id], &st, 0) != pid[id] || !WIFEXITED(st) || WEXITSTATUS(st))
            failed = 1;
    }
    printf("simd: sse %s avx %s\n", failed ? "LOST" : "ok", !avx ? "absent" : failed ? "LOST" : "ok");
    return failed;
}

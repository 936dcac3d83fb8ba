/* simd [N]: two processes each keep their own values in xmm0-7 (and in the upper halves of
 * ymm0-7 when AVX is usable) across N sched_yield calls, checking them after every one: the
 * kernel must save and restore each process's vector state when it switches between them.
 * Before that, one signal: its handler must start with xmm0-7 cleared, and the values must
 * be back after it returns (the kernel saves them in the frame and gives the handler a fresh
 * state, arch/x86/kernel/signal.c handle_signal). */
#include <cpuid.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* What one asm statement works on, addressed through %edx so that no other operand needs a
 * register: the values to hold, where the registers go after each yield, and the counts. */
struct hold {
    uint8_t want[256];      /* register i from want + i * width, width 16 (xmm) or 32 (ymm) */
    uint8_t seen[256];
    long iterations, intact;
};
_Static_assert(offsetof(struct hold, seen) == 256 && offsetof(struct hold, iterations) == 512 &&
               offsetof(struct hold, intact) == 516, "the asm below hard-codes these offsets");

/* The compiler may keep values in xmm registers only when it is allowed SSE (not with -m32's
 * default i686); then it must know that the asm below overwrites them. */
#ifdef __SSE__
#define XMM_CLOBBERS , "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7"
#else
#define XMM_CLOBBERS
#endif

#define ROWS8(row, w)  row(0, w) row(1, w) row(2, w) row(3, w) row(4, w) row(5, w) row(6, w) row(7, w)
#define LOAD_SSE(i, w)  "movdqu  " #i "*" #w "(%%edx), %%xmm" #i "\n\t"
#define STORE_SSE(i, w) "movdqu  %%xmm" #i ", 256+" #i "*" #w "(%%edx)\n\t"
#define LOAD_AVX(i, w)  "vmovdqu " #i "*" #w "(%%edx), %%ymm" #i "\n\t"
#define STORE_AVX(i, w) "vmovdqu %%ymm" #i ", 256+" #i "*" #w "(%%edx)\n\t"

/* Load the eight registers once from h->want, then up to h->iterations times: sched_yield
 * through int $0x80, store the registers to h->seen and compare it with h->want. Stops at the
 * first difference; h->intact counts the yields that kept every value. All in one asm
 * statement, so no compiled code runs while the registers hold the values. */
#define HOLD_LOOP(load, store, w, tail)                                                         \
    __asm__ volatile(ROWS8(load, w)                                                             \
                     "1:\n\t"                                                                    \
                     "movl %[nr], %%eax\n\t"                                                     \
                     "int $0x80\n\t"                                                             \
                     ROWS8(store, w)                                                             \
                     "movl %%edx, %%esi\n\t"                                                     \
                     "leal 256(%%edx), %%edi\n\t"                                                \
                     "movl $8*" #w "/4, %%ecx\n\t"                                               \
                     "cld\n\t"                                                                   \
                     "repe cmpsl\n\t"                                                            \
                     "jne 2f\n\t"                                                                \
                     "incl 516(%%edx)\n\t"                                                       \
                     "movl 516(%%edx), %%eax\n\t"                                                \
                     "cmpl 512(%%edx), %%eax\n\t"                                                \
                     "jb 1b\n"                                                                    \
                     "2:\n\t" tail                                                               \
                     : : "d"(h), [nr] "i"(SYS_sched_yield)                                       \
                     : "eax", "ecx", "esi", "edi", "cc", "memory" XMM_CLOBBERS)

static void hold_sse(struct hold *h)
{
    HOLD_LOOP(LOAD_SSE, STORE_SSE, 16, "");
}

static void hold_avx(struct hold *h)
{
    /* vzeroupper: leave no dirty upper halves behind for the SSE code of libc. */
    HOLD_LOOP(LOAD_AVX, STORE_AVX, 32, "vzeroupper");
}

/* xmm0-7 as the SIGUSR1 handler saw them, in its seen[]. */
static struct hold in_handler;

static void on_usr1(int sig)
{
    (void)sig;
    __asm__ volatile(ROWS8(STORE_SSE, 16) : : "d"(&in_handler) : "memory");
}

/* Load xmm0-7 from (want), send this process SIGUSR1 by int $0x80, store them after the
 * handler. True when the handler saw all of them zero and the values came back. The handler
 * runs on a stack of pages not touched before: the kernel's first write there is the XSAVE of
 * the vector state into the frame, which faults and is fixed up through its exception-table
 * entry before the kernel faults the pages in and tries again (arch/x86/kernel/fpu/signal.c,
 * copy_fpstate_to_sigframe). */
static int signal_clears_and_restores(void)
{
    static struct hold h;
    enum { ALT_STACK = 1 << 16 };
    for (int i = 0; i < 128; i++)
        h.want[i] = (uint8_t)(0xA5 ^ i);
    stack_t alt = { .ss_sp = mmap(NULL, ALT_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                  -1, 0), .ss_size = ALT_STACK };
    struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };
    if (alt.ss_sp == MAP_FAILED || sigaltstack(&alt, NULL) || sigaction(SIGUSR1, &sa, NULL))
        return 0;
    __asm__ volatile(ROWS8(LOAD_SSE, 16)
                     "movl %[nr], %%eax\n\t"
                     "int $0x80\n\t"
                     : : "d"(&h), "b"(getpid()), "c"(SIGUSR1), [nr] "i"(SYS_kill)
                     : "eax", "memory" XMM_CLOBBERS);
    __asm__ volatile(ROWS8(STORE_SSE, 16) : : "d"(&h) : "memory");
    int clear = 1;
    for (int i = 0; i < 128; i++)
        clear &= in_handler.seen[i] == 0;
    return clear && memcmp(h.seen, h.want, 128) == 0;
}

/* AVX is usable when the CPU has it and the kernel enabled its state in XCR0 (CPUID.1:ECX
 * OSXSAVE bit 27 and AVX bit 28; XCR0 bits 1 SSE and 2 AVX): Intel SDM vol. 1, 14.3. */
static int avx_usable(void)
{
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || !(c & (1u << 28)))
        return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}

/* One process: bit 0 of the result is set if its xmm values were lost, bit 1 its ymm ones. */
static int worker(int id, long iterations, int avx)
{
    static struct hold h;
    int lost = 0;

    for (int phase = 0; phase < 1 + avx; phase++) {
        /* Every byte differs between the two processes and between the two phases. */
        for (int i = 0; i < 256; i++)
            h.want[i] = (uint8_t)(i + 0x40 * id + 0x80 * phase);
        h.iterations = iterations;
        h.intact = 0;
        if (phase == 0)
            hold_sse(&h);
        else
            hold_avx(&h);
        if (h.intact != iterations) {
            fprintf(stderr, "simd: process %d lost its %s values after %ld of %ld yields\n", id,
                    phase ? "ymm" : "xmm", h.intact, iterations);
            lost |= 1 << phase;
        }
    }
    return lost;
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 2000;
    int avx = avx_usable(), lost = 0, signal_ok = signal_clears_and_restores();
    pid_t pid[2];

    if (iterations < 1) {
        fprintf(stderr, "usage: simd [ITERATIONS>0]\n");
        return 2;
    }
    for (int id = 0; id < 2; id++) {
        pid[id] = fork();
        if (pid[id] < 0) {
            perror("simd: fork");
            return 2;
        }
        if (pid[id] == 0)
            _exit(worker(id + 1, iterations, avx));
    }
    for (int id = 0; id < 2; id++) {
        int st;
        if (waitpid(pid[id], &st, 0) != pid[id] || !WIFEXITED(st)) {
            fprintf(stderr, "simd: process %d did not exit normally\n", id + 1);
            lost |= 3;
        } else {
            lost |= WEXITSTATUS(st);
        }
    }
    printf("simd: sse %s signal %s avx %s\n", lost & 1 ? "LOST" : "ok", signal_ok ? "ok" : "LOST",
           !avx ? "absent" : lost & 2 ? "LOST" : "ok");
    return lost || !signal_ok ? 1 : 0;
}

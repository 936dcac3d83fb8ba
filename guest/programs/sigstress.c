/* sigstress DELIVERIES | sigstress --chunks N: a computation in which every instruction shows,
 * run while signals and interrupts land on it as often as the guest can make them.
 *
 * The computation is a chain over all eight general registers but %esp, the carry flag
 * (adc, sbb, rcl) and four xmm registers, in chunks of CHUNK iterations, each one asm
 * statement: an instruction run twice or skipped, or a register or flag changed across an
 * interruption, changes the result. Beside it: an interval timer at one tick, a second process
 * that sends SIGUSR1 to it in a loop, and two more that play ping-pong over pipes. Its signal
 * handlers overwrite every register they can, xmm0-7 included.
 *
 * With DELIVERIES it computes chunk after chunk until that many signals have been handled, then
 * prints "chunks N state HASH deliveries D". With --chunks N it computes N chunks undisturbed
 * and prints the same line: the state must be the same (tests/test_sigstress.py runs it
 * natively that way, as the oracle).
 */
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK 200000

/* The state a chunk starts from and leaves: eax ebx ecx(unused between chunks) edx esi edi ebp,
 * then xmm0 and xmm1. Addressed through %ecx by offset. */
struct state {
    uint32_t gpr[7];
    uint32_t xmm[8];
};

static volatile sig_atomic_t deliveries;

/* One chunk: CHUNK steps of a chain in which each instruction's result feeds the next, and the
 * carry of each arithmetic step feeds the one after it. */
static void chunk(struct state *s)
{
    __asm__ volatile(
        "pushl %%ebp\n\t"
        "pushl %%ecx\n\t"                /* the state's address, at 4(%%esp) in the loop */
        "movdqu 28(%%ecx), %%xmm0\n\t"
        "movdqu 44(%%ecx), %%xmm1\n\t"
        "movl 0(%%ecx), %%eax\n\t"
        "movl 4(%%ecx), %%ebx\n\t"
        "movl 12(%%ecx), %%edx\n\t"
        "movl 16(%%ecx), %%esi\n\t"
        "movl 20(%%ecx), %%edi\n\t"
        "movl 24(%%ecx), %%ebp\n\t"
        "pushl $%c[n]\n\t"                /* the steps left, at (%%esp) */
        "clc\n"
        "1:\n\t"
        "adcl %%ebx, %%eax\n\t"
        "adcl %%esi, %%edx\n\t"
        "roll $7, %%ebx\n\t"
        "xorl %%eax, %%ebx\n\t"
        "sbbl %%edi, %%esi\n\t"
        "rcll $3, %%edi\n\t"
        "leal 0x9e3779b9(%%ebp,%%eax), %%ebp\n\t"
        "xorl %%ebp, %%edx\n\t"
        "addl %%edx, %%edi\n\t"
        "paddd %%xmm1, %%xmm0\n\t"
        "pxor %%xmm0, %%xmm1\n\t"
        "pshufd $0x93, %%xmm1, %%xmm1\n\t"
        "movd %%xmm0, %%ecx\n\t"        /* xmm0 feeds the carry chain too */
        "addl %%ecx, %%esi\n\t"
        "btl $3, %%ecx\n\t"
        "decl (%%esp)\n\t"               /* keeps CF for the next step's adc */
        "jnz 1b\n\t"
        "addl $4, %%esp\n\t"
        "popl %%ecx\n\t"
        "movl %%eax, 0(%%ecx)\n\t"
        "movl %%ebx, 4(%%ecx)\n\t"
        "movl %%edx, 12(%%ecx)\n\t"
        "movl %%esi, 16(%%ecx)\n\t"
        "movl %%edi, 20(%%ecx)\n\t"
        "movl %%ebp, 24(%%ecx)\n\t"
        "movdqu %%xmm0, 28(%%ecx)\n\t"
        "movdqu %%xmm1, 44(%%ecx)\n\t"
        "popl %%ebp\n\t"
        :
        : "c"(s), [n] "i"(CHUNK)
        : "eax", "ebx", "edx", "esi", "edi", "cc", "memory");
}

/* The handlers count, then overwrite the registers the interrupted code holds its state in:
 * the kernel must give them back from the signal frame. */
static void on_signal(int sig)
{
    (void)sig;
    deliveries++;
    __asm__ volatile("movl $0xdeadbeef, %%eax\n\t"
                     "movd %%eax, %%xmm0\n\t"
                     "pshufd $0, %%xmm0, %%xmm0\n\t"
                     "movdqa %%xmm0, %%xmm1\n\t"
                     "movdqa %%xmm0, %%xmm2\n\t"
                     "movdqa %%xmm0, %%xmm3\n\t"
                     "movdqa %%xmm0, %%xmm4\n\t"
                     "movdqa %%xmm0, %%xmm5\n\t"
                     "movdqa %%xmm0, %%xmm6\n\t"
                     "movdqa %%xmm0, %%xmm7\n\t"
                     "movl %%eax, %%ebx\n\t"
                     "movl %%eax, %%edx\n\t"
                     "movl %%eax, %%esi\n\t"
                     "movl %%eax, %%edi\n\t"
                     "stc\n\t"
                     : : : "eax", "ebx", "edx", "esi", "edi", "cc");
}

static uint64_t hash(const struct state *s)
{
    uint64_t h = 1469598103934665603ull;
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < sizeof *s; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The companions, which end when their parent does. */
static void killer(pid_t target)
{
    while (getppid() == target) {
        kill(target, SIGUSR1);
        sched_yield();
    }
    _exit(0);
}

static void pinger(int in, int out, pid_t parent)
{
    char c = 'x';
    while (getppid() == parent && write(out, &c, 1) == 1 && read(in, &c, 1) == 1)
        ;
    _exit(0);
}

int main(int argc, char **argv)
{
    struct state s;
    long target = 0, chunks = -1;

    if (argc == 3 && !strcmp(argv[1], "--chunks"))
        chunks = atol(argv[2]);
    else if (argc == 2)
        target = atol(argv[1]);
    if ((chunks < 0 && target <= 0) || (chunks >= 0 && argc != 3)) {
        fprintf(stderr, "usage: sigstress DELIVERIES | sigstress --chunks N\n");
        return 2;
    }
    for (unsigned i = 0; i < 7; i++)
        s.gpr[i] = 0x01234567u * (i + 1);
    for (unsigned i = 0; i < 8; i++)
        s.xmm[i] = 0x89abcdefu ^ (i * 0x01010101u);

    if (chunks >= 0) {
        for (long i = 0; i < chunks; i++)
            chunk(&s);
        printf("chunks %ld state %016llx\n", chunks, (unsigned long long)hash(&s));
        return 0;
    }

    pid_t self = getpid();
    int ab[2], ba[2];
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    if (pipe(ab) || pipe(ba) || sigaction(SIGUSR1, &sa, NULL) || sigaction(SIGALRM, &sa, NULL)) {
        perror("sigstress");
        return 1;
    }
    pid_t kids[3];
    if ((kids[0] = fork()) == 0)
        killer(self);
    if ((kids[1] = fork()) == 0)
        pinger(ab[0], ba[1], self);
    if ((kids[2] = fork()) == 0)
        pinger(ba[0], ab[1], self);
    struct itimerval tick = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &tick, NULL);

    long n = 0;
    while (deliveries < target) {
        chunk(&s);
        n++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    for (unsigned i = 0; i < 3; i++)
        kill(kids[i], SIGKILL);
    for (unsigned i = 0; i < 3; i++)
        waitpid(kids[i], NULL, 0);
    printf("chunks %ld state %016llx deliveries %ld\n", n, (unsigned long long)hash(&s),
           (long)deliveries);
    return 0;
}

/* cpuid show|step: what a process's cpuid answers, and where a single step over one stops.
 *
 *   cpuid show   EAX, EBX, ECX and EDX for each (leaf, sub-leaf) below, asked three times each
 *                (leaves without sub-leaves also with other values in ECX), one line per pair:
 *                "LEAF.SUB EAX EBX ECX EDX", or "LEAF.SUB differs" when the answers disagree;
 *                then "asked N"
 *   cpuid step   cpuid with the trap flag set by the popf before it (SDM vol. 3, 18.3.1.4: the
 *                single-step trap comes after the instruction that follows the popf), and where
 *                the trap came: "step: after cpuid" (as on hardware), or the offset it came at
 *
 * Under ring3 a process's cpuid is answered by the monitor, or, once it has given that answer,
 * by the process's stub itself (stub/protocol.h, "CPUID"); tests/test_cpuid.py holds the two to
 * each other, and the step to hardware's.
 */
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

static const struct { uint32_t leaf, sub; } asked[] = {
    { 0, 0 }, { 1, 0 }, { 2, 0 }, { 4, 0 }, { 4, 1 }, { 4, 2 }, { 4, 3 }, { 6, 0 }, { 7, 0 },
    { 7, 1 }, { 0xD, 0 }, { 0xD, 1 }, { 0xD, 2 }, { 0x14, 0 }, { 0x80000000u, 0 },
    { 0x80000001u, 0 }, { 0x80000006u, 0 }, { 0x80000007u, 0 }, { 0x80000008u, 0 },
};
/* ECX values a program may leave for a leaf without sub-leaves (glibc: a stack address) */
static const uint32_t other_ecx[] = { 0xFFFFD5C8u, 7 };

static unsigned count;

static void ask(uint32_t leaf, uint32_t sub, uint32_t out[4])
{
    __cpuid_count(leaf, sub, out[0], out[1], out[2], out[3]);
    count++;
}

static void show(void)
{
    for (unsigned i = 0; i < sizeof asked / sizeof asked[0]; i++) {
        uint32_t first[4], again[4];
        int same = 1;
        ask(asked[i].leaf, asked[i].sub, first);
        for (unsigned k = 0; k < 2; k++) {
            ask(asked[i].leaf, asked[i].sub, again);
            same &= !memcmp(first, again, sizeof first);
        }
        /* leaves 0 and 1 and the extended ones ignore ECX (SDM vol. 2, CPUID) */
        if (asked[i].leaf <= 1 || asked[i].leaf >= 0x80000000u) {
            for (unsigned k = 0; k < sizeof other_ecx / sizeof other_ecx[0]; k++) {
                ask(asked[i].leaf, other_ecx[k], again);
                same &= !memcmp(first, again, sizeof first);
            }
        }
        if (same)
            printf("%x.%x %08x %08x %08x %08x\n", asked[i].leaf, asked[i].sub, first[0], first[1], first[2],
                   first[3]);
        else
            printf("%x.%x differs\n", asked[i].leaf, asked[i].sub);
    }
    printf("asked %u\n", count);
}

static volatile uint32_t trap_eip;

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ctx;
    trap_eip = (uint32_t)uc->uc_mcontext.gregs[REG_EIP];
    uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;     /* TF off: one trap only */
}

static void step(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGTRAP, &sa, NULL);
    uint32_t at, a = 0, b, c = 0, d;
    __asm__ volatile(
        "movl $1f, %0\n\t"
        "pushfl\n\t"
        "orl $0x100, (%%esp)\n\t"
        "popfl\n\t"
        "1: cpuid\n\t"
        "nop\n\t"
        "nop\n\t"
        : "=&m"(at), "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory", "cc");
    if (trap_eip == at + 2)
        printf("step: after cpuid\n");
    else
        printf("step: at cpuid%+d\n", (int)(trap_eip - at));
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "show"))
        show();
    else if (argc == 2 && !strcmp(argv[1], "step"))
        step();
    else {
        fprintf(stderr, "usage: cpuid show|step\n");
        return 2;
    }
    return 0;
}

/* segv null|kernel|handler [ds|ss [ADDR]]: read address 0, or the guest kernel's 0xC0000000,
 * with no handler (the shell should see signal 11, status 139); or read 0xC0000000 (or hex
 * ADDR) with a SIGSEGV handler that reports si_addr and returns through siglongjmp, through
 * DS or SS. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL_ADDR 0xC0000000ul

static sigjmp_buf back;
static volatile sig_atomic_t caught_signo;
static void *volatile caught_addr;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    caught_signo = sig;
    caught_addr = si->si_addr;
    siglongjmp(back, 1);
}

static int read_at(unsigned long addr)
{
    return *(volatile int *)addr;
}

static int read_at_ss(unsigned long addr)
{
    int v;
    __asm__ volatile("movl %%ss:(%1), %0" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

/* Only reached when the read did not fault. */
static int no_fault(unsigned long addr)
{
    printf("segv: no fault reading %lx\n", addr);
    return 1;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";

    if (!strcmp(what, "null")) {
        read_at(0);
        return no_fault(0);
    }
    if (!strcmp(what, "kernel")) {
        read_at(KERNEL_ADDR);
        return no_fault(KERNEL_ADDR);
    }
    if (!strcmp(what, "handler")) {
        unsigned long addr = argc > 3 ? strtoul(argv[3], NULL, 16) : KERNEL_ADDR;
        struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, NULL)) {
            perror("segv: sigaction");
            return 1;
        }
        if (!sigsetjmp(back, 1)) {
            if (argc > 2 && !strcmp(argv[2], "ss"))
                read_at_ss(addr);
            else
                read_at(addr);
            return no_fault(addr);
        }
        printf("segv: caught %s at %lx\n", caught_signo == SIGSEGV ? "SIGSEGV" : "another signal",
               (unsigned long)caught_addr);
        return caught_signo == SIGSEGV && (unsigned long)caught_addr == addr ? 0 : 1;
    }
    fprintf(stderr, "usage: segv null|kernel|handler [ds|ss [ADDR]]\n");
    return 2;
}

/* segv null|kernel|handler: a NULL read, a read of the guest kernel's 0xC0000000, or the latter caught. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static sigjmp_buf back;
static void *fault_addr;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    fault_addr = si->si_addr;
    siglongjmp(back, 1);
}

static int read_at(unsigned long addr)
{
    return *(volatile int *)addr;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";

    if (!strcmp(what, "null"))
        return read_at(0);
    if (!strcmp(what, "kernel"))
        return read_at(0xC0000000ul);
    if (!strcmp(what, "handler")) {
        struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
        sigaction(SIGSEGV, &sa, NULL);
        if (!sigsetjmp(back, 1)) {
            read_at(0xC0000000ul);
            printf("segv: no fault\n");
            return 1;
        }
        printf("segv: caught SIGSEGV at %lx\n", (unsigned long)fault_addr);
        return 0;
    }
    fprintf(stderr, "usage: segv null|kernel|handler\n");
    return 2;
}

/* Execute permission of data pages: code written into pages that mmap, mprotect, .data or the
 * stack left without PROT_EXEC, then called. Where the page tables say execute-disable (PAE
 * paging with EFER.NXE, SDM vol. 3, 4.6.2), the call raises #PF with I/D set and the process
 * gets SIGSEGV at the code's address; where they allow it, the code runs. Prints one line per
 * case, the same natively and in the guest (tests/test_nx.py). */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* mov $42, %eax; ret */
static const uint8_t code[] = {0xB8, 0x2A, 0x00, 0x00, 0x00, 0xC3};

static sigjmp_buf back;
static volatile uintptr_t fault_addr;
static volatile int fault_code;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    fault_addr = (uintptr_t)si->si_addr;
    fault_code = si->si_code;
    siglongjmp(back, 1);
}

/* Calls the code copied to (at) and says what happened, naming the fault's address relative
 * to (at) so that the line does not depend on where the kernel put the page. */
static void try_call(const char *what, uint8_t *at)
{
    if (sigsetjmp(back, 1)) {
        printf("%s: SIGSEGV %s at code%+ld\n", what,
               fault_code == SEGV_ACCERR ? "SEGV_ACCERR" : fault_code == SEGV_MAPERR ? "SEGV_MAPERR"
                                                                                     : "other",
               (long)(fault_addr - (uintptr_t)at));
        return;
    }
    int r = ((int (*)(void))(uintptr_t)at)();
    printf("%s: ran, returned %d\n", what, r);
}

static uint8_t data_page[4096] __attribute__((aligned(4096)));

static uint8_t *map(int prot)
{
    uint8_t *p = mmap(NULL, 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        _exit(2);
    }
    return p;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_NODEFER};
    sigaction(SIGSEGV, &sa, NULL);

    uint8_t *rw = map(PROT_READ | PROT_WRITE);
    memcpy(rw, code, sizeof code);
    try_call("mmap read-write", rw);
    printf("mmap read-write: read back %s\n", memcmp(rw, code, sizeof code) ? "differs" : "the code");
    mprotect(rw, 4096, PROT_READ | PROT_EXEC);
    try_call("mprotect read-exec", rw);
    mprotect(rw, 4096, PROT_READ);
    try_call("mprotect read-only", rw);
    mprotect(rw, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
    try_call("mprotect read-write-exec", rw);
    mprotect(rw, 4096, PROT_READ | PROT_WRITE);
    try_call("mprotect read-write again", rw);

    uint8_t *rwx = map(PROT_READ | PROT_WRITE | PROT_EXEC);
    memcpy(rwx + 100, code, sizeof code);
    try_call("mmap read-write-exec", rwx + 100);

    memcpy(data_page + 8, code, sizeof code);
    try_call(".data", data_page + 8);

    uint8_t stack[64];
    memcpy(stack, code, sizeof code);
    try_call("stack", stack);

    /* A page the child writes and calls after fork: copy-on-write keeps execute-disable. */
    pid_t pid = fork();
    if (pid == 0) {
        memcpy(rw + 200, code, sizeof code);
        try_call("after fork, mmap read-write", rw + 200);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    printf("nx: done\n");
    return 0;
}

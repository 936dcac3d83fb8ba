/* debugregs: the debug registers as a debugger uses them, through ptrace(PTRACE_POKEUSER).
 *
 * For each of the four slots and each kind (instruction, data write, data read or write)
 * and length (1, 2, 4 bytes), the parent sets DRn and DR7 in a traced child and lets it run
 * a fixed list of operations: loads and stores of each size at each offset around the
 * watched bytes, a call of the watched function, and a read(2) into the watched bytes (an
 * access by the kernel, which a user breakpoint does not report). At each SIGTRAP it notes
 * which operation the child was in and the slot bits of DR6. Output has no addresses, so
 * the same program natively, under QEMU and under ring3 prints the same lines
 * (tests/test_selftests.py). */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define DR_OFFSET(n) (offsetof(struct user, u_debugreg) + (n) * sizeof(long))

static volatile uint8_t area[64] __attribute__((aligned(16)));
static volatile int op;             /* the operation under way, which the parent reads */
static int pipe_fd[2];

__attribute__((noinline)) static void watched_function(void)
{
    __asm__ volatile("" ::: "memory");
}

/* The child's operations: op is set before each. */
static void operations(void)
{
    static const unsigned sizes[] = {1, 2, 4};
    int n = 0;
    for (unsigned s = 0; s < 3; s++) {
        for (unsigned off = 12; off < 22; off++) {
            op = ++n;
            switch (sizes[s]) {
            case 1: area[off] = 1; break;
            case 2: *(volatile uint16_t *)&area[off] = 2; break;
            case 4: *(volatile uint32_t *)&area[off] = 4; break;
            }
            op = ++n;
            switch (sizes[s]) {
            case 1: (void)area[off]; break;
            case 2: (void)*(volatile uint16_t *)&area[off]; break;
            case 4: (void)*(volatile uint32_t *)&area[off]; break;
            }
        }
    }
    op = ++n;
    watched_function();
    op = ++n;
    if (read(pipe_fd[0], (void *)&area[16], 4) != 4)
        _exit(3);
    op = ++n;
}

static void child(void)
{
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
        _exit(2);
    raise(SIGSTOP);
    operations();
    _exit(0);
}

static const char *kind_name[4] = {"exec", "write", "io", "readwrite"};

/* One run of the operations with slot (n) watching (kind, len) at the watched bytes. */
static void one_run(unsigned n, unsigned kind, unsigned len)
{
    if (pipe(pipe_fd) || write(pipe_fd[1], "abcd", 4) != 4) {
        perror("pipe");
        exit(1);
    }
    pid_t pid = fork();
    if (pid == 0)
        child();
    int status;
    waitpid(pid, &status, 0);
    unsigned long addr = kind == 0 ? (unsigned long)watched_function : (unsigned long)&area[16];
    unsigned long len_bits = len == 1 ? 0 : len == 2 ? 1 : 3;
    unsigned long dr7 = (1ul << (2 * n)) | ((unsigned long)kind << (16 + 4 * n)) |
                        (kind == 0 ? 0 : len_bits << (18 + 4 * n));
    if (ptrace(PTRACE_POKEUSER, pid, (void *)DR_OFFSET(n), (void *)addr) ||
        ptrace(PTRACE_POKEUSER, pid, (void *)DR_OFFSET(7), (void *)dr7)) {
        perror("PTRACE_POKEUSER");
        exit(1);
    }
    printf("slot %u %s len %u:", n, kind_name[kind], kind == 0 ? 1 : len);
    for (int traps = 0; traps < 100; traps++) {
        ptrace(PTRACE_CONT, pid, NULL, NULL);
        waitpid(pid, &status, 0);
        if (!WIFSTOPPED(status))
            break;
        if (WSTOPSIG(status) != SIGTRAP) {
            printf(" signal %d", WSTOPSIG(status));
            continue;
        }
        long at = ptrace(PTRACE_PEEKDATA, pid, (void *)&op, NULL);
        unsigned long dr6 = (unsigned long)ptrace(PTRACE_PEEKUSER, pid, (void *)DR_OFFSET(6), NULL);
        printf(" op %ld dr6 %lx", at, dr6 & 0xF);
        if (kind == 0) {        /* step over the instruction breakpoint: off, one step, on */
            ptrace(PTRACE_POKEUSER, pid, (void *)DR_OFFSET(7), NULL);
            ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL);
            waitpid(pid, &status, 0);
            ptrace(PTRACE_POKEUSER, pid, (void *)DR_OFFSET(7), (void *)dr7);
        }
    }
    printf(WIFEXITED(status) ? ", exit %d\n" : ", status %d\n",
           WIFEXITED(status) ? WEXITSTATUS(status) : status);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (unsigned n = 0; n < 4; n++) {
        one_run(n, 0, 1);
        for (unsigned len = 1; len <= 4; len *= 2) {
            one_run(n, 1, len);
            one_run(n, 3, len);
        }
    }
    return 0;
}

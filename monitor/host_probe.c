/* What this host's CPU and kernel do with a compatibility-mode sysenter, found once at start-up.
 *
 * AMD CPUs raise #UD for sysenter in compatibility mode (AMD APM vol. 3,
 * SYSENTER): the monitor sees SIGILL at the instruction. Intel CPUs enter
 * the host kernel's compat sysenter path, which follows the 32-bit vDSO's
 * convention: it takes the user stack pointer from %ebp, loads %ebp from
 * the word at [%ebp], and returns to the host's 32-bit vDSO landing pad,
 * an address computed from this process's 64-bit vDSO base and truncated to
 * 32 bits (arch/x86/entry/entry_64_compat.S, do_fast_syscall_32). Under
 * Syscall User Dispatch the monitor then gets a SIGSYS whose instruction
 * pointer is that landing pad, or, if [%ebp] was unreadable, a fault there
 * with -EFAULT in %eax. The landing pad is the only way to tell that a
 * sysenter happened, so a child process runs one and reports where it went.
 */
#include "host_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1
#endif
#define SUD_ALLOW 0
#define SUD_BLOCK 1
#define HOST_CS32 0x23
#define PROBE_TIMEOUT_MS 2000

static volatile uint8_t probe_sud = SUD_ALLOW;
static int probe_fd = -1;

static long raw_syscall3(long nr, long a, long b, long c)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

/* In the child, on any signal: report it and where it happened, and exit. */
static void probe_signal(int sig, siginfo_t *si, void *ucv)
{
    const ucontext_t *uc = ucv;
    uint32_t msg[2] = {(uint32_t)sig, (uint32_t)uc->uc_mcontext.gregs[REG_RIP]};

    (void)si;
    probe_sud = SUD_ALLOW;
    raw_syscall3(SYS_write, probe_fd, (long)msg, sizeof msg);
    raw_syscall3(SYS_exit_group, 0, 0, 0);
}

static _Noreturn void probe_child(void)
{
    static const int sigs[] = {SIGSYS, SIGILL, SIGSEGV, SIGBUS, SIGTRAP, SIGFPE};
    static uint8_t altstack[64 << 10];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    struct sigaction sa;
    uint8_t *low = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);

    if (low == MAP_FAILED || sigaltstack(&ss, NULL))
        _exit(1);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = probe_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
    if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0, &probe_sud))
        _exit(1);
    /* sysenter; ud2 in 32-bit code, with %ebp at a readable word and a low stack. */
    memcpy(low, "\x0f\x34\x0f\x0b", 4);
    uint32_t ebp = (uint32_t)(uintptr_t)(low + 4096);
    uint64_t esp = (uint64_t)(uintptr_t)(low + 8192 - 64), code = (uint64_t)(uintptr_t)low;
    probe_sud = SUD_BLOCK;
    __asm__ volatile("movl %%eax, %%ebp\n\t"
                     "movq %%rbx, %%rsp\n\t"
                     "pushq %[cs]\n\t"
                     "pushq %%rcx\n\t"
                     "lretq"
                     : : "a"(ebp), "b"(esp), "c"(code), [cs] "i"(HOST_CS32) : "memory");
    __builtin_unreachable();
}

uint32_t host_probe_sysenter(int *signal)
{
    int fds[2];
    uint32_t msg[2] = {0, 0};
    pid_t pid;

    *signal = 0;
    if (pipe2(fds, O_CLOEXEC))
        return 0;
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        probe_fd = fds[1];
        probe_child();
    }
    close(fds[1]);
    if (pid > 0) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        if (poll(&p, 1, PROBE_TIMEOUT_MS) != 1 || read(fds[0], msg, sizeof msg) != sizeof msg)
            msg[0] = 0;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    close(fds[0]);
    *signal = (int)msg[0];
    /* SIGSYS means the host kernel took the sysenter and came back at its landing pad. */
    return msg[0] == SIGSYS ? msg[1] : 0;
}

/* What a compatibility-mode sysenter does on this host, found once at start-up by running one.
 *
 * AMD CPUs raise #UD for sysenter in long mode, compatibility mode included
 * (AMD APM vol. 3, SYSENTER): the monitor gets SIGILL at the instruction.
 * Intel CPUs enter the host kernel (SDM vol. 2, SYSENTER), whose compat entry
 * (arch/x86/entry/entry_64_compat.S, do_SYSENTER_32, do_fast_syscall_32)
 * assumes the 32-bit vDSO's convention: the user stack pointer is %ebp, the
 * sixth argument is the word at [%ebp] and becomes %ebp, and the call returns
 * to the 32-bit vDSO's landing pad, an address the kernel computes from this
 * process's 64-bit vDSO base and its own build. Under Syscall User Dispatch
 * the process then gets a SIGSYS whose instruction pointer is that landing
 * pad; if [%ebp] cannot be read, the call fails with -EFAULT before the
 * dispatch and the process resumes at the landing pad itself. The pad is the
 * only trace a sysenter leaves, so a child process runs one and reports it.
 * (A compatibility-mode syscall takes the same kernel path on AMD: there the
 * SIGSYS names the full 64-bit address, vDSO + 0x5e9 on Linux 6.18, and the
 * -EFAULT return faults with #GP at it, above the 4 GiB code segment limit.)
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "host_probe.h"

#define HOST_CS32 0x23          /* the host's compatibility-mode user code segment */
#define EFAULT_RET ((uint32_t)-14)

#ifndef SYS_USER_DISPATCH
#define SYS_USER_DISPATCH 2     /* si_code of a Syscall User Dispatch SIGSYS */
#endif
#define PROBE_PAGE       4096
#define PROBE_TIMEOUT_MS 1000

/* What the child saw: the signal, its si_code and RIP, and where its code was. */
struct probe_report {
    int32_t sig, code;
    uint64_t rip, code_page;
};

static volatile char probe_sud_selector = SYSCALL_DISPATCH_FILTER_ALLOW;
static int probe_fd = -1;
static struct probe_report report;

/* In the child, on any signal: report it and exit. */
static void probe_signal(int sig, siginfo_t *si, void *ucv)
{
    const ucontext_t *uc = ucv;

    probe_sud_selector = SYSCALL_DISPATCH_FILTER_ALLOW;
    report.sig = sig;
    report.code = si->si_code;
    report.rip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    if (write(probe_fd, &report, sizeof report) != sizeof report)
        _exit(1);
    _exit(0);
}

/* Two pages below 4 GiB: `sysenter; ud2` in 32-bit code, then the stack,
 * whose first word is the readable [%ebp]. Signals run on their own stack:
 * the low one is too small for a host signal frame. */
static _Noreturn void probe_child(void)
{
    static const int sigs[] = {SIGSYS, SIGILL, SIGSEGV, SIGBUS, SIGTRAP, SIGFPE};
    size_t alt_size = getauxval(AT_MINSIGSTKSZ) * 4 + (64u << 10);
    uint8_t *alt = mmap(NULL, alt_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *low = mmap(NULL, 2 * PROBE_PAGE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    stack_t ss = {.ss_sp = alt, .ss_size = alt_size};
    struct sigaction sa = {.sa_sigaction = probe_signal, .sa_flags = SA_SIGINFO | SA_ONSTACK};

    if (alt == MAP_FAILED || low == MAP_FAILED || sigaltstack(&ss, NULL))
        _exit(1);
    sigfillset(&sa.sa_mask);
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], &sa, NULL))
            _exit(1);
    memcpy(low, "\x0f\x34\x0f\x0b", 4);
    report.code_page = (uint64_t)(uintptr_t)low;
    if (mprotect(low, PROBE_PAGE, PROT_READ | PROT_EXEC) ||
        prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0, &probe_sud_selector))
        _exit(1);
    probe_sud_selector = SYSCALL_DISPATCH_FILTER_BLOCK;
    /* A far return to the compatibility-mode code segment, %ebp at the stack
     * page's first word and %esp near its top. */
    __asm__ volatile("movl %%eax, %%ebp\n\t"
                     "movq %%rbx, %%rsp\n\t"
                     "pushq %[cs]\n\t"
                     "pushq %%rcx\n\t"
                     "lretq"
                     : : "a"((uint32_t)(uintptr_t)(low + PROBE_PAGE)),
                         "b"(low + 2 * PROBE_PAGE - 16), "c"(low), [cs] "i"(HOST_CS32)
                     : "memory");
    __builtin_unreachable();
}

uint64_t host_probe_sysenter(void)
{
    struct probe_report r = {0};
    int fds[2];
    pid_t pid;

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
        if (poll(&p, 1, PROBE_TIMEOUT_MS) != 1 || read(fds[0], &r, sizeof r) != sizeof r)
            r.sig = 0;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    close(fds[0]);
    /* A SIGSYS from the dispatch that names a place outside the probe's own
     * code is the landing pad. Anything else (#UD, no report in time, a host
     * without Syscall User Dispatch) leaves sysenter to be recognised by its
     * #UD, as on AMD. */
    if (r.sig == SIGSYS && r.code == SYS_USER_DISPATCH && r.rip - r.code_page >= PROBE_PAGE)
        return r.rip;
    return 0;
}

uint64_t host_probe_pad_for(uint64_t pad, uint64_t vdso)
{
    return pad ? vdso + (pad - getauxval(AT_SYSINFO_EHDR)) : 0;
}

bool host_probe_sysenter_returned(uint64_t pad, int sig, uint64_t rip, uint64_t addr, uint32_t eax)
{
    if (!pad)
        return false;
    if (sig == SIGSYS)
        return rip == pad;
    return sig == SIGSEGV && eax == EFAULT_RET && (rip == pad || (rip == (uint32_t)pad && addr == rip));
}

/* --syscalls=sysemu (trace.h): ptrace of the stubs, after ptrace(2) and the UML patch that added PTRACE_SYSEMU. */
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"

#ifndef PTRACE_SYSEMU
#define PTRACE_SYSEMU 31
#endif

/* The host's XSAVE register set (NT_X86_XSTATE): SETREGSET takes only the whole of it
 * (arch/x86/kernel/fpu/regset.c, xstateregs_set), which may be more than the monitor's image
 * when the host has components it leaves out. Learned from the first GETREGSET. */
static _Alignas(64) unsigned char regset[32768];
static size_t regset_size;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int stop_fd = -1;         /* trace_stop_fd: SIGCHLD as a descriptor */

int trace_init(void)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0 ||
        (stop_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        fprintf(stderr, "ring3: --syscalls=sysemu: cannot block SIGCHLD or open a signalfd for it: %s\n",
                strerror(errno));
        return -1;
    }
    return 0;
}

int trace_stop_fd(void)
{
    return stop_fd;
}

void trace_stops_seen(void)
{
    struct signalfd_siginfo si[8];
    while (read(stop_fd, si, sizeof si) > 0)
        continue;
}

int trace_attach(pid_t pid)
{
    /* EXITKILL: the stubs die with the monitor. TRACESYSGOOD: a system-call stop says so in
     * its status (SIGTRAP | 0x80), apart from a SIGTRAP of guest code or of the trap site. */
    if (ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD) == 0)
        return 0;
    fprintf(stderr, "ring3: --syscalls=sysemu: cannot trace stub process %d: %s%s\n", pid, strerror(errno),
            errno == EPERM ? " (is ptrace limited by kernel.yama.ptrace_scope? use --syscalls=sud)" : "");
    return -1;
}

void trace_wait(pid_t pid, uint64_t deadline_ns, uint64_t spin_ns, struct trace_event *ev)
{
    uint64_t t0 = now_ns();
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ev->stop = TRACE_NONE;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, __WALL | WNOHANG);
        if (r == pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
            ev->stop = TRACE_GONE;
            return;
        }
        if (r == pid && WIFSTOPPED(st)) {
            /* Under PTRACE_SEIZE a group stop reports PTRACE_EVENT_STOP: a stub never stops. */
            if (st >> 16 == PTRACE_EVENT_STOP) {
                ptrace(PTRACE_CONT, pid, 0, 0);
                continue;
            }
            if (ptrace(PTRACE_GETREGS, pid, 0, &ev->regs) != 0) {
                ev->stop = TRACE_GONE;          /* killed meanwhile */
                return;
            }
            int sig = WSTOPSIG(st);
            ev->stop = sig == (SIGTRAP | 0x80) ? TRACE_SYSCALL : TRACE_SIGNAL;
            ev->sig = sig & 0x7F;
            return;
        }
        if (r < 0 && errno != EINTR) {
            ev->stop = TRACE_GONE;
            return;
        }
        uint64_t t = now_ns();
        if (deadline_ns && t >= deadline_ns)
            return;
        if (t - t0 < spin_ns) {
            for (int i = 0; i < 64; i++)
                __builtin_ia32_pause();
            continue;
        }
        /* A stop sends the tracer SIGCHLD, which stays pending while blocked: one that came
         * after the waitpid above ends this wait at once. */
        uint64_t left = deadline_ns ? deadline_ns - t : 1000000000ull;
        struct timespec ts = { (time_t)(left / 1000000000ull), (long)(left % 1000000000ull) };
        if (sigtimedwait(&chld, NULL, &ts) < 0 && errno == EINTR)
            return;                             /* a host signal to the monitor */
    }
}

int trace_get_xstate(pid_t pid, void *xsave, size_t xsave_size)
{
    struct iovec iov = { regset, sizeof regset };
    if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &iov) != 0)
        return -1;
    regset_size = iov.iov_len;
    memcpy(xsave, regset, xsave_size < regset_size ? xsave_size : regset_size);
    return 0;
}

static int set_state(pid_t pid, const struct user_regs_struct *regs, const void *xsave, size_t xsave_size)
{
    if (regs && ptrace(PTRACE_SETREGS, pid, 0, regs) != 0)
        return -1;
    if (!xsave)
        return 0;
    if (!regset_size && trace_get_xstate(pid, regset, 0) != 0)
        return -1;
    /* The image is as large as XSAVE of every component the CPU supports can write
     * (CPUID.(EAX=0DH,ECX=0):ECX), the regset as the components the host kernel gives the
     * process: on an Intel host with AMX, 11008 bytes against 2688 (XCR0 0xe7). What lies
     * past the regset is the state of components that XCR0 leaves off or XFD keeps unused,
     * which XSTATE_BV never names in an image from XSAVE or xstate_make_loadable. */
    size_t n = xsave_size < regset_size ? xsave_size : regset_size;
    memcpy(regset, xsave, n);
    memset(regset + n, 0, regset_size - n);  /* components past the image: XSTATE_BV leaves them out */
    struct iovec iov = { regset, regset_size };
    return ptrace(PTRACE_SETREGSET, pid, (void *)NT_X86_XSTATE, &iov) == 0 ? 0 : -1;
}

int trace_sysemu(pid_t pid, const struct user_regs_struct *regs, const void *xsave, size_t xsave_size)
{
    if (set_state(pid, regs, xsave, xsave_size) != 0)
        return -1;
    return ptrace(PTRACE_SYSEMU, pid, 0, 0) == 0 ? 0 : -1;
}

int trace_cont(pid_t pid, const struct user_regs_struct *regs, const void *xsave, size_t xsave_size, int sig)
{
    if (set_state(pid, regs, xsave, xsave_size) != 0)
        return -1;
    return ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig) == 0 ? 0 : -1;
}

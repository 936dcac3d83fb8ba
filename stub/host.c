/* The monitor's side of the stub processes (host.h): start them, hand them work, wait for their events, end them. */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/futex.h>
#include <linux/seccomp.h>

#include "asm.h"
#include "host.h"
#include "trace.h"
#include "lib/tsc.h"
#include "x86/xstate.h"

#define POOL_SIZE      2
#define READY_NS       30000000000ull  /* a stub that is not ready by then is rejected */
/* How long a stub may owe the monitor an answer (to a preemption, or its call at the map
 * site) before it is taken for hostile and killed. Counted in the stub's own CPU time: one
 * that has run that long without answering ignores the monitor, whereas one that a loaded
 * host has not scheduled only waits (measured with four busy loops beside two instances on
 * 2 cores: answers to preemption up to 240 ms late in wall time, and now and then past the
 * 1 s that used to kill the stub, each after microseconds of its CPU time). In wall time a
 * much longer backstop, for a stub asleep in a futex call that guest code jumped to. A stub
 * that is runnable and has had next to no CPU since is not asleep: the host has not run it.
 * Three instances of nx_stack_32 in a loop on a loaded 2-core VM saw that last over 10 s
 * (`R` in /proc/PID/stat, its CPU clock and scheduler statistics still, pinned with the
 * monitor to one core); each such stub ran again later, as it still ended when killed. One
 * with under STARVED_CPU_NS since gets up to SILENT_STARVED_NS. Not more CPU: a stub whose
 * calls at the map site the monitor refuses each slice (stub_wait) is runnable just after. */
#define SILENT_CPU_NS     200000000ull
#define SILENT_WALL_NS    10000000000ull
#define SILENT_STARVED_NS 120000000000ull
#define STARVED_CPU_NS    1000000ull
/* A host modify_ldt writes one entry, and copies the whole LDT into a new one each time
 * (arch/x86/kernel/ldt.c, write_ldt; vmalloc'd past a page), so a stub that mirrors a large
 * guest LDT in one run takes CPU quadratic in its size before it can answer: the child of a
 * fork gets all of its parent's entries (tools/testing/selftests/x86/ldt_gdt.c's exec test
 * forks with 8192). Those 8192 writes in ascending order took 135 ms of CPU on an idle AMD
 * EPYC VM, and over SILENT_CPU_NS on a loaded one, which killed the child's stub. A run that
 * carries LDT writes is allowed LDT_WRITE_NS for each, and LDT_ENTRY_NS for each entry the
 * LDT may have by then, on top: 1.24 s for those 8192, 9 times what they took. */
#define LDT_WRITE_NS   20000ull
#define LDT_ENTRY_NS   16ull
#define SLICE_NS       10000000ull     /* stub_wait sleeps in slices of at most this, after its spin (placement.h) */

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x10
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC 4
#endif

/* Where a traced stub (--syscalls=sysemu) is: running, or stopped in ptrace and where. */
enum stub_stop {
    STOP_NONE,                          /* running, or asleep in its futex (before the first event) */
    STOP_HANDOFF,                       /* at its trap site: the event is in the control area */
    STOP_GUEST,                         /* in guest code: a system call or a preemption; regs say where */
};

struct stub {
    pid_t pid;
    int pidfd, sock, listener;          /* sock: until READY */
    struct stub_ctl *ctl;
    uint64_t map_site;                  /* from READY, before any guest code ran */
    uint64_t vdso;                      /* likewise: the stub's vDSO base */
    clockid_t cpu_clock;                /* the stub's CPU time */
    struct since { uint64_t wall, cpu; } preempted;     /* when it was sent a preemption; 0: none owed */
    bool ready, dead;
    enum stub_loss loss;                /* why it is gone, once dead */
    uint32_t nmap, nunmap, ntls, nldt;  /* nldt: queued straight into the control area */
    uint32_t ldt_top;                   /* 1 + the highest LDT entry queued */
    uint64_t ldt_cpu;                   /* CPU time its last run's LDT writes may take (LDT_*) */
    struct stub_range map[STUB_MAX_RANGES], unmap[STUB_MAX_RANGES];
    struct stub_tls tls[3];
    struct stub *next;                  /* every stub, for the exit handler */
    /* --syscalls=sysemu */
    uint64_t trap_site, cmd_entry;      /* from READY */
    enum stub_stop stop;
    struct user_regs_struct stop_regs;  /* STOP_GUEST: the registers at the stop */
    uint64_t placed;                    /* the placement it was last moved to (placement_stub) */
    bool handed_off;                    /* --syscalls=sud: an event taken, no resume since */
    bool held;                          /* ... and since stub_hold, stopped at its map site */
    uint64_t held_id;                   /* ... in the call of this notification */
};

extern const char ring3_stub_image[], ring3_stub_image_end[];   /* stub/blob.S */

static int guest_memfd = -1, image_fd = -1;
static int cpuid_fd = -1;                   /* the CPUID answers (protocol.h, "CPUID") ... */
static struct stub_cpuid_page *cpuid_page;  /* ... and the monitor's writable view of them */
static enum stub_syscalls redirect;
static size_t xsave_size;
static uint64_t host_xcr0;          /* what the vector state taken from a stub may hold */
static uint32_t host_mxcsr_mask;
static struct seccomp_notif_sizes notif_sizes;
static struct stub *pool[POOL_SIZE + 1];     /* started ahead of need: pool[0..npool) */
static int npool;
static struct stub *all_stubs;
static uint64_t map_calls_restarted, parked_found;
static uint64_t holds, hold_wait_ns;
static uint64_t starved, starved_since;     /* waits that passed SILENT_WALL_NS on a stub the host did not run */
static uint64_t cpuids_here;                /* cpuids the stubs answered themselves, as they said */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(const struct stub *s)
{
    struct timespec ts;
    if (clock_gettime(s->cpu_clock, &ts) != 0)
        return UINT64_MAX;              /* reaped: silent for good */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct since since_now(const struct stub *s)
{
    return (struct since){ now_ns(), cpu_ns(s) };
}

/* Whether the host has (s) runnable: state R in /proc/PID/stat (proc(5)), after the name,
 * which may itself hold spaces and parentheses. */
static bool runnable(const struct stub *s)
{
    char path[40], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)s->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    const char *end = strrchr(buf, ')');
    return end && end[1] == ' ' && end[2] == 'R';
}

/* Whether a stub that has owed an answer since (t) has been silent too long (SILENT_*). */
static bool silent_too_long(const struct stub *s, struct since t)
{
    uint64_t cpu = cpu_ns(s) - t.cpu, wall = now_ns() - t.wall;
    if (cpu > SILENT_CPU_NS + s->ldt_cpu)
        return true;
    if (wall <= SILENT_WALL_NS)
        return false;
    if (cpu < STARVED_CPU_NS && wall <= SILENT_STARVED_NS && runnable(s)) {
        if (starved_since != t.wall)
            starved++;              /* counted once a wait */
        starved_since = t.wall;
        return false;
    }
    return true;
}

static void kill_stub(struct stub *s)
{
    if (s->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
    s->dead = true;
}

/* The monitor gives up on (s), for (why): it is killed, as it may run guest code that ignores
 * the monitor. A stub found dead already keeps the cause it had. */
static void give_up(struct stub *s, enum stub_loss why)
{
    if (!s->dead)
        s->loss = why;
    kill_stub(s);
}

/* (s) was found gone of itself (its pidfd readable, or ptrace says so). */
static void found_dead(struct stub *s)
{
    if (!s->dead)
        s->loss = STUB_LOSS_DIED;
    s->dead = true;
}

static void kill_all(void)
{
    for (struct stub *s = all_stubs; s; s = s->next)
        kill_stub(s);
}

/* ---- starting a stub ---- */

struct child_args { int image, ctl, sock, cpuid; };

/* Runs in the child of clone(CLONE_VM | CLONE_VFORK), on the monitor's memory until execveat:
 * raw system calls only, nothing the monitor could notice. The monitor's signal handlers,
 * signal mask and Syscall User Dispatch must not reach the stub. */
static int child_main(void *p)
{
    const struct child_args *a = p;
    syscall(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
    struct { unsigned long handler, flags, restorer, mask; } dfl = { 0, 0, 0, 0 };   /* SIG_DFL */
    for (int sig = 1; sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, 8);
    stack_t ss = { .ss_flags = SS_DISABLE };
    syscall(SYS_sigaltstack, &ss, NULL);
    if (syscall(SYS_dup3, a->ctl, STUB_FD_CTL, 0) < 0 || syscall(SYS_dup3, a->sock, STUB_FD_SOCK, 0) < 0 ||
        syscall(SYS_dup3, a->cpuid, STUB_FD_CPUID, 0) < 0)
        syscall(SYS_exit_group, 126);
    syscall(SYS_close_range, 0, 2, 0);
    syscall(SYS_close_range, STUB_FD_CPUID + 1, ~0u, CLOSE_RANGE_CLOEXEC);  /* the image fd must live to execveat */
    unsigned long none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
    char *argv[] = { "ring3-stub", NULL }, *envp[] = { NULL };
    syscall(SYS_execveat, a->image, "", argv, envp, AT_EMPTY_PATH);
    syscall(SYS_exit_group, 127);
    return 127;
}

static struct stub *start_stub(void)
{
    static char child_stack[32768] __attribute__((aligned(64)));   /* CLONE_VFORK: one child at a time */
    struct stub *s = calloc(1, sizeof *s);
    int ctlfd = -1, sv[2] = { -1, -1 };
    struct child_args a = { image_fd, -1, -1, cpuid_fd };
    if (!s)
        return NULL;
    s->pidfd = s->sock = s->listener = -1;
    s->ctl = MAP_FAILED;
    ctlfd = memfd_create("ring3-stub-ctl", MFD_CLOEXEC);
    if (ctlfd < 0 || ftruncate(ctlfd, STUB_CTL_SIZE) < 0)
        goto fail;
    s->ctl = mmap(NULL, STUB_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, ctlfd, 0);
    if (s->ctl != MAP_FAILED)
        s->ctl->spin_ticks = placement_spin_ticks();
    if (s->ctl == MAP_FAILED || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        goto fail;
    /* above the child's target descriptors, so that dup3 cannot clobber one with the other */
    a.ctl = fcntl(ctlfd, F_DUPFD_CLOEXEC, 10);
    a.sock = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    if (a.ctl < 0 || a.sock < 0)
        goto fail;
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);   /* no monitor handler may run in the child */
    int pidfd = -1;
    pid_t pid = clone(child_main, child_stack + sizeof child_stack,
                      CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &a, &pidfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        goto fail;
    s->pid = pid;
    s->pidfd = pidfd;
    placement_spawned(pid);
    if (clock_getcpuclockid(pid, &s->cpu_clock) != 0)
        s->cpu_clock = CLOCK_MONOTONIC;     /* not expected; then wall time counts twice */
    s->sock = sv[0];
    sv[0] = -1;
    close(a.ctl);
    close(a.sock);
    close(sv[1]);
    close(ctlfd);
    s->next = all_stubs;
    all_stubs = s;
    return s;
fail:
    fprintf(stderr, "ring3: cannot start a stub process: %s\n", strerror(errno));
    if (a.ctl >= 0) close(a.ctl);
    if (a.sock >= 0) close(a.sock);
    if (sv[0] >= 0) close(sv[0]);
    if (sv[1] >= 0) close(sv[1]);
    if (ctlfd >= 0) close(ctlfd);
    if (s->ctl != MAP_FAILED) munmap(s->ctl, STUB_CTL_SIZE);
    free(s);
    return NULL;
}

/* Whether (state) says the control area holds an event: the stub handed it off, and spins or
 * is parked. */
static bool is_event_state(uint32_t state)
{
    return state == STUB_EVENT || state == STUB_PARKED;
}

static bool handed_off_event(const struct stub_ctl *c)
{
    return is_event_state(__atomic_load_n(&c->state, __ATOMIC_ACQUIRE));
}

/* The READY report: the listener over the socket, then the control area's READY event. */
static bool wait_ready(struct stub *s)
{
    const char *why = "it did not report ready within 30 s";
    /* Counted from now: a stub started long ago and kept in the pool has long been ready. */
    uint64_t deadline = now_ns() + READY_NS;
    for (;;) {
        uint64_t t = now_ns();
        if (t >= deadline)
            goto fail;
        struct pollfd p = { s->sock, POLLIN, 0 };
        int n = poll(&p, 1, (int)((deadline - t) / 1000000 + 1));
        if (n < 0 && errno != EINTR)
            goto fail;
        if (n > 0)
            break;
    }
    char byte;
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } cm;
    struct iovec iov = { &byte, 1 };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf };
    why = "it exited during start-up";
    if (recvmsg(s->sock, &msg, MSG_CMSG_CLOEXEC) != 1)
        goto fail;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
        goto fail;
    memcpy(&s->listener, CMSG_DATA(c), sizeof(int));
    close(s->sock);
    s->sock = -1;
    /* the stub writes READY right after sending the listener */
    why = "it sent no READY event";
    while (!handed_off_event(s->ctl)) {
        if (now_ns() >= deadline)
            goto fail;
        usleep(50);
    }
    uint64_t site = s->ctl->map_site;
    why = "its READY event is malformed";
    if (s->ctl->kind != STUB_EV_READY || site < STUB_TEXT_ADDR || site >= STUB_TEXT_END)
        goto fail;
    s->map_site = site;
    s->vdso = s->ctl->vdso;
    if (redirect == STUB_SYSEMU) {
        why = "it reported no trap site";
        s->trap_site = s->ctl->trap_site;
        s->cmd_entry = s->ctl->cmd_entry;
        if (s->trap_site < STUB_TEXT_ADDR || s->trap_site >= STUB_TEXT_END ||
            s->cmd_entry < STUB_TEXT_ADDR || s->cmd_entry >= STUB_TEXT_END)
            goto fail;
        if (trace_attach(s->pid) != 0) {
            kill_stub(s);
            return false;
        }
        s->ctl->trap_handoff = 1;
    }
    s->ready = true;
    return true;
fail:;
    int st;
    if (waitpid(s->pid, &st, WNOHANG) == s->pid && WIFEXITED(st))
        fprintf(stderr, "ring3: stub process %d rejected: %s (exit status %d)\n", s->pid, why, WEXITSTATUS(st));
    else
        fprintf(stderr, "ring3: stub process %d rejected: %s\n", s->pid, why);
    kill_stub(s);
    return false;
}

/* The CPUID answers' page (protocol.h, "CPUID"): mapped writable here, then sealed so that no
 * other mapping of it can be writable, a stub's included. */
static int cpuid_page_init(void)
{
    int fd = memfd_create("ring3-stub-cpuid", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof *cpuid_page) == 0)
        p = mmap(NULL, sizeof *cpuid_page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (p == MAP_FAILED || high < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0) {
        int e = errno;
        if (p != MAP_FAILED) munmap(p, sizeof *cpuid_page);
        if (high >= 0) close(high);
        close(fd);
        errno = e;
        return -1;
    }
    close(fd);
    cpuid_page = p;
    cpuid_fd = high;
    return 0;
}

void stubs_cpuid_answered(uint32_t leaf, uint32_t sub, bool any_sub, const uint32_t out[4])
{
    uint32_t n = cpuid_page ? cpuid_page->count : STUB_CPUID_MAX;
    if (n >= STUB_CPUID_MAX)
        return;                     /* full: the monitor answers the rest */
    for (uint32_t i = 0; i < n; i++)
        if (cpuid_page->a[i].leaf == leaf && (any_sub || cpuid_page->a[i].sub == sub))
            return;
    struct stub_cpuid_answer *a = &cpuid_page->a[n];
    *a = (struct stub_cpuid_answer){ .leaf = leaf, .sub = any_sub ? 0 : sub, .any_sub = any_sub };
    memcpy(a->out, out, sizeof a->out);
    __atomic_store_n(&cpuid_page->count, n + 1, __ATOMIC_RELEASE);
}

void stubs_cpuid_forget(void)
{
    if (cpuid_page)
        __atomic_store_n(&cpuid_page->count, 0, __ATOMIC_RELEASE);
}

int stubs_init(int memfd, size_t xsize, enum stub_syscalls how, enum stub_placement where)
{
    if (xsize > STUB_FPU_MAX || xsize < 576) {
        fprintf(stderr, "ring3: stubs: an XSAVE image of %zu bytes does not fit the control area\n", xsize);
        return -1;
    }
    uint32_t action = SECCOMP_RET_USER_NOTIF;
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0 ||
        syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &notif_sizes) != 0) {
        fprintf(stderr, "ring3: stubs need seccomp user notification (Linux 5.9 or later): %s\n", strerror(errno));
        return -1;
    }
    if (how == STUB_SYSEMU && trace_init() != 0)
        return -1;
    redirect = how;
    placement_init(where, tsc_khz());
    guest_memfd = memfd;
    xsave_size = xsize;
    xstate_layout_init();
    host_xcr0 = xstate_xcr0();
    host_mxcsr_mask = xstate_mxcsr_mask();
    /* vm.memfd_noexec may ask for MFD_EXEC (Linux 6.3); older kernels reject the flag */
    image_fd = memfd_create("ring3-stub", MFD_CLOEXEC | MFD_EXEC);
    if (image_fd < 0 && errno == EINVAL)
        image_fd = memfd_create("ring3-stub", MFD_CLOEXEC);
    size_t len = (size_t)(ring3_stub_image_end - ring3_stub_image);
    if (image_fd < 0 || write(image_fd, ring3_stub_image, len) != (ssize_t)len) {
        fprintf(stderr, "ring3: stubs: cannot write the stub image to a memfd: %s\n", strerror(errno));
        return -1;
    }
    /* above the descriptors a child sets up (STUB_FD_CTL, STUB_FD_SOCK, STUB_FD_CPUID) before
     * its execveat */
    int high = fcntl(image_fd, F_DUPFD_CLOEXEC, 10);
    if (high < 0 || cpuid_page_init() < 0) {
        fprintf(stderr, "ring3: stubs: %s\n", strerror(errno));
        return -1;
    }
    close(image_fd);
    image_fd = high;
    atexit(kill_all);
    /* One more than the pool keeps: the first guest process takes it without starting a
     * replacement, so the host resources stubs hold do not step up later in the run. */
    for (npool = 0; npool < POOL_SIZE + 1; npool++)
        pool[npool] = start_stub();
    return 0;
}

struct stub *stub_create(void)
{
    for (int tries = 0; tries < POOL_SIZE + 2; tries++) {
        if (!npool)
            pool[npool++] = start_stub();
        struct stub *s = pool[0];
        memmove(pool, pool + 1, sizeof pool[0] * --npool);
        if (npool < POOL_SIZE)
            pool[npool++] = start_stub();
        if (!s)
            continue;
        if (wait_ready(s))
            return s;
        stub_destroy(s);
    }
    fprintf(stderr, "ring3: no stub process could be started\n");
    return NULL;
}

int stub_destroy(struct stub *s)
{
    if (!s)
        return 0;
    kill_stub(s);
    int st = 0;
    for (;;) {
        /* The monitor's handlers do not restart calls (signals.c): its timer interrupts the
         * wait, which then goes on, or the stub would stay a zombie and its status be lost.
         * A traced stub may report a stop before its end. */
        pid_t r = waitpid(s->pid, &st, __WALL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != s->pid || WIFEXITED(st) || WIFSIGNALED(st))
            break;
    }
    for (struct stub **p = &all_stubs; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    if (s->pidfd >= 0) close(s->pidfd);
    if (s->sock >= 0) close(s->sock);
    if (s->listener >= 0) close(s->listener);
    munmap(s->ctl, STUB_CTL_SIZE);
    free(s);
    return st;
}

enum stub_loss stub_loss(const struct stub *s) { return s->loss; }

const char *stub_loss_name(enum stub_loss why)
{
    static const char *const names[STUB_LOSS_KINDS] = {
        [STUB_LOSS_DIED] = "it died",
        [STUB_LOSS_SILENT] = "killed, silent too long",
        [STUB_LOSS_PROTOCOL] = "killed, broke the protocol",
    };
    return why < STUB_LOSS_KINDS ? names[why] : "?";
}

uint64_t stubs_map_calls_restarted(void) { return map_calls_restarted; }
uint64_t stubs_parked_found(void) { return parked_found; }
uint64_t stubs_starved(void) { return starved; }
uint64_t stubs_cpuids_here(void) { return cpuids_here; }

uint64_t stubs_holds(uint64_t *wait_ns)
{
    *wait_ns = hold_wait_ns;
    return holds;
}

int stub_pid(const struct stub *s) { return s->pid; }
uint64_t stub_map_site(const struct stub *s) { return s->map_site; }
uint64_t stub_trap_site(const struct stub *s) { return s->trap_site; }

uint64_t stub_vdso(const struct stub *s) { return s->vdso; }

/* ---- queued changes ---- */

bool stub_queue_unmap(struct stub *s, uint32_t linear, uint32_t pages)
{
    if (s->nunmap >= STUB_MAX_RANGES)
        return false;
    s->unmap[s->nunmap++] = (struct stub_range){ .linear = linear, .pages = pages };
    return true;
}

bool stub_queue_map(struct stub *s, uint32_t linear, uint64_t gpa, uint32_t pages, int prot)
{
    if (s->nmap >= STUB_MAX_RANGES)
        return false;
    s->map[s->nmap++] = (struct stub_range){ .linear = linear, .pages = pages, .offset = gpa, .prot = (uint32_t)prot };
    return true;
}

void stub_queue_tls(struct stub *s, const struct stub_tls *d)
{
    uint32_t i = 0;
    while (i < s->ntls && s->tls[i].entry_number != d->entry_number)
        i++;
    if (i == 3)
        i = 2;
    s->tls[i] = *d;
    if (i == s->ntls)
        s->ntls++;
}

bool stub_queue_ldt(struct stub *s, const struct stub_tls *d)
{
    /* The stub reads this area only when told to run, and no guest code runs here before. */
    if (s->nldt >= STUB_LDT_MAX)
        return false;
    STUB_CTL_LDT(s->ctl)[s->nldt++] = *d;
    if (d->entry_number >= s->ldt_top)
        s->ldt_top = d->entry_number + 1;
    return true;
}

/* Whether a traced stub stopped in its own code, or in 64-bit code (the runtime blob's landing,
 * or guest code that far-jumped there): a signal there goes to the stub's handler. */
static bool is_stub_code(const struct user_regs_struct *regs)
{
    return regs->cs == HOST_CS64 || (regs->rip >= STUB_TEXT_ADDR && regs->rip < STUB_TEXT_END);
}

/* ---- seccomp user notifications (seccomp_unotify(2)) ---- */

/* ioctl, again after a host signal: the monitor's own timer (SIGALRM) may
 * interrupt a notification ioctl that waits for the stub. */
static int notif_ioctl(int fd, unsigned long request, void *arg)
{
    int r;
    do
        r = ioctl(fd, request, arg);
    while (r < 0 && errno == EINTR);
    return r;
}

/* Answers notification (id): the call fails with (error), or returns 0. 0, or -1 with errno. */
static int respond(int listener, uint64_t id, int error)
{
    struct seccomp_notif_resp resp = { .id = id, .error = error ? -error : 0, .val = 0, .flags = 0 };
    return notif_ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

/* Receives one notification into (n) (notif_sizes.seccomp_notif bytes). false: none. */
static bool recv_notif(struct stub *s, struct seccomp_notif *n)
{
    memset(n, 0, notif_sizes.seccomp_notif);    /* NOTIF_RECV wants a zeroed buffer */
    return notif_ioctl(s->listener, SECCOMP_IOCTL_NOTIF_RECV, n) == 0;
}

static struct seccomp_notif *notif_buf(void)
{
    static union { struct seccomp_notif n; char buf[512]; } b;
    return notif_sizes.seccomp_notif <= sizeof b ? &b.n : NULL;
}

/* Answers every pending notification with EPERM: none is expected outside a map hand-off. */
static void deny_notifications(struct stub *s)
{
    struct seccomp_notif *n = notif_buf();
    struct pollfd p = { s->listener, POLLIN, 0 };
    while (n && poll(&p, 1, 0) > 0 && (p.revents & POLLIN) && recv_notif(s, n))
        respond(s->listener, n->id, EPERM);
}

/* A traced stub on its way to its map site may stop for a signal (a preemption sent before
 * its last event and still pending): its handler takes it, as it would untraced. 0, or -1
 * when it is gone or stopped at anything else. */
static int pass_signal_stops(struct stub *s)
{
    struct trace_event te;
    trace_wait(s->pid, 1, 0, &te);
    if (te.stop == TRACE_NONE)
        return 0;
    if (te.stop != TRACE_SIGNAL || !is_stub_code(&te.regs))
        return -1;
    return trace_cont(s->pid, NULL, NULL, 0, te.sig);
}

/* The stub's call at its map site (protocol.h, "Mapping"), received and checked: its
 * notification's id in (*id). 0, or -1 (the stub was given up: give_up). */
static int take_map_call(struct stub *s, uint64_t *id)
{
    struct seccomp_notif *n = notif_buf();
    /* Reading the stub's CPU time is a system call, and most calls come within a slice: it is
     * read first when a slice has passed, and silence counted from there (a slice is 5% of
     * SILENT_CPU_NS); then looked at once a slice, however fast this loop turns (a stub that
     * makes calls from elsewhere turns it at will). */
    struct since start = { now_ns(), 0 };
    uint64_t looked = start.wall;
    bool counting = false;
    if (!n)
        return give_up(s, STUB_LOSS_PROTOCOL), -1;
    for (;;) {
        /* poll without sleeping first: waking this core from idle costs more than the stub's way
         * to its map site (DESIGN.md, "Isolation") */
        uint64_t now = now_ns();
        bool spinning = now - start.wall < placement_spin_ns();
        if (now - looked >= SLICE_NS) {
            looked = now;
            if (!counting)
                start.cpu = cpu_ns(s), counting = true;
            else if (silent_too_long(s, start))
                return give_up(s, STUB_LOSS_SILENT), -1;
        }
        /* A traced stub that stops on its way (a preemption) is continued at once: the stop's
         * SIGCHLD wakes this wait. Continued only at the next slice, a stub sent preemptions
         * faster than that would never leave its stops. */
        if (redirect == STUB_SYSEMU && pass_signal_stops(s) < 0)
            return give_up(s, STUB_LOSS_PROTOCOL), -1;
        struct pollfd p[3] = { { s->listener, POLLIN, 0 }, { s->pidfd, POLLIN, 0 },
                               { redirect == STUB_SYSEMU ? trace_stop_fd() : -1, POLLIN, 0 } };
        int k = poll(p, 3, spinning ? 0 : (int)(SLICE_NS / 1000000));
        if (k < 0 && errno != EINTR)
            return give_up(s, STUB_LOSS_PROTOCOL), -1;
        if (p[2].revents)
            trace_stops_seen();         /* before the next pass_signal_stops: no stop is missed */
        if (k <= 0 || !(p[0].revents | p[1].revents))
            continue;
        if (p[1].revents || (p[0].revents & (POLLHUP | POLLERR)))
            return found_dead(s), -1;
        if (!recv_notif(s, n)) {
            if (errno == ENOENT)        /* the call was interrupted before it was read, or the stub died */
                map_calls_restarted++;
            continue;
        }
        /* the instruction pointer of a system call is the address after `syscall` (0f 05) */
        if (n->pid != (uint32_t)s->pid || n->data.nr != STUB_NR_MAP || n->data.arch != AUDIT_ARCH_X86_64 ||
            n->data.instruction_pointer != s->map_site + 2) {
            respond(s->listener, n->id, EPERM);
            continue;
        }
        *id = n->id;
        return 0;
    }
}

/* The answer to call (id) of take_map_call: the queued unmaps and maps in the control area, and
 * guest memory's descriptor. 0; 1 when the call is gone (a preemption interrupted it, and the
 * stub makes it again); or -1 (given up). */
static int answer_map_call(struct stub *s, uint64_t id)
{
    memcpy(s->ctl->unmap, s->unmap, sizeof s->unmap[0] * s->nunmap);
    s->ctl->nunmap = s->nunmap;
    memcpy(s->ctl->map, s->map, sizeof s->map[0] * s->nmap);
    s->ctl->nmap = s->nmap;
    /* A notification gone (ENOENT) or an answer refused because its call was interrupted
     * (ESRCH: seccomp_do_user_notification) is a preemption that reached the stub in the
     * call: the call is made again (stub.c, SA_RESTART), and the caller takes the new one. */
    if (!s->nmap && !s->nunmap) {
        /* nothing to map: the call returns 0 (a parked stub's resume, a hold's end) */
        if (respond(s->listener, id, 0) == 0)
            return 0;
        return errno == ENOENT ? 1 : (give_up(s, STUB_LOSS_PROTOCOL), -1);
    }
    /* The descriptor and the answer in one step (SECCOMP_ADDFD_FLAG_SEND, Linux 5.14): the
     * stub's call returns STUB_MEMFD, and it is woken once, not twice. ADDFD checks the id
     * itself (seccomp_notify_addfd: ENOENT when the notification is gone), so no
     * SECCOMP_IOCTL_NOTIF_ID_VALID before it: a system call less a map hand-off. */
    struct seccomp_notif_addfd add = { .id = id, .flags = SECCOMP_ADDFD_FLAG_SETFD | SECCOMP_ADDFD_FLAG_SEND,
                                       .srcfd = (uint32_t)guest_memfd, .newfd = STUB_MEMFD, .newfd_flags = 0 };
    /* No host signal may interrupt it: after an interrupted ADDFD with SEND the
     * notification counts as answered, and the call again fails (EINPROGRESS). */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    int fd = notif_ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add), err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd == STUB_MEMFD)
        return 0;
    if (fd < 0 && (err == ENOENT || err == ESRCH))
        return 1;
    return give_up(s, STUB_LOSS_PROTOCOL), -1;
}

/* The checked map hand-off of protocol.h, to a stub on its way to its map site or held there
 * (stub_hold). 0, or -1 (the stub was given up: give_up). */
static int serve_map(struct stub *s)
{
    for (;;) {
        uint64_t id = s->held_id;
        if (!s->held && take_map_call(s, &id) < 0)
            return -1;
        s->held = false;
        int r = answer_map_call(s, id);
        if (r <= 0)
            return r;
        map_calls_restarted++;
    }
}

/* ---- running ---- */

/* STUB_RUN for a stub that handed off an event (protocol.h, "Parking"): true when it had
 * parked, and waits in its map site's call, which the caller must answer. */
static bool run(struct stub_ctl *c)
{
    uint32_t was = STUB_EVENT;
    if (__atomic_compare_exchange_n(&c->state, &was, STUB_RUN, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return false;                   /* it spins, and sees STUB_RUN */
    __atomic_store_n(&c->state, STUB_RUN, __ATOMIC_SEQ_CST);
    parked_found += was == STUB_PARKED;
    return was == STUB_PARKED;
}

/* ---- holding ---- */

int stub_hold(struct stub *s)
{
    /* A traced stub is in a ptrace stop from its event to its resume, which guest code cannot
     * forge; nor has a stub that has taken no event run guest code yet. */
    if (redirect != STUB_SUD || !s->handed_off || s->held || s->dead)
        return 0;
    struct stub_ctl *c = s->ctl;
    uint64_t t0 = now_ns();
    c->cmd = STUB_CMD_MAP;
    c->nmap = c->nunmap = 0;
    placement_stub(s->pid, &s->placed);
    run(c);
    int rc = take_map_call(s, &s->held_id);
    holds++;
    hold_wait_ns += now_ns() - t0;
    if (rc == 0) {
        s->held = true;
        return 0;
    }
    /* Given up: killed, but it may still run until the kill reaches it. Its pages go only
     * once it has ended (exit_mm comes before the exit is reported). */
    siginfo_t si;
    while (waitid(P_PID, (id_t)s->pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
        ;
    return -1;
}

/* The commands for the stub's next run, into its control area (the registers too). (xsave)
 * goes with them when not NULL. Returns the command bits. */
static uint32_t load_commands(struct stub *s, const struct stub_regs *r, const void *xsave)
{
    struct stub_ctl *c = s->ctl;
    uint32_t cmd = 0;
    c->r = *r;
    c->spin_ticks = placement_spin_ticks();
    s->ldt_cpu = 0;
    if (s->ntls) {
        memcpy(c->tls, s->tls, sizeof s->tls[0] * s->ntls);
        c->ntls = s->ntls;
        s->ntls = 0;
        cmd |= STUB_CMD_TLS;
    }
    if (s->nldt) {
        c->nldt = s->nldt;
        s->ldt_cpu = s->nldt * (LDT_WRITE_NS + s->ldt_top * LDT_ENTRY_NS);
        s->nldt = s->ldt_top = 0;
        cmd |= STUB_CMD_LDT;
    }
    /* The stub's registers are still those its last event saved in the control area (stub
     * code never touches them): when the guest kernel left the state as it was, they stay. */
    if (xsave && !xstate_same(STUB_CTL_FPU(c), xsave, xsave_size)) {
        xstate_copy(STUB_CTL_FPU(c), xsave, xsave_size);
        cmd |= STUB_CMD_FPU;
    }
    if (s->nmap || s->nunmap) {
        /* Written only once the stub is proven at its map site (serve_map): the unmaps too, or
         * guest code that forged its last event and runs on could skip them and keep pages the
         * guest kernel has freed since. */
        c->nmap = c->nunmap = 0;
        cmd |= STUB_CMD_MAP;
    }
    c->cmd = cmd;
    return cmd;
}

/* A traced stub stopped in guest code goes on from (r) without stub code: its registers and
 * vector state set through ptrace, to its next system call. Only when nothing is queued and
 * the segment registers are those it stopped with (loading a selector is the stub's work,
 * entry.S LOADSEL), and NT and ID too, which PTRACE_SETREGS leaves as they were
 * (arch/x86/kernel/ptrace.c, FLAG_MASK). */
static bool resume_in_guest(struct stub *s, const struct stub_regs *r, const void *xsave)
{
    struct user_regs_struct g = s->stop_regs;
    const uint64_t sel[6] = { g.es, g.cs, g.ss, g.ds, g.fs, g.gs };
    if (s->nunmap || s->ntls || s->nldt || s->nmap)
        return false;
    for (int i = 0; i < 6; i++)
        if ((r->sel[i] & 0xFFFF) != sel[i])
            return false;
    if ((r->eflags ^ g.eflags) & (EFLAGS_NT | EFLAGS_ID))
        return false;
    g.rax = r->regs[0];
    g.rcx = r->regs[1];
    g.rdx = r->regs[2];
    g.rbx = r->regs[3];
    g.rsp = r->regs[4];
    g.rbp = r->regs[5];
    g.rsi = r->regs[6];
    g.rdi = r->regs[7];
    g.r8 = g.r9 = g.r10 = g.r11 = g.r12 = g.r13 = g.r14 = g.r15 = 0;
    g.rip = r->eip;
    g.eflags = (r->eflags & EFLAGS_USER) | EFLAGS_IF | 2;
    g.orig_rax = (uint64_t)-1;          /* no system call to restart */
    s->stop = STOP_NONE;
    if (trace_sysemu(s->pid, &g, xsave, xsave_size) != 0)
        give_up(s, STUB_LOSS_PROTOCOL);
    return true;
}

int stub_resume(struct stub *s, const struct stub_regs *r, const void *xsave)
{
    struct stub_ctl *c = s->ctl;
    if (s->dead || !s->ready)
        return -1;
    s->handed_off = false;
    placement_stub(s->pid, &s->placed);
    if (s->held) {
        /* Stopped at its map site since stub_hold: the answer to that call is its resume. The
         * stub reads the commands again once the maps are done (stub.c run_commands). */
        load_commands(s, r, xsave);
        int rc = serve_map(s);
        s->nmap = s->nunmap = 0;
        return rc;
    }
    if (s->stop == STOP_GUEST && resume_in_guest(s, r, xsave))
        return s->dead ? -1 : 0;
    enum stub_stop was = s->stop;
    /* Stopped in guest code, the stub runs its commands from cmd_entry; the vector state goes
     * in through ptrace, which also sets it for stub code that never touches it. */
    uint32_t cmd = load_commands(s, r, was == STOP_GUEST ? NULL : xsave);
    s->stop = STOP_NONE;
    if (was == STOP_NONE) {
        if (run(c))
            cmd |= STUB_CMD_MAP;        /* parked: the answer to its call is the resume */
    } else {
        __atomic_store_n(&c->state, STUB_RUN, __ATOMIC_SEQ_CST);
        struct user_regs_struct g = s->stop_regs;
        if (was == STOP_GUEST) {
            g.rip = s->cmd_entry;
            g.cs = HOST_CS64;
            g.ss = HOST_DS;
            g.eflags = EFLAGS_IF | 2;
            g.orig_rax = (uint64_t)-1;
        }
        if (trace_cont(s->pid, was == STOP_GUEST ? &g : NULL, was == STOP_GUEST ? xsave : NULL, xsave_size, 0) != 0) {
            give_up(s, STUB_LOSS_PROTOCOL);
            return -1;
        }
    }
    if (cmd & STUB_CMD_MAP) {
        int rc = serve_map(s);
        s->nmap = s->nunmap = 0;
        if (rc < 0)
            return -1;
    }
    return 0;
}

static void copy_event(struct stub *s, struct stub_event *ev, void *xsave)
{
    const struct stub_ctl *c = s->ctl;
    ev->kind = c->kind;
    ev->entry = c->entry;
    ev->sig = c->sig;
    ev->si_code = c->si_code;
    ev->addr = c->addr;
    ev->perf_data = c->perf_data;
    ev->trapno = c->trapno;
    ev->err = c->err;
    ev->fsbase = c->fsbase;
    ev->gsbase = c->gsbase;
    ev->rip64 = c->rip64;
    memcpy(&ev->r, (const void *)&c->r, sizeof ev->r);
    cpuids_here += s->ctl->cpuids_here;         /* --stats only: guest code can write the count */
    s->ctl->cpuids_here = 0;
    if (xsave)
        stub_take_vector_state(s, xsave);
    s->preempted.wall = 0;
    s->ldt_cpu = 0;
}

void stub_take_vector_state(const struct stub *s, void *xsave)
{
    xstate_copy(xsave, STUB_CTL_FPU(s->ctl), xsave_size);
    /* Guest code may have written any bytes there (protocol.h): the gate's XRSTOR takes them.
     * The stub's PKRU stays in the stub, and is 0 when it resumes. */
    xstate_make_loadable(xsave, host_xcr0, host_mxcsr_mask);
}

/* An event of a traced stub that stopped in guest code (s->stop_regs), as the stub's handler
 * would have reported it: (sig) with the registers and vector state at the stop. A system
 * call is reported as the SIGSYS of seccomp's RET_TRAP (SYS_SECCOMP, at the address after
 * the instruction, %eax the number). */
static bool guest_stop_event(struct stub *s, int sig, uint32_t eax, struct stub_event *ev, void *xsave)
{
    const struct user_regs_struct *g = &s->stop_regs;
    if (xsave && trace_get_xstate(s->pid, xsave, xsave_size) != 0)
        return false;
    if (xsave)
        xstate_forget_pkru(xsave);
    memset(ev, 0, sizeof *ev);
    ev->kind = STUB_EV_SIGNAL;
    ev->sig = sig;
    ev->si_code = sig == SIGSYS ? 1 /* SYS_SECCOMP */ : 0;
    ev->addr = sig == SIGSYS ? g->rip : 0;
    ev->fsbase = g->fs_base;
    ev->gsbase = g->gs_base;
    ev->rip64 = g->rip;
    const uint64_t regs[8] = { eax, g->rcx, g->rdx, g->rbx, g->rsp, g->rbp, g->rsi, g->rdi };
    for (int i = 0; i < 8; i++)
        ev->r.regs[i] = (uint32_t)regs[i];
    ev->r.eip = (uint32_t)g->rip;
    ev->r.eflags = (uint32_t)g->eflags;
    const uint64_t sel[6] = { g->es, g->cs, g->ss, g->ds, g->fs, g->gs };
    for (int i = 0; i < 6; i++)
        ev->r.sel[i] = (uint32_t)(sel[i] & 0xFFFF);
    s->preempted.wall = 0;
    s->ldt_cpu = 0;
    s->stop = STOP_GUEST;
    return true;
}

/* stub_wait of a traced stub: every event is a ptrace stop. */
static enum stub_wait_result traced_wait(struct stub *s, uint64_t deadline_ns, struct stub_event *ev, void *xsave)
{
    for (bool first = true;; first = false) {
        uint64_t t = now_ns(), until = t + SLICE_NS;
        if (deadline_ns && deadline_ns < until)
            until = deadline_ns;
        struct trace_event te;
        trace_wait(s->pid, until, first ? placement_spin_ns() : 0, &te);
        s->stop_regs = te.regs;
        switch (te.stop) {
        case TRACE_GONE:
            found_dead(s);
            return STUB_WAIT_DIED;
        case TRACE_NONE: {
            /* a notification outside a map hand-off: guest code jumped to the map site */
            deny_notifications(s);
            if (s->preempted.wall && silent_too_long(s, s->preempted)) {
                give_up(s, STUB_LOSS_SILENT);
                return STUB_WAIT_DIED;
            }
            t = now_ns();
            if ((deadline_ns && t >= deadline_ns) || t < until)
                return STUB_WAIT_TIMEOUT;   /* the deadline, or a host signal to the monitor */
            continue;
        }
        case TRACE_SYSCALL:
            if (!guest_stop_event(s, SIGSYS, (uint32_t)te.regs.orig_rax, ev, xsave))
                break;
            placement_handoff();
            return STUB_WAIT_EVENT;
        case TRACE_SIGNAL:
            if (te.sig == SIGTRAP && te.regs.rip == s->trap_site && te.regs.cs == HOST_CS64) {
                /* the stub's hand-off; the control area holds the event */
                if (__atomic_load_n(&s->ctl->state, __ATOMIC_ACQUIRE) != STUB_EVENT)
                    break;
                s->stop = STOP_HANDOFF;
                copy_event(s, ev, xsave);
                placement_handoff();
                return STUB_WAIT_EVENT;
            }
            /* seccomp's SIGSYS for a guest system call (%eax rolled back to the number, as
             * seccomp's RET_TRAP leaves it), and the monitor's preemption, taken at the stop */
            if ((te.sig == SIGSYS || te.sig == STUB_PREEMPT_SIG) && !is_stub_code(&te.regs)) {
                if (!guest_stop_event(s, te.sig, (uint32_t)te.regs.rax, ev, xsave))
                    break;
                placement_handoff();
                return STUB_WAIT_EVENT;
            }
            /* a stub never stops; anything else its handler takes, and then hands off */
            bool stopping = te.sig == SIGSTOP || te.sig == SIGTSTP || te.sig == SIGTTIN || te.sig == SIGTTOU;
            if (trace_cont(s->pid, NULL, NULL, 0, stopping ? 0 : te.sig) != 0)
                break;
            continue;
        }
        give_up(s, STUB_LOSS_PROTOCOL);     /* broke the protocol, or ptrace failed */
        return STUB_WAIT_DIED;
    }
}

enum stub_wait_result stub_wait(struct stub *s, uint64_t deadline_ns, struct stub_event *ev, void *xsave)
{
    struct stub_ctl *c = s->ctl;
    if (s->dead || !s->ready)
        return STUB_WAIT_DIED;
    if (redirect == STUB_SYSEMU)
        return traced_wait(s, deadline_ns, ev, xsave);
    uint64_t t0 = now_ns(), t = t0, spin = placement_spin_ns();
    while (t - t0 < spin) {
        for (int i = 0; i < 64; i++) {
            if (handed_off_event(c))
                goto got;
            __builtin_ia32_pause();
        }
        t = now_ns();
    }
    for (;;) {
        c->monitor_sleeps = 1;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        uint32_t v = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
        if (is_event_state(v))
            break;
        t = now_ns();
        if (deadline_ns && t >= deadline_ns) {
            c->monitor_sleeps = 0;
            return STUB_WAIT_TIMEOUT;
        }
        uint64_t slice = SLICE_NS;
        if (deadline_ns && deadline_ns - t < slice)
            slice = deadline_ns - t;
        struct timespec ts = { 0, (long)slice };
        /* not FUTEX_PRIVATE_FLAG: the word lives in memory shared with the stub. Waiting on the
         * value just read keeps a forged state from turning this into a busy loop. */
        if (syscall(SYS_futex, &c->state, FUTEX_WAIT, v, &ts, NULL, 0) < 0 && errno == EINTR) {
            c->monitor_sleeps = 0;
            return STUB_WAIT_TIMEOUT;
        }
        struct pollfd p[2] = { { s->pidfd, POLLIN, 0 }, { s->listener, POLLIN, 0 } };
        if (poll(p, 2, 0) > 0) {
            if (p[0].revents) {
                found_dead(s);
                c->monitor_sleeps = 0;
                return STUB_WAIT_DIED;
            }
            /* refused unless a parked stub's: that call comes after STUB_PARKED (protocol.h),
             * and the event is taken above. A stub that parks while these are refused may
             * have its call refused too: it makes it again (stub.c map_handoff). */
            if ((p[1].revents & POLLIN) && !handed_off_event(c))
                deny_notifications(s);
        }
        if (s->preempted.wall && silent_too_long(s, s->preempted)) {
            give_up(s, STUB_LOSS_SILENT);   /* e.g. it blocked its signals with a forged rt_sigreturn frame */
            c->monitor_sleeps = 0;
            return STUB_WAIT_DIED;
        }
    }
    c->monitor_sleeps = 0;
got:
    placement_handoff();
    copy_event(s, ev, xsave);
    s->handed_off = true;
    return STUB_WAIT_EVENT;
}

void stub_preempt(struct stub *s)
{
    if (s->dead)
        return;
    syscall(SYS_pidfd_send_signal, s->pidfd, STUB_PREEMPT_SIG, NULL, 0);
    if (!s->preempted.wall)
        s->preempted = since_now(s);
}

/* Test driver of the stub processes: a mini-monitor (stub/host.c) runs hand-assembled guest code (guest.S) in stubs. */
#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include "host.h"
#include "guest.h"
#include "ring3/abi.h"

#define MEM_SIZE (4u << 20)

enum {
#define SYM_ENUM(name) S_##name,
    GUEST_SYMS(SYM_ENUM)
    S_COUNT
};
static uint32_t sym[S_COUNT];

static int mem = -1, failures;
static enum stub_syscalls how;          /* the redirection under test (argv[2]) */
static size_t xsave_size;
static uint8_t xs[STUB_FPU_MAX] __attribute__((aligned(64)));
static struct stub_event ev;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    if (!ok)
        failures++;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t peek32(uint64_t gpa)
{
    uint32_t v = 0;
    if (pread(mem, &v, 4, (off_t)gpa) != 4)
        return 0xFFFFFFFF;
    return v;
}

static void poke(uint64_t gpa, const void *p, size_t n)
{
    if (pwrite(mem, p, n, (off_t)gpa) != (ssize_t)n)
        abort();
}

static struct stub_regs regs_at(uint32_t eip)
{
    struct stub_regs r = { .eip = eip, .eflags = 0x202, .sel = { 0x2b, 0x23, 0x2b, 0x2b, 0, 0 } };
    r.regs[4] = G_STACK + 0x1000;
    return r;
}

/* resume, then wait up to (ms) for the next event */
static enum stub_wait_result go(struct stub *s, const struct stub_regs *r, const void *fpu, int ms)
{
    if (stub_resume(s, r, fpu) < 0)
        return STUB_WAIT_DIED;
    return stub_wait(s, now_ns() + (uint64_t)ms * 1000000, &ev, xs);
}

static int is_sig(enum stub_wait_result w, int sig)
{
    return w == STUB_WAIT_EVENT && ev.kind == STUB_EV_SIGNAL && ev.sig == sig;
}

/* ": why" when (w) says the stub is gone (stub_loss_name), else "": for messages. */
static const char *loss(enum stub_wait_result w, const struct stub *s)
{
    static char buf[64];
    if (w != STUB_WAIT_DIED)
        return "";
    snprintf(buf, sizeof buf, ": %s", stub_loss_name(stub_loss(s)));
    return buf;
}

static struct stub *new_stub(void)
{
    struct stub *s = stub_create();
    if (!s) {
        printf("FAIL no stub\n");
        exit(1);
    }
    stub_queue_map(s, G_CODE, 0, 1, PROT_READ | PROT_EXEC);
    stub_queue_map(s, G_STACK, G_STACK_GPA, 1, PROT_READ | PROT_WRITE);
    stub_queue_map(s, G_PATH, G_PATH, 1, PROT_READ | PROT_WRITE);
    return s;
}

static uint32_t xmm0(void) { uint32_t v; memcpy(&v, xs + 160, 4); return v; }   /* FXSAVE layout: XMM0 at 160 */
static void set_xmm0(uint32_t v)
{
    memcpy(xs + 160, &v, 4);
    xs[512] |= 2;                       /* XSTATE_BV: SSE state present */
}

static void test_basic(struct stub *s)
{
    struct stub_regs r = regs_at(sym[S_t1]);
    enum stub_wait_result w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && ev.r.eip == sym[S_t1_after] && ev.r.regs[0] == 4 && ev.r.regs[3] == 0x11111111 &&
          ev.r.regs[1] == 0x22222222 && ev.r.regs[2] == 0x33333333 && ev.r.regs[6] == 0x44444444 &&
          ev.r.regs[7] == 0x55555555 && ev.r.regs[5] == 0x66666666 && ev.r.sel[1] == 0x23,
          "1 int $0x80 -> SIGSYS, eip %#x after the instruction, registers as set (w %d sig %d eax %#x)",
          ev.r.eip, w, ev.sig, ev.r.regs[0]);
    r = ev.r;
    r.regs[0] = 0x1234;
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && ev.r.regs[7] == 0x1234 && ev.r.eip == sym[S_t1_end],
          "1 resume with eax 0x1234: the guest sees it (edi %#x)", ev.r.regs[7]);

    /* 2 */
    uint32_t v = 0xdeadbeef;
    poke(G_DATA, &v, 4);
    r = regs_at(sym[S_t2]);
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSEGV) && ev.addr == G_DATA && ev.r.eip == sym[S_t2],
          "2 load from an unmapped page -> SIGSEGV at %#llx", (unsigned long long)ev.addr);
    stub_queue_map(s, G_DATA, G_DATA, 1, PROT_READ | PROT_WRITE);
    stub_queue_map(s, G_RO, G_RO, 1, PROT_READ);
    r = ev.r;
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSEGV) && ev.addr == G_RO && (ev.err & 2) && ev.r.regs[0] == 0xdeadbeef,
          "2 after the map the load sees the memfd (eax %#x); a store to a read-only page -> SIGSEGV, err %#llx",
          ev.r.regs[0], (unsigned long long)ev.err);
    stub_queue_unmap(s, G_RO, 1);
    stub_queue_map(s, G_RO, G_RO, 1, PROT_READ | PROT_WRITE);
    r = ev.r;
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && peek32(G_RO) == 0xcafef00d && peek32(G_DATA + 4) == 0x600dcafe,
          "2 stores to writable pages show in the memfd (%#x %#x)", peek32(G_RO), peek32(G_DATA + 4));

    /* 3 */
    r = regs_at(sym[S_t3]);
    w = go(s, &r, NULL, 2000);
    uint32_t ret = peek32(G_STACK_GPA + (ev.r.regs[4] - G_STACK));
    check(w == STUB_WAIT_EVENT && ev.kind == STUB_EV_GATE && ev.entry == R3_E_IN && ret == sym[S_t3_ret] &&
          ev.r.regs[4] == G_STACK + 0x1000 - 4,
          "3 gate call -> STUB_EV_GATE entry %u, esp %#x at the return address %#x", ev.entry, ev.r.regs[4], ret);
    r = ev.r;
    r.eip = ret;
    r.regs[4] += 4;
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && (ev.r.regs[0] & 0x3200) == 0x200 && (ev.r.regs[3] & 0xCD5) == 0xCD5,
          "3 pushf inline: image %#x (IF 1, IOPL 0); popf inline: flags %#x", ev.r.regs[0], ev.r.regs[3]);
    r = ev.r;
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSEGV) && ev.addr == R3_SHARED && ev.r.eip == sym[S_t3_shared],
          "3 a load from R3_SHARED -> SIGSEGV at %#llx", (unsigned long long)ev.addr);
    r = ev.r;
    r.eip += 6;
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS), "3 resumed after the fault");

    /* 4 */
    r = regs_at(sym[S_t4]);
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && xmm0() == 0x11223344, "4 xmm0 in the signal event's XSAVE image: %#x", xmm0());
    set_xmm0(0x55667788);
    r = ev.r;
    w = go(s, &r, xs, 2000);
    check(is_sig(w, SIGSYS) && ev.r.regs[3] == 0x55667788, "4 xmm0 changed at a signal event: the guest sees %#x",
          ev.r.regs[3]);
    r = ev.r;
    w = go(s, &r, NULL, 2000);
    check(w == STUB_WAIT_EVENT && ev.kind == STUB_EV_GATE && xmm0() == 0x99aabbcc,
          "4 xmm0 in the gate event's XSAVE image: %#x", xmm0());
    set_xmm0(0x13572468);
    r = ev.r;
    r.eip = sym[S_t4_ret];
    r.regs[4] += 4;
    w = go(s, &r, xs, 2000);
    check(is_sig(w, SIGSYS) && ev.r.regs[3] == 0x13572468, "4 xmm0 changed at a gate event: the guest sees %#x",
          ev.r.regs[3]);

    /* 5 */
    struct stub_tls d = { 12, G_DATA + 3, 0xFFFFF, 0x51 };  /* seg_32bit, limit_in_pages, useable */
    stub_queue_tls(s, &d);
    r = regs_at(sym[S_t5]);
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && ev.r.regs[0] == 0xde && ev.r.sel[5] == 0x63,
          "5 TLS entry 12 at %#x: %%gs:0 = %#x, gs %#x", G_DATA + 3, ev.r.regs[0], ev.r.sel[5]);
}

/* 64-bit jump from guest code to (target) with the registers given */
static struct stub_regs jmp64(uint64_t target, uint32_t rax, uint32_t rdi, uint32_t rsi, uint32_t rdx)
{
    struct stub_regs r = regs_at(sym[S_g_jmp64]);
    r.regs[7] = (uint32_t)(target >> 32);
    r.regs[6] = (uint32_t)target;
    r.regs[0] = rax;
    r.regs[3] = rdi;
    r.regs[1] = rsi;
    r.regs[2] = rdx;
    return r;
}

/* The descriptors process (pid) holds, as "n n ..." into (buf). */
static const char *open_fds(int pid, char *buf, size_t size)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    buf[0] = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%.12s", buf[0] ? " " : "", e->d_name);
    if (d)
        closedir(d);
    return buf;
}

static void test_hostile(struct stub *s, const char *path)
{
    poke(G_PATH, path, strlen(path) + 1);
    unlink(path);
    struct stub_regs r = jmp64(sym[S_g_syscall64], 2, G_PATH, 0101, 0644);   /* open(path, O_CREAT|O_WRONLY) */
    enum stub_wait_result w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && ev.r.sel[1] == 0x33 && ev.rip64 == sym[S_g_syscall64] + 2 && access(path, F_OK) != 0,
          "6a 64-bit open(O_CREAT) from guest code -> SIGSYS (cs %#x), no file", ev.r.sel[1]);
    r = jmp64(sym[S_g_syscall64], 85, G_PATH, 0644, 0);                       /* creat */
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && access(path, F_OK) != 0, "6a 64-bit creat from guest code -> SIGSYS, no file");
    static const struct { int nr, fd; const char *name; } rd[] = {
        { 0, STUB_MEMFD, "read(STUB_MEMFD)" }, { 17, STUB_MEMFD, "pread64(STUB_MEMFD)" },
        { 17, 3, "pread64(3)" }, { 0, 4, "read(4)" },
    };
    for (unsigned i = 0; i < sizeof rd / sizeof rd[0]; i++) {
        r = jmp64(sym[S_g_syscall64], (uint32_t)rd[i].nr, (uint32_t)rd[i].fd, G_PATH, 64);
        w = go(s, &r, NULL, 2000);
        check(is_sig(w, SIGSYS) && ev.r.regs[0] == (uint32_t)rd[i].nr, "6b 64-bit %s from guest code -> SIGSYS", rd[i].name);
    }

    /* c: a forged map request at the map site itself */
    r = regs_at(sym[S_g_forge]);
    r.regs[7] = (uint32_t)(stub_map_site(s) >> 32);
    r.regs[6] = (uint32_t)stub_map_site(s);
    uint64_t t0 = now_ns();
    w = go(s, &r, NULL, 3000);
    check(w != STUB_WAIT_TIMEOUT, "6c forged map request: answered (%s after %.1f ms, rip64 %#llx)",
          w == STUB_WAIT_EVENT ? "event" : "died", (now_ns() - t0) / 1e6, (unsigned long long)ev.rip64);
    if (w == STUB_WAIT_EVENT) {
        r = regs_at(sym[S_g_probe]);
        w = go(s, &r, NULL, 2000);
        check(is_sig(w, SIGSEGV) && ev.addr == G_FORGE_LIN, "6c nothing was mapped at %#x (SIGSEGV at %#llx)",
              G_FORGE_LIN, (unsigned long long)ev.addr);
    }

    /* g: a map hand-off to a forged event, whose map code a single-step trap interrupts (SUD
     * only: under sysemu the monitor takes events at ptrace stops, which guest code cannot forge) */
    if (how == STUB_SUD) {
        r = regs_at(sym[S_g_forge_tf]);
        r.regs[7] = (uint32_t)(stub_map_site(s) >> 32);
        r.regs[6] = (uint32_t)stub_map_site(s);
        w = go(s, &r, NULL, 2000);
        check(w == STUB_WAIT_EVENT && ev.kind == STUB_EV_GATE, "6g forged event: taken as one (wait %d%s)", w,
              loss(w, s));
        stub_queue_map(s, G_FORGE_LIN, G_FORGE_GPA, 1, PROT_READ);
        r = regs_at(sym[S_g_loop]);
        w = go(s, &r, NULL, 2000);
        check(is_sig(w, SIGTRAP) && ev.rip64 > stub_map_site(s) && ev.rip64 < stub_map_site(s) + 64,
              "6g map site entered with TF: the trap in the map code is an event (wait %d, sig %d, rip64 %#llx)", w,
              ev.sig, (unsigned long long)ev.rip64);
        char fds[64];
        check(w == STUB_WAIT_EVENT && !strcmp(open_fds(stub_pid(s), fds, sizeof fds), ""),
              "6g ... and the handler closed guest memory's descriptor before it (open: '%s')", fds);
    }

    /* d: open from stub text */
    r = jmp64(stub_map_site(s), 2, G_PATH, 0101, 0644);
    w = go(s, &r, NULL, 3000);
    check(w == STUB_WAIT_DIED && stub_loss(s) == STUB_LOSS_DIED && access(path, F_OK) != 0,
          "6d open from the stub's text: the stub is killed (wait %d%s)", w, loss(w, s));
    stub_destroy(s);
}

/* Whether page (linear) is mapped in process (pid): a read of it from here. */
static bool mapped_in(int pid, uint32_t linear)
{
    uint32_t v;
    struct iovec here = { &v, sizeof v }, there = { (void *)(uintptr_t)linear, sizeof v };
    return process_vm_readv(pid, &here, 1, &there, 1, 0) == (ssize_t)sizeof v;
}

/* 6h: a forged event, then guest code that goes on (tests/stub/guest.S g_forge_keep): the unmap
 * the resume carries must not be lost to it. The monitor runs the guest kernel for the event,
 * which may free the page and give it to another process, so the stub must either have unmapped
 * it before guest code runs again, or be given up. */
static void test_forged_keep(struct stub *s)
{
    uint32_t marker = 0x6b656570;
    poke(G_DATA, &marker, 4);
    stub_queue_map(s, G_FORGE_LIN, G_DATA, 1, PROT_READ);
    struct stub_regs r = regs_at(sym[S_g_forge_keep]);
    if (how == STUB_SYSEMU) {
        r.regs[7] = (uint32_t)((stub_trap_site(s) - 1) >> 32);
        r.regs[6] = (uint32_t)(stub_trap_site(s) - 1);
    }
    enum stub_wait_result w = go(s, &r, NULL, 2000);
    bool before = mapped_in(stub_pid(s), G_FORGE_LIN);
    check(w == STUB_WAIT_EVENT && ev.kind == STUB_EV_GATE && before,
          "6h forged event while guest code goes on: taken as one (wait %d), the page mapped (%d)", w, before);
    stub_queue_unmap(s, G_FORGE_LIN, 1);
    r = regs_at(sym[S_g_loop]);
    w = go(s, &r, NULL, 1000);
    bool after = w != STUB_WAIT_DIED && mapped_in(stub_pid(s), G_FORGE_LIN);
    check(!after, "6h ... the unmap of the resume is done or the stub given up (wait %d%s), not skipped",
          w, loss(w, s));
    stub_destroy(s);
}

/* 6i: stub_hold, which the monitor calls before the guest kernel may free a page the stub maps.
 * A stub that took a real event comes to its map site, and the resume that answers its call
 * there carries the maps and the registers written since; one whose event guest code forged,
 * and which runs on, is given up and has ended when stub_hold returns. Under sysemu a stub is
 * stopped from its event to its resume, and holding does nothing. */
static void test_hold(struct stub *s)
{
    uint32_t marker = 0x686f6c64;
    poke(G_DATA, &marker, 4);
    struct stub_regs r = regs_at(sym[S_g_probe]);
    enum stub_wait_result w = go(s, &r, NULL, 2000);
    bool segv = is_sig(w, SIGSEGV) && ev.addr == G_FORGE_LIN;
    int held = stub_hold(s);
    stub_queue_map(s, G_FORGE_LIN, G_DATA, 1, PROT_READ);
    r = ev.r;
    r.regs[3] = 0x5a5a5a5a;             /* written after the hold: the stub must take it */
    enum stub_wait_result w2 = go(s, &r, NULL, 2000);
    check(segv && held == 0 && is_sig(w2, SIGSYS) && ev.r.regs[0] == marker &&
          ev.r.regs[3] == 0x5a5a5a5a, "6i a stub held after a real event, then resumed: the map and the "
          "registers of the resume (hold %d, wait %d then %d, eax %#x, ebx %#x)", held, w, w2, ev.r.regs[0],
          ev.r.regs[3]);
    stub_destroy(s);
    if (how == STUB_SYSEMU)
        return;
    s = new_stub();
    stub_queue_map(s, G_FORGE_LIN, G_DATA, 1, PROT_READ);
    r = regs_at(sym[S_g_forge_keep]);
    w = go(s, &r, NULL, 2000);
    uint64_t t0 = now_ns();
    held = stub_hold(s);
    siginfo_t si = { 0 };
    int ended = waitid(P_PID, (id_t)stub_pid(s), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == stub_pid(s);
    check(w == STUB_WAIT_EVENT && held < 0 && ended, "6i a stub held after a forged event, guest code running on: "
          "given up (%s) and ended when the hold returns, after %.0f ms", stub_loss_name(stub_loss(s)),
          (now_ns() - t0) / 1e6);
    stub_destroy(s);
}

/* 9: parking (protocol.h). A stub whose spin ends waits in its map site's call, and the resume
 * answers that call: with the maps after a fault, with nothing after a gate event, after a
 * preemption reached the call (made again), and a stub killed there is reported dead. The guest
 * sees what the resume of a spinning stub gives it. Under sysemu a stub stops at its hand-off
 * instead, and the same resumes must give the same. */
static void park(void)
{
    struct timespec ts = { 0, 20000000 };   /* 20 ms: far beyond any spin */
    nanosleep(&ts, NULL);
}

/* The seccomp listener among this process's descriptors with a call waiting: the parked stub's
 * (each stub has its own listener, and only that stub waits in a call). -1 if none. */
static int listener_with_call(void)
{
    DIR *d = opendir("/proc/self/fd");
    int found = -1;
    for (struct dirent *e; d && found < 0 && (e = readdir(d));) {
        char path[64], link[64];
        snprintf(path, sizeof path, "/proc/self/fd/%.12s", e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        struct pollfd p = { atoi(e->d_name), POLLIN, 0 };
        if (!strcmp(link, "anon_inode:seccomp notify") && poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
            found = p.fd;
    }
    if (d)
        closedir(d);
    return found;
}

struct refusal { int listener; uint64_t id; };

/* Refuses the call (arg) once the resume has had time to set STUB_RUN and wait for it. */
static void *refuse_later(void *arg)
{
    const struct refusal *f = arg;
    park();
    struct seccomp_notif_resp resp = { .id = f->id, .error = -EPERM };
    ioctl(f->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    return NULL;
}

/* 9, SUD: a parked stub's call refused, as stub_wait refuses the calls it finds before it sees
 * the event, once the resume has found the stub parked, set STUB_RUN and waits for the call.
 * The stub must make it again, and not go on into guest code unanswered: the resume's map would
 * be lost, and the monitor would wait at the map site for a stub running guest code (here one
 * that forges an event, tests/stub/guest.S g_forge_keep, and so never parks). */
static void test_parked_refused(struct stub *s)
{
    struct stub_regs r = regs_at(sym[S_g_probe]);
    enum stub_wait_result w = go(s, &r, NULL, 2000);
    bool segv = is_sig(w, SIGSEGV) && ev.addr == G_FORGE_LIN;
    park();
    union { struct seccomp_notif n; char buf[512]; } notif;
    memset(&notif, 0, sizeof notif);
    struct refusal f = { listener_with_call(), 0 };
    bool taken = f.listener >= 0 && ioctl(f.listener, SECCOMP_IOCTL_NOTIF_RECV, &notif) == 0 &&
                 notif.n.pid == (uint32_t)stub_pid(s);
    f.id = notif.n.id;
    pthread_t t;
    bool started = taken && pthread_create(&t, NULL, refuse_later, &f) == 0;
    stub_queue_map(s, G_FORGE_LIN, G_DATA, 1, PROT_READ);
    r = regs_at(sym[S_g_forge_keep]);       /* %edi:%esi 0: no jump, straight to its loop */
    w = go(s, &r, NULL, 2000);
    if (started)
        pthread_join(t, NULL);
    bool mapped = mapped_in(stub_pid(s), G_FORGE_LIN);
    check(segv && started && w == STUB_WAIT_EVENT && ev.kind == STUB_EV_GATE && mapped,
          "9 a parked stub's call refused after the resume set STUB_RUN: made again and answered "
          "(call taken %d, wait %d%s, event kind %d, the page mapped %d)", taken, w, loss(w, s), ev.kind,
          mapped);
    stub_destroy(s);
}

static void test_parked(struct stub *s)
{
    uint64_t found = stubs_parked_found();
    uint32_t marker = 0x7061726b;
    poke(G_DATA, &marker, 4);
    struct stub_regs r = regs_at(sym[S_g_probe]);
    enum stub_wait_result w = go(s, &r, NULL, 2000);
    bool segv = is_sig(w, SIGSEGV) && ev.addr == G_FORGE_LIN;
    park();
    stub_queue_map(s, G_FORGE_LIN, G_DATA, 1, PROT_READ);
    r = ev.r;
    r.regs[3] = 0x5a5a5a5a;
    w = go(s, &r, NULL, 2000);
    check(segv && is_sig(w, SIGSYS) && ev.r.regs[0] == marker && ev.r.regs[3] == 0x5a5a5a5a,
          "9 parked after a fault, resumed with a map: the page and the registers (wait %d, eax %#x, ebx %#x)",
          w, ev.r.regs[0], ev.r.regs[3]);

    park();
    r = regs_at(sym[S_g_probe]);
    r.regs[3] = 0x600d;
    w = go(s, &r, NULL, 2000);
    check(is_sig(w, SIGSYS) && ev.r.regs[0] == marker && ev.r.regs[3] == 0x600d,
          "9 parked after a system call, resumed with nothing to map (wait %d, eax %#x, ebx %#x)", w,
          ev.r.regs[0], ev.r.regs[3]);

    stub_queue_map(s, G_DATA, G_DATA, 1, PROT_READ);
    r = regs_at(sym[S_g_maploop]);
    w = go(s, &r, NULL, 2000);
    bool gate = w == STUB_WAIT_EVENT && ev.kind == STUB_EV_GATE;
    park();
    r = regs_at(sym[S_g_probe]);
    r.regs[3] = 0x9a7e;
    w = go(s, &r, NULL, 2000);
    check(gate && is_sig(w, SIGSYS) && ev.r.regs[0] == marker && ev.r.regs[3] == 0x9a7e,
          "9 parked after a gate event, resumed with nothing to map (wait %d, eax %#x, ebx %#x)", w,
          ev.r.regs[0], ev.r.regs[3]);

    /* the preemption interrupts the call, which the stub makes again; it is then reported
     * at the resume, from the registers about to run (stub.c stub_preempt_c) */
    park();
    kill(stub_pid(s), STUB_PREEMPT_SIG);
    park();
    stub_queue_unmap(s, G_FORGE_LIN, 1);
    r = regs_at(sym[S_g_probe]);
    w = go(s, &r, NULL, 2000);
    int preempted = is_sig(w, STUB_PREEMPT_SIG);
    if (preempted)
        w = go(s, &ev.r, NULL, 2000);
    check(is_sig(w, SIGSEGV) && ev.addr == G_FORGE_LIN,
          "9 parked, a preemption, then resumed with an unmap: the page is gone (wait %d, sig %d, "
          "addr %#llx, preemption reported first: %d)", w, ev.sig, (unsigned long long)ev.addr, preempted);
    if (how == STUB_SUD)
        check(stubs_parked_found() >= found + 4, "9 ... each of those resumes found the stub parked (%llu)",
              (unsigned long long)(stubs_parked_found() - found));

    park();
    kill(stub_pid(s), SIGKILL);
    park();
    r = regs_at(sym[S_g_probe]);
    w = go(s, &r, NULL, 2000);
    check(w == STUB_WAIT_DIED, "9 a stub killed while parked: the resume reports it dead (wait %d)", w);
    stub_destroy(s);
}

static void test_preempt(struct stub *s)
{
    struct stub_regs r = regs_at(sym[S_g_loop]);
    enum stub_wait_result w = go(s, &r, NULL, 50);
    check(w == STUB_WAIT_TIMEOUT, "6e for(;;): no event within 50 ms");
    uint64_t t0 = now_ns();
    stub_preempt(s);
    w = stub_wait(s, now_ns() + 2000000000ull, &ev, xs);
    check(is_sig(w, STUB_PREEMPT_SIG) && ev.r.eip == sym[S_g_loop], "6e stub_preempt -> STUB_PREEMPT_SIG after %.3f ms",
          (now_ns() - t0) / 1e6);

    /* f: rt_sigreturn from stub text with a frame that blocks every signal */
    uint8_t f[512] = { 0 };
    uint64_t v;
#define PUT(off, val) (v = (val), memcpy(f + (off), &v, 8))
    PUT(16 + 8, 2);                              /* uc_stack.ss_flags = SS_DISABLE */
    PUT(40 + 15 * 8, G_STACK + 0x800);           /* rsp */
    PUT(40 + 16 * 8, sym[S_g_loop]);             /* rip */
    PUT(40 + 17 * 8, 0x202);                     /* eflags */
    PUT(40 + 18 * 8, 0x002b000000000023ull);     /* cs 0x23, gs 0, fs 0, ss 0x2b */
    PUT(40 + 256, ~0ull);                        /* uc_sigmask */
    poke(G_PATH + 0x100, f, sizeof f);
    r = jmp64(stub_map_site(s), 15, 0, 0, 0);
    r.regs[4] = G_PATH + 0x100;
    w = go(s, &r, NULL, 50);
    if (how == STUB_SYSEMU) {
        /* resumed from a ptrace stop (the preemption), the stub is in PTRACE_SYSEMU: the call
         * stops before it runs, wherever it is made */
        check(is_sig(w, SIGSYS) && ev.r.sel[1] == 0x33 && ev.rip64 == stub_map_site(s) + 2,
              "6f forged rt_sigreturn under sysemu: a system-call stop, not run (wait %d)", w);
        stub_destroy(s);
        return;
    }
    check(w == STUB_WAIT_TIMEOUT, "6f forged rt_sigreturn blocking all signals: no event within 50 ms (wait %d)", w);
    t0 = now_ns();
    stub_preempt(s);
    w = stub_wait(s, now_ns() + 5000000000ull, &ev, xs);
    check(w == STUB_WAIT_DIED, "6f stub_preempt -> STUB_WAIT_DIED after %.0f ms", (now_ns() - t0) / 1e6);
    stub_destroy(s);
}

/* 8: a preemption that reaches the stub while it runs commands outside its signal handler
 * (after a gate event, whose handler has returned) interrupts nothing the monitor waits for.
 * A thread sends preemptions as the monitor does, but at any moment (the monitor sends one only
 * while it waits, yet the host may deliver it late); each resume maps G_DATA again, and guest
 * code then loads from it. The map is neither lost (SIGSEGV at G_DATA) nor taken for a broken
 * protocol (the stub killed). Under sysemu each preemption is a signal stop too, which the
 * monitor must continue at once, not at its next slice (stub/host.c serve_map): a stub sent
 * preemptions faster than that never left its stops, and was killed as silent. */
static volatile int hammering;

static void *hammer(void *arg)
{
    int pid = *(int *)arg;
    for (uint32_t x = 1; __atomic_load_n(&hammering, __ATOMIC_RELAXED);) {
        kill(pid, STUB_PREEMPT_SIG);
        /* 100-600 us apart: a stub takes each (a signal stop too, in sysemu) long before the
         * next, as it takes the monitor's one preemption a wait */
        x = x * 1103515245 + 12345;
        struct timespec ts = { 0, 100000 + (long)((x >> 16) % 500) * 1000 };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_preempt_in_map(struct stub *s)
{
    enum { ROUNDS = 20000 };
    stub_queue_map(s, G_DATA, G_DATA, 1, PROT_READ | PROT_WRITE);
    struct stub_regs r = regs_at(sym[S_g_maploop]);
    enum stub_wait_result w = go(s, &r, NULL, 2000);
    int gates = 0, preempts = 0, i, pid = stub_pid(s);
    pthread_t t;
    hammering = 1;
    int e = pthread_create(&t, NULL, hammer, &pid);
    if (e) {
        check(0, "8 no thread to send preemptions: %s", strerror(e));
        stub_destroy(s);
        return;
    }
    for (i = 0; i < ROUNDS && w == STUB_WAIT_EVENT; i++) {
        r = ev.r;
        if (ev.kind == STUB_EV_GATE) {
            gates++;
            r.eip = sym[S_g_maploop_ret];
            r.regs[4] += 4;
        } else if (is_sig(w, STUB_PREEMPT_SIG)) {
            preempts++;
        } else {
            break;
        }
        stub_queue_unmap(s, G_DATA, 1);
        stub_queue_map(s, G_DATA, G_DATA, 1, PROT_READ | PROT_WRITE);
        w = go(s, &r, NULL, 2000);
    }
    hammering = 0;
    pthread_join(t, NULL);
    check(i == ROUNDS && preempts > 0, "8 %d maps under a stream of preemptions: %d gate events, %d preemptions (then wait %d: "
          "%s; kind %u sig %d at %#x, addr %#llx)", i, gates, preempts, w,
          w == STUB_WAIT_DIED ? stub_loss_name(stub_loss(s)) : "alive", ev.kind, ev.sig, ev.r.eip,
          (unsigned long long)ev.addr);
    stub_destroy(s);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median of 3 runs of (n) round trips, in us each; kind 0 int $0x80, 1 gate, 2 map */
static double bench(struct stub *s, int kind, int n)
{
    double t[3];
    for (int run = 0; run < 3; run++) {
        struct stub_regs r = regs_at(kind == 1 ? sym[S_g_gateloop] : sym[S_g_sysloop]);
        if (go(s, &r, NULL, 2000) != STUB_WAIT_EVENT)
            return -1;
        uint64_t t0 = now_ns();
        for (int i = 0; i < n; i++) {
            r = ev.r;
            if (kind == 1) {
                r.eip = sym[S_g_gateloop_ret];
                r.regs[4] += 4;
            }
            if (kind == 2)
                stub_queue_map(s, G_DATA, G_DATA, 1, PROT_READ | PROT_WRITE);
            if (go(s, &r, NULL, 2000) != STUB_WAIT_EVENT)
                return -1;
        }
        t[run] = (now_ns() - t0) / 1e3 / n;
    }
    qsort(t, 3, sizeof t[0], cmp);
    return t[1];
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/tmp/ring3-stub-test-file";
    /* the second argument: how system calls leave the stub (host.h), sud or sysemu */
    how = argc > 2 && !strcmp(argv[2], "sysemu") ? STUB_SYSEMU : STUB_SUD;
    /* the third: where the stubs sit (placement.h), spread (the default here) or shared */
    enum stub_placement where = argc > 3 && !strcmp(argv[3], "shared") ? PLACE_SHARED : PLACE_SPREAD;
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsigned a, b, c, d;
    __cpuid_count(0xD, 0, a, b, c, d);
    xsave_size = c;
    mem = memfd_create("guest", MFD_CLOEXEC);
    FILE *g = fopen(GUEST_BIN, "rb");
    static uint8_t bin[65536];
    size_t n = g ? fread(bin, 1, sizeof bin, g) : 0;
    if (mem < 0 || ftruncate(mem, MEM_SIZE) < 0 || n < sizeof sym) {
        printf("FAIL setup: %s\n", strerror(errno));
        return 1;
    }
    fclose(g);
    poke(0, bin, n);
    memcpy(sym, bin, sizeof sym);
    if (stubs_init(mem, xsave_size, how, where) < 0)
        return 1;

    struct stub *s = new_stub();
    test_basic(s);
    stub_destroy(s);
    test_hostile(new_stub(), path);
    test_forged_keep(new_stub());
    test_hold(new_stub());
    test_parked(new_stub());
    if (how == STUB_SUD)
        test_parked_refused(new_stub());
    test_preempt(new_stub());
    test_preempt_in_map(new_stub());

    s = new_stub();
    stub_queue_map(s, G_DATA, G_DATA, 1, PROT_READ | PROT_WRITE);
    double sys = bench(s, 0, 100000), gate = bench(s, 1, 100000), map = bench(s, 2, 20000);
    check(sys > 0 && gate > 0 && map > 0, "7 round trips (median of 3): int $0x80 %.2f us, gate %.2f us, "
          "int $0x80 + map of one page %.2f us", sys, gate, map);
    stub_destroy(s);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

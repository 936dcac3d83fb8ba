/* A gdb remote stub for the guest (gdbstub.h): the connection, the stop loop, the commands. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gdbstub.h"

#include "lib/listen.h"
#include "memory/guestmem.h"
#include "monitor/host/breakpoints.h"
#include "monitor/host/console.h"
#include "monitor/host/events.h"
#include "monitor/host/run.h"
#include "monitor/mmu/aspace.h"
#include "monitor/mmu/paging.h"
#include "monitor/prompt/commands.h"

#include "fpregs.h"
#include "rsp.h"
#include "tdesc.h"

#define MAX_BREAKPOINTS 64
#define SIG_TRAP 5                      /* gdb's signal numbers (GDB manual, "Signals"): SIGTRAP */
#define STOP_TRAP "S05"                 /* the stop replies: a breakpoint or a step */
#define STOP_INT  "S02"                 /* ... and a Ctrl-C (SIGINT) */

struct breakpoint {
    uint32_t linear;
    bool placed;                        /* the int3 is in memory, at phys */
    uint64_t phys;
    uint8_t saved;                      /* the byte it replaced */
    bool user;                          /* in a page user code can reach: one process's */
};

static int listen_fd = -1;
static struct rsp conn = { .fd = -1 };
static bool stepping;                   /* gdb asked for one step; TF is set for it */
static uint32_t guest_tf;               /* the guest's own TF when the step began */
static struct breakpoint bps[MAX_BREAKPOINTS];
static unsigned nbps;

/* Z2 (write) and Z4 (access) watchpoints: host perf breakpoints on the monitor's thread, where
 * the guest kernel runs (and every guest process with --isolation=none); a process in a stub
 * is not watched. x86 has no read-only watch (SDM vol. 3, 17.2.5), so Z3 is refused. */
struct watchpoint {
    uint32_t addr, len;
    char kind;                          /* '2' or '4'; 0: the slot is free */
    int fd;
};
static struct watchpoint wps[BP_SLOTS];

/* ---- the address ---- */

int gdb_start(struct vcpu *v, const char *spec, bool wait)
{
    if ((listen_fd = listen_on(spec)) < 0) {
        fprintf(stderr, "ring3: cannot listen for gdb on %s: %s\n", spec, strerror(errno));
        return -1;
    }
    if (wait) {
        fprintf(stderr, "ring3: waiting for gdb on %s\n", spec);
        struct pollfd p = { listen_fd, POLLIN, 0 };
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
        gdb_poll(v);
    }
    return 0;
}

int gdb_fd(void)
{
    return conn.fd >= 0 ? conn.fd : listen_fd;
}

/* ---- guest memory, through the page tables in force ---- */

static struct breakpoint *find_bp(uint32_t linear)
{
    for (unsigned i = 0; i < nbps; i++)
        if (bps[i].linear == linear)
            return &bps[i];
    return NULL;
}

/* Copies guest memory at [linear, linear + n) to (buf) (write: from it), as it would be without
 * gdb's int3 bytes. False when a page of it is not mapped. */
static bool access_memory(struct vcpu *v, uint32_t linear, uint8_t *buf, uint32_t n, bool write)
{
    for (uint32_t done = 0; done < n;) {
        uint32_t room;
        uint64_t phys;
        uint8_t *p = paging_peek(v, linear + done, &phys, &room);
        if (!p)
            return false;
        uint32_t k = n - done < room ? n - done : room;
        for (uint32_t i = 0; i < k; i++) {
            struct breakpoint *b = find_bp(linear + done + i);
            uint8_t *at = b && b->placed && b->phys == phys + i ? &b->saved : p + i;
            if (write)
                *at = buf[done + i];
            else
                buf[done + i] = *at;
        }
        done += k;
    }
    return true;
}

/* ---- breakpoints: int3 (0xCC) in guest memory ---- */

static void place(struct vcpu *v, struct breakpoint *b)
{
    uint32_t room;
    uint64_t phys;
    struct walk w;
    uint8_t *p = b->placed ? NULL : paging_peek(v, b->linear, &phys, &room);
    if (!p)
        return;                         /* placed already, or not mapped yet: at the next paging change */
    b->saved = *p;
    b->phys = phys;
    b->user = !paging_walk(v, b->linear, MMU_READ, true, false, &w);
    *p = 0xCC;
    b->placed = true;
}

static void unplace(struct vcpu *v, struct breakpoint *b)
{
    uint8_t *p = b->placed ? guestmem_ptr(v->gm, b->phys, 1) : NULL;
    if (p && *p == 0xCC)
        *p = b->saved;
    b->placed = false;
}

static void remove_all(struct vcpu *v)
{
    for (unsigned i = 0; i < nbps; i++)
        unplace(v, &bps[i]);
    nbps = 0;
    for (unsigned i = 0; i < BP_SLOTS; i++)
        if (wps[i].kind) {
            close(wps[i].fd);
            wps[i].kind = 0;
        }
}

/* Z2/Z4 (insert) and z2/z4 at (addr, len): "OK", "E22" for a length or alignment the debug
 * registers cannot watch (SDM vol. 3, 17.2.5), "E28" when all four are taken. */
static const char *watch(char kind, bool insert, uint32_t addr, uint64_t len)
{
    struct watchpoint *w = NULL, *free_slot = NULL;
    for (unsigned i = 0; i < BP_SLOTS; i++) {
        if (wps[i].kind == kind && wps[i].addr == addr && wps[i].len == len)
            w = &wps[i];
        if (!wps[i].kind && !free_slot)
            free_slot = &wps[i];
    }
    if (!insert) {
        if (w) {
            close(w->fd);
            w->kind = 0;
        }
        return "OK";
    }
    if (w)
        return "OK";
    if ((len != 1 && len != 2 && len != 4 && len != 8) || addr % len)
        return "E22";
    if (!free_slot)
        return "E28";
    int fd = bp_open_data(addr, (unsigned)len, kind == '4', BP_GDB_TAG + (uint64_t)(free_slot - wps));
    if (fd < 0)
        return "E28";                   /* the host's four are taken, or perf is refused */
    *free_slot = (struct watchpoint){ .addr = addr, .len = (uint32_t)len, .kind = kind, .fd = fd };
    return "OK";
}

/* A breakpoint is at a virtual address, in every address space, as QEMU's are. One in a user
 * page is in the physical page of the address space in force only: it moves at each CR3 write,
 * and is placed when the running process maps its page. */
void gdb_paging_changed(struct vcpu *v)
{
    for (unsigned i = 0; i < nbps; i++)
        if (bps[i].user)
            unplace(v, &bps[i]);
    gdb_pages_mapped(v);
}

void gdb_pages_mapped(struct vcpu *v)
{
    for (unsigned i = 0; i < nbps; i++)
        place(v, &bps[i]);
}

/* ---- registers: gdb's i386 order eax ecx edx ebx esp ebp esi edi eip eflags cs ss ds es fs gs ---- */

static uint32_t eflags_image(struct vcpu *v)
{
    uint32_t user = v->sh->eflags & FL_USER;
    if (stepping)
        user = (user & ~FL_TF) | guest_tf;
    return user | (v->sh->vif ? FL_IF : 0) | v->iopl | 2;
}

static void read_registers(struct vcpu *v, char *out)
{
    uint32_t r[16];
    uint8_t fp[FPREGS_GDB_BYTES];
    static const unsigned sreg_order[6] = { SREG_CS, SREG_SS, SREG_DS, SREG_ES, SREG_FS, SREG_GS };
    memcpy(r, v->sh->regs, 8 * sizeof r[0]);
    r[8] = v->sh->eip;
    r[9] = eflags_image(v);
    for (unsigned i = 0; i < 6; i++)
        r[10 + i] = v->sreg[sreg_order[i]].sel;
    rsp_hex(out, r, sizeof r);
    aspace_vec_load(v);
    fpregs_to_gdb(v->fpu_image, fp);
    rsp_hex(out + strlen(out), fp, sizeof fp);
}

/* 'G': the general registers, eip and eflags, and the x87 and SSE ones when sent; segment
 * registers stay as they are. */
static bool write_registers(struct vcpu *v, const char *in)
{
    uint32_t r[10];
    uint8_t fp[FPREGS_GDB_BYTES];
    size_t fp_at = 2 * 16 * sizeof r[0];
    if (strlen(in) < 2 * sizeof r || !rsp_unhex(r, in, sizeof r))
        return false;
    bool with_fp = strlen(in) >= fp_at + 2 * sizeof fp;
    if (with_fp && !rsp_unhex(fp, in + fp_at, sizeof fp))
        return false;
    memcpy(v->sh->regs, r, 8 * sizeof r[0]);
    v->sh->eip = r[8];
    v->sh->eflags = (v->sh->eflags & ~FL_USER) | (r[9] & FL_USER) | 2;
    v->sh->vif = (r[9] & FL_IF) != 0;
    if (with_fp) {
        aspace_vec_load(v);
        fpregs_from_gdb(v->fpu_image, fp);
    }
    return true;
}

#define EXIT_ACK_MS 2000             /* gdb_exited waits this long for gdb's acknowledgement */

/* ---- the stop loop ---- */

static void disconnect(struct vcpu *v)
{
    remove_all(v);
    if (stepping)
        v->sh->eflags = (v->sh->eflags & ~FL_TF) | guest_tf;
    stepping = false;
    close(conn.fd);
    conn.fd = -1;
}

/* "ADDR,LEN" into (addr, len); the rest after it in *rest. */
static bool addr_len(const char *s, uint64_t *addr, uint64_t *len, const char **rest)
{
    s = rsp_number(s, addr);
    if (!s || *s != ',' || !(s = rsp_number(s + 1, len)))
        return false;
    *rest = s;
    return *addr <= UINT32_MAX;
}

/* qRcmd (gdb's `monitor CMD`): the monitor prompt's command (hex), its output as the answer.
 * gdb holds the guest here: the prompt's stop and cont are gdb's to give. */
static void monitor_command(struct vcpu *v, const char *hex, char *out)
{
    char line[512], *text = NULL;
    size_t n = strlen(hex) / 2, len = 0;
    if (n >= sizeof line || !rsp_unhex(line, hex, n)) {
        strcpy(out, "E01");
        return;
    }
    line[n] = 0;
    if (!(text = prompt_run(v, line, true, &len))) {
        strcpy(out, "E0C");             /* ENOMEM */
        return;
    }
    if (len > RSP_MAX / 2 - 64)
        len = RSP_MAX / 2 - 64;         /* hex doubles it; the packet has room for this */
    if (len)
        rsp_hex(out, text, len);
    else
        strcpy(out, "OK");
    free(text);
}

/* One command (r->in); its answer into (out). Returns true when the guest is to run again. */
static bool command(struct vcpu *v, char *in, char *out)
{
    uint64_t addr, len;
    const char *rest;
    static uint8_t buf[RSP_MAX / 2];
    out[0] = 0;
    switch (in[0]) {
    case '?':
        sprintf(out, "S%02x", SIG_TRAP);
        return false;
    case 'g':
        read_registers(v, out);
        return false;
    case 'G':
        strcpy(out, write_registers(v, in + 1) ? "OK" : "E01");
        return false;
    case 'm':
        if (!addr_len(in + 1, &addr, &len, &rest) || len > sizeof buf)
            strcpy(out, "E01");
        else if (!access_memory(v, (uint32_t)addr, buf, (uint32_t)len, false))
            strcpy(out, "E14");             /* EFAULT, as gdbserver and QEMU answer */
        else
            rsp_hex(out, buf, len);
        return false;
    case 'M':
        if (!addr_len(in + 1, &addr, &len, &rest) || *rest != ':' || len > sizeof buf ||
            strlen(rest + 1) < 2 * len || !rsp_unhex(buf, rest + 1, len))
            strcpy(out, "E01");
        else
            strcpy(out, access_memory(v, (uint32_t)addr, buf, (uint32_t)len, true) ? "OK" : "E14");
        return false;
    case 'Z':
    case 'z':
        if (in[2] != ',' || !addr_len(in + 3, &addr, &len, &rest))
            return false;
        if (in[1] == '2' || in[1] == '4') {
            strcpy(out, watch(in[1], in[0] == 'Z', (uint32_t)addr, len));
            return false;
        }
        if (in[1] != '0')
            return false;                   /* Z1 and Z3: unsupported, gdb says it cannot */
        struct breakpoint *b = find_bp((uint32_t)addr);
        if (in[0] == 'Z' && !b) {
            if (nbps == MAX_BREAKPOINTS) {
                strcpy(out, "E28");         /* ENOSPC */
                return false;
            }
            b = &bps[nbps++];
            *b = (struct breakpoint){ .linear = (uint32_t)addr };
            place(v, b);
        } else if (in[0] == 'z' && b) {
            unplace(v, b);
            *b = bps[--nbps];
        }
        strcpy(out, "OK");
        return false;
    case 'c':
    case 's':
    case 'C':
    case 'S': {
        /* c [addr], C sig[;addr]: the signal is not the guest's to take, and is dropped */
        const char *a = in[0] == 'C' || in[0] == 'S' ? strchr(in, ';') : in + 1;
        if (a && *a == ';')
            a++;
        if (a && rsp_number(a, &addr))
            v->sh->eip = (uint32_t)addr;
        if (in[0] == 's' || in[0] == 'S') {
            stepping = true;
            guest_tf = v->sh->eflags & FL_TF;
            v->sh->eflags |= FL_TF;
        }
        return true;
    }
    case 'v':
        if (!strcmp(in, "vCont?")) {
            strcpy(out, "vCont;c;C;s;S");
        } else if (!strncmp(in, "vCont;", 6)) {
            char act[2] = { in[6], 0 };     /* the first action is for the only thread */
            if (act[0] == 'c' || act[0] == 'C' || act[0] == 's' || act[0] == 'S') {
                act[0] = (char)(act[0] | 0x20);
                return command(v, act, out);
            }
        }
        return false;
    case 'H':
    case 'T':
        strcpy(out, "OK");
        return false;
    case 'q':
        if (!strncmp(in, "qRcmd,", 6))
            monitor_command(v, in + 6, out);
        else if (!strncmp(in, "qSupported", 10))
            sprintf(out, "PacketSize=%x;qXfer:features:read+", RSP_MAX);
        else if (!strncmp(in, "qXfer:features:read:", 20))
            tdesc_read(in + 20, out, RSP_MAX / 2);
        else if (!strcmp(in, "qAttached"))
            strcpy(out, "1");
        else if (!strcmp(in, "qC"))
            strcpy(out, "QC1");
        else if (!strcmp(in, "qfThreadInfo"))
            strcpy(out, "m1");
        else if (!strcmp(in, "qsThreadInfo"))
            strcpy(out, "l");
        return false;
    case 'D':
        strcpy(out, "OK");
        return true;
    case 'k':
        fflush(stdout);
        console_restore();
        fprintf(stderr, "ring3: killed by gdb\n");
        remove_all(v);
        monitor_exit(v, 0);
    default:
        return false;                       /* unknown: the empty answer */
    }
}

/* The guest stopped; (reply) tells gdb why (after c or s), NULL when gdb is to ask with `?` (at
 * attach): answer gdb until it lets the guest run again, or goes away (then the guest runs on,
 * without breakpoints). The monitor's timer waits. */
static void stop(struct vcpu *v, const char *reply)
{
    static char out[2 * RSP_MAX + 8];
    sigset_t alarm, old;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    sigprocmask(SIG_BLOCK, &alarm, &old);
    events_clock_stop();
    bool ok = !reply || rsp_send(&conn, reply);
    while (ok && (ok = rsp_read_packet(&conn, false))) {
        bool run = command(v, (char *)conn.in, out);
        bool detach = run && conn.in[0] == 'D';
        if (run && !detach)
            break;                          /* the answer to c or s is the next stop */
        ok = rsp_send(&conn, out);
        if (detach) {
            disconnect(v);
            break;
        }
    }
    if (conn.fd >= 0 && !ok)
        disconnect(v);                      /* gone while the guest stood: it runs on */
    conn.interrupt = false;                 /* a Ctrl-C while stopped asks for nothing */
    gdb_paging_changed(v);                  /* what was added while stopped */
    events_clock_start();
    sigprocmask(SIG_SETMASK, &old, NULL);
}

void gdb_poll(struct vcpu *v)
{
    if (listen_fd < 0)
        return;
    if (conn.fd < 0) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        rsp_init(&conn, fd);
        stop(v, NULL);                      /* gdb finds the guest stopped when it attaches */
        return;
    }
    uint8_t b[256];
    ssize_t n = recv(conn.fd, b, sizeof b, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        disconnect(v);                      /* gone: the guest runs on */
        return;
    }
    for (ssize_t i = 0; i < n; i++)
        if (b[i] == 0x03)
            conn.interrupt = true;
    if (conn.interrupt) {
        conn.interrupt = false;
        stop(v, STOP_INT);
    }
}

bool gdb_breakpoint_hit(struct vcpu *v)
{
    uint32_t at = v->sreg[SREG_CS].base + v->sh->eip - 1;
    struct breakpoint *b = conn.fd >= 0 ? find_bp(at) : NULL;
    if (!b || !b->placed)
        return false;
    v->sh->eip--;
    stop(v, STOP_TRAP);
    return true;
}

bool gdb_step_done(struct vcpu *v)
{
    if (!stepping)
        return false;
    stepping = false;
    v->sh->eflags = (v->sh->eflags & ~FL_TF) | guest_tf;
    v->dr[6] &= ~DR6_BS;
    if (conn.fd >= 0)
        stop(v, STOP_TRAP);
    return true;
}

void gdb_watch_hit(struct vcpu *v, uint64_t tag)
{
    struct watchpoint *w = &wps[(tag - BP_GDB_TAG) % BP_SLOTS];
    char reply[40];
    if (conn.fd < 0 || !w->kind)
        return;                         /* removed since: the access is not reported */
    snprintf(reply, sizeof reply, "T%02x%s:%08x;", SIG_TRAP, w->kind == '2' ? "watch" : "awatch", w->addr);
    stop(v, reply);
}

void gdb_exited(int status)
{
    char reply[8];
    if (conn.fd < 0)
        return;
    snprintf(reply, sizeof reply, "W%02x", status & 0xFF);
    rsp_send(&conn, reply);
    /* gdb acknowledges the packet with `+` (this stub never offers QStartNoAckMode). Its write
     * to a socket this process has closed fails (EPIPE), and gdb then reports a lost target
     * instead of the exit: so wait for the `+`, or gdb's end, at most EXIT_ACK_MS. */
    uint64_t until = events_now() + EXIT_ACK_MS * 1000000ull;
    for (uint64_t t = events_now(); t < until; t = events_now()) {
        struct pollfd p = { conn.fd, POLLIN, 0 };
        if (poll(&p, 1, (int)((until - t) / 1000000 + 1)) <= 0)
            continue;                   /* EINTR, or the time is up */
        char buf[64];
        ssize_t k = read(conn.fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0 || memchr(buf, '+', (size_t)k))
            return;                     /* gdb's end, or its acknowledgement */
    }
}

bool gdb_holds_interrupts(void)
{
    return stepping;
}

/* The guest's breakpoint registers as host perf breakpoints (breakpoints.h).
 *
 * Guest user code runs on the host CPU at the addresses the guest gave it (flat segments,
 * linear address == host address below 4 GiB), so a host breakpoint at the linear address
 * in a guest DRn is hit by exactly the accesses the guest's DRn would catch. The host kernel
 * owns the real debug registers; perf_event_open(2) lends them to one task, and with
 * attr.sigtrap the hit comes back as a synchronous SIGTRAP (TRAP_PERF) after the access
 * (a data breakpoint is a trap) or before the instruction (an instruction breakpoint is a
 * fault), as the guest's #DB would (SDM vol. 3, 17.3.1.1, 17.3.1.2). */
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "breakpoints.h"

/* DR7's fields for slot n (SDM vol. 3, 17.2.4): L and G enable bits 2n and 2n+1, R/W at bit
 * 16 + 4n, LEN at bit 18 + 4n. */
#define DR7_ENABLED(dr7, n) (((dr7) >> (2 * (n))) & 3u)
#define DR7_RW(dr7, n)      (((dr7) >> (16 + 4 * (n))) & 3u)
#define DR7_LEN(dr7, n)     (((dr7) >> (18 + 4 * (n))) & 3u)
#define DR7_ENABLE_MASK     0xFFu

enum { RW_EXECUTE = 0, RW_WRITE = 1, RW_IO = 2, RW_READ_WRITE = 3 };

/* What slot (n) asks for: 1 << 40 | kind << 36 | length << 32 | address, or 0 for nothing.
 * LEN 00b, 01b, 11b and 10b are 1, 2, 4 and 8 bytes, and the address bits below the length
 * are ignored; an instruction breakpoint is one byte (17.2.5). */
static uint64_t slot_want(const uint32_t dr[8], unsigned n)
{
    static const unsigned len_bytes[4] = {1, 2, 8, 4};
    uint32_t dr7 = dr[7];
    unsigned rw = DR7_RW(dr7, n);
    if (!DR7_ENABLED(dr7, n) || rw == RW_IO)
        return 0;
    unsigned len = rw == RW_EXECUTE ? 1 : len_bytes[DR7_LEN(dr7, n)];
    uint32_t addr = dr[n] & ~(uint32_t)(len - 1);
    return 1ull << 40 | (uint64_t)rw << 36 | (uint64_t)len << 32 | addr;
}

static int open_breakpoint(int tid, uint64_t tag, uint64_t want)
{
    unsigned rw = (unsigned)(want >> 36) & 3u, len = (unsigned)(want >> 32) & 0xFu;
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_BREAKPOINT;
    a.size = sizeof a;
    a.bp_addr = (uint32_t)want;
    if (rw == RW_EXECUTE) {
        a.bp_type = HW_BREAKPOINT_X;
        a.bp_len = sizeof(long);        /* the host's rule for an instruction breakpoint */
    } else {
        a.bp_type = rw == RW_WRITE ? HW_BREAKPOINT_W : HW_BREAKPOINT_R | HW_BREAKPOINT_W;
        a.bp_len = len;
    }
    a.sample_period = 1;
    a.sigtrap = 1;
    a.remove_on_exec = 1;               /* required with sigtrap */
    a.sig_data = tag;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int bp_open_data(uint32_t addr, unsigned len, bool reads, uint64_t tag)
{
    uint64_t rw = reads ? RW_READ_WRITE : RW_WRITE;
    return open_breakpoint(0, tag, 1ull << 40 | rw << 36 | (uint64_t)len << 32 | addr);
}

static void close_slot(struct bp_task *t, unsigned n)
{
    if (t->want[n] && t->fd[n] >= 0)
        close(t->fd[n]);
    t->fd[n] = -1;
    t->want[n] = 0;
}

void bp_sync(struct bp_task *t, int tid, const uint32_t dr[8])
{
    static bool warned;
    bool any = (dr[7] & DR7_ENABLE_MASK) != 0;
    for (unsigned n = 0; n < BP_SLOTS && !any; n++)
        any = t->want[n] != 0;
    if (!any)
        return;
    for (unsigned n = 0; n < BP_SLOTS; n++) {
        uint64_t want = slot_want(dr, n);
        if (want == t->want[n])
            continue;
        close_slot(t, n);
        if (!want)
            continue;
        t->want[n] = want;
        t->fd[n] = open_breakpoint(tid, n, want);
        if (t->fd[n] < 0 && !warned) {
            warned = true;
            fprintf(stderr, "ring3: the guest's hardware breakpoints have no effect: the host "
                    "refuses perf breakpoints (perf_event_open: %s)\n", strerror(errno));
        }
    }
}

void bp_task_close(struct bp_task *t)
{
    for (unsigned n = 0; n < BP_SLOTS; n++)
        close_slot(t, n);
}

/* The guest MMU: 32-bit and PAE paging, host mappings as the TLB.
 *
 * A guest linear page is mapped into the host (at the same address, from the
 * guest-memory memfd) only after a host fault on it, once the guest's page
 * tables allow the access (SDM vol. 3, 4.3 and 4.6). Pages are mapped
 * read-only until their first write, so the dirty bit can be set exactly
 * when the CPU would set it (SDM vol. 3, 4.8), and executable only where no
 * execute-disable bit forbids it (4.6.2). invlpg drops a mapping (closes it
 * where it is: close_page); a CR3 write drops those the new page tables
 * would not fill the same way, so that switching between processes that
 * share pages (text, libraries after fork) refaults only what differs. Bitmaps remember what is mapped, and
 * how: from global pages, writable, granting more than user mode may have.
 *
 * Those privileged mappings stay in place when the guest goes out to CPL 3,
 * as long as all of them lie above the user code's data segments: DS and ES
 * then run on a host segment whose limit stops below the lowest of them
 * (segment.c), so a user access there raises #GP instead of reaching them
 * (SDM vol. 3, 5.3). That #GP takes the slow way once: the privileged
 * mappings are dropped, the segments made flat again and the access
 * retried, so that it faults or succeeds exactly as paging says. Until the
 * next CR3 write, user mode then runs that way. A guest whose kernel sits
 * below its processes (the test guests) therefore works too, only slower.
 *
 * With --isolation=process guest user code runs in stub processes instead
 * (monitor/mmu/aspace.c), each with a TLB of its own (struct tlb): the monitor's
 * own one then holds only what the kernel touched, and a fill at CPL 3 goes
 * to the stub of the current address space, queued until it runs again.
 *
 * The host lets a process have only so many mappings (vm.max_map_count), and
 * a page on a frame of its own is one. A TLB that would need more is emptied,
 * as a CPU may drop any TLB entry at any time (SDM vol. 3, 4.10.2.2): ring3's
 * own when the host refuses it a mapping (evict_own), a stub's before it
 * holds more pages than the host would give it mappings (fill).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mmu.h"

#include "ring3/abi.h"

#include "lib/fail.h"
#include "lib/sysctl.h"
#include "memory/guestmem.h"
#include "monitor/cpu/ldt.h"
#include "monitor/cpu/segment.h"
#include "monitor/cpu/vcpu.h"
#include "monitor/gdb/gdbstub.h"
#include "monitor/host/console.h"
#include "monitor/host/events.h"
#include "monitor/host/run.h"
#include "monitor/host/stats.h"

#include "aspace.h"
#include "paging.h"

#define NPAGES (1u << 20)

/* One host address space used as a TLB: the monitor's own (as NULL), or a stub's. */
struct tlb {
    uint64_t mapped[NPAGES / 64], global[NPAGES / 64], privileged[NPAGES / 64];
    uint64_t writable[NPAGES / 64];         /* mapped with PROT_WRITE */
    uint64_t noexec[NPAGES / 64];           /* mapped without PROT_EXEC */
    uint64_t closed[NPAGES / 64];           /* ring3's own only: dropped, left on frame[] (close_page) */
    uint64_t in_use[NPAGES / 64 / 64];      /* bit w: mapped[w] or closed[w] may be nonzero (sweeps skip the rest) */
    uint32_t frame[NPAGES];                 /* the physical page each mapped page shows */
    uint64_t large[1024 / 64];              /* bit r: a large page in 4 MiB region r was filled whole */
    /* At or below the lowest page mapped privileged (a bound, not exact: pages
     * dropped one by one leave it as it is); NO_PRIVILEGED when none is. */
    uint32_t lowest_privileged;
    uint32_t closed_pages;                  /* bits set in closed[] */
    uint32_t pages;                         /* bits set in mapped[] */
    struct aspace *as;                      /* the stub's address space; NULL: the monitor's */
};
#define NO_PRIVILEGED 0xFFFFFFFFu

static struct tlb own;                      /* the monitor process's low 4 GiB */
static uint32_t stub_pages_max;             /* a stub's TLB holds at most this many pages (mmu_init) */
const uint32_t *const mmu_own_lowest_privileged = &own.lowest_privileged;
const uint64_t *const mmu_own_mapped = own.mapped, *const mmu_own_privileged = own.privileged;

static bool bit(const uint64_t *map, uint32_t page) { return map[page / 64] >> (page % 64) & 1; }
static void set_bit(uint64_t *map, uint32_t page, bool on)
{
    if (on)
        map[page / 64] |= 1ull << (page % 64);
    else
        map[page / 64] &= ~(1ull << (page % 64));
}

/* Put (page) on guest frame (phys) with (prot) in (t)'s host address space.
 * In ring3's own, a page mapped or closed on that frame already only changes
 * its protection. */
static int tlb_install(struct vcpu *v, struct tlb *t, uint64_t phys, uint32_t page, int prot)
{
    uint32_t n = page >> 12;
    if (t->as)
        return aspace_map(t->as, page, phys, prot) ? 0 : -ENOSPC;
    if (bit(t->closed, n) && t->frame[n] == phys >> 12) {
        stats_reopened();
        return guestmem_protect(v->gm, page, 0x1000, prot);
    }
    return guestmem_map(v->gm, phys, page, 0x1000, prot);
}

/* Each closed page may keep a host mapping (a VMA) of its own, and the host
 * allows a process 65530 by default (vm.max_map_count); past this many
 * closed pages, all go back to the reservation. */
#define CLOSED_MAX 4096

/* The bits of [first, end) that fall in bitmap word (w). */
static uint64_t word_mask(unsigned w, uint32_t first, uint32_t end)
{
    uint32_t base = w * 64;
    if (end <= base || first >= base + 64)
        return 0;
    uint32_t lo = first > base ? first - base : 0, hi = end - base < 64 ? end - base : 64;
    return hi - lo == 64 ? ~0ull : ((1ull << (hi - lo)) - 1) << lo;
}

/* Forgets that the pages of [first, end) are closed: they are the reservation again. Only the
 * words in_use names are looked at. */
static void open_range(struct tlb *t, uint32_t first, uint32_t end)
{
    for (uint32_t u = first / 4096; u <= (end - 1) / 4096 && t->closed_pages; u++) {
        for (uint64_t words = t->in_use[u]; words; words &= words - 1) {
            unsigned w = u * 64 + (unsigned)__builtin_ctzll(words);
            uint64_t gone = t->closed[w] & word_mask(w, first, end);
            t->closed_pages -= (uint32_t)__builtin_popcountll(gone);
            t->closed[w] &= ~gone;
        }
    }
}

/* Empties ring3's own TLB: the reservation goes back over all of [low_base, R3_RUNTIME_BASE).
 * The host refused a mapping call (ENOMEM: a process's count of mappings is at
 * vm.max_map_count; a page on a frame of its own is one, and it splits the reservation around
 * it in two). The range begins and ends at the edges of mappings (the reservation's start, the
 * runtime area), so giving it back splits none, and leaves one mapping where there were many;
 * ring3 has no thread but the monitor's that maps memory (guestmem_unmap_all). */
static void evict_own(struct vcpu *v)
{
    uint64_t first = v->gm->low_base;
    int r = guestmem_unmap_all(v->gm, first, R3_RUNTIME_BASE - first);
    if (r) {
        fprintf(stderr, "ring3: cannot give guest linear memory back to the reservation: error %d\n", -r);
        monitor_exit(v, EXIT_HOST);
    }
    stats_evicted(own.pages + own.closed_pages);
    TRACE(v, "host mapping refused: all %u pages of ring3's own TLB dropped", own.pages + own.closed_pages);
    mmu_tlb_forget(&own);
}

/* Pages [first, end) of ring3's own back to the reservation, closed pages among them; all of
 * them when the host refuses (a split at the run's ends needs a mapping more). */
static void give_back(struct vcpu *v, uint32_t first, uint32_t end)
{
    if (guestmem_unmap(v->gm, (uint64_t)first << 12, (uint64_t)(end - first) << 12))
        evict_own(v);
    else
        open_range(&own, first, end);
}

/* Drop pages [first, end) (page numbers) from (t)'s host address space: in
 * ring3's own, back to the reservation, closed pages among them too. */
static void tlb_remove(struct vcpu *v, struct tlb *t, uint32_t first, uint32_t end)
{
    if (t->as)
        aspace_unmap(t->as, first, end);
    else
        give_back(v, first, end);
}

/* Whether a page of [first, end) is mapped in (t). */
static bool mapped_in(const struct tlb *t, uint32_t first, uint32_t end)
{
    for (unsigned w = first / 64; w * 64 < end; w++)
        if (t->mapped[w] & word_mask(w, first, end))
            return true;
    return false;
}

/* Gives every closed page back to the reservation, in runs that may span
 * reserved pages; a mapped page ends a run (no page is both). */
static void release_closed(struct vcpu *v, struct tlb *t)
{
    uint32_t first = 0, end = 0;    /* the run: pages [first, end), none when end == 0 */

    for (unsigned u = 0; u < NPAGES / 64 / 64; u++) {
        for (uint64_t words = t->in_use[u]; words; words &= words - 1) {
            unsigned w = u * 64 + (unsigned)__builtin_ctzll(words);
            for (uint64_t todo = t->closed[w]; todo; todo &= todo - 1) {
                uint32_t n = w * 64 + (uint32_t)__builtin_ctzll(todo);
                if (end && mapped_in(t, end, n)) {
                    give_back(v, first, end);
                    end = 0;
                }
                if (!end)
                    first = n;
                end = n + 1;
            }
            t->closed[w] = 0;
            if (!t->mapped[w])
                t->in_use[u] &= ~(1ull << (w % 64));
        }
    }
    if (end)
        give_back(v, first, end);
    stats_released(t->closed_pages);
    t->closed_pages = 0;
}

/* The TLB a fill at the current CPL goes to. */
static struct tlb *current_tlb(struct vcpu *v)
{
    if (v->cpl == 3 && v->isolation == ISOLATION_PROCESS)
        return aspace_tlb(aspace_current(v));
    return &own;
}

/* Records (page) as mapped in (t) on frame (phys) with (prot), by a fill at (cpl). */
static void record(struct vcpu *v, struct tlb *t, uint32_t page, uint64_t phys, int prot, bool glob,
                   bool priv)
{
    uint32_t n = page >> 12;
    if (bit(t->closed, n)) {
        set_bit(t->closed, n, false);
        t->closed_pages--;
    }
    t->pages += !bit(t->mapped, n);
    set_bit(t->mapped, n, true);
    set_bit(t->in_use, n >> 6, true);
    set_bit(t->writable, n, prot & PROT_WRITE);
    set_bit(t->noexec, n, !(prot & PROT_EXEC));
    t->frame[n] = (uint32_t)(phys >> 12);
    set_bit(t->global, n, glob);
    set_bit(t->privileged, n, priv);
    if (priv && page < t->lowest_privileged)
        t->lowest_privileged = page;
    TRACE(v, "map %08x -> %09llx %s%s%s", page, (unsigned long long)phys, prot & PROT_WRITE ? "rw" : "ro",
          prot & PROT_EXEC ? "" : " nx", t->as ? " (stub)" : "");
}

/* The host protection of a page the tables give (rw) and (nx): PROT_WRITE
 * only once dirty, so the first write comes back to set D; PROT_EXEC unless
 * execute-disable forbids fetches (SDM vol. 3, 4.6.2). */
static int page_prot(bool rw, bool nx)
{
    return PROT_READ | (nx ? 0 : PROT_EXEC) | (rw ? PROT_WRITE : 0);
}

/* The host protection a fill gives a page: at CPL 0 with CR0.WP clear,
 * writable whatever R/W says (SDM vol. 3, 4.6.1). */
static int fill_prot(struct vcpu *v, const struct walk *w, bool *wp_override)
{
    bool rw = (w->pde & PG_RW) && (w->pte & PG_RW);
    *wp_override = v->cpl == 0 && !(v->cr0 & CR0_WP) && !rw;
    if (*wp_override)
        rw = true;
    return page_prot(rw && (w->pte & PG_D), w->nx);
}

/* Maps (pages) pages from (page) on frames from (phys) on, and records them
 * (glob, priv: as record): in a stub one queued map each, which go in its next
 * hand-off; in ring3's own process one host mapping. False when they could not
 * be mapped. */
static bool map_run(struct vcpu *v, struct tlb *t, uint32_t page, uint64_t phys, uint32_t pages, int prot,
                    bool glob, bool priv)
{
    if (!t->as && guestmem_map(v->gm, phys, page, (uint64_t)pages << 12, prot))
        return false;
    for (uint32_t i = 0; i < pages; i++) {
        uint32_t at = page + (i << 12);
        if (t->as && tlb_install(v, t, phys + ((uint64_t)i << 12), at, prot))
            return false;
        record(v, t, at, phys + ((uint64_t)i << 12), prot, glob, priv);
    }
    return true;
}

/* Fault-around for a page user mode may read: the other pages of the aligned
 * group of FAULT_AROUND around (linear) that the guest's tables let user mode
 * read, mapped read-only unless already dirty. A fill costs a hand-off in a
 * stub and a host signal in ring3's own process, and the guest kernel fills
 * the entries of a whole folio at one fault (up to 128 KiB of fresh anonymous
 * memory, guest/linux/ring3.config), and of 128 KiB of the page cache
 * (guest/linux/patches/0003), so the group goes at once: in a stub in one
 * hand-off, here in one host mapping per run of consecutive frames. Their
 * accessed flags are set, as a processor that loads translations ahead of use
 * (SDM vol. 3, 4.10.2.3) and sets accessed flags speculatively (4.8) may. */
#define FAULT_AROUND 32
static void fault_around(struct vcpu *v, struct tlb *t, uint32_t linear)
{
    uint32_t first = (linear >> 12) & ~(uint32_t)(FAULT_AROUND - 1), run = 0;
    uint64_t run_phys = 0;
    int run_prot = 0;
    for (uint32_t n = first; n <= first + FAULT_AROUND; n++) {
        struct walk w;
        bool wp;
        uint32_t page = n << 12;
        bool want = n < first + FAULT_AROUND && !bit(t->mapped, n) && page != (linear & ~0xFFFu) &&
                    page < R3_RUNTIME_BASE && page >= v->gm->low_base &&
                    !paging_walk(v, page, MMU_READ, true, true, &w) &&
                    guestmem_ok(v->gm, w.phys & ~0xFFFull, 0x1000);
        uint64_t phys = want ? w.phys & ~0xFFFull : 0;
        int prot = want ? fill_prot(v, &w, &wp) : 0;
        if (want && run && phys == run_phys + ((uint64_t)run << 12) && prot == run_prot) {
            run++;
            continue;
        }
        /* Here a lone page costs a host mapping of its own, much as the fill it may save. */
        if ((run > 1 || (run && t->as)) && !map_run(v, t, (n - run) << 12, run_phys, run, run_prot, false, false))
            return;
        run = want;
        run_phys = phys;
        run_prot = prot;
    }
}

/* A kernel fill inside a large page maps the rest of it in the same step:
 * one translation covers the whole page on hardware (SDM vol. 3, 4.10.2.3:
 * "a TLB entry for a 4-MByte page", or a 2-MByte one under PAE), so its other
 * 4 KiB pieces share its rights and its A and D flags, which the walk just
 * set. Without this, a kernel that touches fresh memory in its direct map
 * (the page cache during a disk read) takes one host fault per 4 KiB. Pieces
 * already mapped as wanted are left; runs of the others go in one mapping
 * each. */
static void fill_large(struct vcpu *v, struct tlb *t, uint32_t linear, const struct walk *w,
                       int prot, bool glob, bool priv)
{
    uint32_t pages = paging_pae(v) ? 512 : 1024, size = pages << 12;
    uint32_t first = (linear & ~(size - 1)) >> 12;
    uint64_t phys0 = w->phys & ~(uint64_t)(size - 1);
    uint32_t run = 0;
    set_bit(t->large, first >> 10, true);
    for (uint32_t i = 0; i <= pages; i++) {
        uint32_t n = first + i, page = n << 12;
        uint64_t phys = phys0 + ((uint64_t)i << 12);
        bool want = i < pages && page < R3_RUNTIME_BASE && page >= v->gm->low_base &&
                    guestmem_ok(v->gm, phys, 0x1000) &&
                    !(bit(t->mapped, n) && t->frame[n] == phys >> 12 &&
                      (bit(t->writable, n) || !(prot & PROT_WRITE)) &&
                      bit(t->noexec, n) == !(prot & PROT_EXEC));
        if (want) {
            run++;
            continue;
        }
        if (run) {
            uint32_t start = n - run;
            if (!map_run(v, t, start << 12, phys0 + ((uint64_t)(start - first) << 12), run, prot, glob, priv))
                return;
            run = 0;
        }
    }
}

/* mmu_fill; when (quiet), a page that cannot be mapped is only not mapped. */
static bool fill(struct vcpu *v, uint32_t linear, enum mmu_access access, bool quiet)
{
    struct walk w;
    uint32_t page = linear & ~0xFFFu;
    if (paging_walk(v, linear, access, v->cpl == 3, true, &w))
        return false;
    uint64_t phys = w.phys & ~0xFFFull;
    bool mappable = page < R3_RUNTIME_BASE && page >= v->gm->low_base &&
                    guestmem_ok(v->gm, phys, 0x1000);
    if (!mappable && quiet)
        return false;
    if (!mappable) {
        fflush(stdout);
        console_restore();
        fprintf(stderr, "ring3: guest access to linear %08x (physical %09llx) cannot be mapped: %s\n",
                linear, (unsigned long long)w.phys,
                page >= R3_RUNTIME_BASE ? "it is ring3's runtime area (reserve it with reservetop=)"
                : page < v->gm->low_base ? "the host keeps the first 64 KiB unmapped"
                : "no guest memory there (use a larger -m?)");
        vcpu_dump(v, stderr);
        monitor_exit(v, EXIT_INTERNAL);
    }
    bool us = (w.pde & PG_US) && (w.pte & PG_US), wp_override;
    int prot = fill_prot(v, &w, &wp_override);
    struct tlb *t = current_tlb(v);
    if (t->as && t->pages >= stub_pages_max) {
        stats_evicted(t->pages);
        TRACE(v, "stub TLB full: all %u pages dropped", t->pages);
        tlb_remove(v, t, (uint32_t)(v->gm->low_base >> 12), R3_RUNTIME_BASE >> 12);
        mmu_tlb_forget(t);
    }
    int r = tlb_install(v, t, phys, page, prot);
    if (r == -ENOMEM && !t->as) {
        evict_own(v);
        r = tlb_install(v, t, phys, page, prot);
    }
    if (r) {
        fprintf(stderr, "ring3: cannot map guest page %08x: error %d\n", page, -r);
        monitor_exit(v, EXIT_HOST);
    }
    bool glob = (v->cr4 & CR4_PGE) && (w.pte & PG_G), priv = v->cpl == 0 && (!us || wp_override);
    record(v, t, page, phys, prot, glob, priv);
    if (w.large && v->cpl == 0 && !t->as)
        fill_large(v, t, linear, &w, prot, glob, priv);
    else if (us)
        fault_around(v, t, linear);
    gdb_pages_mapped(v);                /* a breakpoint in a page a process maps only now */
    return true;
}

bool mmu_fill(struct vcpu *v, uint32_t linear, enum mmu_access access)
{
    return fill(v, linear, access, false);
}

void mmu_prefill(struct vcpu *v, uint32_t linear)
{
    if (!bit(current_tlb(v)->mapped, linear >> 12))
        fill(v, linear, MMU_READ, true);
}

static void forget_page(struct tlb *t, uint32_t page)
{
    t->pages -= bit(t->mapped, page);
    set_bit(t->mapped, page, false);
    set_bit(t->global, page, false);
    set_bit(t->privileged, page, false);
    set_bit(t->writable, page, false);
    set_bit(t->noexec, page, false);
}

/* Drops (page), mapped in ring3's own, by closing it: it stays on its frame
 * with PROT_NONE, so that any access faults as it would on the reservation.
 * invlpg mostly drops one page that is filled again soon: a kmap slot of the
 * guest kernel, on another frame, or a process's page after an mprotect, on
 * the same one. On this host a one-page mmap over the reservation cost
 * 3.5 us, the reservation's mmap back over the page 2.4-3.2 us, an mprotect
 * 0.8-1.2 us and an mmap over a closed page 2.3-2.8 us (the host splits,
 * allocates and merges fewer mappings); a fill on the frame the page was
 * closed on needs only the mprotect. Runs of pages (unmap_where) go back to
 * the reservation as before: closing them too made each CR3 write of
 * fork+execve in --isolation=none cost 55 us against 23. */
static void close_page(struct vcpu *v, uint32_t page)
{
    if (guestmem_protect(v->gm, (uint64_t)page << 12, 0x1000, PROT_NONE)) {
        evict_own(v);                   /* refused: it splits a run's mapping */
        return;
    }
    forget_page(&own, page);
    set_bit(own.closed, page, true);
    if (++own.closed_pages > CLOSED_MAX)
        release_closed(v, &own);
}

void mmu_flush_page(struct vcpu *v, uint32_t linear)
{
    uint32_t page = linear >> 12;
    v->walk_epoch++;                    /* every entry: one may be a 4 KiB piece of a large page */
    /* invlpg drops the translation of the page holding (linear), all 4 MiB
     * of it when that page is large (SDM vol. 3, INVLPG and 4.10.4.1). */
    if (bit(own.large, linear >> 22)) {
        uint32_t first = linear >> 22 << 10;
        set_bit(own.large, linear >> 22, false);
        tlb_remove(v, &own, first, first + 1024);
        for (uint32_t n = first; n < first + 1024; n++)
            if (bit(own.mapped, n))
                forget_page(&own, n);
    } else if (bit(own.mapped, page)) {
        close_page(v, page);
    }
    struct tlb *t = v->as ? aspace_tlb(v->as) : NULL;
    if (t && bit(t->mapped, page)) {
        aspace_hold(v);                 /* the guest kernel may free the page next */
        tlb_remove(v, t, page, page + 1);
        forget_page(t, page);
    }
}

enum drop { DROP_ALL, DROP_NOT_GLOBAL, DROP_PRIVILEGED, DROP_STALE };

/* What a CR3 write does with a page mapped, not global (stale_check). */
enum stale { STALE_DROP, STALE_KEEP, STALE_MOVE };

/* Whether the host mapping of (page) can stay after a CR3 write: it is
 * exactly what a fill would make under the page tables now in force (the
 * same physical page, the access it was mapped for still allowed, its
 * accessed flag, and dirty flag if mapped writable, already set, so that no
 * flag the CPU would set goes unset): STALE_KEEP. Then a TLB that dropped it
 * and refilled it could not be told from one that kept it. A page the new
 * tables map elsewhere, already accessed, is STALE_MOVE: it goes on (*phys)
 * with (*prot), the rights a fill would give, at once (move_run), one system
 * call instead of an unmap, a host fault and a map when the process touches
 * it again. */
static enum stale stale_check(struct vcpu *v, struct tlb *t, uint32_t page, uint64_t *phys, int *prot)
{
    struct walk w;
    uint32_t linear = page << 12;
    bool wr = bit(t->writable, page), nx = bit(t->noexec, page), user = !bit(t->privileged, page);

    if (paging_walk(v, linear, MMU_READ, user, false, &w) || !(w.pde & PG_A) || !(w.pte & PG_A))
        return STALE_DROP;
    bool rw = (w.pde & PG_RW) && (w.pte & PG_RW) && (w.pte & PG_D);
    enum stale what = STALE_KEEP;
    if (w.phys >> 12 != t->frame[page] || wr != rw || nx != w.nx) {
        if (!user && !rw && !(v->cr0 & CR0_WP))
            return STALE_DROP;  /* a CR0.WP = 0 override: let a fault decide */
        *phys = w.phys & ~0xFFFull;
        *prot = page_prot(rw, w.nx);
        if (!guestmem_ok(v->gm, *phys, 0x1000))
            return STALE_DROP;
        what = STALE_MOVE;
    }
    set_bit(t->global, page, (v->cr4 & CR4_PGE) && (w.pte & PG_G));
    return what;
}

/* Pages of one bitmap word that a CR3 write moves (STALE_MOVE): consecutive
 * pages on consecutive frames with one protection, alike in their global and
 * privileged bits, which map_run maps with one host mapping call where one
 * for each page cost 2.8 us. In GNU patch's ./configure under
 * --isolation=none, 1.9 million pages moved, 1.2 million of them the page
 * after the one before on the frame after its frame. */
struct moved {
    uint32_t first, pages;
    uint64_t phys, bits;                    /* bits: the run's pages in the word */
    int prot;
};

/* Maps the run (m) where it goes (map_run, which records it again as it was
 * but for frame and rights); false when the host refused (the caller then
 * drops its pages). */
static bool move_run(struct vcpu *v, struct tlb *t, const struct moved *m)
{
    return map_run(v, t, m->first << 12, m->phys, m->pages, m->prot, bit(t->global, m->first),
                   bit(t->privileged, m->first));
}

/* The pages of word (word) of (t)'s bitmaps that a CR3 write drops: every
 * mapped page not global whose mapping is not current, or made so
 * (stale_check); none of the others. */
static uint64_t drop_stale(struct vcpu *v, struct tlb *t, unsigned word)
{
    uint64_t drop = t->mapped[word] & ~t->global[word];
    struct moved run = {0};

    for (uint64_t todo = drop; todo; todo &= todo - 1) {
        unsigned b = (unsigned)__builtin_ctzll(todo);
        uint32_t page = word * 64 + b;
        uint64_t phys = 0;
        int prot = 0;
        switch (stale_check(v, t, page, &phys, &prot)) {
        case STALE_DROP:
            break;
        case STALE_KEEP:
            drop &= ~(1ull << b);
            break;
        case STALE_MOVE:
            if (!run.pages || page != run.first + run.pages ||
                phys != run.phys + ((uint64_t)run.pages << 12) || prot != run.prot ||
                bit(t->global, page) != bit(t->global, run.first) ||
                bit(t->privileged, page) != bit(t->privileged, run.first)) {
                if (run.pages && move_run(v, t, &run))
                    drop &= ~run.bits;
                run = (struct moved){ .first = page, .phys = phys, .prot = prot };
            }
            run.pages++;
            run.bits |= 1ull << b;
            break;
        }
    }
    if (run.pages && move_run(v, t, &run))
        drop &= ~run.bits;
    return drop;
}

static uint64_t drop_mask(struct vcpu *v, struct tlb *t, unsigned word, enum drop what)
{
    switch (what) {
    case DROP_ALL: return t->mapped[word];
    case DROP_NOT_GLOBAL: return t->mapped[word] & ~t->global[word];
    case DROP_PRIVILEGED: return t->mapped[word] & t->privileged[word];
    default: return drop_stale(v, t, word);
    }
}

/* Drops the selected pages of word (w) of the bitmaps; (first, end) is the
 * run being gathered, unmapped when a page that stays ends it. */
static void drop_in_word(struct vcpu *v, struct tlb *t, unsigned w, enum drop what, uint32_t *first,
                         uint32_t *end)
{
    uint64_t drop = drop_mask(v, t, w, what), keep = t->mapped[w] & ~drop;

    /* Forgotten first: a removal below may empty the whole TLB (evict_own). */
    t->pages -= (uint32_t)__builtin_popcountll(drop);
    t->mapped[w] &= ~drop;
    t->global[w] &= ~drop;
    t->privileged[w] &= ~drop;
    t->writable[w] &= ~drop;
    t->noexec[w] &= ~drop;
    for (uint64_t todo = drop; todo; todo &= todo - 1) {
        unsigned d = (unsigned)__builtin_ctzll(todo);
        uint64_t kept_before = keep & ((1ull << d) - 1);
        if (kept_before && *end) {
            tlb_remove(v, t, *first, *end);
            *end = 0;
        }
        keep &= ~kept_before;
        if (!*end)
            *first = w * 64 + d;
        *end = w * 64 + d + 1;
    }
    if (keep && *end) {
        tlb_remove(v, t, *first, *end);
        *end = 0;
    }
}

/* Unmaps every mapped page of (t) that (what) selects. A run may span pages
 * that are not mapped (they are the reservation already), so that all of a
 * process's pages usually go in one system call; a page that stays ends it.
 * Only the bitmap words in_use names are looked at. */
static void unmap_where(struct vcpu *v, struct tlb *t, enum drop what)
{
    uint32_t first = 0, end = 0;    /* the run: pages [first, end), none when end == 0 */

    for (unsigned u = 0; u < NPAGES / 64 / 64; u++) {
        for (uint64_t words = t->in_use[u]; words; words &= words - 1) {
            unsigned w = u * 64 + (unsigned)__builtin_ctzll(words);
            if (t->mapped[w])
                drop_in_word(v, t, w, what, &first, &end);
            if (!t->mapped[w] && !t->closed[w])
                t->in_use[u] &= ~(1ull << (w % 64));
        }
    }
    if (end)
        tlb_remove(v, t, first, end);
    if (what == DROP_ALL || what == DROP_PRIVILEGED)
        t->lowest_privileged = NO_PRIVILEGED;
}

void mmu_flush(struct vcpu *v, bool keep_global)
{
    aspace_hold(v);                     /* the guest kernel may free the pages next */
    unmap_where(v, &own, keep_global ? DROP_NOT_GLOBAL : DROP_ALL);
    v->user_unlimited = false;
    v->tlb_epoch++;
    v->walk_epoch++;
    TRACE(v, "flush%s", keep_global ? " (global pages kept)" : "");
}

void mmu_new_cr3(struct vcpu *v)
{
    aspace_hold(v);                     /* the pages it maps may be freed next, or while it is away */
    unmap_where(v, &own, DROP_STALE);
    v->user_unlimited = false;
    v->tlb_epoch++;
    v->walk_epoch++;
    v->as = NULL;
    TRACE(v, "cr3 %08x: stale mappings dropped", v->cr3);
}

void mmu_set_cpl(struct vcpu *v, unsigned cpl)
{
    if (cpl > v->cpl) {
        v->user_limit = 0;
        /* In-process user code must not reach what only the kernel may: limit
         * its segments below those pages, or drop them; and below ring3's
         * runtime area always, which stays mapped. A stub has neither. */
        if (v->isolation == ISOLATION_NONE) {
            ldt_leaving_kernel(v);      /* before ring3's own entry for user data below */
            uint32_t top = R3_RUNTIME_BASE;
            if (own.lowest_privileged < top && v->user_unlimited)
                unmap_where(v, &own, DROP_PRIVILEGED);
            else if (own.lowest_privileged < top)
                top = own.lowest_privileged;
            if (seg_set_user_limit(v, top))
                v->user_limit = top;
            else
                unmap_where(v, &own, DROP_PRIVILEGED);
        }
        seg_sync_tls(v);
    } else if (cpl < v->cpl) {
        v->user_limit = 0;
    }
    if (cpl == 3 && !v->first_user_ns)
        v->first_user_ns = events_now();
    v->cpl = cpl;
    seg_user_data(v);
}

bool mmu_user_unlimit(struct vcpu *v)
{
    if (v->cpl != 3 || !v->user_limit || v->user_limit >= R3_RUNTIME_BASE)
        return false;           /* none, or past the runtime area's start: the process's own #GP */
    TRACE(v, "user access beyond the limit %08x: supervisor pages dropped", v->user_limit);
    unmap_where(v, &own, DROP_PRIVILEGED);
    v->user_unlimited = true;
    v->user_limit = seg_set_user_limit(v, R3_RUNTIME_BASE) ? R3_RUNTIME_BASE : 0;
    seg_user_data(v);
    return true;
}

struct tlb *mmu_tlb_new(struct aspace *as)
{
    struct tlb *t = calloc(1, sizeof *t);
    if (t) {
        t->as = as;
        t->lowest_privileged = NO_PRIVILEGED;
    }
    return t;
}

void mmu_tlb_validate(struct vcpu *v, struct tlb *t)
{
    unmap_where(v, t, DROP_STALE);
}

/* Empties (t) as if new. Only the bitmap words in_use names can be nonzero (a page's bits are
 * set with its mapped bit and cleared with it), and frame[] is read only where mapped is set:
 * so those words are cleared and the 4 MiB of frame numbers are left untouched, neither written
 * nor, in a slot that never mapped much, brought into memory. */
void mmu_tlb_forget(struct tlb *t)
{
    for (unsigned u = 0; u < NPAGES / 64 / 64; u++) {
        for (uint64_t words = t->in_use[u]; words; words &= words - 1) {
            unsigned w = u * 64 + (unsigned)__builtin_ctzll(words);
            t->mapped[w] = t->global[w] = t->privileged[w] = 0;
            t->writable[w] = t->noexec[w] = t->closed[w] = 0;
        }
        t->in_use[u] = 0;
    }
    memset(t->large, 0, sizeof t->large);
    t->lowest_privileged = NO_PRIVILEGED;
    t->closed_pages = t->pages = 0;
}

/* A stub's pages are one host mapping each at most, and it has a few of its own; so below
 * vm.max_map_count by this many, its mapping calls are never refused for their count. */
#define STUB_OWN_MAPS 1024

void mmu_init(struct vcpu *v)
{
    v->walk_epoch = 1;                  /* above every zeroed entry's */
    mmu_tlb_forget(&own);
    unsigned long long max = sysctl_number("vm/max_map_count", 65530);    /* the host's default */
    if (max > NPAGES)
        max = NPAGES;
    stub_pages_max = (uint32_t)(max > 2 * STUB_OWN_MAPS ? max - STUB_OWN_MAPS : max / 2);
}

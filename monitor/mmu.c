/* The guest MMU: 2-level IA-32 paging with 4 MiB pages, host mappings as the TLB.
 *
 * A guest linear page is mapped into the host (at the same address, from the
 * guest-memory memfd) only after a host fault on it, once the guest's page
 * tables allow the access (SDM vol. 3, 4.3 and 4.6). Pages are mapped
 * read-only until their first write, so the dirty bit can be set exactly
 * when the CPU would set it (SDM vol. 3, 4.8). invlpg drops a mapping; a CR3
 * write drops those the new page tables would not fill the same way, so
 * that switching between processes that share pages (text, libraries after
 * fork) refaults only what differs. Bitmaps remember what is mapped, and
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
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "guestmem.h"
#include "ring3/abi.h"
#include "vcpu.h"

#define PG_P   0x001u
#define PG_RW  0x002u
#define PG_US  0x004u
#define PG_A   0x020u
#define PG_D   0x040u
#define PG_PS  0x080u
#define PG_G   0x100u

#define PF_P 0x1    /* #PF error code (SDM vol. 3, 4.7) */
#define PF_W 0x2
#define PF_U 0x4

#define NPAGES (1u << 20)
static uint64_t mapped[NPAGES / 64], global[NPAGES / 64], privileged[NPAGES / 64];
static uint64_t writable[NPAGES / 64];     /* mapped with PROT_WRITE */
static uint64_t in_use[NPAGES / 64 / 64];   /* bit w: mapped[w] may be nonzero (sweeps skip the rest) */
static uint32_t frame[NPAGES];              /* the physical page each mapped page shows */
/* At or below the lowest page mapped privileged (a bound, not exact: pages
 * dropped one by one leave it as it is); NO_PRIVILEGED when none is. */
#define NO_PRIVILEGED 0xFFFFFFFFu
static uint32_t lowest_privileged = NO_PRIVILEGED;

static bool bit(const uint64_t *map, uint32_t page) { return map[page / 64] >> (page % 64) & 1; }
static void set_bit(uint64_t *map, uint32_t page, bool on)
{
    if (on)
        map[page / 64] |= 1ull << (page % 64);
    else
        map[page / 64] &= ~(1ull << (page % 64));
}

struct walk {
    uint32_t phys;          /* physical address of the byte */
    uint32_t pde_at, pte_at;
    uint32_t pde, pte;      /* pte == pde for a 4 MiB page */
    bool large;
};

static uint32_t phys_read32(struct vcpu *v, uint32_t pa, bool *ok)
{
    uint32_t *p = guestmem_ptr(v->gm, pa, 4);
    *ok = p != NULL;
    return p ? *p : 0;
}

static void phys_write32(struct vcpu *v, uint32_t pa, uint32_t value)
{
    uint32_t *p = guestmem_ptr(v->gm, pa, 4);
    if (p)
        *p = value;
}

/* Walks the page tables for (linear). Returns 0 and fills (w), or the #PF
 * error code for a (write) access at user level (user). Sets A and D bits
 * when (commit). */
static int walk(struct vcpu *v, uint32_t linear, bool write, bool user, bool commit, struct walk *w)
{
    if (!(v->cr0 & CR0_PG)) {
        w->phys = linear;
        w->large = false;
        w->pde = w->pte = PG_P | PG_RW | PG_US | PG_A | PG_D;
        return 0;
    }
    int err = (write ? PF_W : 0) | (user ? PF_U : 0);
    bool ok;
    w->pde_at = (v->cr3 & ~0xFFFu) + (linear >> 22) * 4;
    w->pde = phys_read32(v, w->pde_at, &ok);
    if (!ok || !(w->pde & PG_P))
        return err | 0x10000;   /* not present; the high bit only marks "fault" */
    w->large = (w->pde & PG_PS) && (v->cr4 & CR4_PSE);
    if (w->large) {
        w->pte_at = w->pde_at;
        w->pte = w->pde;
        w->phys = (w->pde & 0xFFC00000u) | (linear & 0x3FFFFF);
    } else {
        w->pte_at = (w->pde & ~0xFFFu) + ((linear >> 12) & 0x3FF) * 4;
        w->pte = phys_read32(v, w->pte_at, &ok);
        if (!ok || !(w->pte & PG_P))
            return err | 0x10000;
        w->phys = (w->pte & ~0xFFFu) | (linear & 0xFFF);
    }
    /* Combined rights: both levels must allow (SDM vol. 3, 4.6.1). */
    bool us = (w->pde & PG_US) && (w->pte & PG_US);
    bool rw = (w->pde & PG_RW) && (w->pte & PG_RW);
    if (user && !us)
        return err | PF_P;
    if (write && !rw && (user || (v->cr0 & CR0_WP)))
        return err | PF_P;
    if (commit) {
        if (!(w->pde & PG_A))
            phys_write32(v, w->pde_at, w->pde |= PG_A);
        if (!w->large && !(w->pte & PG_A))
            phys_write32(v, w->pte_at, w->pte |= PG_A);
        if (write && !(w->pte & PG_D)) {
            w->pte |= PG_D;
            phys_write32(v, w->pte_at, w->pte);
            if (w->large)
                w->pde = w->pte;
        }
    }
    return 0;
}

static _Noreturn void page_fault(struct vcpu *v, uint32_t linear, int err)
{
    v->cr2 = linear;
    vcpu_raise(v, VEC_PF, err & 0xFFFF);
}

/* Copies (len) bytes within one page between (buf) and guest linear memory. */
static void access_page(struct vcpu *v, uint32_t linear, void *buf, uint32_t len, bool write,
                        bool supervisor)
{
    struct walk w;
    bool user = v->cpl == 3 && !supervisor;
    int err = walk(v, linear, write, user, true, &w);
    if (err)
        page_fault(v, linear, err);
    uint8_t *p = guestmem_ptr(v->gm, w.phys, len);
    if (!p) {
        /* No memory there: reads float high, writes go nowhere, as on a PC bus. */
        if (!write)
            memset(buf, 0xFF, len);
        return;
    }
    if (write)
        memcpy(p, buf, len);
    else
        memcpy(buf, p, len);
}

static void copy_linear(struct vcpu *v, uint32_t linear, void *buf, uint32_t len, bool write, bool sup)
{
    uint8_t *b = buf;
    while (len) {
        uint32_t chunk = 0x1000 - (linear & 0xFFF);
        if (chunk > len)
            chunk = len;
        access_page(v, linear, b, chunk, write, sup);
        linear += chunk;
        b += chunk;
        len -= chunk;
    }
}

void mmu_read(struct vcpu *v, uint32_t linear, void *buf, uint32_t len, bool supervisor)
{
    copy_linear(v, linear, buf, len, false, supervisor);
}

void mmu_write(struct vcpu *v, uint32_t linear, const void *buf, uint32_t len, bool supervisor)
{
    /* Check every page before writing any, so a fault leaves memory as it was. */
    for (uint32_t off = 0; off < len;) {
        struct walk w;
        uint32_t a = linear + off;
        int err = walk(v, a, true, v->cpl == 3 && !supervisor, false, &w);
        if (err)
            page_fault(v, a, err);
        off += 0x1000 - (a & 0xFFF);
    }
    copy_linear(v, linear, (void *)buf, len, true, supervisor);
}

uint32_t mmu_read32(struct vcpu *v, uint32_t linear, bool supervisor)
{
    uint32_t x;
    mmu_read(v, linear, &x, 4, supervisor);
    return x;
}

uint16_t mmu_read16(struct vcpu *v, uint32_t linear)
{
    uint16_t x;
    mmu_read(v, linear, &x, 2, false);
    return x;
}

void mmu_write32(struct vcpu *v, uint32_t linear, uint32_t value, bool supervisor)
{
    mmu_write(v, linear, &value, 4, supervisor);
}

void mmu_write16(struct vcpu *v, uint32_t linear, uint16_t value)
{
    mmu_write(v, linear, &value, 2, false);
}

int mmu_fault_error(struct vcpu *v, uint32_t linear, enum mmu_access access, bool supervisor)
{
    struct walk w;
    int err = walk(v, linear, access == MMU_WRITE, v->cpl == 3 && !supervisor, false, &w);
    return err & 0xFFFF;
}

/* mmu_fill; when (quiet), a page that cannot be mapped is only not mapped. */
static bool fill(struct vcpu *v, uint32_t linear, enum mmu_access access, bool quiet)
{
    struct walk w;
    uint32_t page = linear & ~0xFFFu;
    bool write = access == MMU_WRITE;
    if (walk(v, linear, write, v->cpl == 3, true, &w))
        return false;
    uint32_t phys = w.phys & ~0xFFFu;
    bool mappable = page < R3_RUNTIME_BASE && page >= v->gm->low_base &&
                    guestmem_ok(v->gm, phys, 0x1000);
    if (!mappable && quiet)
        return false;
    if (!mappable) {
        fflush(stdout);
        console_restore();
        fprintf(stderr, "ring3: guest access to linear %08x (physical %08x) cannot be mapped: %s\n",
                linear, w.phys,
                page >= R3_RUNTIME_BASE ? "it is ring3's runtime area (reserve it with reservetop=)"
                : page < v->gm->low_base ? "the host keeps the first 64 KiB unmapped"
                : "no guest memory there (use a larger -m?)");
        vcpu_dump(v, stderr);
        monitor_exit(v, 4);
    }
    /* Writable only once dirty, so the first write comes back here to set D. */
    bool rw = (w.pde & PG_RW) && (w.pte & PG_RW);
    bool us = (w.pde & PG_US) && (w.pte & PG_US);
    bool wp_override = v->cpl == 0 && !(v->cr0 & CR0_WP) && !rw;
    if (wp_override)
        rw = true;
    int prot = PROT_READ | PROT_EXEC | ((rw && (w.pte & PG_D)) ? PROT_WRITE : 0);
    int r = guestmem_map(v->gm, phys, page, 0x1000, prot);
    if (r) {
        fprintf(stderr, "ring3: cannot map guest page %08x: error %d\n", page, -r);
        monitor_exit(v, 1);
    }
    set_bit(mapped, page >> 12, true);
    set_bit(in_use, page >> 18, true);
    set_bit(writable, page >> 12, prot & PROT_WRITE);
    frame[page >> 12] = phys >> 12;
    set_bit(global, page >> 12, (v->cr4 & CR4_PGE) && (w.pte & PG_G));
    set_bit(privileged, page >> 12, v->cpl == 0 && (!us || wp_override));
    if (v->cpl == 0 && (!us || wp_override) && page < lowest_privileged)
        lowest_privileged = page;
    TRACE(v, "map %08x -> %08x %s", page, phys, prot & PROT_WRITE ? "rw" : "ro");
    return true;
}

bool mmu_readable(struct vcpu *v, uint32_t linear)
{
    struct walk w;
    return walk(v, linear, false, v->cpl == 3, false, &w) == 0;
}

bool mmu_fill(struct vcpu *v, uint32_t linear, enum mmu_access access)
{
    return fill(v, linear, access, false);
}

void mmu_prefill(struct vcpu *v, uint32_t linear)
{
    if (!bit(mapped, linear >> 12))
        fill(v, linear, MMU_READ, true);
}

void mmu_flush_page(struct vcpu *v, uint32_t linear)
{
    uint32_t page = linear >> 12;
    if (bit(mapped, page)) {
        guestmem_unmap(v->gm, (uint64_t)page << 12, 0x1000);
        set_bit(mapped, page, false);
        set_bit(global, page, false);
        set_bit(privileged, page, false);
        set_bit(writable, page, false);
    }
}

enum drop { DROP_ALL, DROP_NOT_GLOBAL, DROP_PRIVILEGED, DROP_STALE };

/* Whether the host mapping of (page), not global, can stay after a CR3
 * write: it is exactly what a fill would make under the page tables now in
 * force (the same physical page, the access it was mapped for still allowed,
 * its accessed flag, and dirty flag if mapped writable, already set, so that
 * no flag the CPU would set goes unset), or it is made so now. Then a TLB
 * that dropped it and refilled it could not be told from one that kept it.
 * A page the new tables map elsewhere, already accessed, is mapped there at
 * once, with the rights a fill would give: one system call instead of an
 * unmap, a host fault and a map when the process touches it again. */
static bool mapping_current(struct vcpu *v, uint32_t page)
{
    struct walk w;
    uint32_t linear = page << 12;
    bool wr = bit(writable, page), user = !bit(privileged, page);

    if (walk(v, linear, false, user, false, &w) || !(w.pde & PG_A) || !(w.pte & PG_A))
        return false;
    bool rw = (w.pde & PG_RW) && (w.pte & PG_RW) && (w.pte & PG_D);
    if (w.phys >> 12 != frame[page] || wr != rw) {
        if (!user && !rw && !(v->cr0 & CR0_WP))
            return false;       /* a CR0.WP = 0 override: let a fault decide */
        uint32_t phys = w.phys & ~0xFFFu;
        if (!guestmem_ok(v->gm, phys, 0x1000) ||
            guestmem_map(v->gm, phys, linear, 0x1000, PROT_READ | PROT_EXEC | (rw ? PROT_WRITE : 0)))
            return false;
        frame[page] = phys >> 12;
        set_bit(writable, page, rw);
    }
    set_bit(global, page, (v->cr4 & CR4_PGE) && (w.pte & PG_G));
    return true;
}

static uint64_t drop_mask(struct vcpu *v, unsigned word, enum drop what)
{
    uint64_t m;

    switch (what) {
    case DROP_ALL: return mapped[word];
    case DROP_NOT_GLOBAL: return mapped[word] & ~global[word];
    case DROP_PRIVILEGED: return mapped[word] & privileged[word];
    default:
        m = mapped[word] & ~global[word];
        for (uint64_t todo = m; todo; todo &= todo - 1) {
            unsigned b = (unsigned)__builtin_ctzll(todo);
            if (mapping_current(v, word * 64 + b))
                m &= ~(1ull << b);
        }
        return m;
    }
}

static void unmap_run(struct vcpu *v, uint32_t first, uint32_t end)
{
    guestmem_unmap(v->gm, (uint64_t)first << 12, (uint64_t)(end - first) << 12);
}

/* Drops the selected pages of word (w) of the bitmaps; (first, end) is the
 * run being gathered, unmapped when a page that stays ends it. */
static void drop_in_word(struct vcpu *v, unsigned w, enum drop what, uint32_t *first, uint32_t *end)
{
    uint64_t drop = drop_mask(v, w, what), keep = mapped[w] & ~drop;

    for (uint64_t todo = drop; todo; todo &= todo - 1) {
        unsigned d = (unsigned)__builtin_ctzll(todo);
        uint64_t kept_before = keep & ((1ull << d) - 1);
        if (kept_before && *end) {
            unmap_run(v, *first, *end);
            *end = 0;
        }
        keep &= ~kept_before;
        if (!*end)
            *first = w * 64 + d;
        *end = w * 64 + d + 1;
    }
    if (keep && *end) {
        unmap_run(v, *first, *end);
        *end = 0;
    }
    mapped[w] &= ~drop;
    global[w] &= ~drop;
    privileged[w] &= ~drop;
    writable[w] &= ~drop;
}

/* Unmaps every mapped page that (what) selects. A run may span pages that
 * are not mapped (they are the reservation already), so that all of a
 * process's pages usually go in one system call; a page that stays ends it.
 * Only the bitmap words in_use names are looked at. */
static void unmap_where(struct vcpu *v, enum drop what)
{
    uint32_t first = 0, end = 0;    /* the run: pages [first, end), none when end == 0 */

    for (unsigned u = 0; u < NPAGES / 64 / 64; u++) {
        for (uint64_t words = in_use[u]; words; words &= words - 1) {
            unsigned w = u * 64 + (unsigned)__builtin_ctzll(words);
            if (mapped[w])
                drop_in_word(v, w, what, &first, &end);
            if (!mapped[w])
                in_use[u] &= ~(1ull << (w % 64));
        }
    }
    if (end)
        unmap_run(v, first, end);
}

static void drop_privileged(struct vcpu *v)
{
    unmap_where(v, DROP_PRIVILEGED);
    lowest_privileged = NO_PRIVILEGED;
}

void mmu_flush(struct vcpu *v, bool keep_global)
{
    unmap_where(v, keep_global ? DROP_NOT_GLOBAL : DROP_ALL);
    if (!keep_global)
        lowest_privileged = NO_PRIVILEGED;
    v->user_unlimited = false;
    TRACE(v, "flush%s", keep_global ? " (global pages kept)" : "");
}

void mmu_new_cr3(struct vcpu *v)
{
    unmap_where(v, DROP_STALE);
    v->user_unlimited = false;
    TRACE(v, "cr3 %08x: stale mappings dropped", v->cr3);
}

void mmu_set_cpl(struct vcpu *v, unsigned cpl)
{
    if (cpl > v->cpl) {
        v->user_limit = 0;
        if (lowest_privileged != NO_PRIVILEGED) {
            if (!v->user_unlimited && seg_set_user_limit(v, lowest_privileged))
                v->user_limit = lowest_privileged;
            else
                drop_privileged(v);
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
    if (v->cpl != 3 || !v->user_limit)
        return false;
    TRACE(v, "user access beyond the limit %08x: supervisor pages dropped", v->user_limit);
    drop_privileged(v);
    v->user_limit = 0;
    v->user_unlimited = true;
    seg_user_data(v);
    return true;
}

void mmu_init(struct vcpu *v)
{
    (void)v;
    memset(mapped, 0, sizeof mapped);
    memset(global, 0, sizeof global);
    memset(privileged, 0, sizeof privileged);
    memset(writable, 0, sizeof writable);
    memset(in_use, 0, sizeof in_use);
}

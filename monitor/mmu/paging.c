/* Guest linear memory as the CPU reaches it: the page walk (32-bit and PAE paging), and the
 * monitor's reads and writes with the rights of the current CPL, raising #PF with CR2 as the CPU
 * does (SDM vol. 3, 4.7). */
#include <string.h>

#include "paging.h"

#include "memory/guestmem.h"
#include "monitor/cpu/vcpu.h"

#include "mmu.h"

/* A paging-structure entry of (wide ? 8 : 4) bytes at (pa); *ok false when no memory backs it. */
static uint64_t read_entry(struct vcpu *v, uint64_t pa, bool wide, bool *ok)
{
    void *p = guestmem_ptr(v->gm, pa, wide ? 8 : 4);
    uint64_t e = 0;
    *ok = p != NULL;
    if (p)
        memcpy(&e, p, wide ? 8 : 4);
    return e;
}

/* Sets flag bits of the entry at (pa). A and D lie in the low 32 bits in both
 * formats, so only those are written, as a processor's locked update of them. */
static void set_entry_flags(struct vcpu *v, uint64_t pa, uint64_t *entry, uint32_t flags)
{
    uint32_t *p = guestmem_ptr(v->gm, pa, 4);
    *entry |= flags;
    if (p)
        *p |= flags;
}

#define PAE_ADDR 0x000FFFFFFFFFF000ull     /* bits 51:12 of a PAE entry: the next table or page */

uint8_t *paging_peek(struct vcpu *v, uint32_t linear, uint64_t *phys, uint32_t *room)
{
    struct walk w;
    if (paging_walk(v, linear, MMU_READ, false, false, &w))
        return NULL;
    *room = 0x1000 - (linear & 0xFFF);
    *phys = w.phys;
    return guestmem_ptr(v->gm, w.phys, *room);
}

bool paging_load_pdptes(struct vcpu *v)
{
    if (!paging_pae(v))
        return true;
    uint64_t e[4];
    /* PDPTE bits 2:1 and 8:5 are reserved, and MAXPHYADDR to 63 (SDM vol. 3, 4.4.1). */
    uint64_t reserved = (v->pae_reserved | PG_XD) | 0x1E6u;
    for (unsigned i = 0; i < 4; i++) {
        bool ok;
        e[i] = read_entry(v, paging_root(v) + i * 8, true, &ok);
        if (!ok || ((e[i] & PG_P) && (e[i] & reserved)))
            return false;
    }
    memcpy(v->pdpte, e, sizeof e);
    return true;
}

/* The page-directory entry for (linear), and where it lies; false when the
 * level above it (a PAE PDPTE) is not present. */
static bool find_pde(struct vcpu *v, uint32_t linear, bool pae, struct walk *w)
{
    bool ok;
    if (pae) {
        uint64_t pdpte = v->pdpte[linear >> 30];
        if (!(pdpte & PG_P))
            return false;
        w->pde_at = (pdpte & PAE_ADDR) + ((linear >> 21) & 0x1FF) * 8;
    } else {
        w->pde_at = paging_root(v) + (linear >> 22) * 4;
    }
    w->pde = read_entry(v, w->pde_at, pae, &ok);
    return ok;
}

int paging_walk(struct vcpu *v, uint32_t linear, enum mmu_access access, bool user, bool commit,
                struct walk *w)
{
    w->nx = false;
    if (!(v->cr0 & CR0_PG)) {
        w->phys = linear;
        w->large = false;
        w->pde = w->pte = PG_P | PG_RW | PG_US | PG_A | PG_D;
        return 0;
    }
    bool pae = v->cr4 & CR4_PAE, write = access == MMU_WRITE, ok;
    bool nxe = pae && (v->efer & EFER_NXE);
    /* I/D reports a fetch only where execute-disable exists (SDM vol. 3, 4.7). */
    int err = (write ? PF_W : 0) | (user ? PF_U : 0) | (nxe && access == MMU_FETCH ? PF_I : 0);
    /* Bits a present PAE entry must have clear: MAXPHYADDR to 62, and XD without NXE (4.4.2). */
    uint64_t reserved = pae ? v->pae_reserved | (nxe ? 0 : PG_XD) : 0;
    if (!find_pde(v, linear, pae, w) || !(w->pde & PG_P))
        return err | 0x10000;   /* not present; the high bit only marks "fault" */
    w->large = (w->pde & PG_PS) && (pae || (v->cr4 & CR4_PSE));
    if (w->large) {
        /* A 2 MiB page's bits 20:13 are reserved (SDM vol. 3, Table 4-18). */
        if (w->pde & (reserved | (pae ? 0x1FE000u : 0)))
            return err | PF_P | PF_RSVD;
        w->pte_at = w->pde_at;
        w->pte = w->pde;
        w->phys = pae ? (w->pde & PAE_ADDR & ~0x1FFFFFull) | (linear & 0x1FFFFF)
                      : (w->pde & 0xFFC00000u) | (linear & 0x3FFFFF);
    } else {
        if (w->pde & reserved)
            return err | PF_P | PF_RSVD;
        w->pte_at = pae ? (w->pde & PAE_ADDR) + ((linear >> 12) & 0x1FF) * 8
                        : (w->pde & ~0xFFFull) + ((linear >> 12) & 0x3FF) * 4;
        w->pte = read_entry(v, w->pte_at, pae, &ok);
        if (!ok || !(w->pte & PG_P))
            return err | 0x10000;
        if (w->pte & reserved)
            return err | PF_P | PF_RSVD;
        w->phys = (w->pte & (pae ? PAE_ADDR : 0xFFFFF000u)) | (linear & 0xFFF);
    }
    /* Combined rights: both levels must allow (SDM vol. 3, 4.6.1); a fetch
     * needs XD clear at both (4.6.2). */
    bool us = (w->pde & PG_US) && (w->pte & PG_US);
    bool rw = (w->pde & PG_RW) && (w->pte & PG_RW);
    w->nx = nxe && ((w->pde | w->pte) & PG_XD);
    if (user && !us)
        return err | PF_P;
    if (write && !rw && (user || (v->cr0 & CR0_WP)))
        return err | PF_P;
    if (access == MMU_FETCH && w->nx)
        return err | PF_P;
    if (commit) {
        /* A large page's one entry takes both flags (SDM vol. 3, 4.8). */
        uint32_t last = PG_A | (write ? PG_D : 0);
        if ((w->pde & (w->large ? last : PG_A)) != (w->large ? last : PG_A))
            set_entry_flags(v, w->pde_at, &w->pde, w->large ? last : PG_A);
        if (w->large)
            w->pte = w->pde;
        else if ((w->pte & last) != last)
            set_entry_flags(v, w->pte_at, &w->pte, last);
    }
    return 0;
}

static _Noreturn void page_fault(struct vcpu *v, uint32_t linear, int err)
{
    v->cr2 = linear;
    vcpu_raise(v, VEC_PF, err & 0xFFFF);
}

/* The monitor's translation cache (vcpu.h walk_cache), as a TLB (SDM vol. 3, 4.10.2): filled
 * by a walk that set the accessed flag, kept until a CR3 write, a flush or an invlpg (mmu.c
 * bumps walk_epoch), without a look at the tables in between, which a guest must invalidate
 * after it changes them (4.10.4). An entry serves only an access its rights allow, and a write
 * only once the dirty flag is set (4.8); anything else walks again, and that walk raises the
 * fault, if any. A CPU may fault on a stale entry instead (a "spurious" fault, 4.10.4.3); this
 * never does. */
static bool cached(const struct vcpu *v, uint32_t linear, bool write, bool user, uint64_t *phys)
{
    const struct walk_cache *e = &v->walk_cache[(linear >> 12) % WALK_CACHE_ENTRIES];
    if (e->epoch != v->walk_epoch || e->page != linear >> 12)
        return false;
    if (user && !(e->rights & PG_US))
        return false;
    if (write && (!(e->rights & PG_D) || (!(e->rights & PG_RW) && (user || (v->cr0 & CR0_WP)))))
        return false;
    *phys = e->frame | (linear & 0xFFF);
    return true;
}

static void remember(struct vcpu *v, uint32_t linear, const struct walk *w)
{
    if (!(v->cr0 & CR0_PG))
        return;
    struct walk_cache *e = &v->walk_cache[(linear >> 12) % WALK_CACHE_ENTRIES];
    /* both levels' rights (4.6.1); the dirty flag is the last level's (pte == pde when large) */
    e->rights = (uint32_t)(w->pde & w->pte & (PG_US | PG_RW)) | (uint32_t)(w->pte & PG_D);
    e->frame = w->phys & ~0xFFFull;
    e->page = linear >> 12;
    e->epoch = v->walk_epoch;
}

/* Copies (len) bytes within one page between (buf) and guest linear memory. */
static void access_page(struct vcpu *v, uint32_t linear, void *buf, uint32_t len, bool write,
                        bool supervisor)
{
    bool user = v->cpl == 3 && !supervisor;
    uint64_t phys;
    if (!cached(v, linear, write, user, &phys)) {
        struct walk w;
        int err = paging_walk(v, linear, write ? MMU_WRITE : MMU_READ, user, true, &w);
        if (err)
            page_fault(v, linear, err);
        remember(v, linear, &w);
        phys = w.phys;
    }
    uint8_t *p = guestmem_ptr(v->gm, phys, len);
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
        int err = paging_walk(v, a, MMU_WRITE, v->cpl == 3 && !supervisor, false, &w);
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
    int err = paging_walk(v, linear, access, v->cpl == 3 && !supervisor, false, &w);
    return err & 0xFFFF;
}

bool mmu_readable(struct vcpu *v, uint32_t linear)
{
    struct walk w;
    return paging_walk(v, linear, MMU_READ, v->cpl == 3, false, &w) == 0;
}

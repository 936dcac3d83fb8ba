/* Guest linear memory as the CPU reaches it: the page walk, and the monitor's reads and writes
 * with the rights of the current CPL, raising #PF with CR2 as the CPU does (SDM vol. 3, 4.7). */
#include <string.h>

#include "paging.h"

#include "memory/guestmem.h"
#include "monitor/cpu/vcpu.h"

#include "mmu.h"

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

int paging_walk(struct vcpu *v, uint32_t linear, bool write, bool user, bool commit, struct walk *w)
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
    int err = paging_walk(v, linear, write, user, true, &w);
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
        int err = paging_walk(v, a, true, v->cpl == 3 && !supervisor, false, &w);
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
    int err = paging_walk(v, linear, access == MMU_WRITE, v->cpl == 3 && !supervisor, false, &w);
    return err & 0xFFFF;
}

bool mmu_readable(struct vcpu *v, uint32_t linear)
{
    struct walk w;
    return paging_walk(v, linear, false, v->cpl == 3, false, &w) == 0;
}

/* The guest's LDT mirrored into a host LDT (ldt.h). */
#include "ldt.h"

#include <asm/ldt.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memory/guestmem.h"
#include "monitor/mmu/paging.h"
#include "segment.h"

/* Descriptor fields (SDM vol. 3, 3.4.5): type bits 40-43, S 44, DPL 45-46, P 47, AVL 52,
 * L 53, D/B 54, G 55. */
#define D_TYPE(raw)  ((unsigned)((raw) >> 40) & 0xF)
#define D_S          (1ull << 44)
#define D_DPL(raw)   ((unsigned)((raw) >> 45) & 3)
#define D_P          (1ull << 47)
#define D_AVL        (1ull << 52)
#define D_L          (1ull << 53)
#define D_DB         (1ull << 54)
#define D_G          (1ull << 55)

static uint64_t generation = 1;
static unsigned here_entries;       /* how many entries the guest's LDT has in ring3's own process */

void ldt_user_desc(uint64_t raw, unsigned index, struct user_desc *d)
{
    memset(d, 0, sizeof *d);
    d->entry_number = index;
    if (!(raw & D_S) || D_DPL(raw) != 3 || (raw & D_L)) {
        /* modify_ldt's "clear this entry" (LDT_empty, asm/desc.h); all zero is a 16-bit segment */
        d->read_exec_only = 1;
        d->seg_not_present = 1;
        return;
    }
    unsigned type = D_TYPE(raw);
    d->base_addr = (uint32_t)((raw >> 16) & 0xFFFFFF) | (uint32_t)((raw >> 32) & 0xFF000000u);
    d->limit = (uint32_t)(raw & 0xFFFF) | (uint32_t)((raw >> 32) & 0xF0000);
    d->seg_32bit = (raw & D_DB) ? 1 : 0;
    d->contents = (type >> 2) & 3;
    d->read_exec_only = (type & 2) ? 0 : 1;
    d->limit_in_pages = (raw & D_G) ? 1 : 0;
    d->seg_not_present = (raw & D_P) ? 0 : 1;
    d->useable = (raw & D_AVL) ? 1 : 0;
}

void ldt_loaded(struct vcpu *v)
{
    generation++;
    if (v->isolation == ISOLATION_NONE) {
        static struct ldt_mirror here;
        ldt_update(v, &here, LDT_ENTRIES, NULL, NULL);
        here_entries = (v->ldtr.sel & ~3u) ? (v->ldtr.limit + 1) / 8 : 0;
    }
}

uint64_t ldt_gen(void)
{
    return generation;
}

/* Guest LDT entry (i), read as the CPU reads descriptors (supervisor rights,
 * no accessed or dirty bit set); 0 where no page or no memory backs it. */
static uint64_t guest_entry(struct vcpu *v, unsigned i)
{
    struct walk w;
    uint32_t at = v->ldtr.base + i * 8;
    if (paging_walk(v, at, MMU_READ, false, false, &w))
        return 0;
    const uint64_t *p = guestmem_ptr(v->gm, w.phys, 8);
    return p ? *p : 0;
}

/* modify_ldt in ring3's own process. */
static void write_here(void *ctx, const struct user_desc *d)
{
    struct vcpu *v = ctx;
    seg_host_descriptors_changed(v);
    if (syscall(SYS_modify_ldt, 0x11, d, sizeof *d) != 0)
        TRACE(v, "the host refused guest LDT entry %u", d->entry_number);
}

void ldt_update(struct vcpu *v, struct ldt_mirror *m, unsigned max,
                void (*write)(void *ctx, const struct user_desc *d), void *ctx)
{
    if (!write) {
        write = write_here;
        ctx = v;
    }
    unsigned n = (v->ldtr.sel & ~3u) ? (v->ldtr.limit + 1) / 8 : 0;
    if (n > max) {
        TRACE(v, "guest LDT entries %u and up are not mirrored", max);
        n = max;
    }
    unsigned top = n > m->n ? n : m->n;
    for (unsigned i = 0; i < top; i++) {
        uint64_t raw = i < n ? guest_entry(v, i) : 0;
        if (i < m->n && raw == m->raw[i])
            continue;
        if (i >= m->n && raw == 0)
            continue;               /* an entry the host never had is empty there already */
        struct user_desc d;
        ldt_user_desc(raw, i, &d);
        write(ctx, &d);
        m->raw[i] = raw;
    }
    /* Entries from n on are empty on the host now, and counted as such. */
    m->n = top;
    m->gen = generation;
}

bool ldt_covers_here(unsigned index)
{
    return index < here_entries;
}

bool ldt_mirrored_here(uint16_t sel)
{
    return (sel & 4) && ldt_covers_here(sel >> 3u);
}

/* The guest's LDT mirrored into a host LDT (ldt.h). */
#include "ldt.h"

#include <asm/ldt.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memory/guestmem.h"
#include "monitor/host/stats.h"
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

uint64_t ldt_generation = 1;
static unsigned here_entries;       /* how many entries the guest's LDT has in ring3's own process */

/* ring3's own host LDT, with --isolation=none. Its entries from here_entries on may still
 * hold an earlier guest LDT's (here_stale) until guest code next runs above CPL 0
 * (ldt_leaving_kernel): the guest kernel loads a null LDT for each temporary mm it uses
 * (text_poke's poking_mm, init_mm) and the process's LDT again after, with no user code
 * in between. Clearing a full LDT there and writing it back cost 2 x 8192 host modify_ldt
 * calls, each a copy of the whole table (ldt.h). */
static struct ldt_mirror here;
static bool here_stale;

/* The raw value of an entry ring3 wrote for itself (ldt_own_written): none that
 * mirrored() gives, which makes every system descriptor 0. */
#define RAW_OWN 1u

/* What the host entry for guest descriptor (raw) is made from: 0 for each one
 * ldt_user_desc empties, so that equal values give equal host entries. */
static uint64_t mirrored(uint64_t raw)
{
    return !(raw & D_S) || D_DPL(raw) != 3 || (raw & D_L) ? 0 : raw;
}

/* Whether a mirror entry of (raw) holds a guest descriptor on the host: what emptying the
 * entries past a smaller table must clear (not an empty one, nor ring3's own). */
static bool holds_guest(uint64_t raw)
{
    return raw != 0 && raw != RAW_OWN;
}

void ldt_user_desc(uint64_t raw, unsigned index, struct user_desc *d)
{
    memset(d, 0, sizeof *d);
    d->entry_number = index;
    if (!mirrored(raw)) {
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

/* The guest LDT's entry count: none with a null LDTR (SDM vol. 3, 3.5.1). */
static unsigned guest_entries(const struct vcpu *v)
{
    return (v->ldtr.sel & ~3u) ? (v->ldtr.limit + 1) / 8 : 0;
}

uint64_t ldt_gen(void)
{
    return ldt_generation;
}

/* The guest's LDT read a page at a time: one walk for its 512 entries, not one each. */
struct ldt_reader {
    uint32_t page;                  /* linear page of p (meaningful when known) */
    bool known;
    const uint8_t *p;               /* its bytes, NULL where no page or no memory backs it */
};

/* The bytes of linear page (page), read as the CPU reads descriptors
 * (supervisor rights, no accessed or dirty bit set). */
static const uint8_t *reader_page(struct vcpu *v, struct ldt_reader *r, uint32_t page)
{
    if (!r->known || r->page != page) {
        struct walk w;
        r->page = page;
        r->known = true;
        r->p = paging_walk(v, page, MMU_READ, false, false, &w) ? NULL
                                                                 : guestmem_ptr(v->gm, w.phys, 4096);
    }
    return r->p;
}

/* Guest LDT entry (i); 0 where no page or no memory backs any of its bytes.
 * A descriptor that straddles two pages is read from both (SDM vol. 3, 3.5.1:
 * the LDT is at a linear address, with no alignment required). */
static uint64_t guest_entry(struct vcpu *v, struct ldt_reader *r, unsigned i)
{
    uint32_t at = v->ldtr.base + i * 8;
    uint8_t bytes[8];
    for (unsigned done = 0; done < 8;) {
        uint32_t a = at + done, off = a & 0xFFF, n = 4096 - off < 8 - done ? 4096 - off : 8 - done;
        const uint8_t *p = reader_page(v, r, a & ~0xFFFu);
        if (!p)
            return 0;
        memcpy(bytes + done, p + off, n);
        done += n;
    }
    uint64_t raw;
    memcpy(&raw, bytes, 8);
    return raw;
}

unsigned ldt_stale(const struct vcpu *v, const struct ldt_mirror *m)
{
    unsigned stale = 0;
    for (unsigned i = guest_entries(v); i < m->n; i++)
        stale += holds_guest(m->raw[i]);
    return stale;
}

/* Entry (i) of (m) made (raw) on the host. */
static void put(struct ldt_mirror *m, unsigned i, uint64_t raw, ldt_write *write, void *ctx)
{
    struct user_desc d;
    ldt_user_desc(raw, i, &d);
    write(ctx, &d);
    m->raw[i] = raw;
    stats_ldt_written();
}

/* (m) covering entries [0, n) at least: an entry the host never had is empty there. */
static void cover(struct ldt_mirror *m, unsigned n)
{
    for (; m->n < n; m->n++)
        m->raw[m->n] = 0;
}

/* Entries [0, n) of (m) brought up to the guest's LDT, n its entry count up to (max);
 * the entries of (m) from n on are left as they are. Returns n. */
static unsigned mirror_entries(struct vcpu *v, struct ldt_mirror *m, unsigned max, ldt_write *write, void *ctx)
{
    unsigned n = guest_entries(v);
    if (n > max) {
        TRACE(v, "guest LDT entries %u and up are not mirrored", max);
        n = max;
    }
    cover(m, n);
    struct ldt_reader r = {0};
    for (unsigned i = 0; i < n; i++) {
        uint64_t raw = mirrored(guest_entry(v, &r, i));
        if (raw == m->raw[i])
            continue;
        put(m, i, raw, write, ctx);
    }
    return n;
}

/* The entries of (m) from (n) on emptied on the host, but for ring3's own. */
static void clear_from(struct ldt_mirror *m, unsigned n, ldt_write *write, void *ctx)
{
    for (unsigned i = n; i < m->n; i++) {
        if (holds_guest(m->raw[i]))
            put(m, i, 0, write, ctx);
    }
}

void ldt_update(struct vcpu *v, struct ldt_mirror *m, unsigned max, ldt_write *write, void *ctx)
{
    clear_from(m, mirror_entries(v, m, max, write, ctx), write, ctx);
}

/* modify_ldt in ring3's own process. */
static void write_here(void *ctx, const struct user_desc *d)
{
    struct vcpu *v = ctx;
    seg_host_descriptors_changed(v);
    if (syscall(SYS_modify_ldt, 0x11, d, sizeof *d) != 0)
        TRACE(v, "the host refused guest LDT entry %u", d->entry_number);
}

void ldt_loaded(struct vcpu *v)
{
    ldt_generation++;
    if (v->isolation == ISOLATION_NONE) {
        here_entries = mirror_entries(v, &here, LDT_ENTRIES, write_here, v);
        here_stale = here_stale || here.n > here_entries;
    }
}

void ldt_leaving_kernel(struct vcpu *v)
{
    if (!here_stale)
        return;
    clear_from(&here, here_entries, write_here, v);
    here_stale = false;
}

void ldt_own_written(unsigned index)
{
    cover(&here, index + 1);
    here.raw[index] = RAW_OWN;
}

bool ldt_covers_here(unsigned index)
{
    return index < here_entries;
}

bool ldt_mirrored_here(uint16_t sel)
{
    return (sel & 4) && ldt_covers_here(sel >> 3u);
}

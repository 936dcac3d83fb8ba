/* Segment descriptors and segment registers (SDM vol. 3, ch. 3 and 5), mapped onto host selectors.
 *
 * Guest kernel code always runs with the host's flat compatibility-mode CS;
 * the guest's CS is virtual and must be flat there. User code runs on it too,
 * or on a code segment of the guest's own LDT, which ldt.c mirrors into the
 * host LDT of the process user code runs in. A data segment that is flat runs
 * on the host's flat data selector; a null one on a real null selector (so
 * that using it faults as it should); a user one of the guest's LDT on its
 * own selector where the host LDT mirrors it; any other is copied into a host
 * LDT entry of ring3's own, so the CPU applies its base and limit for real.
 *
 * At CPL 3, flat DS, ES and SS run on one more LDT entry, flat but for a limit
 * below the guest kernel's mapped pages (mmu.c says where), so that a user
 * access to them raises #GP rather than reaching them.
 *
 * The kernel's entry and exit code saves, loads and restores es, ds and fs
 * on every system call and interrupt. Each load this file makes at CPL 0 is
 * remembered in the shared page (SH_SEGC), with the descriptor it read, so
 * that the runtime stubs can repeat it without the gate while the descriptor
 * is unchanged; seg_take_fast_loads adopts what they did.
 */
#include <asm/ldt.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "segment.h"

#include "fast_syscall.h"
#include "ldt.h"

#include "memory/guestmem.h"
#include "monitor/mmu/mmu.h"
#include "monitor/mmu/paging.h"

#include "vcpu.h"

#define ATTR_P      0x0080
#define ATTR_S      0x0010
#define ATTR_CODE   0x0008
#define ATTR_CONF   0x0004    /* code: conforming; data: expand-down */
#define ATTR_RW     0x0002    /* code: readable; data: writable */
#define ATTR_DB     0x4000
#define ATTR_G      0x8000

static unsigned dpl_of(const struct seg *s) { return (s->attr >> 5) & 3; }

/* What the fast path of SYSENTER and SYSEXIT reads of the state kept below (fast_syscall.h). */
struct fast_facts fast_facts;

void seg_decode(uint64_t raw, uint16_t selector, struct seg *out)
{
    uint32_t limit = (uint32_t)(raw & 0xFFFF) | (uint32_t)((raw >> 32) & 0xF0000);
    out->sel = selector;
    out->base = (uint32_t)((raw >> 16) & 0xFFFFFF) | (uint32_t)((raw >> 32) & 0xFF000000u);
    out->attr = (uint16_t)(((raw >> 40) & 0xFF) | (((raw >> 52) & 0xF) << 12));
    out->limit = out->attr & ATTR_G ? (limit << 12) | 0xFFF : limit;
}

static uint32_t descriptor_address(struct vcpu *v, uint16_t selector, bool *ok)
{
    uint32_t index = selector & ~7u;
    uint32_t base, limit;
    bool guest_ldt = (v->ldtr.sel & ~3u) && index + 7 <= v->ldtr.limit;
    if ((selector | 3) == USER_SEL && !guest_ldt && v->isolation == ISOLATION_NONE) {
        /* In ring3's own process, user DS, ES and SS run on this host LDT
         * entry (seg_set_user_limit), which the process sees and may hand
         * back, as a sigreturn frame does: where the guest's own LDT has no
         * such entry, it stands for the guest's flat user data segment. A
         * stub never has it: there it is the guest's LDT entry or nothing. */
        selector = HOST_DS;
        index = selector & ~7u;
    }
    if (selector & 4) {
        if (!guest_ldt) {
            *ok = false;
            return 0;
        }
        base = v->ldtr.base;
        limit = v->ldtr.limit;
    } else {
        base = v->gdtr.base;
        limit = v->gdtr.limit;
    }
    *ok = index + 7 <= limit;
    return base + index;
}

bool seg_read_descriptor(struct vcpu *v, uint16_t selector, uint64_t *raw)
{
    bool ok;
    uint32_t at = descriptor_address(v, selector, &ok);
    if (!ok)
        return false;
    mmu_read(v, at, raw, 8, true);
    return true;
}

/* The CPU sets the accessed bit of a descriptor it loads (SDM vol. 3, 3.4.5.1). */
static void mark_accessed(struct vcpu *v, uint16_t selector, struct seg *s)
{
    bool ok;
    uint32_t at = descriptor_address(v, selector, &ok);
    if (ok && !(s->attr & 1)) {
        uint8_t type;
        mmu_read(v, at + 5, &type, 1, true);
        type |= 1;
        mmu_write(v, at + 5, &type, 1, true);
        s->attr |= 1;
    }
}

/* The guest's TLS descriptors (GDT entries 12-14, by the guest-constants
 * patch) live in the same entries of the host's GDT, which set_thread_area
 * fills, so that a TLS selector guest user code loads itself (glibc's %gs)
 * means there what it means in the guest. Returns false for a descriptor
 * set_thread_area does not take (only 32-bit data segments). */
#define TLS_FIRST 12
#define TLS_COUNT 3
static struct seg tls_synced[TLS_COUNT];
static bool tls_valid[TLS_COUNT];

/* set_thread_area for a host GDT TLS entry. The x86-64 system call table has
 * none; the i386 one (int $0x80, number 243) takes a 32-bit pointer, so the
 * descriptor goes through the shared page's scratch area. A TLS entry written
 * outside seg_sync_tls leaves what fast_syscall knew of them out of date. */
static bool tls_write_failed;       /* a host_set_thread_area failed during seg_sync_tls */

static bool host_set_thread_area(struct vcpu *v, const struct user_desc *d)
{
    struct user_desc *low = (struct user_desc *)(uintptr_t)(R3_SHARED + SH_SCRATCH);
    long r;

    *low = *d;
    seg_host_descriptors_changed(v);
    fast_facts.tls_known = false;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(243), "b"(low) : "memory", "r8", "r9", "r10", "r11");
    if (r != 0)
        tls_write_failed = true;
    return r == 0;
}

static bool is_tls_selector(uint16_t sel)
{
    return !(sel & 4) && (sel >> 3) >= TLS_FIRST && (sel >> 3) < TLS_FIRST + TLS_COUNT;
}

/* The user_desc of set_thread_area for guest TLS descriptor (s); false for
 * one set_thread_area does not take (only 32-bit data segments). */
static bool tls_desc(const struct seg *s, struct user_desc *d)
{
    memset(d, 0, sizeof *d);
    d->entry_number = s->sel >> 3;
    if ((s->attr & (ATTR_S | ATTR_CODE)) != ATTR_S || !(s->attr & ATTR_DB))
        return false;
    d->base_addr = s->base;
    d->limit_in_pages = (s->attr & ATTR_G) ? 1 : 0;
    d->limit = d->limit_in_pages ? s->limit >> 12 : s->limit;
    d->seg_32bit = 1;
    d->contents = (s->attr & ATTR_CONF) ? 1 : 0;
    d->read_exec_only = (s->attr & ATTR_RW) ? 0 : 1;
    d->seg_not_present = (s->attr & ATTR_P) ? 0 : 1;
    d->useable = (s->attr >> 12) & 1;
    return true;
}

/* An empty entry: loading its selector faults. */
static void tls_empty(unsigned entry, struct user_desc *d)
{
    memset(d, 0, sizeof *d);
    d->entry_number = entry;
    d->read_exec_only = 1;
    d->seg_not_present = 1;
}

static bool tls_sync(struct vcpu *v, const struct seg *s)
{
    unsigned i = (s->sel >> 3) - TLS_FIRST;
    struct user_desc d;

    if (!tls_desc(s, &d))
        return false;
    if (tls_valid[i] && tls_synced[i].base == s->base && tls_synced[i].limit == s->limit &&
        (tls_synced[i].attr | 1) == (s->attr | 1))
        return true;
    if (!host_set_thread_area(v, &d))
        return false;
    tls_synced[i] = *s;
    tls_valid[i] = true;
    TRACE(v, "TLS entry %u base %08x limit %08x", TLS_FIRST + i, s->base, s->limit);
    return true;
}

/* After seg_sync_tls made the host's TLS entries from (raw), read at GDT linear (at): where
 * those bytes are in guest memory, for fast_syscall to see whether they changed. */
static void tls_remember(struct vcpu *v, uint32_t at, const uint64_t raw[TLS_COUNT])
{
    struct walk w;
    if ((at & 7) || (at & 0xFFF) > 0x1000 - TLS_COUNT * 8 || paging_walk(v, at, MMU_READ, false, false, &w))
        return;
    const uint64_t *p = guestmem_ptr(v->gm, w.phys, TLS_COUNT * 8);
    if (!p)
        return;
    struct fast_facts *f = &fast_facts;
    f->tls_at = p;
    memcpy(f->tls_raw, raw, sizeof f->tls_raw);
    f->tls_walk_epoch = v->walk_epoch;
    f->tls_gdt_base = v->gdtr.base;
    f->tls_gdt_limit = v->gdtr.limit;
    f->tls_known = true;
}

void seg_sync_tls(struct vcpu *v)
{
    uint64_t read[TLS_COUNT];
    if (seg_tls_unchanged(v))
        return;                     /* as tls_remember found them: this would write nothing */
    tls_write_failed = false;
    for (unsigned i = 0; i < TLS_COUNT; i++) {
        uint16_t sel = (uint16_t)((TLS_FIRST + i) << 3);
        uint64_t raw;
        struct seg s;

        if (!seg_read_descriptor(v, sel, &raw))
            return;
        read[i] = raw;
        seg_decode(raw, sel, &s);
        if (!tls_sync(v, &s) && tls_valid[i]) {
            /* Not a descriptor set_thread_area takes (or an empty one): make the
             * host's entry empty, so that loading it faults. */
            struct user_desc d;
            tls_empty(TLS_FIRST + i, &d);
            if (host_set_thread_area(v, &d))
                tls_valid[i] = false;
        }
    }
    /* Run again on the same descriptors it would write nothing, unless a write failed. */
    if (!tls_write_failed)
        tls_remember(v, v->gdtr.base + TLS_FIRST * 8, read);
}

void seg_tls_descriptor(struct vcpu *v, unsigned i, struct user_desc *d)
{
    uint16_t sel = (uint16_t)((TLS_FIRST + i) << 3);
    uint64_t raw;
    struct seg s;

    if (!seg_read_descriptor(v, sel, &raw)) {
        tls_empty(TLS_FIRST + i, d);
        return;
    }
    seg_decode(raw, sel, &s);
    if (!tls_desc(&s, d))
        tls_empty(TLS_FIRST + i, d);
}

/* Whether ring3 may use its own LDT entry (index) in its own process: not
 * where the guest's LDT, mirrored there, has one (ldt.h). Its entries are
 * written again after every lldt (own_gen), which may have covered or
 * emptied them. */
static uint64_t own_gen;

static bool own_entry_free(struct vcpu *v, unsigned index)
{
    if (v->isolation == ISOLATION_NONE && ldt_covers_here(index)) {
        TRACE(v, "host LDT entry %u is the guest's: ring3 does without its own", index);
        return false;
    }
    return true;
}

/* The host LDT entry of user mode's flat data segments, after one per sreg; where it ends is
 * fast_facts.user_top. */
bool seg_set_user_limit(struct vcpu *v, uint32_t top)
{
    struct user_desc d;

    if (top == fast_facts.user_top && fast_facts.user_gen == ldt_gen())
        return true;
    fast_facts.user_top = 0;
    if (top < 0x1000 || !own_entry_free(v, LDT_USER))
        return false;
    memset(&d, 0, sizeof d);
    d.entry_number = LDT_USER;
    d.limit_in_pages = 1;
    d.limit = (top >> 12) - 1;
    d.seg_32bit = 1;
    seg_host_descriptors_changed(v);
    ldt_own_written(LDT_USER);
    if (syscall(SYS_modify_ldt, 1, &d, sizeof d) != 0)
        return false;
    fast_facts.user_top = top;
    fast_facts.user_gen = ldt_gen();
    TRACE(v, "user data segments end below %08x", top);
    return true;
}

static bool fast_reg(unsigned sreg)
{
    return sreg == SREG_ES || sreg == SREG_DS || sreg == SREG_FS || sreg == SREG_GS;
}

/* Remember a load just made at CPL 0 of (selector), whose descriptor (raw,
 * accessed bit set) sits at linear (at); at == 0 for a null selector. */
static void remember_load(struct vcpu *v, unsigned sreg, uint16_t selector, uint32_t at, uint64_t raw)
{
    struct r3_segcache *c = &v->sh->segc[sreg];

    if (v->cpl != 0 || !fast_reg(sreg) || (selector & 4))
        return;
    fast_facts.loaded[sreg] = v->sreg[sreg];
    c->sel = selector;
    c->host = v->host_sel[sreg];
    c->addr = at;
    c->lo = (uint32_t)raw;
    c->hi = (uint32_t)(raw >> 32);
}

void seg_forget_fast_loads(struct vcpu *v)
{
    for (unsigned i = 0; i < 6; i++)
        v->sh->segc[i].sel = SEGC_NONE;
}

void seg_host_descriptors_changed(struct vcpu *v)
{
    v->sh->desc_gen++;
}

void seg_publish(struct vcpu *v)
{
    struct r3_shared *sh = v->sh;

    for (unsigned i = 0; i < 6; i++)
        sh->vsel[i] = v->sreg[i].sel;
    sh->cpl = (v->cr0 & CR0_PE) ? v->cpl : 0xFF;
    /* User code in a code segment of the guest's LDT runs on it in ring3's own
     * process, where the host LDT mirrors the guest's (ldt.c); all other
     * guest code on the flat one. */
    uint16_t cs = v->sreg[SREG_CS].sel;
    sh->sel[SREG_CS] = v->isolation == ISOLATION_NONE && v->cpl == 3 && (cs & 3) == 3 &&
                       ldt_mirrored_here(cs) ? cs : HOST_CS32;
    fast_arm_sysenter(v);
}

/* What ring3's own host LDT entry for each segment register holds. */
static struct seg own_entry[6];
static bool own_entry_valid[6];

/* The host selector that gives guest segment (s) its base and limit. */
static uint16_t host_selector(struct vcpu *v, unsigned sreg, const struct seg *s)
{
    if ((s->sel & ~3u) == 0 && sreg != SREG_SS && sreg != SREG_CS)
        return 0;
    /* A user segment of the guest's LDT, in ring3's own process: its own
     * selector, which the host LDT there mirrors (ldt.c). */
    if (v->isolation == ISOLATION_NONE && ldt_mirrored_here(s->sel) && dpl_of(s) == 3 && sreg != SREG_CS)
        return s->sel;
    if (sreg != SREG_SS && sreg != SREG_CS && is_tls_selector(s->sel) && tls_sync(v, s))
        return s->sel | 3;
    bool expand_down = !(s->attr & ATTR_CODE) && (s->attr & ATTR_CONF);
    if (s->base == 0 && s->limit == 0xFFFFFFFFu && !expand_down) {
        if (sreg == SREG_CS)
            return HOST_CS32;
        return sreg != SREG_FS && sreg != SREG_GS && v->cpl == 3 && v->user_limit ? USER_SEL
                                                                                 : HOST_DS;
    }
    uint16_t own = (uint16_t)((LDT_OWN(sreg) << 3) | 4 | 3);
    if (own_gen != ldt_gen()) {
        memset(own_entry_valid, 0, sizeof own_entry_valid);
        own_gen = ldt_gen();
    }
    if (own_entry_valid[sreg] && own_entry[sreg].base == s->base && own_entry[sreg].limit == s->limit &&
        own_entry[sreg].attr == s->attr)
        return own;
    if (!own_entry_free(v, LDT_OWN(sreg)))
        return HOST_DS;
    struct user_desc d;
    memset(&d, 0, sizeof d);
    d.entry_number = LDT_OWN(sreg);
    d.base_addr = s->base;
    d.limit_in_pages = (s->attr & ATTR_G) ? 1 : 0;
    d.limit = d.limit_in_pages ? s->limit >> 12 : s->limit;
    d.seg_32bit = 1;
    d.contents = expand_down ? 1 : 0;
    d.read_exec_only = (s->attr & ATTR_RW) ? 0 : 1;
    v->sh->segc[sreg].sel = SEGC_NONE;      /* its LDT entry changes: forget what it held */
    own_entry_valid[sreg] = false;
    seg_host_descriptors_changed(v);
    ldt_own_written(d.entry_number);
    if (syscall(SYS_modify_ldt, 1, &d, sizeof d) != 0) {
        TRACE(v, "modify_ldt failed for %04x; using the flat segment", s->sel);
        return HOST_DS;
    }
    own_entry[sreg] = *s;
    own_entry_valid[sreg] = true;
    TRACE(v, "segment %u base %08x limit %08x on host LDT entry %u", sreg, s->base, s->limit, LDT_OWN(sreg));
    return own;
}

void seg_set(struct vcpu *v, unsigned sreg, uint16_t selector, const struct seg *cache)
{
    struct seg s = {.sel = selector};
    if (cache)
        s = *cache;
    s.sel = selector;
    v->sreg[sreg] = s;
    if (sreg != SREG_CS)
        v->host_sel[sreg] = v->sh->sel[sreg] = host_selector(v, sreg, &s);
    /* Loading FS or GS sets its base, which the way back to the guest writes
     * with wrfsbase/wrgsbase after the selector. */
    if (sreg == SREG_FS)
        v->sh->fsbase = s.base;
    if (sreg == SREG_GS)
        v->sh->gsbase = s.base;
}

void seg_load(struct vcpu *v, unsigned sreg, uint16_t selector)
{
    uint16_t err = selector & ~3u;
    if (err == 0) {
        if (sreg == SREG_SS)
            vcpu_raise(v, VEC_GP, 0);
        seg_set(v, sreg, selector, NULL);
        remember_load(v, sreg, selector, 0, 0);
        return;
    }
    uint64_t raw;
    if (!seg_read_descriptor(v, selector, &raw))
        vcpu_raise(v, VEC_GP, err);
    struct seg s;
    seg_decode(raw, selector, &s);
    unsigned rpl = selector & 3, dpl = dpl_of(&s);
    bool code = s.attr & ATTR_CODE;
    if (!(s.attr & ATTR_S))
        vcpu_raise(v, VEC_GP, err);
    if (sreg == SREG_SS) {
        /* SS: a writable data segment with RPL = DPL = CPL (SDM vol. 2, MOV). */
        if (code || !(s.attr & ATTR_RW) || rpl != v->cpl || dpl != v->cpl)
            vcpu_raise(v, VEC_GP, err);
        if (!(s.attr & ATTR_P))
            vcpu_raise(v, VEC_SS, err);
    } else {
        /* DS, ES, FS, GS: data or readable code; privilege unless conforming code. */
        if (code && !(s.attr & ATTR_RW))
            vcpu_raise(v, VEC_GP, err);
        if (!(code && (s.attr & ATTR_CONF)) && (rpl > dpl || v->cpl > dpl))
            vcpu_raise(v, VEC_GP, err);
        if (!(s.attr & ATTR_P))
            vcpu_raise(v, VEC_NP, err);
    }
    mark_accessed(v, selector, &s);
    seg_set(v, sreg, selector, &s);
    remember_load(v, sreg, selector, v->gdtr.base + (selector & ~7u), raw | 1ull << 40);
    TRACE(v, "load %u <- %04x base %08x limit %08x", sreg, selector, s.base, s.limit);
}

uint32_t seg_linear(struct vcpu *v, unsigned sreg, uint32_t offset, uint32_t len)
{
    const struct seg *s = &v->sreg[sreg];
    unsigned vector = sreg == SREG_SS ? VEC_SS : VEC_GP;
    if ((s->sel & ~3u) == 0 && sreg != SREG_CS && sreg != SREG_SS && v->cr0 & CR0_PE)
        vcpu_raise(v, VEC_GP, 0);
    uint64_t last = (uint64_t)offset + len - 1;
    bool expand_down = !(s->attr & ATTR_CODE) && (s->attr & ATTR_CONF);
    if (expand_down ? (offset <= s->limit || last > 0xFFFFFFFFu) : last > s->limit)
        vcpu_raise(v, vector, 0);
    return s->base + offset;
}

void seg_reset_flat(struct vcpu *v, uint16_t cs, uint16_t ds)
{
    struct seg code = {cs, 0, 0xFFFFFFFFu, 0x9B | ATTR_DB | ATTR_G};
    struct seg data = {ds, 0, 0xFFFFFFFFu, 0x93 | ATTR_DB | ATTR_G};
    seg_set(v, SREG_CS, cs, &code);
    for (unsigned i = 0; i < 6; i++)
        if (i != SREG_CS)
            seg_set(v, i, ds, &data);
    v->sh->sel[SREG_CS] = HOST_CS32;
}

void seg_load_at_cpl(struct vcpu *v, unsigned sreg, uint16_t selector, unsigned cpl)
{
    unsigned old = v->cpl;
    jmp_buf jb, *outer = v->fault_jmp;
    v->cpl = cpl;
    v->fault_jmp = &jb;
    if (setjmp(jb)) {
        v->cpl = old;
        v->fault_jmp = outer;
        vcpu_raise(v, (unsigned)v->pending_vector, v->pending_error);
    }
    seg_load(v, sreg, selector);
    v->fault_jmp = outer;
    v->cpl = old;
}

void seg_null_inaccessible(struct vcpu *v, unsigned cpl)
{
    static const unsigned data_segs[] = {SREG_ES, SREG_DS, SREG_FS, SREG_GS};
    for (unsigned i = 0; i < 4; i++) {
        struct seg *s = &v->sreg[data_segs[i]];
        bool conforming_code = (s->attr & 0x1C) == 0x1C;
        if ((s->sel & ~3u) && !conforming_code && dpl_of(s) < cpl)
            seg_set(v, data_segs[i], 0, NULL);
    }
}

/* In a stub, a guest LDT selector is its own there (ldt.h) and stands for
 * what virtual register (r) holds while it is unchanged; ring3's own process
 * has that segment under the host selector it gave it, which (real) must not
 * replace in the shared page. */
static bool stub_ldt_unchanged(struct vcpu *v, unsigned r, uint16_t real)
{
    if (v->isolation != ISOLATION_PROCESS || !(real & 4) || real != v->sreg[r].sel)
        return false;
    v->sh->sel[r] = v->host_sel[r];
    return true;
}

bool seg_user_code(const struct vcpu *v, uint16_t cs)
{
    return cs == HOST_CS32 || ((cs & 7) == 7 && cs == v->sreg[SREG_CS].sel);
}

void seg_sync_user(struct vcpu *v, const uint16_t real[6], uint64_t fsbase, uint64_t gsbase)
{
    static const unsigned data_segs[] = {SREG_ES, SREG_DS, SREG_FS, SREG_GS};
    /* User code may far-jump between the code segments of the guest's LDT,
     * which the host LDT it runs with mirrors, and back to the flat one. (Any
     * GDT code segment of the guest runs on the host's flat 0x23: its 0x33 too,
     * which is 64-bit on the host.) */
    uint16_t cs = real[SREG_CS];
    uint64_t raw;
    bool ldt_code = (cs & 7) == 7 && (v->isolation == ISOLATION_PROCESS || ldt_mirrored_here(cs));
    bool from_ldt = cs == HOST_CS32 && (v->sreg[SREG_CS].sel & 4);
    if (cs != v->sreg[SREG_CS].sel && (ldt_code || from_ldt) && seg_read_descriptor(v, cs, &raw)) {
        seg_decode(raw, cs, &v->sreg[SREG_CS]);
        TRACE(v, "user code went to code segment %04x", cs);
    }
    stub_ldt_unchanged(v, SREG_SS, real[SREG_SS]);
    for (unsigned i = 0; i < 4; i++) {
        unsigned r = data_segs[i];
        uint16_t sel = real[r];
        struct seg s = {.sel = sel};
        uint64_t raw;

        if (sel == v->host_sel[r])
            continue;
        if (stub_ldt_unchanged(v, r, sel))
            continue;
        if (sel == USER_SEL && v->isolation == ISOLATION_NONE && !ldt_covers_here(LDT_USER)) {
            /* Our limited flat segment, copied from DS to ES or back. In a stub, or where
             * the guest's LDT reaches it, the selector is the guest's own LDT entry, and
             * ring3's own process has that only in an entry of its own (below). */
            v->sreg[r] = v->sreg[r == SREG_DS ? SREG_ES : SREG_DS];
            v->host_sel[r] = v->sh->sel[r] = sel;
            continue;
        }
        /* Guest user code loaded a selector itself: the host accepted it, so
         * it is one the guest GDT gives the same meaning (the flat user
         * segments, a TLS entry), an entry of the guest LDT (mirrored there
         * by ldt.c), or null. */
        if ((sel & ~3u) && seg_read_descriptor(v, sel, &raw))
            seg_decode(raw, sel, &s);
        v->sreg[r] = s;
        /* An LDT segment a stub's code loaded: ring3's own process has its
         * descriptor only in an entry of its own. */
        v->host_sel[r] = v->sh->sel[r] = v->isolation == ISOLATION_PROCESS && (sel & 4)
                                              ? host_selector(v, r, &s) : sel;
        if (r == SREG_FS)
            v->sh->fsbase = fsbase;
        if (r == SREG_GS)
            v->sh->gsbase = gsbase;
        TRACE(v, "user loaded segment %u <- %04x", r, sel);
    }
}

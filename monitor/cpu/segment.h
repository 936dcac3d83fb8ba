/* Descriptors and segment registers: the protected-mode checks of every segment load (SDM vol. 3, 5). */
#ifndef RING3_SEGMENT_H
#define RING3_SEGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "fast_syscall.h"
#include "ldt.h"
#include "vcpu.h"

/* ring3's own host LDT entries sit above the guest LDT entries it mirrors (ldt.h): one per
 * segment register for segments with a base or a limit, then the one user DS, ES and SS run
 * on in its own process (seg_set_user_limit). */
#define LDT_OWN(sreg) (LDT_OWN_FIRST + (sreg))
#define LDT_USER LDT_OWN(6)
#define USER_SEL ((LDT_USER << 3) | 4 | 3)
_Static_assert(LDT_USER < LDT_ENTRIES, "ring3's own LDT entries fit in the LDT");

/* A flat data segment (SDM vol. 3, 3.4.5.1: not code, not expand-down, base 0, 4 GiB). */
static inline bool seg_is_flat_data(const struct seg *s)
{
    return (s->sel & ~3u) && !(s->attr & 0x0008) && !(s->attr & 0x0004) && s->base == 0 &&
           s->limit == 0xFFFFFFFFu;
}

/* Load segment register (sreg) with (selector) following the protected-mode
 * checks of MOV to a segment register (SDM vol. 2, MOV; vol. 3, 5.10):
 * raises #GP, #SS or #NP as the hardware would. */
void seg_load(struct vcpu *v, unsigned sreg, uint16_t selector);

/* seg_load with the checks made for privilege level (cpl), as a far return
 * or an interrupt does for the stack of the level it moves to. */
void seg_load_at_cpl(struct vcpu *v, unsigned sreg, uint16_t selector, unsigned cpl);

/* On a return to outer level (cpl), data segment registers that level may
 * not use become null (SDM vol. 3, 5.8.6; vol. 2, IRET and RET). */
void seg_null_inaccessible(struct vcpu *v, unsigned cpl);

/* Set segment register (sreg) without checks, e.g. from a loader or iret. */
void seg_set(struct vcpu *v, unsigned sreg, uint16_t selector, const struct seg *cache);

/* Read the 8-byte descriptor for (selector) from the GDT or LDT into
 * (cache); returns false when the selector is outside the table limit. */
bool seg_read_descriptor(struct vcpu *v, uint16_t selector, uint64_t *raw);
void seg_decode(uint64_t raw, uint16_t selector, struct seg *out);

/* Linear address of (offset) in segment (sreg) for an access of (len)
 * bytes, checking the limit: #GP(0) or #SS(0) outside it. */
uint32_t seg_linear(struct vcpu *v, unsigned sreg, uint32_t offset, uint32_t len);

/* Copy the guest's TLS descriptors (GDT entries 12-14) into the host's, so
 * that guest user code can load their selectors itself. On every way out
 * to CPL 3: the guest kernel writes them with plain stores (load_TLS). */
void seg_sync_tls(struct vcpu *v);

/* Whether seg_sync_tls would write nothing: the guest's TLS descriptors are the bytes the
 * host's were last made from, read through the translation used then, in a GDT where it
 * was. Inline, as seg_take_fast_loads: fast_syscall.c runs it with general registers only. */
static inline bool seg_tls_unchanged(const struct vcpu *v)
{
    const struct fast_facts *f = &fast_facts;
    if (!f->tls_known || f->tls_walk_epoch != v->walk_epoch || f->tls_gdt_base != v->gdtr.base ||
        f->tls_gdt_limit != v->gdtr.limit)
        return false;
    for (unsigned i = 0; i < 3; i++)
        if (f->tls_at[i] != f->tls_raw[i])
            return false;
    return true;
}

/* The set_thread_area descriptor of guest TLS entry (i) (0-2; GDT entry
 * 12 + i) as it is now, an empty one when set_thread_area would not take it:
 * what a stub's host GDT needs (monitor/mmu/aspace.c). */
struct user_desc;
void seg_tls_descriptor(struct vcpu *v, unsigned i, struct user_desc *d);

/* After an entry from CPL 3: the real selectors (real, sreg order) and
 * FS/GS bases of the interrupted guest code. A data segment register whose
 * selector differs from what the monitor loaded was loaded by the guest
 * process itself; take it into the virtual state. */
void seg_sync_user(struct vcpu *v, const uint16_t real[6], uint64_t fsbase, uint64_t gsbase);

/* Whether host code selector (cs) of an event is guest user code's own: the
 * flat compatibility-mode selector, or the guest LDT code segment its virtual
 * CS holds (in a stub, where the LDT is mirrored). */
bool seg_user_code(const struct vcpu *v, uint16_t cs);

/* Point the host LDT's user data entry at [0, top): the segment user mode's
 * flat DS and ES run on while supervisor pages at and above (top) stay
 * mapped. Returns false when the host refuses (the caller unmaps instead). */
bool seg_set_user_limit(struct vcpu *v, uint32_t top);

/* Whether data segment register (r) holds a flat segment on the host's flat entry or the
 * limited user one: the registers seg_user_data moves between the two. */
static inline bool seg_on_flat_entry(const struct vcpu *v, unsigned r)
{
    return (v->host_sel[r] == HOST_DS || v->host_sel[r] == USER_SEL) && seg_is_flat_data(&v->sreg[r]);
}

/* After a change of CPL or of v->user_limit: put flat DS, ES and SS on the
 * limited user entry at CPL 3 with a limit, on the host's flat segment otherwise.
 * Inline, as seg_take_fast_loads: fast_syscall.c runs it with general registers only. */
static inline void seg_user_data(struct vcpu *v)
{
    static const unsigned limited[] = {SREG_ES, SREG_SS, SREG_DS};
    uint16_t flat = v->cpl == 3 && v->user_limit ? USER_SEL : HOST_DS;

    for (unsigned i = 0; i < 3; i++) {
        unsigned r = limited[i];
        if (seg_on_flat_entry(v, r))
            v->host_sel[r] = (uint16_t)(v->sh->sel[r] = flat);
    }
}

/* The fast segment-register paths of the runtime stubs (SH_SEGC, SH_VSEL):
 * publish the virtual selectors and CPL before going back to the guest;
 * adopt the loads the stubs made, first thing on every monitor entry; forget
 * every remembered load when the GDT moves (lgdt). */
void seg_publish(struct vcpu *v);
void seg_forget_fast_loads(struct vcpu *v);

static inline void seg_take_fast_loads(struct vcpu *v)
{
    struct r3_shared *sh = v->sh;
    uint32_t loaded = sh->fastload;

    if (!loaded)
        return;
    sh->fastload = 0;
    for (unsigned i = 0; i < 6; i++) {
        if (!(loaded >> i & 1))
            continue;
        v->sreg[i] = fast_facts.loaded[i];
        v->host_sel[i] = (uint16_t)(sh->sel[i] = sh->segc[i].host);
        if (i == SREG_FS)
            sh->fsbase = fast_facts.loaded[i].base;
        if (i == SREG_GS)
            sh->gsbase = fast_facts.loaded[i].base;
    }
}

/* After any change to a host LDT or GDT TLS entry of ring3's own process: the
 * way back loads every data segment register again (SH_DESC_GEN). */
void seg_host_descriptors_changed(struct vcpu *v);

/* Reset all segment registers to flat 4 GiB segments with the given
 * selectors (the Multiboot entry state). */
void seg_reset_flat(struct vcpu *v, uint16_t cs, uint16_t ds);

#endif

/* The guest's LDT mirrored into the host LDT of the process that runs guest user code.
 *
 * Guest user code is not rewritten: it loads LDT selectors itself (mov to a
 * segment register, a far transfer, lar, lsl, verr), and the CPU looks them
 * up in the LDT of the host process it runs in. So that a selector means
 * there what it means in the guest, each entry of the guest's LDT is copied,
 * at the same index, into the host LDT of that process through modify_ldt:
 * ring3's own process with --isolation=none, the address space's stub
 * otherwise. Linux never changes an LDT in place: modify_ldt installs a new
 * one and every CPU reloads LDTR (arch/x86/kernel/ldt.c, install_ldt), so the
 * copy is brought up to date after each lldt. In ring3's own process, entries
 * past the guest's LDT are emptied only before guest code next runs above
 * CPL 0: a process that the kernel switches to and away from without
 * returning to it leaves the host table as it was.
 */
#ifndef RING3_LDT_H
#define RING3_LDT_H

#include <asm/ldt.h>                /* LDT_ENTRIES (8192, SDM vol. 3, 3.5.1), struct user_desc */
#include <stdbool.h>
#include <stdint.h>

#include "vcpu.h"

/* ring3's own host LDT entries in its own process sit at the top of the
 * table (segment.c), where only a guest LDT of more than 8184 entries
 * reaches: such a guest entry wins, and ring3 does without its own. */
#define LDT_OWN_FIRST (LDT_ENTRIES - 7)

/* What one host LDT holds of the guest's: raw descriptors, [0, n). */
struct ldt_mirror {
    unsigned n;
    uint64_t raw[LDT_ENTRIES];
};

/* The descriptor a host modify_ldt (func 0x11) takes for guest LDT entry
 * (index) whose raw descriptor is (raw): the inverse of the kernel's
 * fill_ldt. Anything but a present or absent DPL-3 code or data segment
 * (what Linux's modify_ldt writes) becomes an empty entry. */
void ldt_user_desc(uint64_t raw, unsigned index, struct user_desc *d);

/* LDTR was loaded (lldt): the guest's LDT may be new. */
void ldt_loaded(struct vcpu *v);

/* Guest code is about to run above CPL 0 in ring3's own process
 * (--isolation=none): host LDT entries past the guest's LDT are emptied now,
 * if an earlier lldt left any (ldt.c, here_stale). */
void ldt_leaving_kernel(struct vcpu *v);

/* ring3 wrote an entry of its own (segment.c) at (index) of its own host LDT,
 * where the guest's LDT has none: the next lldt that covers it writes it. */
void ldt_own_written(unsigned index);

/* Counts ldt_loaded calls: a mirror older than this may be out of date. */
extern uint64_t ldt_generation;
uint64_t ldt_gen(void);

/* Passes one entry to the host modify_ldt of the process that (ctx) names. */
typedef void ldt_write(void *ctx, const struct user_desc *d);

/* Bring (m) up to the guest's LDT now, at most (max) entries: (write) gets
 * each entry that changed. */
void ldt_update(struct vcpu *v, struct ldt_mirror *m, unsigned max, ldt_write *write, void *ctx);

/* How many non-empty entries of (m) the guest's LDT now leaves out: what
 * ldt_update would clear, one host modify_ldt each. */
unsigned ldt_stale(const struct vcpu *v, const struct ldt_mirror *m);

/* Whether the guest's LDT, mirrored into ring3's own host LDT with
 * --isolation=none, has entry (index) there; then ring3 may not use it. */
bool ldt_covers_here(unsigned index);

/* Whether LDT selector (sel) has its guest descriptor in ring3's own host
 * LDT (--isolation=none), at the same index. */
bool ldt_mirrored_here(uint16_t sel);

#endif

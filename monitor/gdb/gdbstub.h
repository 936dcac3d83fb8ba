/* A gdb remote stub for the guest (--gdb, -s, -S): the monitor stops the guest and lets gdb look.
 *
 * The guest stops at a monitor entry: when gdb connects, at its Ctrl-C (looked for at each
 * timer tick and in hlt), at a software breakpoint (int3 written into guest memory), and after
 * a single step (the guest's TF, which the monitor already turns into one step per
 * instruction, a rewritten site counting as one). While gdb steps, no interrupt is delivered,
 * as QEMU does by default. Memory is read and written at guest linear addresses through the
 * page tables in force, without setting their accessed or dirty flags.
 *
 * Every function here is cheap and does nothing when no --gdb was given.
 */
#ifndef RING3_GDBSTUB_H
#define RING3_GDBSTUB_H

#include <stdbool.h>
#include <stdint.h>

#include "monitor/cpu/vcpu.h"

/* Listen on (spec): tcp:[HOST]:PORT (HOST: 127.0.0.1 when empty) or unix:PATH. With (wait),
 * block until gdb connects and let it have the guest stopped before its first instruction.
 * Returns 0, or -1 after printing one line that says why. */
int gdb_start(struct vcpu *v, const char *spec, bool wait);


/* A timer tick or hlt: take a new client or its Ctrl-C, and stop there if one came. */
void gdb_poll(struct vcpu *v);

/* The descriptor hlt should also wait on (the listener or the client), -1 for none. */
int gdb_fd(void);

/* int3 at v->sh->eip - 1 trapped: true when it was gdb's (the guest stopped there, eip back
 * on it), false when the guest's own. */
bool gdb_breakpoint_hit(struct vcpu *v);

/* The single-step trap of the instruction just done (DR6.BS set): true when gdb asked for the
 * step (the guest stopped, the trap is not the guest's), false otherwise. */
bool gdb_step_done(struct vcpu *v);

/* A host perf breakpoint with si_perf_data (tag) (bp_is_gdb) was hit by guest code: gdb's
 * watchpoint; the guest stops after the access, as on x86 (SDM vol. 3, 17.3.1.2). */
void gdb_watch_hit(struct vcpu *v, uint64_t tag);

/* Whether interrupts are held back: gdb is stepping. */
bool gdb_holds_interrupts(void);

/* The run ends with (status): gdb hears that the target exited (W), as from QEMU. */
void gdb_exited(int status);

/* Paging changed (a CR0, CR3 or CR4 write): breakpoints in user pages move to the new address
 * space, and those that could not be placed yet are, where now mapped. */
void gdb_paging_changed(struct vcpu *v);

/* The monitor mapped a page for guest code: place the breakpoints the page tables now allow. */
void gdb_pages_mapped(struct vcpu *v);

#endif

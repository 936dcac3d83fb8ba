/* The ABI entries (include/ring3/abi.h): the gate, and each sensitive instruction as the SDM defines it. */
#ifndef RING3_EMULATE_H
#define RING3_EMULATE_H

#include <stdbool.h>
#include <stdint.h>

#include "vcpu.h"

/* The gate handler (runtime_install): emulates sh->entry at the site the
 * guest called from, then checks for interrupts before returning. */
void emulate_gate(void);

/* Emulate entry (entry) with operands (desc, aux): sh->eip is already past
 * the instruction, fault_eip at its first byte. Used by the gate and, for
 * insert mode, by insert_emulate after decoding. */
void emulate_entry(struct vcpu *v, unsigned entry, uint32_t desc, uint32_t aux);

/* A single-step trap (TF) at the first instruction of the runtime code a
 * site's call leads to: the guest called the site whose return address is
 * at [esp] with TF set. Emulate it as one instruction and, when (step),
 * raise the single-step #DB after it, as the CPU does after an instruction
 * that began with TF set (SDM vol. 3, 17.3.1.4). False, changing nothing,
 * when [esp] holds no site's return address. */
bool emulate_stepped_site(struct vcpu *v, bool step);

/* Where a fault of the kernel instruction at (eip) is reported: at the FPU site before it,
 * if there is one (the rewriter leaves the instruction after the site, and its
 * exception-table label on the site), else at (eip). Reads guest memory without faulting. */
uint32_t emulate_fault_eip(struct vcpu *v, uint32_t eip);

/* Whether the code at (eip) is the rest of a site: the site's call
 * `call *%cs:R3_TABLE+4*N` (*entry = N), or a push and that call. (*inside)
 * tells whether some of the site has run already (its pushes, or PUSHF's
 * inline pushfl), so that a single step landing at (eip) is one inside the
 * site, which counts as one instruction. */
bool emulate_site_entry_at(struct vcpu *v, uint32_t eip, unsigned *entry, bool *inside);

/* The ABI name of (entry), e.g. "SYSENTER". */
const char *emulate_entry_name(unsigned entry);

/* decode.c: if the instruction at sh->eip is cli, sti, in, out, ins, outs or
 * cpuid, or the rewritten cli (a store to the virtual IF), run it through
 * its entry (which checks IOPL) and return true. */
bool decode_io_instruction(struct vcpu *v);

/* ---- The entries' parts that have files of their own ---- */

/* sysreg.c. Writes to control registers (SDM vol. 3, 2.5): paging changes
 * drop the host TLB; reads of CR1 and CR5-7 and writes of them are #UD. */
void sysreg_write_cr(struct vcpu *v, unsigned n, uint32_t value);
uint32_t sysreg_read_cr(struct vcpu *v, unsigned n);

/* The debug register (n) names: DR4 and DR5 alias DR6 and DR7 while CR4.DE
 * is clear, and are #UD while it is set (SDM vol. 3, 17.2.2). */
unsigned sysreg_dr_index(struct vcpu *v, unsigned n);

/* A write to debug register (n). DR0-DR3 and DR7 become host breakpoints where guest user
 * code runs (monitor/host/breakpoints.h): on this thread at once with --isolation=none, in
 * a stub before it next runs (aspace.c). */
void sysreg_write_dr(struct vcpu *v, unsigned n, uint32_t value);

/* lldt (task false) and ltr (task true): GDT selectors of the right type
 * (SDM vol. 2, LLDT and LTR); ltr marks the TSS busy. */
void sysreg_load_system_segment(struct vcpu *v, bool task, uint16_t sel);

/* lar, lsl, verr, verw (entry) (SDM vol. 2): never fault on the selector,
 * report in ZF. */
void sysreg_selector_query(struct vcpu *v, unsigned entry, uint32_t desc, uint32_t aux);

/* transfer.c. ljmp and lcall (call) to the far pointer of (desc, aux): to a
 * code segment at the same privilege, or through a call gate (SDM vol. 3,
 * 5.8.1-5.8.5). */
void transfer_far(struct vcpu *v, uint32_t desc, uint32_t aux, bool call);

/* lret (SDM vol. 2, RET): same level, or to an outer level with ESP and SS. */
void transfer_lret(struct vcpu *v, uint32_t desc);

/* SYSENTER and SYSEXIT (SDM vol. 2): flat segments from IA32_SYSENTER_CS, CPL 0 and 3. */
void transfer_sysenter(struct vcpu *v);
void transfer_sysexit(struct vcpu *v);

#endif

/* System calls of --isolation=none with the guest's vector state left in the registers.
 *
 * The gate (runtime.S, tramp64) saves the x87/SSE/AVX registers before monitor C code runs,
 * since that code and the libc it calls use them: XSAVEOPT and XRSTOR cost about 150 ns a
 * gate on an AMD EPYC VM, and a system call through the vDSO takes two gates. For SYSENTER
 * from CPL 3 and SYSEXIT to CPL 3 the gate first calls fast_syscall, which is built with
 * -mgeneral-regs-only and calls no function (mk/monitor.mk checks that its object file
 * names no undefined symbol). When it returns 1 it has done what emulate_gate would have,
 * and the gate goes back to the guest without touching the vector registers. It returns 0,
 * having changed nothing, whenever emulate_gate would do more than the common case: a
 * fault to raise, an interrupt to take, a segment register the process loaded itself, a
 * TLS or LDT entry to write, a segment of the kernel's that is not flat, --trace or gdb.
 */
#ifndef RING3_FAST_SYSCALL_H
#define RING3_FAST_SYSCALL_H

#include <stdbool.h>
#include <stdint.h>

#include "vcpu.h"

/* What fast_syscall reads of the state segment.c keeps, which keeps it there. */
struct fast_facts {
    struct seg loaded[6];           /* what each SH_SEGC entry loads, as the vcpu holds it */
    uint32_t user_top;              /* where ring3's user data entry ends (seg_set_user_limit); 0: unset */
    uint64_t user_gen;              /* ldt_generation when it was set */
    /* The guest's TLS descriptors as seg_sync_tls last made the host's from them, and where
     * they are in guest memory: valid while tls_known, the GDT is where it was and no
     * translation has been dropped since (walk_epoch, as the monitor's TLB keeps them). */
    bool tls_known;
    const volatile uint64_t *tls_at;
    uint64_t tls_raw[3];
    uint64_t tls_walk_epoch;
    uint32_t tls_gdt_base;
    uint16_t tls_gdt_limit;
    uint64_t sysenters, sysexits;   /* done here, counted under --stats */
    uint64_t lazy_sysenters;        /* done in the runtime (below), counted under --stats */
};
extern struct fast_facts fast_facts;

/* The gate's fast path for the entry in the shared page: 1 when it did all of it. */
int fast_syscall(void);

/* SYSENTER in the runtime. The common SYSENTER from CPL 3 needs no monitor code at all: on
 * the way back to CPL 3, fast_arm_sysenter works out what sysenter() below would do with it
 * and points the entry at sysenter_lazy (monitor/cpu/runtime.S), which does that in 32-bit
 * code when the process has loaded no segment register itself since, and notes it in
 * SH_LAZY_ENTERED. fast_take_sysenter, first thing at every monitor entry (the gate, the
 * fast path, a host signal), brings the vcpu's state up to date with it; the guest kernel's
 * code until then runs on the runtime's stubs alone, which read only the shared page. Each
 * monitor entry it saves is two changes of mode and the gate's own work: 0.61 against 0.48 us
 * a getpid through the vDSO, on a 2-core Intel Xeon VM. */
void fast_arm_sysenter(struct vcpu *v);
void fast_take_sysenter(struct vcpu *v);

#endif

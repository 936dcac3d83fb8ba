/* Guest address spaces in stub processes (--isolation=process): the cache keyed by page directory, and user code run there. */
#ifndef RING3_ASPACE_H
#define RING3_ASPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "monitor/cpu/vcpu.h"
#include "stub/host.h"

/* Default and limits of --stubs: how many guest address spaces keep a stub. */
#define ASPACE_DEFAULT_MAX 16
#define ASPACE_MAX 256

/* A host signal in guest code, as the host reported it. */
struct host_fault {
    int sig;
    int code;                   /* si_code: for SIGTRAP, TRAP_TRACE is a single step */
    uint64_t sysenter_pad;      /* where the host returns a compat-mode sysenter here (Intel), or 0 */
    uint16_t cs;                /* the host code selector it came from (0x23: compatibility mode) */
    unsigned trapno, err;
    uint64_t addr, rip;
    uint64_t perf_data;         /* si_code TRAP_PERF: the guest breakpoint slot hit (breakpoints.h) */
};

/* Once, before guest code runs: start the stub machinery with room for
 * (max) address spaces, system calls redirected (how). Returns 0, or -1
 * after printing why. */
int aspace_init(struct vcpu *v, unsigned max, enum stub_syscalls how, enum stub_placement where);

/* The address space of CR3 now, with a stub, its TLB checked against the
 * page tables if a CR3 write or flush came since it last ran. Never NULL:
 * a stub that cannot be started ends the run. */
struct aspace *aspace_current(struct vcpu *v);
struct tlb *aspace_tlb(struct aspace *as);

/* Host mapping changes of (as)'s stub, carried out before its guest code next
 * runs: put the page at (linear) on the guest frame at (phys) with (prot),
 * false when no room is left (the page then stays unmapped: a fault maps it
 * later); drop page numbers [first, end). */
bool aspace_map(struct aspace *as, uint32_t linear, uint64_t phys, int prot);
void aspace_unmap(struct aspace *as, uint32_t first, uint32_t end);

/* Before the guest kernel drops translations of the address space whose stub handed it the
 * event at hand (v->as), or leaves it: that stub is held (stub/host.h, stub_hold), or has ended. */
void aspace_hold(struct vcpu *v);

/* The guest's cpuid at (leaf, sub) was answered (out), by cpu_cpuid: stubs give their guest code
 * that answer themselves from now on (stub/protocol.h, "CPUID"), until aspace_cpuid_changed, which
 * comes when an answer changes, before guest user code runs again. */
void aspace_cpuid_answered(const struct vcpu *v, uint32_t leaf, uint32_t sub, const uint32_t out[4]);
void aspace_cpuid_changed(const struct vcpu *v);

/* Make the guest's vector registers what v->fpu_image holds (the gate's image, or a signal
 * frame's), when they still wait in the stub that last ran (aspace.c). Before anything reads
 * or writes that image: the kernel's FPU sites, gdb. */
void aspace_vec_load(struct vcpu *v);

/* Run guest user code (v->cpl == 3) in the current address space's stub
 * until it enters the guest kernel; the shared page then holds the kernel's
 * state, as after an in-process entry, and (xsave) the guest's vector
 * registers (XSAVE standard format), which it held on the way in too. Does
 * nothing when already running. */
void aspace_run_user(struct vcpu *v, void *xsave);

#endif

/* The shared page: state that guest-side runtime code and the monitor both touch.
 *
 * It sits at R3_SHARED (include/ring3/abi.h), inside the guest's 4 GiB, so the
 * 32-bit stubs reach it with absolute addresses. It holds only what the guest
 * may see: the virtual IF, the pending-interrupt flag and the register file
 * saved by the gate. Nothing the monitor trusts for its own control flow
 * (stack, handler address, TLS base) lives here; those sit in the read-only
 * runtime code page.
 */
#ifndef RING3_SHARED_H
#define RING3_SHARED_H

#include "ring3/abi.h"

/* Byte offsets, for monitor/cpu/runtime.S; checked against the struct below. */
#define SH_VIF      0x00
#define SH_PENDING  0x01
#define SH_VEC_LAZY 0x02    /* the guest's vector state waits in a stub (monitor/mmu/aspace.c) */
#define SH_FPU_SITES 0x03   /* the kernel ran an FPU site: it marks its vector-state code */
#define SH_ENTRY    0x04
#define SH_REGS     0x08    /* eax ecx edx ebx esp ebp esi edi, ModRM order */
#define SH_EAX      0x08
#define SH_ECX      0x0c
#define SH_EDX      0x10
#define SH_EBX      0x14
#define SH_ESP      0x18
#define SH_EBP      0x1c
#define SH_ESI      0x20
#define SH_EDI      0x24
#define SH_EIP      0x28
#define SH_EFLAGS   0x2c
#define SH_SEL      0x30    /* host selectors es cs ss ds fs gs, sreg order, 4 bytes each */
#define SH_ES       0x30
#define SH_CS       0x34
#define SH_SS       0x38
#define SH_DS       0x3c
#define SH_FS       0x40
#define SH_GS       0x44
#define SH_FSBASE   0x48
#define SH_GSBASE   0x50
/* For the stubs' fast segment-register paths (monitor/cpu/segment.c keeps them). */
#define SH_CPL      0x58    /* the virtual CPL; 0xFF outside protected mode */
#define SH_FASTLOAD 0x5c    /* bit N: a stub loaded segment register N from SH_SEGC */
#define SH_VSEL     0x60    /* the virtual selectors, es cs ss ds fs gs, 4 bytes each */
#define SH_DESC_GEN 0x78    /* bumped at each change of a host LDT or TLS entry (segment.c) */
#define SH_LOADED_GEN 0x7c  /* SH_DESC_GEN when the way back last loaded every data segment register */
#define SH_SEGC     0x80    /* per segment register, SEGC_SIZE bytes: a load the stubs may repeat */
#define SEGC_SEL    0x00    /*   its selector (SEGC_NONE: none) */
#define SEGC_HOST   0x04    /*   the host selector it put in the register */
#define SEGC_ADDR   0x08    /*   linear address of its GDT descriptor; 0 for a null selector */
#define SEGC_LO     0x0c    /*   the descriptor as it was then, accessed bit set */
#define SEGC_HI     0x10
#define SEGC_SIZE   0x20
#define SEGC_NONE   0xFFFFFFFFu
/* SYSENTER in the runtime (fast_syscall.h): where its entry goes, and what it loads. */
#define SH_SYSENTER_TO  0x140   /* the entry's gate stub, or sysenter_lazy when armed */
#define SH_LAZY_EIP     0x144   /* IA32_SYSENTER_EIP and ESP */
#define SH_LAZY_ESP     0x148
#define SH_LAZY_ES      0x14c   /* the host selectors ES, DS and SS take at CPL 0 */
#define SH_LAZY_DS      0x150
#define SH_LAZY_SS      0x154
#define SH_LAZY_VCS     0x158   /* the virtual CS and SS */
#define SH_LAZY_VSS     0x15c
#define SH_LAZY_ENTERED 0x160   /* set by sysenter_lazy: done, and not yet taken by the monitor */
/* Monitor-only scratch below 4 GiB, for the i386 system calls that take a
 * 32-bit pointer (segment.c); never read back after the call. */
#define SH_SCRATCH  0x800

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

struct r3_shared {
    volatile uint8_t vif;      /* virtual EFLAGS.IF */
    volatile uint8_t pending;  /* an interrupt waits for vif */
    uint8_t vec_lazy;          /* the gate neither saves nor restores the vector registers */
    uint8_t fpu_sites;         /* set by the FPU entry's stub */
    uint32_t entry;            /* entry number the gate was taken for */
    uint32_t regs[8];          /* guest general registers, ModRM order */
    uint32_t eip;
    uint32_t eflags;           /* real EFLAGS image (IF is virtual, in vif) */
    uint32_t sel[6];           /* host selectors loaded on the way back */
    uint64_t fsbase;
    uint64_t gsbase;
    uint32_t cpl;
    uint32_t fastload;
    uint32_t vsel[6];
    uint32_t desc_gen;
    uint32_t loaded_gen;
    struct r3_segcache {
        uint32_t sel, host, addr, lo, hi, pad[3];
    } segc[6];
    uint32_t sysenter_to;
    uint32_t lazy_eip, lazy_esp, lazy_es, lazy_ds, lazy_ss, lazy_vcs, lazy_vss;
    volatile uint32_t lazy_entered;
};

_Static_assert(offsetof(struct r3_shared, vec_lazy) == SH_VEC_LAZY, "SH_VEC_LAZY");
_Static_assert(offsetof(struct r3_shared, fpu_sites) == SH_FPU_SITES, "SH_FPU_SITES");
_Static_assert(offsetof(struct r3_shared, entry) == SH_ENTRY, "SH_ENTRY");
_Static_assert(offsetof(struct r3_shared, regs) == SH_REGS, "SH_REGS");
_Static_assert(offsetof(struct r3_shared, eip) == SH_EIP, "SH_EIP");
_Static_assert(offsetof(struct r3_shared, eflags) == SH_EFLAGS, "SH_EFLAGS");
_Static_assert(offsetof(struct r3_shared, sel) == SH_SEL, "SH_SEL");
_Static_assert(offsetof(struct r3_shared, fsbase) == SH_FSBASE, "SH_FSBASE");
_Static_assert(offsetof(struct r3_shared, gsbase) == SH_GSBASE, "SH_GSBASE");
_Static_assert(offsetof(struct r3_shared, cpl) == SH_CPL, "SH_CPL");
_Static_assert(offsetof(struct r3_shared, fastload) == SH_FASTLOAD, "SH_FASTLOAD");
_Static_assert(offsetof(struct r3_shared, vsel) == SH_VSEL, "SH_VSEL");
_Static_assert(offsetof(struct r3_shared, desc_gen) == SH_DESC_GEN, "SH_DESC_GEN");
_Static_assert(offsetof(struct r3_shared, loaded_gen) == SH_LOADED_GEN, "SH_LOADED_GEN");
_Static_assert(offsetof(struct r3_shared, segc) == SH_SEGC, "SH_SEGC");
_Static_assert(sizeof(struct r3_segcache) == SEGC_SIZE, "SEGC_SIZE");
_Static_assert(offsetof(struct r3_shared, sysenter_to) == SH_SYSENTER_TO, "SH_SYSENTER_TO");
_Static_assert(offsetof(struct r3_shared, lazy_ss) == SH_LAZY_SS, "SH_LAZY_SS");
_Static_assert(offsetof(struct r3_shared, lazy_entered) == SH_LAZY_ENTERED, "SH_LAZY_ENTERED");
_Static_assert(sizeof(struct r3_shared) <= SH_SCRATCH, "SH_SCRATCH");

#define r3_shared_page ((struct r3_shared *)(uintptr_t)R3_SHARED)
#endif

#endif

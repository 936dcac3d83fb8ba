/* The CPU the guest sees: the host's CPUID with what ring3 does not emulate taken out, and the MSRs. */
#include <asm/prctl.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include "cpu_model.h"

#include "monitor/host/stats.h"
#include "monitor/mmu/mmu.h"

#include "vcpu.h"

#define MSR_TSC           0x10
#define MSR_BIOS_SIGN_ID  0x8B
#define MSR_SYSENTER_CS   0x174
#define MSR_SYSENTER_ESP  0x175
#define MSR_SYSENTER_EIP  0x176
#define MSR_MISC_ENABLE   0x1A0
#define MSR_PAT           0x277
#define MSR_EFER          0xC0000080
#define MSR_TSC_AUX       0xC0000103
#define MSR_AMD_HWCR      0xC0010015
#define MSR_AMD_NB_CFG    0xC001001F
#define HWCR_TSC_FREQ_SEL (1ull << 24)  /* the TSC counts at the P0 frequency */

/* Leaf 1 EDX (SDM vol. 2, CPUID, Table 3-11): keep FPU, PSE, TSC, MSR, PAE, CX8,
 * SEP, PGE, CMOV, PAT, CLFSH, MMX, FXSR, SSE, SSE2. Hidden: VME, DE, MCE,
 * APIC, MTRR, MCA, PSE-36, DS, ACPI, SS, HTT, TM, PBE (nothing emulates them). */
#define B(n) (1u << (n))
#define LEAF1_EDX_KEEP (B(0) | B(3) | B(4) | B(5) | B(6) | B(8) | B(11) | B(13) | B(15) | B(16) | \
                        B(19) | B(23) | B(24) | B(25) | B(26))
/* Leaf 1 ECX: hidden are DTES64, MONITOR, DS-CPL, VMX, SMX, EST, TM2, CNXT-ID,
 * SDBG, xTPR, PDCM, PCID, DCA, x2APIC and TSC-deadline. XSAVE, OSXSAVE and AVX
 * stay as the host has them: guest processes run on the real CPU and see its
 * vector state, so the guest kernel must save all of it (DESIGN.md); leaf 0xD
 * below says how. */
#define LEAF1_ECX_HIDE (B(2) | B(3) | B(4) | B(5) | B(6) | B(7) | B(8) | B(10) | B(11) | B(14) | \
                        B(15) | B(17) | B(18) | B(21) | B(24))
/* Leaf 7 EBX: hidden are TSC_ADJUST (its MSR is not emulated), SMEP, INVPCID,
 * SMAP and the Intel PT, RDT and SGX bits. */
#define LEAF7_EBX_HIDE (B(1) | B(2) | B(7) | B(10) | B(12) | B(15) | B(20) | B(25))
/* Leaf 7 ECX: hidden are UMIP, PKU, OSPKE and RDPID. RDPID reads IA32_TSC_AUX
 * unprivileged, and guest code runs it natively: it would return the host's
 * value (the host CPU's number), not the guest's. Without it Linux's vDSO
 * reads its CPU number with lsl, which ring3-as rewrites. */
#define LEAF7_ECX_HIDE (B(2) | B(3) | B(4) | B(22))

/* CPUID faulting (arch_prctl ARCH_SET_CPUID; Intel CPUs have it, this
 * kernel's AMD support needs Zen 4's CpuidUserDis): when on, a guest
 * process's cpuid raises #GP and gets the same filtered view as the guest
 * kernel, instead of the host's. The monitor's own cpuid faults too, so it
 * turns faulting off around it. */
static bool cpuid_faulting;

bool cpu_cpuid_faulting_on(void)
{
    cpuid_faulting = syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) == 0;
    return cpuid_faulting;
}

/* The host's answers, each asked once. In a virtual machine every CPUID exits to the
 * hypervisor, and with faulting on, the two arch_prctl around it write an MSR each: on a
 * 2-core Intel Xeon VM a CPUID took 8 us, and with them 27 us, while a static glibc
 * program's start-up asks about 59 times (init_cpu_features and the cache sizes, each a #GP
 * here): more than half of a fork and exec's time in ring3 (bench/programs/forkexec). A
 * leaf's values are the processor's and do not change while it runs (SDM vol. 2, CPUID),
 * but for the APIC IDs in leaves 1, 0xB and 0x1F and the core type of 0x1A, which differ by
 * the host CPU the monitor happens to run on: the guest's one CPU keeps the first it was
 * given. A (leaf, sub-leaf) is looked for in the HOST_CPUID_PROBE slots from where it
 * hashes, and a new one takes the first empty slot there, or the next of them in turn. */
#define HOST_CPUID_SLOTS 256
#define HOST_CPUID_PROBE 8
static struct host_answer {
    bool valid;
    uint32_t leaf, sub, out[4];
} host_answers[HOST_CPUID_SLOTS];

static struct host_answer *host_answer(uint32_t leaf, uint32_t sub)
{
    static unsigned turn;
    unsigned first = (leaf * 0x9E3779B1u ^ sub * 0x85EBCA6Bu) >> 24, empty = HOST_CPUID_SLOTS;
    for (unsigned i = 0; i < HOST_CPUID_PROBE; i++) {
        unsigned slot = (first + i) % HOST_CPUID_SLOTS;
        struct host_answer *a = &host_answers[slot];
        if (a->valid && a->leaf == leaf && a->sub == sub)
            return a;
        if (!a->valid && empty == HOST_CPUID_SLOTS)
            empty = slot;
    }
    if (empty == HOST_CPUID_SLOTS)
        empty = (first + turn++ % HOST_CPUID_PROBE) % HOST_CPUID_SLOTS;
    struct host_answer *a = &host_answers[empty];
    if (cpuid_faulting)
        syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __cpuid_count(leaf, sub, a->out[0], a->out[1], a->out[2], a->out[3]);
    if (cpuid_faulting)
        syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
    a->leaf = leaf;
    a->sub = sub;
    a->valid = true;
    stats_host_cpuid();
    return a;
}

/* Whether (leaf) ignores ECX: the basic leaves without sub-leaves that programs ask most
 * (SDM vol. 2, CPUID, Table 3-8; glibc leaves ECX as it was for leaf 0, a stack address that
 * differs at each exec), and the extended ones up to 0x80000008 (AMD APM vol. 3, E.4). Any
 * other leaf is looked up by its sub-leaf too, which may miss, but never answers wrongly. */
bool cpu_cpuid_without_subleaves(uint32_t leaf)
{
    switch (leaf) {
    case 0x0: case 0x1: case 0x2: case 0x3: case 0x5: case 0x6: case 0xA: case 0x15: case 0x16:
        return true;
    default:
        return leaf >= 0x80000000u && leaf <= 0x80000008u;
    }
}

static void host_cpuid(uint32_t leaf, uint32_t sub, uint32_t out[4])
{
    const struct host_answer *a = host_answer(leaf, cpu_cpuid_without_subleaves(leaf) ? 0 : sub);
    for (unsigned i = 0; i < 4; i++)
        out[i] = a->out[i];
}

/* XCR0 (SDM vol. 1, 13.3): x87 (bit 0), SSE (1), AVX (2), and AVX-512's opmask,
 * ZMM_Hi256 and Hi16_ZMM (5-7). Those are the user states whose CPUID feature
 * bits the guest sees as the host has them. Not offered: MPX (3-4), PKRU (9,
 * PKU is hidden) and AMX (17-18, leaf 7 EDX is zero), whatever the host's XCR0
 * enables: the guest kernel would leave them out of its XSAVE area, and the
 * area's size must then agree with leaf 0xD, or Linux turns XSAVE off and a
 * process's AVX registers are lost at every task switch. */
#define XCR0_X87  B(0)
#define XCR0_SSE  B(1)
#define XCR0_AVX  B(2)
#define XCR0_AVX512 (B(5) | B(6) | B(7))
#define XCR0_OFFERED (XCR0_X87 | XCR0_SSE | XCR0_AVX | XCR0_AVX512)
#define XSAVE_LEGACY_AND_HEADER 576u    /* the FXSAVE image, then the 64-byte header */

static uint64_t xcr0_offered(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32 | lo) & XCR0_OFFERED;
}

/* The size of a standard-format XSAVE area holding the states in (mask): the
 * end of the last one, each at the offset leaf 0xD sub-leaf i gives (SDM vol.
 * 1, 13.4.3). */
static uint32_t xsave_size(uint64_t mask)
{
    uint32_t size = XSAVE_LEGACY_AND_HEADER;
    for (unsigned i = 2; i < 64; i++) {
        if (!(mask >> i & 1))
            continue;
        uint32_t d[4];
        host_cpuid(0xD, i, d);
        if (d[1] + d[0] > size)
            size = d[1] + d[0];
    }
    return size;
}

/* Leaf 0xD, the XSAVE features (SDM vol. 2, CPUID, Table 3-8), as for the
 * guest's own XCR0. XSAVE and XRSTOR run natively in the guest kernel, on the
 * host's state; the guest names the states it saves in EDX:EAX. */
static void xsave_leaf(struct vcpu *v, uint32_t sub, uint32_t out[4])
{
    uint64_t offered = xcr0_offered();
    switch (sub) {
    case 0:
        out[0] = (uint32_t)offered;
        out[3] = (uint32_t)(offered >> 32);
        out[1] = xsave_size(v->xcr0);       /* for the states XCR0 enables now */
        out[2] = xsave_size(offered);       /* for every state it could enable */
        break;
    case 1:
        /* XSAVES is a CPL-0 instruction, not emulated, so no supervisor states
         * (ECX, EDX). XSAVEC goes too: the guest keeps the standard format. */
        out[0] &= ~(B(1) | B(3));
        out[1] = xsave_size(v->xcr0);
        out[2] = out[3] = 0;
        break;
    default:
        if (sub >= 64 || !(offered >> sub & 1))
            out[0] = out[1] = out[2] = out[3] = 0;
        break;
    }
}

bool cpu_xsetbv(struct vcpu *v, uint32_t index, uint64_t value)
{
    /* XSETBV (SDM vol. 2): only XCR0 is writable, x87 state is always on,
     * AVX needs SSE, AVX-512's three states go together and need AVX, and no
     * state the CPU (here: leaf 0xD) does not offer. */
    if (index != 0 || !(value & XCR0_X87) || (value & ~xcr0_offered()) ||
        ((value & XCR0_AVX) && !(value & XCR0_SSE)) ||
        ((value & XCR0_AVX512) && ((value & XCR0_AVX512) != XCR0_AVX512 || !(value & XCR0_AVX))))
        return false;
    v->xcr0 = value;
    return true;
}

void cpu_cpuid(struct vcpu *v, uint32_t leaf, uint32_t sub, uint32_t out[4])
{
    (void)v;
    host_cpuid(leaf, sub, out);
    switch (leaf) {
    case 1:
        out[1] &= 0x0000FFFFu;     /* one logical CPU, APIC ID 0 */
        out[2] &= ~LEAF1_ECX_HIDE;
        out[3] &= LEAF1_EDX_KEEP;
        break;
    case 7:
        if (sub == 0) {
            out[1] &= ~LEAF7_EBX_HIDE;
            out[2] &= ~LEAF7_ECX_HIDE;
            out[3] = 0;             /* speculation-control MSRs are not emulated */
        }
        break;
    case 0x6:
    case 0xA:
        /* Power management (EPB, HWP, APERF/MPERF) and Intel's architectural
         * performance counters: their MSRs are not emulated. */
        out[0] = out[1] = out[2] = out[3] = 0;
        break;
    case 0xD:
        xsave_leaf(v, sub, out);
        break;
    case 0x80000008:
        /* EBX: AMD's speculation-control bits (IBPB, IBRS, STIBP, SSBD and the rest)
         * promise MSRs that are not emulated (AMD APM vol. 3, E.4.7). CLZERO and
         * XSAVEERPTR, which need nothing of the monitor, stay. */
        out[1] &= B(0) | B(2);
        break;
    case 0x80000001:
        out[2] &= B(0) | B(5) | B(8);       /* LAHF, ABM, PREFETCHW */
        /* Hidden: SYSCALL, 1G pages, RDTSCP, LM. NX stays: PAE paging's XD bit is emulated. */
        out[3] &= ~(B(11) | B(26) | B(27) | B(29));
        break;
    default:
        break;
    }
}

bool cpu_rdmsr(struct vcpu *v, uint32_t msr, uint64_t *value)
{
    switch (msr) {
    case MSR_TSC: *value = __rdtsc(); return true;
    case MSR_SYSENTER_CS: *value = v->sysenter_cs; return true;
    case MSR_SYSENTER_ESP: *value = v->sysenter_esp; return true;
    case MSR_SYSENTER_EIP: *value = v->sysenter_eip; return true;
    case MSR_PAT: *value = v->msr_misc[0]; return true;
    case MSR_MISC_ENABLE: *value = v->msr_misc[1]; return true;
    case MSR_EFER: *value = v->efer; return true;
    /* RDTSCP and RDPID read the host's TSC_AUX when guest code runs them natively;
     * the guest kernel's own reads and writes see its value. */
    case MSR_TSC_AUX: *value = v->msr_misc[3]; return true;
    /* Linux reads and sets these on AMD CPUs without a fault handler; they hold
     * nothing ring3 models (AMD BKDG: HWCR, NB_CFG) but HWCR's TscFreqSel. */
    case MSR_AMD_HWCR: *value = HWCR_TSC_FREQ_SEL; return true;
    case MSR_AMD_NB_CFG: *value = 0; return true;
    /* Linux writes 0 to IA32_BIOS_SIGN_ID, runs cpuid and reads the microcode revision back
     * from its upper half on Intel CPUs of family 6 and up (SDM vol. 3, 10.11.7.1), with
     * wrmsr, not wrmsr_safe: a #GP is an "unchecked MSR access" warning, whose stack dump so
     * early in boot faulted. No microcode here: revision 1, as KVM reports by default. */
    case MSR_BIOS_SIGN_ID: *value = 1ull << 32; return true;
    default: return false;       /* #GP(0), as for an MSR the CPU does not have */
    }
}

bool cpu_wrmsr(struct vcpu *v, uint32_t msr, uint64_t value)
{
    switch (msr) {
    case MSR_TSC: return true;   /* the TSC is the host's; writes are dropped */
    case MSR_SYSENTER_CS: v->sysenter_cs = (uint32_t)value; return true;
    case MSR_SYSENTER_ESP: v->sysenter_esp = (uint32_t)value; return true;
    case MSR_SYSENTER_EIP: v->sysenter_eip = (uint32_t)value; return true;
    case MSR_PAT: v->msr_misc[0] = value; return true;
    case MSR_MISC_ENABLE: v->msr_misc[1] = value; return true;
    case MSR_EFER:
        /* Only NXE: SYSCALL and long mode are hidden, so SCE and LME are
         * reserved here (SDM vol. 4, 2.1). NXE decides what the host maps
         * executable: a change drops every mapping. */
        if (value & ~(uint64_t)EFER_NXE)
            return false;
        if ((v->efer ^ value) & EFER_NXE)
            mmu_flush(v, false);
        v->efer = value;
        return true;
    case MSR_TSC_AUX: v->msr_misc[3] = (uint32_t)value; return true;
    case MSR_AMD_HWCR: case MSR_AMD_NB_CFG: case MSR_BIOS_SIGN_ID: return true;
    default: return false;
    }
}

/* The guest's MAXPHYADDR: CPUID 0x80000008 EAX[7:0], which it sees as the
 * host has it, or 36 without that leaf (SDM vol. 3, 4.1.4). */
static unsigned maxphyaddr(void)
{
    uint32_t d[4];
    host_cpuid(0x80000000, 0, d);
    if (d[0] < 0x80000008)
        return 36;
    host_cpuid(0x80000008, 0, d);
    return d[0] & 0xFF;
}

void cpu_reset(struct vcpu *v)
{
    v->xcr0 = XCR0_X87;                         /* XCR0's value at reset (SDM vol. 1, 13.3) */
    v->efer = 0;
    /* PAE entries' reserved bits: MAXPHYADDR through 62 (SDM vol. 3, 4.4.2). */
    v->pae_reserved = ((1ull << 63) - 1) & ~((1ull << maxphyaddr()) - 1);
    v->msr_misc[0] = 0x0007040600070406ull;     /* the PAT's power-up value */
    v->msr_misc[1] = 1;                         /* fast strings enabled */
}

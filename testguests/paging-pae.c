/* paging-pae: PAE paging (SDM vol. 3, 4.4): PDPTEs, 2 MiB pages, A/D in 64-bit entries,
 * reserved bits, EFER.NXE and execute-disable at CPL 0 and 3, PDPTE checks on mov to cr3. */
#include "guest.h"

const char guest_name[] = "paging-pae";

#define VA_A        0x40000000u   /* 4 KiB page: A and D */
#define VA_NP       0x40001000u   /* PTE not present */
#define VA_CODE_XD  0x40002000u   /* the code page with XD */
#define VA_CODE     0x40003000u   /* the code page without XD */
#define VA_RSVD     0x40004000u   /* PTE with bit MAXPHYADDR set */
#define VA_UCODE_XD 0x40005000u   /* the code page, user, XD */
#define VA_UCODE    0x40006000u   /* the code page, user */
#define VA_USTACK   0x40007000u
#define VA_BIG_AD   0x40200000u   /* 2 MiB page: A and D */
#define VA_PDE_XD   0x40400000u   /* XD in the PDE only */
#define VA_BIG_RSVD 0x40600000u   /* 2 MiB page with bit 13 set */
#define VA_PDE_RSVD 0x40800000u   /* PDE with bit MAXPHYADDR set */
#define VA_NO_PDE   0x40A00000u
#define VA_NO_PDPTE 0x80000000u   /* PDPTE 2, not present */
#define PA_BIG      0x00400000u   /* 2 MiB page, identity at 4 MiB and read-only at 6 MiB */
#define VA_BIG_RO   0x00600000u
#define PA_BIG_AD   0x00600000u

#define PG_XD     (1ull << 63)
#define PAE_ADDR  0x000FFFFFFFFFF000ull
#define CR4_PAE   0x00000020u
#define MSR_EFER  0xC0000080u
#define EFER_NXE  0x800u
#define MIB4      0x400000u

/* Code for the code page. At 0: movl $0x600d600d, %eax; jmp *%ecx (back to run_at). At 0x10,
 * for ring 3: movl $0x600d600d, %eax; int $0x80. */
static const uint8_t code_kernel[] = { 0xB8, 0x0D, 0x60, 0x0D, 0x60, 0xFF, 0xE1 };
static const uint8_t code_user[] = { 0xB8, 0x0D, 0x60, 0x0D, 0x60, 0xCD, 0x80 };
#define CODE_USER_OFF 0x10

extern char __image_end[];

static uint64_t *pdpt;
static uint64_t rsvd_bit;       /* the lowest reserved address bit, MAXPHYADDR */
static uint8_t kstack0[4096] __attribute__((aligned(16)));

static uint32_t peek(uint32_t va) { return *(volatile uint32_t *)va; }
static void poke(uint32_t va, uint32_t v) { *(volatile uint32_t *)va = v; }

/* SDM vol. 3, 4.1.4: CPUID.80000008H:EAX[7:0], else 36 when PAE is supported. */
static unsigned maxphyaddr(void)
{
    uint32_t r[4];

    cpuid(0x80000000u, 0, r);
    if (r[0] < 0x80000008u)
        return 36;
    cpuid(0x80000008u, 0, r);
    return r[0] & 0xFF;
}

static uint64_t *pde_of(uint32_t va)
{
    return (uint64_t *)(uint32_t)(pdpt[va >> 30] & PAE_ADDR) + ((va >> 21) & 0x1FF);
}

static uint64_t *pte_of_pae(uint32_t va)
{
    return (uint64_t *)(uint32_t)(*pde_of(va) & PAE_ADDR) + ((va >> 12) & 0x1FF);
}

/* Maps va -> pa with flags (PG_P added); a new page table's PDE gets P|W|U. */
static void map_4k(uint32_t va, uint32_t pa, uint64_t flags)
{
    uint64_t *pde = pde_of(va);

    if (!(*pde & PTE_P))
        *pde = (uint32_t)page_alloc() | PTE_P | PTE_W | PTE_U;
    *pte_of_pae(va) = pa | flags | PTE_P;
}

/* A PDPT need only be 32-byte aligned (SDM vol. 3, 4.4.1): this one is not page-aligned. */
static uint64_t *pdpt_alloc(void)
{
    return (uint64_t *)((uint8_t *)page_alloc() + 0x60);
}

static void setup(void)
{
    uint32_t code = (uint32_t)page_alloc();
    uint32_t pa_a = (uint32_t)page_alloc(), pa_b = (uint32_t)page_alloc();

    if ((uint32_t)__image_end > MIB4)
        panic("setup: image ends above 4 MiB");
    rsvd_bit = 1ull << maxphyaddr();
    memcpy((void *)code, code_kernel, sizeof(code_kernel));
    memcpy((void *)(code + CODE_USER_OFF), code_user, sizeof(code_user));

    pdpt = pdpt_alloc();
    pdpt[0] = (uint32_t)page_alloc() | PTE_P;
    pdpt[1] = (uint32_t)page_alloc() | PTE_P;
    for (uint32_t va = 0; va < MIB4; va += 4096)
        map_4k(va, va, PTE_W);
    *pde_of(PA_BIG) = PA_BIG | PTE_PS | PTE_W | PTE_P;
    *pde_of(VA_BIG_RO) = PA_BIG | PTE_PS | PTE_P;

    map_4k(VA_A, pa_a, PTE_W);
    map_4k(VA_NP, pa_b, PTE_W);
    *pte_of_pae(VA_NP) &= ~(uint64_t)PTE_P;
    map_4k(VA_CODE_XD, code, PG_XD);
    map_4k(VA_CODE, code, 0);
    map_4k(VA_RSVD, pa_b, PTE_W | rsvd_bit);
    map_4k(VA_UCODE_XD, code, PTE_U | PG_XD);
    map_4k(VA_UCODE, code, PTE_U);
    map_4k(VA_USTACK, (uint32_t)page_alloc(), PTE_U | PTE_W);
    *pde_of(VA_BIG_AD) = PA_BIG_AD | PTE_PS | PTE_W | PTE_P;
    map_4k(VA_PDE_XD, code, 0);
    *pde_of(VA_PDE_XD) |= PG_XD;
    *pde_of(VA_BIG_RSVD) = PA_BIG_AD | (1u << 13) | PTE_PS | PTE_W | PTE_P;
    map_4k(VA_PDE_RSVD, pa_a, PTE_W);
    *pde_of(VA_PDE_RSVD) |= rsvd_bit;
}

/* SDM vol. 3, 4.1.2: PAE paging is CR0.PG with CR4.PAE; cr3 names the PDPT. */
static void enable(void)
{
    uint32_t r[4];

    cpuid(1, 0, r);
    kprintf("cpuid: pae %u", (r[3] >> 6) & 1);
    cpuid(0x80000001u, 0, r);
    kprintf(" nx %u\n", (r[3] >> 20) & 1);

    lcr3((uint32_t)pdpt);
    lcr4(rcr4() | CR4_PAE);
    lcr0(rcr0() | CR0_PG | CR0_WP);
    kprintf("pae paging: cr0 0x%08x cr4 0x%08x cr3 %s\n", rcr0() & (CR0_PG | CR0_WP | CR0_PE),
            rcr4() & (CR4_PAE | CR4_PSE | CR4_PGE), rcr3() == (uint32_t)pdpt ? "= pdpt" : "WRONG");
}

static void test_big_page(void)
{
    poke(PA_BIG + 0x123450, 0xCAFE0002);
    kprintf("2 MiB page: via read-only alias 0x%08x\n", peek(VA_BIG_RO + 0x123450));
    PROBE("write 2 MiB read-only alias", "movl %%eax, 0x00723450");
}

/* SDM vol. 3, 4.8: A in every entry used, D in the one that maps the page; both sit in the
 * low dword of a 64-bit entry. */
static void show_ad(const char *what, uint32_t va)
{
    uint64_t pde = *pde_of(va);

    if (pde & PTE_PS)
        kprintf("%s: pde 0x%03x\n", what, (uint32_t)pde & 0xFFF);
    else
        kprintf("%s: pte 0x%03x pde 0x%03x\n", what, (uint32_t)*pte_of_pae(va) & 0xFFF,
                (uint32_t)pde & 0xFFF);
}

static void test_accessed_dirty(void)
{
    show_ad("4k fresh", VA_A);
    (void)peek(VA_A);
    show_ad("4k after read", VA_A);
    poke(VA_A, 1);
    show_ad("4k after write", VA_A);
    show_ad("2M fresh", VA_BIG_AD);
    (void)peek(VA_BIG_AD + 0x1000);
    show_ad("2M after read", VA_BIG_AD);
    poke(VA_BIG_AD + 0x2000, 2);
    show_ad("2M after write", VA_BIG_AD);
}

/* SDM vol. 3, 4.7: P clear for a not-present entry at any level, a PDPTE included. */
static void test_not_present(void)
{
    PROBE("read not-present pte", "movl 0x40001008, %%eax");
    PROBE("write not-present pte", "movl %%eax, 0x4000100c");
    PROBE("read not-present pde", "movl 0x40a00000, %%eax");
    PROBE("read not-present pdpte", "movl 0x80000008, %%eax");
    PROBE("write not-present pdpte", "movl %%eax, 0xc0000000");
}

/* SDM vol. 3, 4.4.2 and 4.7: a reserved bit in a present entry is #PF with P and RSVD. Without
 * EFER.NXE bit 63 (XD) is reserved too. */
static void test_reserved(void)
{
    PROBE("read pte with bit maxphyaddr", "movl 0x40004000, %%eax");
    PROBE("write pte with bit maxphyaddr", "movl %%eax, 0x40004000");
    PROBE("read pde with bit maxphyaddr", "movl 0x40800000, %%eax");
    PROBE("read 2 MiB pde with bit 13", "movl 0x40600000, %%eax");
    PROBE("read pte with xd, nxe 0", "movl 0x40002000, %%eax");
}

static const char *fetch_name;

/* An instruction fetch fault saves EIP = CR2; at CPL 0 resume at %ecx, from ring 3 return. */
static void fetch_fault(struct trapframe *tf)
{
    kprintf("  %s: #PF(0x%04x) cr2=0x%08x cs=0x%04x eip %s\n", fetch_name, tf->err, rcr2(),
            tf->cs & 0xFFFF, tf->eip == rcr2() ? "= cr2" : "WRONG");
    if (tf->cs & 3)
        user_return(0);
    tf->eip = tf->ecx;
}

/* Runs the code page's kernel half at va, or reports the fetch fault. */
static void run_at(const char *name, uint32_t va)
{
    uint32_t r = 0;

    fetch_name = name;
    trap_set_handler(14, fetch_fault);
    __asm__ __volatile__("movl $1f, %%ecx\n\tjmp *%1\n1:" : "+a"(r) : "r"(va) : "ecx", "memory");
    trap_set_handler(14, 0);
    if (r)
        kprintf("  %s: ran, eax 0x%08x\n", name, r);
}

static void on_user_int(struct trapframe *tf)
{
    user_return(tf->eax);
}

/* Enters ring 3 at va, the code page's user half, or reports the fetch fault. */
static void run_user_at(const char *name, uint32_t va)
{
    fetch_name = name;
    trap_set_handler(14, fetch_fault);
    uint32_t r = user_enter(va, VA_USTACK + 4096, 0x2);
    trap_set_handler(14, 0);
    if (r)
        kprintf("  %s: ran, eax 0x%08x\n", name, r);
}

/* SDM vol. 3, 4.6.2: with EFER.NXE, XD at any level forbids fetches; 4.7: I/D reports a fetch
 * (NXE set) whatever the cause. */
static void test_execute_disable(void)
{
    run_at("fetch not-present, nxe 0", VA_NP);
    run_at("fetch xd page, nxe 0", VA_CODE_XD);

    uint64_t efer = rdmsr(MSR_EFER);
    kprintf("efer: 0x%08x:%08x", (uint32_t)(efer >> 32), (uint32_t)efer);
    wrmsr(MSR_EFER, efer | EFER_NXE);
    efer = rdmsr(MSR_EFER);
    kprintf(", with nxe 0x%08x:%08x\n", (uint32_t)(efer >> 32), (uint32_t)efer);

    PROBE("read xd page", "movl 0x40002000, %%eax");
    uint64_t pte = *pte_of_pae(VA_CODE_XD);
    kprintf("xd pte after read: high 0x%08x low 0x%03x\n", (uint32_t)(pte >> 32),
            (uint32_t)pte & 0xFFF);
    run_at("fetch xd page", VA_CODE_XD);
    run_at("fetch same page without xd", VA_CODE);
    run_at("fetch under xd pde", VA_PDE_XD);
    run_at("fetch not-present", VA_NP);
    run_at("fetch pte with bit maxphyaddr", VA_RSVD);

    tss_init((uint32_t)kstack0 + sizeof(kstack0));
    idt_set_gate(0x80, (uint32_t)trap_stubs + TRAP_STUB_SIZE * 0x80, GATE_TRAP, 3);
    trap_set_handler(0x80, on_user_int);
    run_user_at("ring 3 fetch xd page", VA_UCODE_XD + CODE_USER_OFF);
    run_user_at("ring 3 fetch same page without xd", VA_UCODE + CODE_USER_OFF);
}

/* SDM vol. 3, 4.4.1: mov to cr3 loads the four PDPTEs; a present one with a reserved bit (2:1,
 * 8:5, 63:MAXPHYADDR) is #GP(0) and cr3 keeps its value. Not-present entries are not checked. */
static void test_cr3_pdptes(void)
{
    uint64_t *bad = pdpt_alloc();

    memcpy(bad, pdpt, 4 * sizeof(*bad));
    bad[2] = 0xFFFFFFFEFFFFFFFEull;
    PROBE("mov cr3, reserved bits in not-present pdpte", "movl %0, %%cr3", "r"(bad));
    kprintf("cr3 %s\n", rcr3() == (uint32_t)bad ? "= new pdpt" : "WRONG");
    lcr3((uint32_t)pdpt);

    bad[2] = bad[1] | PTE_W;
    PROBE("mov cr3, pdpte with bit 1", "movl %0, %%cr3", "r"(bad));
    kprintf("cr3 %s\n", rcr3() == (uint32_t)pdpt ? "unchanged" : "changed");
    lcr3((uint32_t)pdpt);

    bad[2] = bad[1] | 0x100;
    PROBE("mov cr3, pdpte with bit 8", "movl %0, %%cr3", "r"(bad));
    kprintf("cr3 %s\n", rcr3() == (uint32_t)pdpt ? "unchanged" : "changed");
    lcr3((uint32_t)pdpt);

    bad[2] = bad[1] | rsvd_bit;
    PROBE("mov cr3, pdpte with bit maxphyaddr", "movl %0, %%cr3", "r"(bad));
    kprintf("cr3 %s, 0x40000000 reads 0x%08x\n", rcr3() == (uint32_t)pdpt ? "unchanged" : "changed",
            peek(VA_A));
    lcr3((uint32_t)pdpt);
}

int guest_main(void)
{
    setup();
    enable();
    test_big_page();
    test_accessed_dirty();
    test_not_present();
    test_reserved();
    test_execute_disable();
    test_cr3_pdptes();
    return 0;
}

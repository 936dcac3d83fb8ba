/* paging: 4 KiB and 4 MiB pages, aliases, invlpg, cr3, global pages, #PF codes, demand faults. */
#include "guest.h"

const char guest_name[] = "paging";

#define VA_X      0x40000000u   /* page A */
#define VA_Y      0x40001000u   /* page A again, later B */
#define VA_Z      0x40002000u   /* page B, then not present, then read-only */
#define VA_G      0x40003000u   /* global mapping */
#define VA_RO_PDE 0x40400000u   /* writable PTE under a read-only PDE */
#define VA_DEMAND 0x50000000u   /* mapped by the #PF handler */
#define VA_NOPDE  0x80000000u
#define PA_BIG    0x00400000u   /* 4 MiB page, identity at 4 MiB and read-only at 8 MiB */
#define VA_BIG_RO 0x00800000u

static uint32_t *pd;
static uint32_t pa_a, pa_b, pa_c;

static uint32_t peek(uint32_t va) { return *(volatile uint32_t *)va; }
static void poke(uint32_t va, uint32_t v) { *(volatile uint32_t *)va = v; }

static void setup(void)
{
    pd = paging_identity(PTE_W);
    pa_a = (uint32_t)page_alloc();
    pa_b = (uint32_t)page_alloc();
    pa_c = (uint32_t)page_alloc();
    for (int i = 0; i < 1024; i++) {
        ((uint32_t *)pa_a)[i] = 0xAAAA0000 + i;
        ((uint32_t *)pa_b)[i] = 0xBBBB0000 + i;
    }
    pd[PA_BIG >> 22] = PA_BIG | PTE_PS | PTE_W | PTE_P;
    pd[VA_BIG_RO >> 22] = PA_BIG | PTE_PS | PTE_P;
    map_page(pd, VA_X, pa_a, PTE_W);
    map_page(pd, VA_Y, pa_a, PTE_W);
    map_page(pd, VA_Z, pa_b, PTE_W);
    map_page(pd, VA_G, pa_a, PTE_W | PTE_G);
    map_page(pd, VA_RO_PDE, pa_c, PTE_W);
    pd[VA_RO_PDE >> 22] &= ~(uint32_t)PTE_W;
}

static void test_big_pages(void)
{
    poke(PA_BIG + 0x123450, 0xCAFE0001);
    kprintf("4 MiB page: via read-only alias 0x%08x\n", peek(VA_BIG_RO + 0x123450));
    PROBE("write 4 MiB read-only alias", "movl %%eax, 0x00923450");
}

static void test_aliases(void)
{
    poke(VA_X + 0x10, 0x11110010);
    kprintf("alias: wrote 0x40000010, read 0x40001010 = 0x%08x\n", peek(VA_Y + 0x10));

    *pte_of(pd, VA_Y) = pa_b | PTE_W | PTE_P;
    invlpg(VA_Y);
    kprintf("invlpg: 0x40001000 now reads 0x%08x\n", peek(VA_Y + 4));

    *pte_of(pd, VA_Y) = pa_a | PTE_W | PTE_P;
    lcr3(rcr3());
    kprintf("cr3 reload: 0x40001000 now reads 0x%08x\n", peek(VA_Y + 4));
}

/* Which page the 6 bytes of sidt at (off) in VA_Y reached: A, B, both or neither. */
static const char *sidt_landed(uint32_t off, uint32_t base)
{
    int a = *(volatile uint32_t *)(pa_a + off + 2) == base;
    int b = *(volatile uint32_t *)(pa_b + off + 2) == base;
    return a && b ? "both" : a ? "A" : b ? "B" : "neither";
}

/* The emulator's own reads and writes of guest memory (sidt and lidt are rewritten, so under
 * ring3 the monitor makes their accesses) follow invlpg and a cr3 reload as the CPU's do (SDM
 * 4.10.4.1), and set the accessed flag, then the dirty flag at the first write, even where a
 * read reached the page before (4.8). */
static void test_emulated_accesses(void)
{
    struct { uint16_t limit; uint32_t base; } __attribute__((packed)) idt;
    __asm__ __volatile__("sidt %0" : "=m"(idt));
    __asm__ __volatile__("sidt 0x40001040" : : : "memory");
    *pte_of(pd, VA_Y) = pa_b | PTE_W | PTE_P;
    invlpg(VA_Y);
    __asm__ __volatile__("sidt 0x40001050" : : : "memory");
    *pte_of(pd, VA_Y) = pa_a | PTE_W | PTE_P;
    lcr3(rcr3());
    __asm__ __volatile__("sidt 0x40001060" : : : "memory");
    kprintf("sidt at 0x40001040 reached %s; after invlpg to page B, %s; after cr3 reload to A, %s\n",
            sidt_landed(0x40, idt.base), sidt_landed(0x50, idt.base), sidt_landed(0x60, idt.base));
    *pte_of(pd, VA_Y) = pa_a | PTE_W | PTE_P;
    invlpg(VA_Y);
    uint32_t clean = *pte_of(pd, VA_Y) & (PTE_A | PTE_D);
    __asm__ __volatile__("lidt 0x40001040" : : : "memory");
    uint32_t read = *pte_of(pd, VA_Y) & (PTE_A | PTE_D);
    __asm__ __volatile__("sidt 0x40001070" : : : "memory");
    uint32_t written = *pte_of(pd, VA_Y) & (PTE_A | PTE_D);
    kprintf("VA_Y's A and D: 0x%02x, after lidt 0x%02x, after sidt 0x%02x\n", clean, read, written);
}

/* SDM 4.10.2.4: invlpg drops a global translation too; clearing CR4.PGE drops them all. */
static void test_global(void)
{
    lcr4(rcr4() | CR4_PGE);
    kprintf("global: 0x%08x\n", peek(VA_G + 8));
    *pte_of(pd, VA_G) = pa_b | PTE_W | PTE_G | PTE_P;
    invlpg(VA_G);
    kprintf("global after invlpg: 0x%08x\n", peek(VA_G + 8));
    *pte_of(pd, VA_G) = pa_a | PTE_W | PTE_G | PTE_P;
    lcr4(rcr4() & ~CR4_PGE);
    lcr4(rcr4() | CR4_PGE);
    kprintf("global after cr4.pge toggle: 0x%08x\n", peek(VA_G + 8));
}

/* SDM 4.7: error code bit 0 = present, bit 1 = write, bit 2 = user. */
static void test_fault_codes(void)
{
    *pte_of(pd, VA_Z) = pa_b | PTE_W;          /* not present */
    invlpg(VA_Z);
    PROBE("read not-present pte", "movl 0x40002008, %%eax");
    PROBE("write not-present pte", "movl %%eax, 0x4000200c");
    PROBE("lidt from not-present page", "lidt 0x40002010");
    PROBE("read no page table", "movl 0x80000000, %%eax");

    *pte_of(pd, VA_Z) = pa_b | PTE_P;          /* read-only */
    invlpg(VA_Z);
    PROBE("read read-only pte", "movl 0x40002008, %%eax");
    PROBE("write read-only pte", "movl %%eax, 0x40002008");
    PROBE("sgdt to read-only page", "sgdt 0x40002010");
    PROBE("write under read-only pde", "movl %%eax, 0x40400000");
    kprintf("read-only page still 0x%08x 0x%08x\n", peek(VA_Z + 8), peek(VA_Z + 0x10));
}

static uint32_t demand_faults;

/* Maps the faulting page and returns: the CPU restarts the instruction (SDM 6.5). */
static void demand_map(struct trapframe *tf)
{
    uint32_t cr2 = rcr2();

    demand_faults++;
    kprintf("  demand fault: cr2=0x%08x err=0x%x\n", cr2, tf->err);
    map_page(pd, cr2, pa_c, PTE_W);
}

/* An instruction fetch fault saves EIP = CR2; resume at the address in %ecx. */
static void fetch_fault(struct trapframe *tf)
{
    kprintf("  fetch fault: cr2=0x%08x err=0x%x eip %s\n", rcr2(), tf->err,
            tf->eip == rcr2() ? "= cr2" : "WRONG");
    tf->eip = tf->ecx;
}

static void test_restart(void)
{
    trap_set_handler(14, demand_map);
    poke(VA_DEMAND + 0x20, 0xDE3A0020);
    kprintf("demand: %u fault, read back 0x%08x\n", demand_faults, peek(VA_DEMAND + 0x20));

    trap_set_handler(14, fetch_fault);
    __asm__ __volatile__("movl $1f, %%ecx\n\tjmp *%0\n1:"
                         : : "r"(VA_NOPDE + 0x40) : "ecx", "memory");
    trap_set_handler(14, 0);
}

int guest_main(void)
{
    setup();
    paging_enable(pd);
    kprintf("paging: cr0 0x%08x cr4 0x%08x cr3 %s\n", rcr0() & (CR0_PG | CR0_WP | CR0_PE),
            rcr4() & CR4_PSE, rcr3() == (uint32_t)pd ? "= pd" : "WRONG");

    test_big_pages();
    test_aliases();
    test_emulated_accesses();
    test_global();
    test_fault_codes();
    test_restart();
    return 0;
}

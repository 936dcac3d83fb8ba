/* accessed-dirty: the A and D bits the CPU sets in PTEs and PDEs, including for sgdt/lidt operands. */
#include "guest.h"

const char guest_name[] = "accessed-dirty";

#define VA_P    0x40000000u   /* 4 KiB page */
#define VA_Q    0x40001000u   /* 4 KiB page for sgdt/lidt */
#define VA_R    0x40002000u   /* 4 KiB pages for the cr3 switch */
#define VA_S    0x40003000u
#define VA_T    0x40004000u
#define VA_BIG  0x00800000u   /* 4 MiB page */
#define PA_BIG  0x00400000u

static uint32_t *pd;

static uint32_t peek(uint32_t va) { return *(volatile uint32_t *)va; }
static void poke(uint32_t va, uint32_t v) { *(volatile uint32_t *)va = v; }

/* The entry that maps va: the PTE, or the PDE of a 4 MiB page. */
static uint32_t *leaf(uint32_t va)
{
    uint32_t *pde = &pd[va >> 22];

    return (*pde & PTE_PS) ? pde : pte_of(pd, va);
}

/* Clears A and D in the leaf entry and A in the PDE, then drops the
 * translation (SDM 4.10.4.2: software that clears A or D must invalidate). */
static void clear_ad(uint32_t va)
{
    *leaf(va) &= ~(uint32_t)(PTE_A | PTE_D);
    pd[va >> 22] &= ~(uint32_t)PTE_A;
    invlpg(va);
}

static void show(const char *what, uint32_t va)
{
    uint32_t e = *leaf(va), pde = pd[va >> 22];

    kprintf("%s: A%u D%u", what, (e & PTE_A) ? 1 : 0, (e & PTE_D) ? 1 : 0);
    if (!(pde & PTE_PS))
        kprintf(", pde A%u", (pde & PTE_A) ? 1 : 0);
    kprintf("\n");
}

static void test_small_page(void)
{
    show("4k fresh", VA_P);
    (void)peek(VA_P);
    show("4k after read", VA_P);
    poke(VA_P, 1);
    show("4k after write", VA_P);

    clear_ad(VA_P);
    show("4k cleared", VA_P);
    (void)peek(VA_P + 4);
    show("4k read after clear+invlpg", VA_P);
    clear_ad(VA_P);
    poke(VA_P + 8, 2);
    show("4k write after clear+invlpg", VA_P);

    /* A cached translation with D=0 must not let a write through silently (SDM 4.8). */
    clear_ad(VA_P);
    (void)peek(VA_P);
    poke(VA_P, 3);
    show("4k read then write, no invlpg", VA_P);
}

static void test_big_page(void)
{
    show("4M fresh", VA_BIG);
    (void)peek(VA_BIG + 0x1000);
    show("4M after read", VA_BIG);
    poke(VA_BIG + 0x2000, 4);
    show("4M after write", VA_BIG);
    clear_ad(VA_BIG);
    (void)peek(VA_BIG + 0x3000);
    show("4M read after clear+invlpg", VA_BIG);
    poke(VA_BIG + 0x3000, 5);
    show("4M then write", VA_BIG);
}

/* Accesses the CPU makes itself, for sgdt and lidt, set the bits as well. */
static void test_implicit(void)
{
    struct dtr g;

    clear_ad(VA_Q);
    sgdt((struct dtr *)VA_Q);
    show("4k after sgdt to it", VA_Q);
    clear_ad(VA_Q);
    sidt(&g);
    *(volatile struct dtr *)VA_Q = g;
    clear_ad(VA_Q);
    lidt((const struct dtr *)VA_Q);
    show("4k after lidt from it", VA_Q);
}

static uint32_t bits(uint32_t entry)
{
    return ((entry & PTE_A) ? 2 : 0) | ((entry & PTE_D) ? 1 : 0);
}

/* A cr3 write drops every translation that is not global (SDM vol. 3, 4.10.4.1): accesses
 * then go through the new tables and set their own A and D bits. Under pd2, VA_P is another
 * frame, VA_Q the same frame read-only, VA_R and VA_S the same frame writable with A and D
 * clear (VA_S only read before the switch), VA_T another frame with A already set. */
static void test_cr3_switch(void)
{
    uint32_t *pd2 = paging_identity(PTE_W), *p2 = page_alloc(), *t2 = page_alloc();
    uint32_t q = *pte_of(pd, VA_Q) & ~0xFFFu, r = *pte_of(pd, VA_R) & ~0xFFFu;
    uint32_t s = *pte_of(pd, VA_S) & ~0xFFFu;

    *p2 = 0x2222;
    map_page(pd2, VA_P, (uint32_t)p2, PTE_W);
    map_page(pd2, VA_Q, q, 0);
    map_page(pd2, VA_R, r, PTE_W);
    map_page(pd2, VA_S, s, PTE_W);
    map_page(pd2, VA_T, (uint32_t)t2, PTE_W | PTE_A);
    *t2 = 0x7777;
    poke(VA_T, 0x6666);
    (void)peek(VA_S);
    poke(VA_P, 0x1111);
    poke(VA_Q, 0x3333);
    poke(VA_R, 0x4444);
    lcr3((uint32_t)pd2);
    kprintf("cr3 switch: P 0x%x Q 0x%x R 0x%x S 0x%x;", peek(VA_P), peek(VA_Q), peek(VA_R),
            peek(VA_S));
    kprintf(" pd2 AD: P %u Q %u R %u S %u;", bits(*pte_of(pd2, VA_P)), bits(*pte_of(pd2, VA_Q)),
            bits(*pte_of(pd2, VA_R)), bits(*pte_of(pd2, VA_S)));
    poke(VA_R, 0x5555);
    kprintf(" R after write %u;", bits(*pte_of(pd2, VA_R)));
    kprintf(" T 0x%x AD %u,", peek(VA_T), bits(*pte_of(pd2, VA_T)));
    poke(VA_T, 0x8888);
    kprintf(" after write %u;", bits(*pte_of(pd2, VA_T)));
    lcr3((uint32_t)pd);
    kprintf(" back: P 0x%x R 0x%x T 0x%x\n", peek(VA_P), peek(VA_R), peek(VA_T));
}

int guest_main(void)
{
    pd = paging_identity(PTE_W);
    map_page(pd, VA_P, (uint32_t)page_alloc(), PTE_W);
    map_page(pd, VA_Q, (uint32_t)page_alloc(), PTE_W);
    map_page(pd, VA_R, (uint32_t)page_alloc(), PTE_W);
    map_page(pd, VA_S, (uint32_t)page_alloc(), PTE_W);
    map_page(pd, VA_T, (uint32_t)page_alloc(), PTE_W);
    pd[VA_BIG >> 22] = PA_BIG | PTE_PS | PTE_W | PTE_P;
    paging_enable(pd);

    test_small_page();
    test_big_page();
    test_implicit();
    test_cr3_switch();
    return 0;
}

/* Two-level page tables for the guests that turn paging on (SDM 4.3, 32-bit paging). */
#include "guest.h"

#define POOL_PAGES 32
#define MIB4 0x400000u

extern char __image_end[];

static uint8_t pool[POOL_PAGES][4096] __attribute__((aligned(4096)));
static int pool_used;

void *page_alloc(void)
{
    if (pool_used == POOL_PAGES)
        panic("page_alloc: pool of %d pages exhausted", POOL_PAGES);
    void *p = pool[pool_used++];
    memset(p, 0, 4096);
    return p;
}

uint32_t *pte_of(uint32_t *pd, uint32_t va)
{
    uint32_t pde = pd[va >> 22];

    if (!(pde & PTE_P) || (pde & PTE_PS))
        return 0;
    return (uint32_t *)(pde & ~0xFFFu) + ((va >> 12) & 0x3FF);
}

void map_page(uint32_t *pd, uint32_t va, uint32_t pa, uint32_t flags)
{
    uint32_t *pde = &pd[va >> 22];

    if (!(*pde & PTE_P))
        *pde = (uint32_t)page_alloc() | PTE_P | PTE_W | PTE_U;
    if (*pde & PTE_PS)
        panic("map_page: 0x%08x lies in a 4 MiB page", va);
    uint32_t *pt = (uint32_t *)(*pde & ~0xFFFu);
    pt[(va >> 12) & 0x3FF] = (pa & ~0xFFFu) | flags | PTE_P;
}

uint32_t *paging_identity(uint32_t flags)
{
    uint32_t *pd = page_alloc();

    if ((uint32_t)__image_end > MIB4)
        panic("paging_identity: image ends above 4 MiB");
    for (uint32_t va = 0; va < MIB4; va += 4096)
        map_page(pd, va, va, flags);
    return pd;
}

void paging_enable(uint32_t *pd)
{
    lcr3((uint32_t)pd);
    lcr4(rcr4() | CR4_PSE);
    lcr0(rcr0() | CR0_PG | CR0_WP);
}

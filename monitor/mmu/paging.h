/* The guest's page tables as the CPU reads them: 2-level IA-32 paging with 4 MiB pages (SDM vol. 3, 4.3). */
#ifndef RING3_PAGING_H
#define RING3_PAGING_H

#include <stdbool.h>
#include <stdint.h>

#include "monitor/cpu/vcpu.h"

#define PG_P   0x001u
#define PG_RW  0x002u
#define PG_US  0x004u
#define PG_A   0x020u
#define PG_D   0x040u
#define PG_PS  0x080u
#define PG_G   0x100u

#define PF_P 0x1    /* #PF error code (SDM vol. 3, 4.7) */
#define PF_W 0x2
#define PF_U 0x4

struct walk {
    uint32_t phys;          /* physical address of the byte */
    uint32_t pde_at, pte_at;
    uint32_t pde, pte;      /* pte == pde for a 4 MiB page */
    bool large;
};

/* Walk the page tables for a (write) access to (linear) at user level
 * (user). Returns 0 and fills (w), or, when the access faults, the #PF error
 * code in the low 16 bits (bit 16 is set too when the page is not present,
 * whose code may be 0). Sets the accessed and dirty flags as the CPU would
 * when (commit) (SDM vol. 3, 4.8). With paging off, linear is physical. */
int paging_walk(struct vcpu *v, uint32_t linear, bool write, bool user, bool commit, struct walk *w);

#endif

/* The guest's page tables as the CPU reads them: 32-bit paging with 4 MiB pages (SDM vol. 3,
 * 4.3) and PAE paging with 2 MiB pages and the execute-disable bit (4.4). */
#ifndef RING3_PAGING_H
#define RING3_PAGING_H

#include <stdbool.h>
#include <stdint.h>

#include "monitor/cpu/vcpu.h"

#include "mmu.h"

#define PG_P   0x001u
#define PG_RW  0x002u
#define PG_US  0x004u
#define PG_A   0x020u
#define PG_D   0x040u
#define PG_PS  0x080u
#define PG_G   0x100u
#define PG_XD  (1ull << 63)     /* PAE: execute-disable, with EFER.NXE (SDM vol. 3, 4.4.2) */

#define PF_P    0x01    /* #PF error code (SDM vol. 3, 4.7) */
#define PF_W    0x02
#define PF_U    0x04
#define PF_RSVD 0x08
#define PF_I    0x10

struct walk {
    uint64_t phys;          /* physical address of the byte */
    uint64_t pde_at, pte_at;
    uint64_t pde, pte;      /* pte == pde for a large page */
    bool large;             /* a 4 MiB page (32-bit paging) or a 2 MiB one (PAE) */
    bool nx;                /* an instruction fetch would fault: XD set at either level */
};

/* Whether PAE paging is in force (CR0.PG and CR4.PAE, SDM vol. 3, 4.1.1). */
static inline bool paging_pae(const struct vcpu *v)
{
    return (v->cr0 & CR0_PG) && (v->cr4 & CR4_PAE);
}

/* The physical address of the top-level table CR3 names: a page directory
 * (bits 31:12), or under PAE the page-directory-pointer table (bits 31:5). */
static inline uint32_t paging_root(const struct vcpu *v)
{
    return v->cr3 & ((v->cr4 & CR4_PAE) ? ~0x1Fu : ~0xFFFu);
}

/* Walk the page tables for an (access) to (linear) at user level (user).
 * Returns 0 and fills (w), or, when the access faults, the #PF error code in
 * the low 16 bits (bit 16 is set too when the page is not present, whose
 * code may be 0). Sets the accessed and dirty flags as the CPU would when
 * (commit) (SDM vol. 3, 4.8). With paging off, linear is physical. */
int paging_walk(struct vcpu *v, uint32_t linear, enum mmu_access access, bool user, bool commit,
                struct walk *w);

/* For a debugger's look (gdb, the monitor's x): the host address of the guest byte at (linear)
 * through the tables in force, as a supervisor read that sets no accessed or dirty flag; NULL
 * when it is not mapped. (*phys) gets its physical address, (*room) the bytes left in its page. */
uint8_t *paging_peek(struct vcpu *v, uint32_t linear, uint64_t *phys, uint32_t *room);

/* Under PAE, load the four PDPTE registers from the table CR3 names, as a
 * mov to CR3, or one to CR0 or CR4 that turns PAE paging on or changes PGE
 * or PSE, does (SDM vol. 3, 4.4.1). Returns false, loading nothing, when a
 * present entry has a reserved bit set: the mov then raises #GP(0). Without
 * PAE paging, loads nothing and returns true. */
bool paging_load_pdptes(struct vcpu *v);

#endif

/* The guest MMU: 32-bit and PAE paging (monitor/mmu/paging.c), host mappings as the TLB. */
#ifndef RING3_MMU_H
#define RING3_MMU_H

#include <stdbool.h>
#include <stdint.h>

#include "monitor/cpu/vcpu.h"

enum mmu_access { MMU_READ = 0, MMU_WRITE = 1, MMU_FETCH = 2 };

/* Copy between the monitor and guest linear memory, walking the guest page
 * tables with the permission of (supervisor ? CPL 0 : the current CPL);
 * raises #PF (with CR2) like the CPU. Accessed and dirty bits are set. */
void mmu_read(struct vcpu *v, uint32_t linear, void *buf, uint32_t len, bool supervisor);
void mmu_write(struct vcpu *v, uint32_t linear, const void *buf, uint32_t len, bool supervisor);
uint32_t mmu_read32(struct vcpu *v, uint32_t linear, bool supervisor);
uint16_t mmu_read16(struct vcpu *v, uint32_t linear);
void mmu_write32(struct vcpu *v, uint32_t linear, uint32_t value, bool supervisor);
void mmu_write16(struct vcpu *v, uint32_t linear, uint16_t value);

/* Map the page holding (linear) into the host after a host fault of kind
 * (access) by guest code at the current CPL. Returns true when mapped; false
 * when the guest itself would fault (the caller raises #PF with
 * mmu_fault_error()). */
bool mmu_fill(struct vcpu *v, uint32_t linear, enum mmu_access access);
int mmu_fault_error(struct vcpu *v, uint32_t linear, enum mmu_access access, bool supervisor);

/* Whether the current CPL may read (linear) now; changes no flag. */
bool mmu_readable(struct vcpu *v, uint32_t linear);

/* Map the page holding (linear) for a read at the current CPL if the guest's
 * page tables now allow it, without a host fault first; nothing if not. For
 * the access a guest page-fault handler is about to retry. Sets only the
 * accessed flag, as a CPU caching a translation ahead of use may (SDM
 * vol. 3, 4.10.2.3); a page not yet dirty is mapped read-only, as ever. */
void mmu_prefill(struct vcpu *v, uint32_t linear);

/* Drop host mappings: one page (invlpg), all but global ones (a CR3 write),
 * or every one (paging mode or CPL changes). */
void mmu_flush_page(struct vcpu *v, uint32_t linear);
void mmu_flush(struct vcpu *v, bool keep_global);

/* After a CR3 write: drop the host mappings that are not global and that
 * the new page tables would not fill the same way (the TLB flush of SDM
 * vol. 3, 4.10.4.1, without refaulting what would come back unchanged). */
void mmu_new_cr3(struct vcpu *v);

/* Change the virtual CPL. Going out to CPL 3 either limits user DS and ES
 * below the host mappings that grant more than user mode may have
 * (supervisor pages, writes allowed only by CR0.WP = 0) or drops those
 * mappings, and copies the guest's TLS descriptors into the host GDT
 * (seg_sync_tls); user-accessible mappings serve both levels. */
void mmu_set_cpl(struct vcpu *v, unsigned cpl);
void mmu_init(struct vcpu *v);

/* A stub's TLB (monitor/mmu/aspace.c): new and empty, checked against the page
 * tables now in force (what a CR3 write would have dropped is dropped), or
 * forgotten after its stub was emptied or replaced. Address spaces live as
 * long as the run, so their TLBs are never freed. */
struct tlb *mmu_tlb_new(struct aspace *as);
void mmu_tlb_validate(struct vcpu *v, struct tlb *t);
void mmu_tlb_forget(struct tlb *t);

/* A #GP or #SS at CPL 3 with error code 0: if user DS/ES/SS ran limited, drop the
 * supervisor mappings, make them flat and return true (retry the access);
 * false when the #GP is the guest's own. */
bool mmu_user_unlimit(struct vcpu *v);

/* At or below the lowest page ring3's own process maps supervisor-only: where mmu_set_cpl
 * ends user data segments with --isolation=none (for fast_syscall.c, which calls nothing). */
extern const uint32_t *const mmu_own_lowest_privileged;
/* Bit (page number) of each: ring3's own process maps that page now; it maps it for CPL 0 only. */
extern const uint64_t *const mmu_own_mapped, *const mmu_own_privileged;

#endif

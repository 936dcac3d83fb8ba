/* The memory operands of a guest instruction that faulted, decoded (Capstone) to find the access it made. */
#ifndef RING3_MEMOP_H
#define RING3_MEMOP_H

#include <stdbool.h>

#include "vcpu.h"

/* A #GP(0) at CPL 3 in ring3's own process, after the retry past the kernel's
 * pages (mmu_user_unlimit): user DS, ES and SS still end below ring3's
 * runtime area, where the guest's own segments go on. If a memory operand of
 * the instruction at sh->eip reaches into the area within its guest
 * segment's limit, the access is the page tables' to judge (SDM vol. 3, 4.7):
 * raise the #PF they give, with CR2 and the error code of the guest's walk.
 * Returns false, changing nothing, when no operand does, or when the guest's
 * tables map that address (the #GP stands). */
bool memop_runtime_access(struct vcpu *v);

#endif

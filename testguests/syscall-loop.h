/* syscall-loop: what the ring 0 half (syscall-loop.c) and the ring 3 half (syscall-loop.user.c) share. */
#ifndef TG_SYSCALL_LOOP_H
#define TG_SYSCALL_LOOP_H

#include <stdint.h>

/* Flags an instruction that changes none must leave as they were, through ring3's way back
 * from its monitor too: CF PF AF ZF SF OF, and AC (SDM vol. 1, 3.4.3). */
#define KEPT_FLAGS 0x408D5u

/* Runs (insn) with KEPT_FLAGS set, %eax = (nr) and %ebx = 0, and gives those of KEPT_FLAGS
 * still set after it, then clears them again: in one asm statement, so that no compiled code
 * in between changes a flag. */
#define FLAGS_ACROSS(insn, nr)                                                               \
    ({                                                                                       \
        uint32_t a_ = (nr), f_;                                                              \
        __asm__ __volatile__("pushfl\n\torl %2, (%%esp)\n\tpopfl\n\t" insn "\n\t"            \
                             "pushfl\n\tpopl %1\n\tpushfl\n\tandl %3, (%%esp)\n\tpopfl"      \
                             : "+a"(a_), "=&r"(f_)                                           \
                             : "i"(KEPT_FLAGS), "i"(~KEPT_FLAGS), "b"(0)                     \
                             : "memory", "cc");                                              \
        f_ & KEPT_FLAGS;                                                                     \
    })

extern uint32_t user_flags_kept;    /* FLAGS_ACROSS an int $0x80 (SYS_NOP) in ring 3 */

#endif

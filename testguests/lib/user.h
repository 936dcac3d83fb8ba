/* Ring 3 side of the guests: system calls and probes for code in NAME.user.c files.
 * Those files are always assembled by the plain assembler, like a guest process's code under
 * ring3, so every sensitive instruction in them reaches the real CPU and traps (DESIGN.md:
 * "Guest processes run unrewritten code"). They must call nothing outside themselves. */
#ifndef TG_USER_H
#define TG_USER_H

#include "guest.h"

/* System call numbers (int $0x80: %eax = number, %ebx = argument, result in %eax). */
#define SYS_EXIT   0   /* ends the ring 3 run: user_enter returns the argument */
#define SYS_PUTC   1
#define SYS_GETPID 2   /* answers 42 */
#define SYS_FRAME  3   /* the kernel checks the ring-crossing frame; %ebx = user %esp */
#define SYS_ARM    4   /* probe_arm() */
#define SYS_REPORT 5   /* probe_report(%ebx) */
#define SYS_NOP    6   /* does nothing, counts nothing */

#define GETPID_ANSWER 42

static inline uint32_t usys(uint32_t nr, uint32_t arg)
{
    uint32_t r;

    __asm__ __volatile__("int $0x80" : "=a"(r) : "a"(nr), "b"(arg) : "memory");
    return r;
}

static inline __attribute__((noreturn)) void uexit(uint32_t v)
{
    usys(SYS_EXIT, v);
    __builtin_unreachable();
}

/* sysenter with the return point in %edx and the stack in %ecx, as sysexit expects them. */
static inline uint32_t usysenter(void)
{
    uint32_t r;

    __asm__ __volatile__("movl %%esp, %%ecx\n\tmovl $1f, %%edx\n\tsysenter\n1:"
                         : "=a"(r) : : "ecx", "edx", "memory");
    return r;
}

/* PROBE_FULL and PROBE for ring 3: the kernel arms, catches and reports on behalf of user code. */
#define UPROBE_FULL(name, setup, insn, tail, ...)                                \
    do {                                                                         \
        usys(SYS_ARM, 0);                                                        \
        __asm__ __volatile__(setup "\n\t" PROBE_ASM(name, insn) tail             \
                             : : __VA_ARGS__ : "memory", "cc", "eax", "ecx", "edx"); \
        usys(SYS_REPORT, (uint32_t)name);                                        \
    } while (0)

#define UPROBE(name, insn, ...) UPROBE_FULL(name, "", insn, "", __VA_ARGS__)

#endif

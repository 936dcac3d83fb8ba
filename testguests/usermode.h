/* usermode: what the ring 3 half (usermode.user.c) and the ring 0 half (usermode.c) share. */
#ifndef TG_USERMODE_H
#define TG_USERMODE_H

#include <stdint.h>

/* What ring 3 code saw, printed by the kernel afterwards. */
struct user_seen {
    uint32_t cs, ss, ds, es, fs, gs, eflags, pid, popf_if;
    uint32_t sysenter_ret, sysexit_cs, sysexit_ss;
    uint32_t kernel_popf_if;
};
extern struct user_seen seen;

/* Kernel code (usermode.c, rewritten in the ring3 build) that ring 3 calls: cli, sti, and a
 * popf of an image with IF clear, each at one probe of its own. */
void kernel_cli(void);
void kernel_sti(void);
void kernel_popf_if_clear(void);

void user_main(void) __attribute__((noreturn));
void user_main_iopl(void) __attribute__((noreturn));
void user_main_ioperm(void) __attribute__((noreturn));

#endif

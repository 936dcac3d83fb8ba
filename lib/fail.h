/* Bad input: one line on stderr that says what is wrong and what to do, and exit status 2. */
#ifndef RING3_LIB_FAIL_H
#define RING3_LIB_FAIL_H

#include <stdarg.h>

/* The exit statuses of ring3 (README, "Exit statuses of ring3 run"). Under
 * --cmd, and for isa-debug-exit, the guest's own status is passed on instead. */
enum {
    EXIT_HOST = 1,          /* a host problem: memory, mappings, signals */
    EXIT_BAD_INPUT = 2,     /* options, kernel image, initrd, disk image */
    EXIT_TRIPLE_FAULT = 3,  /* the guest triple-faulted (register dump on stderr) */
    EXIT_INTERNAL = 4,      /* the monitor could not continue (register dump on stderr) */
    EXIT_GUEST_PANIC = 5,   /* the guest Linux kernel panicked */
};

/* Print "(who): " and the message as one line on stderr. Returns
 * EXIT_BAD_INPUT, for the caller to return up to main(). */
int fail_vbad_input(const char *who, const char *fmt, va_list ap);

/* fail_vbad_input for `ring3 run` ("ring3: ..."): the loaders, the options
 * and the disk images report through it. */
__attribute__((format(printf, 1, 2))) int bad_input(const char *fmt, ...);

#endif

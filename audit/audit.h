/* ring3 audit: lists the sensitive instructions left unrewritten in a linked i386 ELF. */
#ifndef RING3_AUDIT_H
#define RING3_AUDIT_H

/* `ring3 audit [--allow FILE] [--insert] ELF`. argv[0] is "audit". Returns
 * the exit status: 0 when nothing is left, 1 when something is, 2 for bad input. */
int audit_main(int argc, char **argv);

/* "ring3 audit: " and the message as one line on stderr; returns 2 (bad input). */
__attribute__((format(printf, 1, 2))) int audit_error(const char *fmt, ...);

#endif

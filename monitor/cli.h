/* ring3: the subcommands main() dispatches to. Each returns the process exit status. */
#ifndef RING3_CLI_H
#define RING3_CLI_H

#include <stdarg.h>

#define RING3_VERSION "0.1"

/* Print "(who): " and the message as one line on stderr. Returns 2, the
 * exit status for bad input (options, files). */
int cli_vfail(const char *who, const char *fmt, va_list ap);

/* cli_vfail for `ring3 run` ("ring3: ..."). */
__attribute__((format(printf, 1, 2))) int bad_input(const char *fmt, ...);

/* `ring3 run [options] KERNEL` (monitor/run.c). argv[0] is "run". */
int run_main(int argc, char **argv);

/* `ring3 audit [--allow FILE] ELF` (monitor/audit.c). argv[0] is "audit". */
int audit_main(int argc, char **argv);

#endif

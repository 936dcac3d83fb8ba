/* ring3: the subcommands main() dispatches to. Each returns the process exit status. */
#ifndef RING3_CLI_H
#define RING3_CLI_H

#define RING3_VERSION "0.1"

/* `ring3 run [options] KERNEL` (monitor/run.c). argv[0] is "run". */
int run_main(int argc, char **argv);

/* `ring3 audit [--allow FILE] ELF` (monitor/audit.c). argv[0] is "audit". */
int audit_main(int argc, char **argv);

#endif

/* `ring3 run`: set up guest memory, devices and the vcpu, enter the guest, and end the run. */
#ifndef RING3_RUN_H
#define RING3_RUN_H

struct vcpu;

/* `ring3 run [options] KERNEL`. argv[0] is "run". Returns the exit status
 * when the guest cannot be started; once it runs, the run ends in monitor_exit. */
int run_main(int argc, char **argv);

/* End the run with (status) (lib/fail.h): restore the terminal, flush the
 * serial output, print what --time and --stats asked for, exit. */
_Noreturn void monitor_exit(struct vcpu *v, int status);

#endif

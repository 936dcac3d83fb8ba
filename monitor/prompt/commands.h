/* The monitor's commands: qemu's human monitor, in small (commands.c).
 *
 * One language for three doors: the terminal's Ctrl-A c prompt, the --monitor socket, and gdb's
 * `monitor` command. `help` lists the commands. Knows nothing of where the line came from.
 */
#ifndef RING3_PROMPT_COMMANDS_H
#define RING3_PROMPT_COMMANDS_H

#include <stdio.h>

#include "monitor/cpu/vcpu.h"

/* What the caller must do after a command. */
enum prompt_action {
    PROMPT_NONE,                        /* nothing: the output says it all */
    PROMPT_STOP,                        /* `stop`: hold the guest */
    PROMPT_CONT,                        /* `cont`: let it run */
    PROMPT_QUIT,                        /* `quit`: end the run */
};

/* Whether the monitor holds the guest (a `stop` without its `cont` yet; prompt.c keeps it). */
extern bool prompt_stopped;

/* Runs one command (line, without its newline); writes its answer to (out). */
enum prompt_action prompt_command(struct vcpu *v, const char *line, FILE *out);

#endif

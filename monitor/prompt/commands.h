/* The monitor's commands: qemu's human monitor, in small (commands.c).
 *
 * One language for three doors: the terminal's Ctrl-A c prompt, the --monitor socket, and gdb's
 * `monitor` command. `help` lists the commands. Of its door it knows only whether gdb is it.
 */
#ifndef RING3_PROMPT_COMMANDS_H
#define RING3_PROMPT_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include "monitor/cpu/vcpu.h"

/* Whether the monitor holds the guest: a `stop` without its `cont` yet (events_hold). */
extern bool prompt_stopped;

/* Runs one command (line, without its newline) and returns what it printed, in a malloc'd
 * string of (*len) bytes (NULL when out of memory). From gdb's `monitor` (gdb): gdb holds the
 * guest, and `stop` and `cont` say so; from the other doors they set prompt_stopped. `quit`
 * ends the run here. */
char *prompt_run(struct vcpu *v, const char *line, bool gdb, size_t *len);

#endif

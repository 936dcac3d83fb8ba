/* The monitor prompt's doors (prompt.c), as qemu -nographic has them: the terminal, where
 * Ctrl-A c switches the keys between the guest's console and a `(ring3)` prompt, and a UNIX
 * socket (--monitor unix:PATH) for scripts, one client at a time. The commands are in
 * commands.h. A `stop` sets prompt_stopped; the run loop then holds the guest (events_hold)
 * until a `cont` comes through either door.
 */
#ifndef RING3_PROMPT_H
#define RING3_PROMPT_H

#include <stdbool.h>
#include <stdint.h>

#include "monitor/cpu/vcpu.h"

#include "commands.h"


/* Listen on (spec). Returns 0, or -1 after printing one line that says why. */
int prompt_listen(const char *spec);

/* Whether typed keys go to the prompt rather than to the guest. */
bool prompt_on_terminal(void);

/* Ctrl-A c: switch the keys between the guest and the prompt. */
void prompt_switch(struct vcpu *v);

/* One typed key for the prompt (line editing; Enter runs the line). */
void prompt_key(struct vcpu *v, uint8_t c);

/* The socket to wait on (the client's, else the listener), -1 for none. */
int prompt_fd(void);

/* Take a new client, or run the lines its client sent; never blocks. */
void prompt_poll(struct vcpu *v);

#endif

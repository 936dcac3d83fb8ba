/* The host terminal: raw while the guest runs, restored on every way out. */
#ifndef RING3_CONSOLE_H
#define RING3_CONSOLE_H

void console_raw(void);        /* raw mode on stdin if it is a terminal */
void console_restore(void);    /* restore it; safe to call from any exit path, twice */

#endif

/* What the guest prints on its serial console: `--cmd` markers and kernel panics. */
#ifndef RING3_GUEST_CONSOLE_H
#define RING3_GUEST_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Send the console to (out). With (cmd) non-NULL, `--cmd` mode: make the
 * archive *archive (*len bytes, malloc'd; a newc cpio holding /ring3/cmd
 * with (cmd) and /ring3/token with a fresh random token) that the initrd is
 * extended with; guest/initramfs/init runs the command between two marker
 * lines made of the token. Only what the command prints between them
 * reaches (out). Returns 0, or -1 (errno set). */
int guest_console_init(FILE *out, const char *cmd, uint8_t **archive, size_t *len);

/* One byte the guest sent to the console. Watches for "Kernel panic - not
 * syncing" and its end line, then ends the run with EXIT_GUEST_PANIC,
 * the panic text having been shown (on stderr when --cmd hid the console). */
void guest_console_putc(uint8_t byte);

/* --cmd mode: whether the end marker came, and the command's exit status. */
bool guest_console_cmd_status(int *status);

/* Whether --cmd mode is on. */
bool guest_console_cmd_mode(void);

/* Write out what the console holds (on every way out of the run, and at a
 * panic's end). */
void guest_console_flush(void);

#endif

/* The reset line of the 8042 keyboard controller (ports 0x60 and 0x64); no keyboard. */
#ifndef RING3_HW_I8042_H
#define RING3_HW_I8042_H

#include <stdbool.h>

#include "io.h"

#define I8042_DATA    0x60
#define I8042_COMMAND 0x64

struct i8042;

/* Register the controller's data and command ports on (bus). Returns NULL
 * if out of memory or the ports are taken. */
struct i8042 *i8042_init(struct io_bus *bus);
void i8042_free(struct i8042 *k);

/* Whether the guest pulsed the CPU reset line (command 0xFE), which is how
 * Linux reboots a PC without ACPI (arch/x86/kernel/reboot.c, BOOT_KBD). */
bool i8042_reset_requested(const struct i8042 *k);

#endif

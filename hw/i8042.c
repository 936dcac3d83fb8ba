/* The reset line of the 8042 keyboard controller: enough of it for a PC's reboot.
 *
 * The status register (port 0x64) always reads "output buffer empty, input
 * buffer empty, system flag set" (bits 0 and 1 clear, bit 2 set), so a
 * guest waiting to send a command never waits. Command 0xFE pulses output
 * port bit 0, the CPU's reset line (IBM PC/AT Technical Reference, 8042
 * commands). Nothing is attached: the data port reads 0 and keyboard
 * commands are dropped.
 */
#include "i8042.h"

#include <stdlib.h>

#define STATUS_SYSTEM   0x04
#define CMD_PULSE_RESET 0xFE

struct i8042 {
    bool reset;
};

static void i8042_data_io(uint16_t off, uint32_t *data, unsigned len, bool is_write, void *opaque)
{
    (void)off;
    (void)len;
    (void)opaque;
    if (!is_write)
        *data = 0;
}

static void i8042_command_io(uint16_t off, uint32_t *data, unsigned len, bool is_write,
                             void *opaque)
{
    struct i8042 *k = opaque;

    (void)off;
    (void)len;
    if (!is_write)
        *data = STATUS_SYSTEM;
    else if ((*data & 0xFF) == CMD_PULSE_RESET)
        k->reset = true;
}

struct i8042 *i8042_init(struct io_bus *bus)
{
    struct i8042 *k = calloc(1, sizeof(*k));

    if (k == NULL)
        return NULL;
    /* Two ports, not the range 0x60-0x64: 0x61 is port B (hw/pit.c). */
    if (io_register(bus, I8042_DATA, 1, i8042_data_io, k, "i8042-data"))
        goto fail;
    if (io_register(bus, I8042_COMMAND, 1, i8042_command_io, k, "i8042-cmd")) {
        io_unregister(bus, I8042_DATA);
        goto fail;
    }
    return k;
fail:
    free(k);
    return NULL;
}

void i8042_free(struct i8042 *k)
{
    free(k);
}

bool i8042_reset_requested(const struct i8042 *k)
{
    return k->reset;
}

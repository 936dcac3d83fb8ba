/* Unit test of the 8042's reset line: the status never blocks a command, and only 0xFE resets. */
#include "check.h"
#include "hw/i8042.h"

int main(void)
{
    struct io_bus *bus = io_bus_new();
    struct i8042 *k = i8042_init(bus);
    CHECK(k != NULL);
    CHECK(i8042_init(bus) == NULL);                  /* the ports are taken */
    /* Linux's kb_wait() waits for input-buffer-full (bit 1) to clear. */
    CHECK_EQ(io_in(bus, I8042_COMMAND, 1) & 0x02, 0);
    CHECK_EQ(io_in(bus, I8042_DATA, 1), 0);
    CHECK_EQ(io_in(bus, 0x61, 1), 0xFF);             /* port B is not the 8042's */
    io_out(bus, I8042_DATA, 1, 0xFE);                /* a keyboard byte, not a command */
    io_out(bus, I8042_COMMAND, 1, 0xAA);             /* self-test: ignored */
    CHECK(!i8042_reset_requested(k));
    io_out(bus, I8042_COMMAND, 1, 0xFE);
    CHECK(i8042_reset_requested(k));
    i8042_free(k);
    io_bus_free(bus);
    return check_done();
}

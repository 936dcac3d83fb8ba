/* Unit test of port 0x80: writes are remembered, reads float to 0xFF. */
#include "check.h"
#include "hw/port80.h"

int main(void)
{
    struct io_bus *bus = io_bus_new();
    struct port80 *p = port80_init(bus);
    CHECK(p != NULL);
    CHECK_EQ(port80_last(p), -1);
    CHECK_EQ(io_in(bus, 0x80, 1), 0xFF);
    io_out(bus, 0x80, 1, 0x42);
    CHECK_EQ(port80_last(p), 0x42);
    CHECK_EQ(io_in(bus, 0x80, 1), 0xFF);
    io_out(bus, 0x80, 1, 0x00);
    CHECK_EQ(port80_last(p), 0x00);
    CHECK_EQ(bus->unmapped_writes, 0);  /* claimed, so no "unmapped" noise */
    CHECK(port80_init(bus) == NULL);
    port80_free(p);
    io_bus_free(bus);
    return check_done();
}

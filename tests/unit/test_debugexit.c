/* Unit test of isa-debug-exit: the exit status is QEMU's (V << 1) | 1, at any width and port of the range. */
#include "check.h"
#include "hw/debugexit.h"

static int notified, notified_status;

static void notify(void *opaque, int status)
{
    (void)opaque;
    notified++;
    notified_status = status;
}

int main(void)
{
    struct io_bus *bus = io_bus_new();
    struct debugexit *d = debugexit_init(bus, DEBUGEXIT_BASE, DEBUGEXIT_LEN, notify, NULL);
    CHECK(d != NULL);
    int status = -1;
    CHECK(!debugexit_requested(d, &status));
    CHECK_EQ(status, -1);
    CHECK_EQ(io_in(bus, 0xF4, 1), 0);   /* reads 0, as under QEMU */
    CHECK_EQ(io_in(bus, 0xF4, 4), 0);
    CHECK(!debugexit_requested(d, NULL));

    io_out(bus, 0xF4, 1, 0x10);
    CHECK(debugexit_requested(d, &status));
    CHECK_EQ(status, 0x21);
    CHECK_EQ(notified, 1);
    CHECK_EQ(notified_status, 0x21);
    io_out(bus, 0xF4, 1, 0x00);         /* the first request wins */
    CHECK(debugexit_requested(d, &status));
    CHECK_EQ(status, 0x21);
    CHECK_EQ(notified, 1);
    debugexit_free(d);
    io_bus_free(bus);

    /* outl of a wide value: the process status keeps the low 8 bits. */
    bus = io_bus_new();
    d = debugexit_init(bus, DEBUGEXIT_BASE, DEBUGEXIT_LEN, NULL, NULL);
    io_out(bus, 0xF4, 4, 0x12345678);
    CHECK(debugexit_requested(d, &status));
    CHECK_EQ(status, ((0x12345678u << 1) | 1) & 0xFF);
    debugexit_free(d);
    io_bus_free(bus);

    /* Any port of the range, any width; V = 0 gives 1. */
    bus = io_bus_new();
    d = debugexit_init(bus, DEBUGEXIT_BASE, DEBUGEXIT_LEN, NULL, NULL);
    io_out(bus, 0xF6, 2, 0);
    CHECK(debugexit_requested(d, &status));
    CHECK_EQ(status, 1);
    CHECK(debugexit_init(bus, 0xF7, 1, NULL, NULL) == NULL);   /* taken */
    debugexit_free(d);
    io_bus_free(bus);

    return check_done();
}

/* Unit test of the 440FX host bridge at 00:00.0: its header, read-only, and Linux's pci_sanity_check passing because of it. */
#include "check.h"
#include "hw/pci.h"
#include "hw/pci_host.h"

static struct io_bus *bus;

static void config_address(unsigned devfn, unsigned reg)
{
    io_out(bus, PCI_CONFIG_ADDRESS, 4, 0x80000000u | devfn << 8 | (reg & 0xFC));
}

static uint32_t config_read(unsigned devfn, unsigned reg, unsigned len)
{
    config_address(devfn, reg);
    return io_in(bus, (uint16_t)(PCI_CONFIG_DATA + (reg & 3)), len);
}

static void config_write(unsigned devfn, unsigned reg, uint32_t value, unsigned len)
{
    config_address(devfn, reg);
    io_out(bus, (uint16_t)(PCI_CONFIG_DATA + (reg & 3)), len, value);
}

/* Linux's pci_sanity_check (arch/x86/pci/direct.c) without a DMI year: some
 * function on bus 0 is a host bridge (0600h) or VGA (0300h), or Intel's or
 * Compaq's. */
static int linux_sanity_check(void)
{
    for (unsigned devfn = 0; devfn < 0x100; devfn++) {
        uint32_t class = config_read(devfn, 0x0A, 2), vendor = config_read(devfn, 0x00, 2);
        if (class == 0x0600 || class == 0x0300 || vendor == 0x8086 || vendor == 0x0E11)
            return 1;
    }
    return 0;
}

int main(void)
{
    bus = io_bus_new();
    struct pci_bus *pci = pci_init(bus);
    CHECK(pci != NULL);
    CHECK(!linux_sanity_check());           /* an empty bus 0: mechanism #1 refused */
    CHECK(pci_host_init(pci) == 0);
    CHECK(pci_host_init(pci) == -1);        /* 00:00.0 is taken */
    CHECK(linux_sanity_check());

    /* The header, by dwords, then by the widths drivers use. */
    static const uint32_t dwords[16] = {0x12378086u, 0x02800006u, 0x06000002u};
    for (unsigned reg = 0; reg < 0x40; reg += 4)
        CHECK_EQ(config_read(0, reg, 4), dwords[reg / 4]);
    CHECK_EQ(config_read(0, 0x02, 2), 0x1237);
    CHECK_EQ(config_read(0, 0x06, 2), 0x0280);
    CHECK_EQ(config_read(0, 0x0A, 2), 0x0600);
    CHECK_EQ(config_read(0, 0x08, 1), 0x02);
    CHECK_EQ(config_read(0, 0x0B, 1), 0x06);
    CHECK_EQ(config_read(0, 0x0E, 1), 0x00);
    CHECK_EQ(config_read(0, 0x3D, 1), 0x00);     /* no interrupt pin */
    for (unsigned reg = 0x40; reg < 0x100; reg += 4)
        CHECK_EQ(config_read(0, reg, 4), 0);
    CHECK_EQ(config_read(1 << 3, 0x00, 4), 0xFFFFFFFFu);    /* nothing else on the bus */
    CHECK_EQ(config_read(1, 0x00, 4), 0xFFFFFFFFu);         /* nor at 00:00.1 */

    /* Read-only: identity, command, status (write-one-to-clear), a BAR
     * sized the way Linux sizes one, the interrupt line, a chipset register. */
    config_write(0, 0x00, 0xDEADBEEFu, 4);
    config_write(0, 0x04, 0x0000, 2);
    config_write(0, 0x06, 0xFFFF, 2);
    config_write(0, 0x0A, 0x0300, 2);
    config_write(0, 0x0C, 0xFFFFFFFFu, 4);
    config_write(0, 0x10, 0xFFFFFFFFu, 4);
    config_write(0, 0x3C, 0x0B, 1);
    config_write(0, 0x72, 0x4A, 1);
    for (unsigned reg = 0; reg < 0x40; reg += 4)
        CHECK_EQ(config_read(0, reg, 4), dwords[reg / 4]);
    CHECK_EQ(config_read(0, 0x70, 4), 0);

    pci_free(pci);
    io_bus_free(bus);
    return check_done();
}

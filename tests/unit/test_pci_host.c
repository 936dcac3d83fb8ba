/* Unit test of the 440FX host bridge at 00:00.0: its header as Linux's pci_sanity_check reads it, read-only. */
#include "check.h"
#include "pci.h"
#include "pci_host.h"

static struct io_bus *bus;

static uint32_t config_read(unsigned dev, unsigned reg, unsigned len)
{
    io_out(bus, PCI_CONFIG_ADDRESS, 4, 0x80000000u | dev << 11 | (reg & 0xFC));
    return io_in(bus, (uint16_t)(PCI_CONFIG_DATA + (reg & 3)), len);
}

static void config_write(unsigned dev, unsigned reg, uint32_t value, unsigned len)
{
    io_out(bus, PCI_CONFIG_ADDRESS, 4, 0x80000000u | dev << 11 | (reg & 0xFC));
    io_out(bus, (uint16_t)(PCI_CONFIG_DATA + (reg & 3)), len, value);
}

int main(void)
{
    bus = io_bus_new();
    struct pci_bus *pci = pci_init(bus);
    CHECK(pci != NULL);
    CHECK(pci_host_init(pci) == 0);
    CHECK(pci_host_init(pci) == -1);        /* 00:00.0 is taken */

    CHECK(config_read(0, 0x00, 4) == 0x12378086u);
    CHECK(config_read(0, 0x02, 2) == 0x1237);
    /* pci_sanity_check: class (the word at 0x0A) host bridge, or vendor Intel. */
    CHECK(config_read(0, 0x0A, 2) == 0x0600);
    CHECK(config_read(0, 0x08, 1) == 0x02);
    CHECK(config_read(0, 0x0E, 1) == 0x00);
    CHECK(config_read(0, 0x40, 4) == 0);
    CHECK(config_read(1, 0x00, 4) == 0xFFFFFFFFu);     /* nothing else on the bus */

    config_write(0, 0x00, 0xDEADBEEFu, 4);
    config_write(0, 0x0A, 0x0300, 2);
    CHECK(config_read(0, 0x00, 4) == 0x12378086u);
    CHECK(config_read(0, 0x0A, 2) == 0x0600);

    pci_free(pci);
    io_bus_free(bus);
    return check_done();
}

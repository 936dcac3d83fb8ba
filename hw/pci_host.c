/* The PCI host bridge at 00:00.0: a read-only Intel 440FX configuration header.
 *
 * Type 0 header (PCI Local Bus Specification 3.0, 6.1): vendor and device,
 * command (memory space and bus master on, as firmware leaves them), status
 * (medium DEVSEL timing), revision 2, class 06/00/00 (host bridge). Nothing
 * behind it is configurable, so every write is ignored, and registers past
 * the header read as zero.
 */
#include "pci_host.h"

#include <stddef.h>

static const uint8_t header[64] = {
    [0x00] = PCI_HOST_VENDOR & 0xFF, [0x01] = PCI_HOST_VENDOR >> 8,
    [0x02] = PCI_HOST_DEVICE & 0xFF, [0x03] = PCI_HOST_DEVICE >> 8,
    [0x04] = 0x06,          /* command: memory space, bus master */
    [0x06] = 0x00, [0x07] = 0x02,   /* status: DEVSEL medium */
    [0x08] = 0x02,          /* revision */
    [0x0B] = 0x06,          /* class: bridge; subclass 0 (host), interface 0 */
    [0x0E] = 0x00,          /* header type 0, single function */
};

static uint32_t pci_host_read(void *opaque, unsigned reg, unsigned len)
{
    uint32_t v = 0;

    (void)opaque;
    for (unsigned i = 0; i < len; i++)
        if (reg + i < sizeof header)
            v |= (uint32_t)header[reg + i] << (8 * i);
    return v;
}

static void pci_host_write(void *opaque, unsigned reg, unsigned len, uint32_t value)
{
    (void)opaque;
    (void)reg;
    (void)len;
    (void)value;
}

int pci_host_init(struct pci_bus *pci)
{
    const struct pci_function fn = { pci_host_read, pci_host_write, NULL };
    return pci_register_function(pci, 0, 0, &fn);
}

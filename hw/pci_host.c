/* The PCI host bridge at 00:00.0: a read-only Intel 440FX configuration header.
 *
 * Type 0 header (PCI Local Bus Specification 3.0, 6.1) with the 82441FX PMC's
 * identity as QEMU's pc machine shows it: vendor 8086h, device 1237h,
 * revision 02h, class 06/00/00 (host bridge), header type 0, single function.
 * Command and status hold the PMC's defaults (82441FX datasheet, PCICMD and
 * PCISTS): memory access and bus master hardwired on; fast back-to-back
 * capable, medium DEVSEL timing. No BARs, no interrupt pin. Nothing behind
 * the bridge is configurable here, so every register is read-only (writes
 * are ignored: no cfg_write), and the PMC's chipset registers past the
 * header (DRAM, PAM, SMRAM) read as zero.
 */
#include "pci_host.h"

#include <stddef.h>

static const uint8_t header[64] = {
    [0x00] = PCI_HOST_VENDOR & 0xFF, [0x01] = PCI_HOST_VENDOR >> 8,
    [0x02] = PCI_HOST_DEVICE & 0xFF, [0x03] = PCI_HOST_DEVICE >> 8,
    [0x04] = 0x06,                  /* PCICMD 0006h: MAE, BME */
    [0x06] = 0x80, [0x07] = 0x02,   /* PCISTS 0280h: FB2B capable, DEVSEL medium */
    [0x08] = 0x02,                  /* revision */
    [0x0B] = 0x06,                  /* class: bridge; subclass 0 (host), interface 0 */
    [0x0E] = 0x00,                  /* header type 0, single function */
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

int pci_host_init(struct pci_bus *pci)
{
    const struct pci_function fn = { pci_host_read, NULL, NULL };
    return pci_register_function(pci, 0, 0, &fn);
}

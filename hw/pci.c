/* PCI configuration mechanism #1, after the PCI Local Bus Specification 3.0, section 3.2.2.3.2. */
#include <stdbool.h>
#include <stdlib.h>

#include "pci.h"

#define PCI_ADDR_ENABLE 0x80000000u

struct pci_bus {
    uint32_t address;   /* CONFIG_ADDRESS */
    struct pci_function fn[PCI_MAX_DEVICES][PCI_MAX_FUNCTIONS];
};

/* CONFIG_ADDRESS takes only whole-dword accesses: "any other types of
 * accesses to this address (non-DWORD) have no effect on CONFIG_ADDRESS and
 * are executed as normal I/O transactions" (none decode them here). Bits
 * 30-24 and 1-0 are reserved and read as 0. */
static void pci_address_io(uint16_t off, uint32_t *data, unsigned len,
                           bool is_write, void *opaque)
{
    struct pci_bus *pci = opaque;
    if (off != 0 || len != 4) {
        if (!is_write)
            *data = 0xFFFFFFFFu;
        return;
    }
    if (is_write)
        pci->address = *data & 0x80FFFFFCu;
    else
        *data = pci->address;
}

static struct pci_function *pci_target(struct pci_bus *pci)
{
    uint32_t a = pci->address;
    if (!(a & PCI_ADDR_ENABLE) || (a >> 16 & 0xFF) != 0)
        return NULL;    /* disabled, or a bus behind no bridge */
    struct pci_function *fn = &pci->fn[a >> 11 & 0x1F][a >> 8 & 0x7];
    return fn->cfg_read ? fn : NULL;
}

/* CONFIG_DATA: a byte, word or dword of the register CONFIG_ADDRESS names,
 * offset by the port's low two bits. With no function there the access ends
 * in a master abort: reads return all ones, writes vanish. */
static void pci_data_io(uint16_t off, uint32_t *data, unsigned len,
                        bool is_write, void *opaque)
{
    struct pci_bus *pci = opaque;
    struct pci_function *fn = pci_target(pci);
    unsigned reg = (pci->address & 0xFC) + off;
    if (fn == NULL) {
        if (!is_write)
            *data = 0xFFFFFFFFu;
        return;
    }
    if (is_write) {
        if (fn->cfg_write)
            fn->cfg_write(fn->opaque, reg, len, *data);
    } else {
        *data = fn->cfg_read(fn->opaque, reg, len);
    }
}

struct pci_bus *pci_init(struct io_bus *bus)
{
    struct pci_bus *pci = calloc(1, sizeof(*pci));
    if (pci == NULL)
        return NULL;
    if (io_register_wide(bus, PCI_CONFIG_ADDRESS, 4, pci_address_io, pci, "pci-addr"))
        goto fail;
    if (io_register_wide(bus, PCI_CONFIG_DATA, 4, pci_data_io, pci, "pci-data")) {
        io_unregister(bus, PCI_CONFIG_ADDRESS);
        goto fail;
    }
    return pci;
fail:
    free(pci);
    return NULL;
}

void pci_free(struct pci_bus *pci)
{
    free(pci);
}

int pci_register_function(struct pci_bus *pci, unsigned dev, unsigned func,
                          const struct pci_function *fn)
{
    if (dev >= PCI_MAX_DEVICES || func >= PCI_MAX_FUNCTIONS || fn->cfg_read == NULL ||
        pci->fn[dev][func].cfg_read)
        return -1;
    pci->fn[dev][func] = *fn;
    return 0;
}

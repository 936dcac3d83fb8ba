/* PCI configuration mechanism #1 (address 0xCF8, data 0xCFC-0xCFF) for bus 0; functions register on it. */
#ifndef RING3_HW_PCI_H
#define RING3_HW_PCI_H

#include <stdint.h>

#include "io.h"

#define PCI_CONFIG_ADDRESS 0xCF8
#define PCI_CONFIG_DATA    0xCFC
#define PCI_MAX_DEVICES    32
#define PCI_MAX_FUNCTIONS  8

/* A PCI function's configuration space, as a device model provides it.
 * (reg) is the byte offset (0-255) and (len) 1, 2 or 4, with the access
 * naturally inside one dword. */
struct pci_function {
    uint32_t (*cfg_read)(void *opaque, unsigned reg, unsigned len);
    void (*cfg_write)(void *opaque, unsigned reg, unsigned len, uint32_t value);
    void *opaque;
};

struct pci_bus;

/* Create the host bridge's configuration ports on (bus). Every function
 * answers "no device" (all ones) until one registers. Returns NULL if out of
 * memory or the ports are taken. */
struct pci_bus *pci_init(struct io_bus *bus);

void pci_free(struct pci_bus *pci);

/* Put (fn) (copied; its opaque must outlive the bus) at bus 0, device (dev)
 * 0-31, function (func) 0-7. Returns 0, or -1 if out of range or taken. */
int pci_register_function(struct pci_bus *pci, unsigned dev, unsigned func,
                          const struct pci_function *fn);

#endif

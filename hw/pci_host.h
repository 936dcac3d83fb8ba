/* The PCI host bridge at 00:00.0: an Intel 440FX, as QEMU's pc machine has. */
#ifndef RING3_HW_PCI_HOST_H
#define RING3_HW_PCI_HOST_H

#include "pci.h"

#define PCI_HOST_VENDOR 0x8086     /* Intel */
#define PCI_HOST_DEVICE 0x1237     /* 82441FX PMC (440FX) */

/* Register the host bridge at bus 0, device 0, function 0 of (pci). Linux
 * accepts configuration mechanism #1 only when some function on bus 0 has
 * the class of a host bridge or a VGA controller, or an Intel or Compaq
 * vendor ID (arch/x86/pci/direct.c, pci_sanity_check): this one is an
 * Intel host bridge. Returns 0, or -1 if the slot is taken. */
int pci_host_init(struct pci_bus *pci);

#endif

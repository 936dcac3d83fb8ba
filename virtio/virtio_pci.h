/* The virtio PCI transport, legacy interface: a PCI function whose I/O BAR holds the virtio registers. */
#ifndef RING3_VIRTIO_PCI_H
#define RING3_VIRTIO_PCI_H

#include <stdbool.h>
#include <stdint.h>

#include "hw/io.h"
#include "hw/irq.h"
#include "hw/pci.h"

#include "virtqueue.h"

#define VIRTIO_PCI_VENDOR     0x1af4
#define VIRTIO_PCI_MAX_QUEUES 4

struct virtio_pci;

/* What a device type tells the transport about itself. */
struct virtio_device {
    const char *name;           /* for messages: "virtio-blk vda" */
    /* Virtio 1.2, 4.1.2.1: a transitional device has PCI device ID 0x1000 +
     * (its type - 1), block 0x1001, and its virtio type as subsystem ID. */
    uint16_t pci_device_id;
    uint16_t type;
    uint32_t class_code;        /* PCI class, subclass, interface (24 bits) */
    uint32_t features;          /* feature bits 0-31 offered (the legacy interface has no more) */
    unsigned nqueues;           /* at most VIRTIO_PCI_MAX_QUEUES */
    const uint8_t *config;      /* the device-specific configuration, read-only to the driver */
    unsigned config_len;
    /* The driver notified queue (index): take its chains, then call
     * virtio_pci_interrupt() if any completed one wants an interrupt. */
    void (*notify)(void *opaque, struct virtio_pci *vp, unsigned index);
    /* The driver reset the device (may be NULL): forget what was meant for the driver. */
    void (*reset)(void *opaque);
    void *opaque;
};

/* Put the device at bus 0, (slot), function 0 of (pci), with its I/O BAR
 * (registers on (io)) at (port) and its INTA# on (irq) (number (irq_num),
 * which the interrupt line register reports), as firmware leaves a device it
 * configured: BAR assigned and I/O decoding on. The driver may move the BAR.
 * Returns NULL when out of memory, the slot is taken or the ports overlap. */
struct virtio_pci *virtio_pci_init(struct pci_bus *pci, struct io_bus *io,
                                   const struct guestmem *gm, unsigned slot, uint16_t port,
                                   struct irq_line *irq, uint8_t irq_num,
                                   const struct virtio_device *dev);

void virtio_pci_free(struct virtio_pci *vp);

/* Queue (index) of the device. */
struct virtqueue *virtio_pci_queue(struct virtio_pci *vp, unsigned index);

/* The feature bits the driver accepted. */
uint32_t virtio_pci_features(const struct virtio_pci *vp);

/* Offer (features) instead of what virtio_pci_init() was given: before the driver runs (a NIC
 * learns what its backend takes after the NIC was made). */
void virtio_pci_offer(struct virtio_pci *vp, uint32_t features);

/* Used buffers were returned: set the ISR's queue bit and assert INTA#
 * (virtio 1.2, 4.1.4.5; it stays asserted until the driver reads the ISR). */
void virtio_pci_interrupt(struct virtio_pci *vp);

/* The device configuration changed (a NIC's link status): set the ISR's
 * configuration bit and assert INTA# (virtio 1.2, 4.1.4.5), once the driver is
 * running; before that it reads the configuration as it sets the device up. */
void virtio_pci_config_changed(struct virtio_pci *vp);

/* The driver broke the rules ((why) says how): the
 * device stops taking requests until the driver resets it, as QEMU's
 * virtio_error() does. The legacy interface has no NEEDS_RESET status bit
 * (virtio 1.2, 2.1.2 and 4.1.4.8; QEMU sets it only with VIRTIO_F_VERSION_1),
 * so the report is one line on stderr, once per reset. */
void virtio_pci_error(struct virtio_pci *vp, const char *why);

/* True from virtio_pci_error() until the driver resets the device. */
bool virtio_pci_broken(const struct virtio_pci *vp);

/* The driver set DRIVER_OK: its queues are ready for the device's buffers (virtio 1.2, 3.1.1). */
bool virtio_pci_driver_ok(const struct virtio_pci *vp);

#endif

/* virtio-net (virtio 1.2, 5.1) over the legacy PCI transport, joined to a network backend. */
#ifndef RING3_VIRTIO_NET_H
#define RING3_VIRTIO_NET_H

#include <stdint.h>

#include "net/backend.h"

#include "virtio_pci.h"

struct virtio_net;

/* A NIC with address (mac) and (mtu) at PCI (slot), I/O BAR at (port), INTA# on (irq)
 * = ISA IRQ (irq_num), named (name) in messages ("eth0"). It sends nowhere
 * until virtio_net_attach(). Returns NULL when out of memory or the slot or
 * ports are taken. */
struct virtio_net *virtio_net_init(struct pci_bus *pci, struct io_bus *io,
                                   const struct guestmem *gm, unsigned slot, uint16_t port,
                                   struct irq_line *irq, uint8_t irq_num,
                                   const uint8_t mac[6], uint16_t mtu, const char *name);

/* The NIC as its backend sees it: frames for the guest, and the link. */
struct net_client virtio_net_client(struct virtio_net *n);

/* Where the guest's frames go from now on (NULL: dropped). */
void virtio_net_attach(struct virtio_net *n, struct net_backend *backend);

void virtio_net_free(struct virtio_net *n);

#endif

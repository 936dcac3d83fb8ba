/* virtio-blk (virtio 1.2, 5.2) over the legacy PCI transport, backed by a raw disk image or by a
 * disk another member of an IKC group serves. */
#ifndef RING3_VIRTIO_BLK_H
#define RING3_VIRTIO_BLK_H

#include "block/image.h"
#include "block/served.h"

#include "virtio_pci.h"

struct virtio_blk;

/* A disk at PCI (slot), I/O BAR at (port), INTA# on (irq) = ISA IRQ
 * (irq_num), holding (image) or (remote), the other NULL (which it closes when freed), with
 * (name) for messages ("vda"). Returns NULL when out of memory or the slot or ports
 * are taken. */
struct virtio_blk *virtio_blk_init(struct pci_bus *pci, struct io_bus *io,
                                   const struct guestmem *gm, unsigned slot, uint16_t port,
                                   struct irq_line *irq, uint8_t irq_num,
                                   struct disk_image *image, struct disk_remote *remote,
                                   const char *name);

/* A served disk's monitor is told this one is done with it (the run ends); what the guest asks
 * from now on fails. */
void virtio_blk_close_remote(struct virtio_blk *b);

void virtio_blk_free(struct virtio_blk *b);

#endif

/* Driving a legacy virtio-PCI device by hand: PCI configuration mechanism #1, the legacy
 * registers of I/O BAR0 (virtio 1.2, 4.1.4.8, without MSI-X) and split virtqueues in the legacy
 * layout (2.7, 2.7.2). */
#ifndef TG_VIRTIO_H
#define TG_VIRTIO_H

#include <stdint.h>

/* ---- PCI configuration mechanism #1 (PCI 3.0, 3.2.2.3.2) ---- */

#define PCI_CMD_IO           0x0001u
#define PCI_CMD_MEM          0x0002u
#define PCI_CMD_MASTER       0x0004u
#define PCI_CMD_INTX_DISABLE 0x0400u
#define PCI_STATUS_INTX      0x0008u

/* (bdf): bus 0, device and function as CONFIG_ADDRESS bits (device << 11 | function << 8). */
uint32_t pci_read(uint32_t bdf, unsigned reg);
void pci_write(uint32_t bdf, unsigned reg, uint32_t v);
void pci_write16(uint32_t bdf, unsigned reg, uint16_t v);
/* The first function on bus 0 whose vendor and device ID dword is (id): 1 and its (*bdf), or 0. */
int pci_find(uint32_t id, uint32_t *bdf);

/* ---- the legacy registers ---- */

#define VIO_DEVICE_FEATURES 0x00
#define VIO_DRIVER_FEATURES 0x04
#define VIO_QUEUE_PFN       0x08
#define VIO_QUEUE_SIZE      0x0C
#define VIO_QUEUE_SEL       0x0E
#define VIO_QUEUE_NOTIFY    0x10
#define VIO_STATUS          0x12
#define VIO_ISR             0x13
#define VIO_CONFIG          0x14

#define ST_ACKNOWLEDGE 1
#define ST_DRIVER      2
#define ST_DRIVER_OK   4

/* The first steps of 3.1.2 "Legacy Interface: Device Initialization": reset (the status then
 * read back in (*reset_status)), ACKNOWLEDGE, DRIVER, and (features) written (read back in
 * (*accepted)). Returns the features the device offers. */
uint32_t vio_negotiate(uint16_t iobase, uint32_t features, uint8_t *reset_status, uint32_t *accepted);

/* ---- a split virtqueue ---- */

#define DESC_F_NEXT  1
#define DESC_F_WRITE 2
#define AVAIL_F_NO_INTERRUPT 1

struct vdesc {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
};

struct vring {
    uint16_t index, size;
    volatile struct vdesc *desc;
    volatile uint16_t *avail;       /* flags, idx, ring[size] */
    volatile uint16_t *used;        /* flags, idx, then {u32 id, u32 len}[size] */
    uint16_t avail_idx, used_seen;
};

/* Queue (index) of the device at (iobase), laid out in (mem) ((bytes) long, page-aligned, zeroed
 * here) and its PFN written: the driver's part of 3.1.2 for one queue. Panics when the device's
 * size is not a power of 2 or the rings do not fit. Returns the size, 0 for a queue that is not
 * there. */
uint16_t vring_setup(uint16_t iobase, struct vring *r, uint16_t index, uint8_t *mem, uint32_t bytes);

void vring_desc(struct vring *r, unsigned i, const volatile void *addr, uint32_t len,
                uint16_t flags, uint16_t next);

/* Offers chain (head) and notifies the queue. */
void vring_kick(uint16_t iobase, struct vring *r, uint16_t head);

/* Polls for the next used element for up to (spins) register reads (QEMU completes requests
 * asynchronously). Returns 1 with its id and length, or 0. */
int vring_wait_used(uint16_t iobase, struct vring *r, uint32_t spins, uint32_t *id, uint32_t *len);

#define SPINS_DONE    5000000u  /* a request that should complete */
#define SPINS_NOTHING 20000u    /* watching for a completion that must not come */

/* ---- INTA# through the PIC ---- */

/* Runs (start) (which offers the device at (iobase) some work), then waits with interrupts on
 * and the CPU halted for its INTA# on ISA IRQ (line), at most 5 s by the PIT at 1 kHz; the
 * handler reads the ISR, which deasserts the level-triggered line, before its EOI. Returns how
 * many interrupts were taken, with the ISR the last handler read in (*isr). */
uint32_t vio_interrupt(uint16_t iobase, uint8_t line, void (*start)(void), uint8_t *isr);

#endif

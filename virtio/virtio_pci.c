/* The virtio PCI transport, legacy interface (virtio 1.2, 4.1.4.8): configuration header, I/O BAR, INTx.
 *
 * The BAR's registers, at these offsets (no MSI-X):
 *   0x00 device features (32, R)    0x0C queue size (16, R)
 *   0x04 driver features (32, RW)   0x0E queue select (16, RW)
 *   0x08 queue address PFN (32, RW) 0x10 queue notify (16, W)
 *   0x12 device status (8, RW)      0x13 ISR status (8, R; reading clears it)
 *   0x14 the device-specific configuration
 * Every access is a guest `in` or `out`, which reaches the monitor anyway.
 */
#include "virtio_pci.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REG_DEVICE_FEATURES 0x00
#define REG_DRIVER_FEATURES 0x04
#define REG_QUEUE_PFN       0x08
#define REG_QUEUE_SIZE      0x0C
#define REG_QUEUE_SEL       0x0E
#define REG_QUEUE_NOTIFY    0x10
#define REG_STATUS          0x12
#define REG_ISR             0x13
#define REG_CONFIG          0x14

#define ISR_QUEUE           1u
#define ISR_CONFIG          2u
#define STATUS_DRIVER_OK    4u       /* virtio 1.2, 2.1 */

/* PCI Local Bus Specification 3.0, 6.2.2-6.2.5. */
#define PCI_CMD_IO           0x0001u
#define PCI_CMD_MASTER       0x0004u
#define PCI_CMD_INTX_DISABLE 0x0400u
#define PCI_STATUS_INTX      0x0008u
#define PCI_BAR_IO           0x1u

struct virtio_pci {
    struct io_bus *io;
    const struct guestmem *gm;
    struct irq_line *irq;
    struct virtio_device dev;
    uint16_t bar_size;      /* a power of 2 holding the registers and configuration */
    uint32_t bar;           /* BAR0 as the driver reads it */
    uint16_t mapped_port;   /* where the registers are decoded, 0 = nowhere */
    uint16_t command;
    uint8_t irq_num;

    uint32_t driver_features;
    uint16_t queue_sel;
    uint8_t status;
    uint8_t isr;
    bool broken;
    struct virtqueue vq[VIRTIO_PCI_MAX_QUEUES];
};

/* INTA# is asserted while an ISR bit is set, unless the command register's
 * Interrupt Disable bit masks it (PCI 3.0, 6.2.2). */
static void update_irq(struct virtio_pci *vp)
{
    irq_set(vp->irq, vp->isr != 0 && !(vp->command & PCI_CMD_INTX_DISABLE));
}

static void reset(struct virtio_pci *vp)
{
    vp->driver_features = 0;
    vp->queue_sel = 0;
    vp->status = 0;
    vp->isr = 0;
    vp->broken = false;
    for (unsigned i = 0; i < VIRTIO_PCI_MAX_QUEUES; i++)
        vq_reset(&vp->vq[i]);
    update_irq(vp);
    if (vp->dev.reset)
        vp->dev.reset(vp->dev.opaque);
}

static struct virtqueue *selected(struct virtio_pci *vp)
{
    return vp->queue_sel < vp->dev.nqueues ? &vp->vq[vp->queue_sel] : NULL;
}

static uint8_t reg_byte(struct virtio_pci *vp, unsigned off)
{
    struct virtqueue *q = selected(vp);
    uint32_t v;
    switch (off & ~3u) {
    case REG_DEVICE_FEATURES: v = vp->dev.features; break;
    case REG_DRIVER_FEATURES: v = vp->driver_features; break;
    case REG_QUEUE_PFN:       v = q ? q->pfn : 0; break;
    case REG_QUEUE_SIZE:      v = (q ? VQ_MAX_SIZE : 0) | (uint32_t)vp->queue_sel << 16; break;
    case REG_QUEUE_NOTIFY:    v = (uint32_t)vp->status << 16 | (uint32_t)vp->isr << 24; break;
    default:
        off -= REG_CONFIG;
        return off < vp->dev.config_len ? vp->dev.config[off] : 0xFF;
    }
    return (uint8_t)(v >> 8 * (off & 3));
}

static void write_status(struct virtio_pci *vp, uint8_t value)
{
    /* 4.1.4.8 (legacy): writing 0 resets the device. */
    if (value == 0) {
        reset(vp);
        return;
    }
    vp->status = value;
}

static void write_pfn(struct virtio_pci *vp, uint32_t pfn)
{
    struct virtqueue *q = selected(vp);
    if (q && vq_set_pfn(q, vp->gm, VQ_MAX_SIZE, pfn))
        virtio_pci_error(vp, "a queue placed outside guest memory");
}

static void bar_io(uint16_t off, uint32_t *data, unsigned len, bool is_write, void *opaque)
{
    struct virtio_pci *vp = opaque;
    if (!is_write) {
        uint32_t v = 0;
        for (unsigned i = 0; i < len; i++)
            v |= (uint32_t)reg_byte(vp, off + i) << 8 * i;
        *data = v;
        /* 4.1.4.5: reading the ISR clears it and deasserts the interrupt. */
        if (off <= REG_ISR && REG_ISR < off + len) {
            vp->isr = 0;
            update_irq(vp);
        }
        return;
    }
    uint32_t v = *data;
    switch (off << 4 | len) {
    case REG_DRIVER_FEATURES << 4 | 4: vp->driver_features = v & vp->dev.features; break;
    case REG_QUEUE_PFN << 4 | 4:       write_pfn(vp, v); break;
    case REG_QUEUE_SEL << 4 | 2:       vp->queue_sel = (uint16_t)v; break;
    case REG_STATUS << 4 | 1:          write_status(vp, (uint8_t)v); break;
    case REG_QUEUE_NOTIFY << 4 | 2:
        if (v < vp->dev.nqueues && !vp->broken && vp->vq[v].size)
            vp->dev.notify(vp->dev.opaque, vp, v);
        break;
    default:
        break;  /* read-only registers and the configuration: the driver has nothing to write */
    }
}

/* Decode the registers where BAR0 points, while I/O space is enabled. */
static void remap(struct virtio_pci *vp)
{
    uint16_t want = 0;
    uint32_t base = vp->bar & ~(uint32_t)(vp->bar_size - 1);
    if ((vp->command & PCI_CMD_IO) && base != 0 && base + vp->bar_size <= 0x10000)
        want = (uint16_t)base;
    if (want == vp->mapped_port)
        return;
    if (vp->mapped_port)
        io_unregister(vp->io, vp->mapped_port);
    vp->mapped_port = 0;
    /* A BAR placed over another device's ports decodes nothing here; on a
     * real bus both would answer and the result is undefined. */
    if (want && io_register_wide(vp->io, want, vp->bar_size, bar_io, vp, "virtio-pci") == 0)
        vp->mapped_port = want;
}

/* The type 0 header (PCI 3.0, 6.1). */
static uint32_t cfg_dword(struct virtio_pci *vp, unsigned reg)
{
    /* 6.2.3: Interrupt Status shows the device's request whatever Interrupt Disable says. */
    uint16_t status = vp->isr ? PCI_STATUS_INTX : 0;
    switch (reg) {
    case 0x00: return (uint32_t)vp->dev.pci_device_id << 16 | VIRTIO_PCI_VENDOR;
    case 0x04: return (uint32_t)status << 16 | vp->command;
    case 0x08: return vp->dev.class_code << 8;      /* revision 0: the legacy interface */
    case 0x0C: return 0;                            /* header type 0, single function */
    case 0x10: return vp->bar;
    case 0x2C: return (uint32_t)vp->dev.type << 16 | VIRTIO_PCI_VENDOR;
    case 0x3C: return 1u << 8 | vp->irq_num;        /* INTA#, and the line firmware wrote */
    default:   return 0;
    }
}

static uint32_t cfg_read(void *opaque, unsigned reg, unsigned len)
{
    uint32_t v = cfg_dword(opaque, reg & ~3u) >> 8 * (reg & 3);
    return len == 4 ? v : v & ((1u << 8 * len) - 1);
}

static void cfg_write(void *opaque, unsigned reg, unsigned len, uint32_t value)
{
    struct virtio_pci *vp = opaque;
    /* Merge the bytes written into the dword they belong to. */
    unsigned shift = 8 * (reg & 3);
    uint32_t mask = (len == 4 ? 0xFFFFFFFFu : (1u << 8 * len) - 1) << shift;
    uint32_t dword = (cfg_dword(vp, reg & ~3u) & ~mask) | (value << shift & mask);
    switch (reg & ~3u) {
    case 0x04:
        vp->command = (uint16_t)dword & (PCI_CMD_IO | PCI_CMD_MASTER | PCI_CMD_INTX_DISABLE);
        update_irq(vp);
        break;
    case 0x10:
        /* Writing all ones reads back the size mask (6.2.5.1). */
        vp->bar = (dword & ~(uint32_t)(vp->bar_size - 1)) | PCI_BAR_IO;
        break;
    case 0x3C:
        vp->irq_num = (uint8_t)dword;   /* only a scratch register for the OS */
        return;
    default:
        return;
    }
    remap(vp);
}

struct virtio_pci *virtio_pci_init(struct pci_bus *pci, struct io_bus *io,
                                   const struct guestmem *gm, unsigned slot, uint16_t port,
                                   struct irq_line *irq, uint8_t irq_num,
                                   const struct virtio_device *dev)
{
    struct virtio_pci *vp = calloc(1, sizeof *vp);
    if (vp == NULL)
        return NULL;
    vp->io = io;
    vp->gm = gm;
    vp->irq = irq;
    vp->irq_num = irq_num;
    vp->dev = *dev;
    vp->bar_size = 32;
    while (vp->bar_size < REG_CONFIG + dev->config_len)
        vp->bar_size *= 2;
    vp->bar = (port & ~(uint32_t)(vp->bar_size - 1)) | PCI_BAR_IO;
    vp->command = PCI_CMD_IO;
    remap(vp);
    const struct pci_function fn = { cfg_read, cfg_write, vp };
    if (vp->mapped_port == 0 || pci_register_function(pci, slot, 0, &fn)) {
        virtio_pci_free(vp);
        return NULL;
    }
    return vp;
}

void virtio_pci_free(struct virtio_pci *vp)
{
    if (vp == NULL)
        return;
    if (vp->mapped_port)
        io_unregister(vp->io, vp->mapped_port);
    free(vp);
}

struct virtqueue *virtio_pci_queue(struct virtio_pci *vp, unsigned index)
{
    return &vp->vq[index];
}

uint32_t virtio_pci_features(const struct virtio_pci *vp)
{
    return vp->driver_features;
}

void virtio_pci_offer(struct virtio_pci *vp, uint32_t features)
{
    vp->dev.features = features;
}

void virtio_pci_interrupt(struct virtio_pci *vp)
{
    vp->isr |= ISR_QUEUE;
    update_irq(vp);
}

void virtio_pci_config_changed(struct virtio_pci *vp)
{
    if (!virtio_pci_driver_ok(vp))
        return;                 /* the driver reads the configuration as it sets up */
    vp->isr |= ISR_CONFIG;
    update_irq(vp);
}

void virtio_pci_error(struct virtio_pci *vp, const char *why)
{
    if (!vp->broken)
        fprintf(stderr, "ring3: %s: the guest's driver gave %s; the device stops until the "
                "driver resets it\n", vp->dev.name, why);
    vp->broken = true;
}

bool virtio_pci_broken(const struct virtio_pci *vp)
{
    return vp->broken;
}

bool virtio_pci_driver_ok(const struct virtio_pci *vp)
{
    return vp->status & STATUS_DRIVER_OK;
}

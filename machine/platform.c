/* The PC platform: one call creates and wires every legacy device. */
#include "platform.h"

#include <stdio.h>

#include "hw/pci_host.h"

/* Where the disks go, as SeaBIOS leaves virtio devices under QEMU's pc
 * machine: PCI slots from 4, I/O BARs from 0xC000, and INTA# routed to an
 * ISA IRQ that the ELCR makes level-triggered (PCI interrupts are
 * level-sensitive and shareable: PCI 3.0, 2.2.6). Each disk gets an IRQ of
 * its own, so no line is shared. */
#define DISK_FIRST_SLOT 4
#define DISK_FIRST_PORT 0xC000
#define DISK_PORT_STEP  0x100
static const uint8_t disk_irq[PLATFORM_MAX_DISKS] = { 11, 10, 9, 5 };

static int attach_disks(struct platform *p, const struct platform_config *cfg, uint16_t *elcr)
{
    for (unsigned i = 0; i < cfg->ndisks; i++) {
        char name[4] = { 'v', 'd', (char)('a' + i), 0 };
        p->disk[i] = virtio_blk_init(p->pci, p->io, cfg->gm, DISK_FIRST_SLOT + i,
                                     (uint16_t)(DISK_FIRST_PORT + DISK_PORT_STEP * i),
                                     pic_irq(p->pic, disk_irq[i]), disk_irq[i],
                                     cfg->disks[i], cfg->remotes[i], name);
        if (p->disk[i] == NULL)
            return -1;
        p->remote[i] = cfg->remotes[i];
        *elcr |= (uint16_t)(1u << disk_irq[i]);
    }
    return 0;
}

/* NICs after the disks: slots from 8, I/O BARs from 0xC400, and IRQs no ISA
 * device of this machine uses (15 and 14 are the IDE lines, 12 the PS/2
 * mouse's, 7 the printer's). */
#define NIC_FIRST_SLOT 8
#define NIC_FIRST_PORT 0xC400
static const uint8_t nic_irq[PLATFORM_MAX_NICS] = { 15, 14, 12, 7 };

static int attach_nics(struct platform *p, const struct platform_config *cfg, uint16_t *elcr,
                       char *err, size_t errlen)
{
    for (unsigned i = 0; i < cfg->nnics; i++) {
        const struct net_spec *spec = &cfg->nics[i];
        char name[16];   /* "eth" and any unsigned */
        snprintf(name, sizeof name, "eth%u", i);
        p->nic[i] = virtio_net_init(p->pci, p->io, cfg->gm, NIC_FIRST_SLOT + i,
                                    (uint16_t)(NIC_FIRST_PORT + DISK_PORT_STEP * i),
                                    pic_irq(p->pic, nic_irq[i]), nic_irq[i], spec->mac, spec->mtu,
                                    name);
        if (p->nic[i] == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        *elcr |= (uint16_t)(1u << nic_irq[i]);
        char why[200];
        struct net_client client = virtio_net_client(p->nic[i]);
        p->backend[i] = net_backend_new(spec, &client, cfg->gm, why, sizeof why);
        if (p->backend[i] == NULL) {
            snprintf(err, errlen, "--net %s (%s): %s", net_kind_name(spec->kind), name, why);
            return -1;
        }
        virtio_net_attach(p->nic[i], p->backend[i]);
    }
    return 0;
}

int platform_init(struct platform *p, const struct platform_config *cfg, char *err, size_t errlen)
{
    *p = (struct platform){ 0 };
    snprintf(err, errlen, "out of memory");     /* unless a backend says otherwise */
    p->clock = cfg->clock ? cfg->clock : &hw_clock_monotonic;
    int64_t wall = cfg->wall_ns ? cfg->wall_ns : hw_wall_ns();

    p->io = io_bus_new();
    if (p->io == NULL)
        goto fail;
    p->pic = pic_init(p->io, cfg->intr);
    p->pit = p->pic ? pit_init(p->io, pic_irq(p->pic, 0), p->clock) : NULL;
    p->com1 = p->pic ? uart_init(p->io, UART_COM1_BASE, pic_irq(p->pic, UART_COM1_IRQ),
                                 cfg->console_tx, cfg->console_opaque, "com1") : NULL;
    p->rtc = p->pic ? rtc_init(p->io, pic_irq(p->pic, RTC_IRQ), p->clock, wall) : NULL;
    p->pci = pci_init(p->io);
    if (p->pci && pci_host_init(p->pci))
        goto fail;
    p->port80 = port80_init(p->io);
    p->i8042 = i8042_init(p->io);
    if (!cfg->no_debugexit) {
        p->debugexit = debugexit_init(p->io, DEBUGEXIT_BASE, DEBUGEXIT_LEN,
                                      cfg->exit_notify, cfg->exit_opaque);
        if (p->debugexit == NULL)
            goto fail;
    }
    if (!p->pic || !p->pit || !p->com1 || !p->rtc || !p->pci || !p->port80 || !p->i8042)
        goto fail;
    rtc_set_memory(p->rtc, cfg->mem_bytes);
    uint16_t elcr = 0;
    for (unsigned i = 0; i < cfg->nexports; i++)
        p->export[i] = cfg->exports[i];
    if (attach_disks(p, cfg, &elcr) || attach_nics(p, cfg, &elcr, err, errlen))
        goto fail;
    io_out(p->io, PIC_ELCR_BASE, 1, elcr & 0xFF);
    io_out(p->io, PIC_ELCR_BASE + 1, 1, elcr >> 8);
    return 0;
fail:
    /* The images the disks did not take over. */
    for (unsigned i = 0; i < cfg->ndisks; i++) {
        if (p->disk[i] == NULL && cfg->disks[i])
            disk_image_close(cfg->disks[i]);
        if (p->disk[i] == NULL)
            disk_remote_free(cfg->remotes[i]);
    }
    platform_destroy(p);
    return -1;
}

void platform_io_close(struct platform *p)
{
    for (unsigned i = 0; i < PLATFORM_MAX_NICS; i++) {
        if (p->nic[i])
            virtio_net_attach(p->nic[i], NULL);
        net_backend_free(p->backend[i]);
        p->backend[i] = NULL;
    }
    for (unsigned i = 0; i < PLATFORM_MAX_DISKS; i++) {
        disk_export_free(p->export[i]);
        p->export[i] = NULL;
        if (p->remote[i])
            virtio_blk_close_remote(p->disk[i]);
        p->remote[i] = NULL;
    }
}

void platform_destroy(struct platform *p)
{
    platform_io_close(p);
    for (unsigned i = 0; i < PLATFORM_MAX_NICS; i++)
        virtio_net_free(p->nic[i]);
    for (unsigned i = 0; i < PLATFORM_MAX_DISKS; i++)
        virtio_blk_free(p->disk[i]);
    debugexit_free(p->debugexit);
    i8042_free(p->i8042);
    port80_free(p->port80);
    pci_free(p->pci);
    rtc_free(p->rtc);
    uart_free(p->com1);
    pit_free(p->pit);
    pic_free(p->pic);
    io_bus_free(p->io);
    *p = (struct platform){ 0 };
}

void platform_update(struct platform *p, uint64_t now)
{
    pit_update(p->pit, now);
    rtc_update(p->rtc, now);
}

uint64_t platform_next_deadline(struct platform *p, uint64_t now)
{
    uint64_t a = pit_next_deadline(p->pit, now);
    uint64_t b = rtc_next_deadline(p->rtc, now);
    return a < b ? a : b;
}

void platform_io_fill(struct platform *p, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline)
{
    for (unsigned i = 0; i < PLATFORM_MAX_NICS; i++)
        if (p->backend[i])
            net_backend_fill(p->backend[i], pfd, n, max, deadline);
    for (unsigned i = 0; i < PLATFORM_MAX_DISKS; i++) {
        if (p->remote[i])
            disk_remote_fill(p->remote[i], pfd, n, max, deadline);
        if (p->export[i])
            disk_export_fill(p->export[i], pfd, n, max, deadline);
    }
}

void platform_io_dispatch(struct platform *p)
{
    for (unsigned i = 0; i < PLATFORM_MAX_NICS; i++)
        if (p->backend[i])
            net_backend_dispatch(p->backend[i]);
    for (unsigned i = 0; i < PLATFORM_MAX_DISKS; i++) {
        if (p->remote[i])
            disk_remote_dispatch(p->remote[i]);
        if (p->export[i])
            disk_export_dispatch(p->export[i]);
    }
}

void platform_io_poll(struct platform *p, uint64_t now)
{
    struct pollfd pfd[PLATFORM_IO_MAX_FDS];
    unsigned n = 0;
    uint64_t deadline = UINT64_MAX;
    platform_io_fill(p, pfd, &n, PLATFORM_IO_MAX_FDS, &deadline);
    if (n == 0 && deadline > now)
        return;
    if (n)
        poll(pfd, n, 0);
    platform_io_dispatch(p);
}

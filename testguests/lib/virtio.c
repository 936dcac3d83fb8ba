/* Legacy virtio-PCI devices driven by hand: PCI configuration, queue layout, descriptors, kicks. */
#include "guest.h"
#include "virtio.h"

#define PCI_ADDRESS 0xCF8
#define PCI_DATA    0xCFC

uint32_t pci_read(uint32_t bdf, unsigned reg)
{
    outl(PCI_ADDRESS, 0x80000000u | bdf | (reg & 0xFC));
    return inl(PCI_DATA);
}

void pci_write(uint32_t bdf, unsigned reg, uint32_t v)
{
    outl(PCI_ADDRESS, 0x80000000u | bdf | (reg & 0xFC));
    outl(PCI_DATA, v);
}

void pci_write16(uint32_t bdf, unsigned reg, uint16_t v)
{
    outl(PCI_ADDRESS, 0x80000000u | bdf | (reg & 0xFC));
    outw(PCI_DATA + (reg & 2), v);
}

int pci_find(uint32_t id, uint32_t *bdf)
{
    for (uint32_t dev = 0; dev < 32; dev++) {
        for (uint32_t fn = 0; fn < 8; fn++) {
            if (pci_read(dev << 11 | fn << 8, 0x00) == id) {
                *bdf = dev << 11 | fn << 8;
                return 1;
            }
        }
    }
    return 0;
}

uint32_t vio_negotiate(uint16_t iobase, uint32_t features, uint8_t *reset_status, uint32_t *accepted)
{
    outb(iobase + VIO_STATUS, 0);
    *reset_status = inb(iobase + VIO_STATUS);
    outb(iobase + VIO_STATUS, ST_ACKNOWLEDGE);
    outb(iobase + VIO_STATUS, ST_ACKNOWLEDGE | ST_DRIVER);
    uint32_t offered = inl(iobase + VIO_DEVICE_FEATURES);
    outl(iobase + VIO_DRIVER_FEATURES, features);
    *accepted = inl(iobase + VIO_DRIVER_FEATURES);
    return offered;
}

static void barrier(void) { __asm__ __volatile__("" : : : "memory"); }

/* 2.7.2: descriptors, the available ring, then the used ring at the next 4096-byte boundary. */
static uint32_t used_offset(uint32_t n)
{
    return (16 * n + 4 + 2 * n + 2 + 4095) & ~4095u;
}

uint16_t vring_setup(uint16_t iobase, struct vring *r, uint16_t index, uint8_t *mem, uint32_t bytes)
{
    outw(iobase + VIO_QUEUE_SEL, index);
    uint16_t n = inw(iobase + VIO_QUEUE_SIZE);
    if (n == 0)
        return 0;
    if ((n & (n - 1)) != 0 || used_offset(n) + 4 + 8 * n + 2 > bytes)
        panic("queue %u has %u entries", index, n);
    memset(mem, 0, bytes);
    *r = (struct vring){ .index = index, .size = n, .desc = (volatile struct vdesc *)mem,
                         .avail = (volatile uint16_t *)(mem + 16 * n),
                         .used = (volatile uint16_t *)(mem + used_offset(n)) };
    outl(iobase + VIO_QUEUE_PFN, (uint32_t)mem >> 12);
    return n;
}

void vring_desc(struct vring *r, unsigned i, const volatile void *addr, uint32_t len,
                uint16_t flags, uint16_t next)
{
    r->desc[i].addr = (uint32_t)addr;
    r->desc[i].len = len;
    r->desc[i].flags = flags;
    r->desc[i].next = next;
}

void vring_kick(uint16_t iobase, struct vring *r, uint16_t head)
{
    r->avail[2 + (r->avail_idx & (r->size - 1))] = head;
    barrier();
    r->avail[1] = ++r->avail_idx;
    barrier();
    outw(iobase + VIO_QUEUE_NOTIFY, r->index);
}

int vring_wait_used(uint16_t iobase, struct vring *r, uint32_t spins, uint32_t *id, uint32_t *len)
{
    for (uint32_t i = 0; i < spins; i++) {
        barrier();
        if (r->used[1] != r->used_seen) {
            volatile uint32_t *e = (volatile uint32_t *)(r->used + 2) + 2 * (r->used_seen & (r->size - 1));
            *id = e[0];
            *len = e[1];
            r->used_seen++;
            return 1;
        }
        (void)inw(iobase + VIO_QUEUE_SIZE);
    }
    return 0;
}

static uint16_t irq_iobase;
static uint8_t irq_line;
static volatile uint32_t ticks, taken;
static volatile uint8_t isr_in_handler;

static void on_tick(struct trapframe *tf)
{
    (void)tf;
    ticks++;
    pic_eoi(0);
}

static void on_device(struct trapframe *tf)
{
    (void)tf;
    isr_in_handler = inb(irq_iobase + VIO_ISR);
    taken++;
    pic_eoi(irq_line);
}

uint32_t vio_interrupt(uint16_t iobase, uint8_t line, void (*start)(void), uint8_t *isr)
{
    irq_iobase = iobase;
    irq_line = line;
    ticks = taken = 0;
    trap_set_handler(IRQ_BASE + 0, on_tick);
    trap_set_handler(IRQ_BASE + line, on_device);
    pit_periodic(1193);     /* 1 kHz */
    pic_unmask(0);
    pic_unmask(line);
    start();
    while (taken == 0 && ticks < 5000) {
        sti_hlt();
        cli();
    }
    pic_mask(line);
    pic_mask(0);
    *isr = isr_in_handler;
    return taken;
}

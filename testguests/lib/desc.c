/* Descriptor tables: the GDT every guest starts with, the IDT of runtime stubs, the TSS. */
#include "guest.h"

uint64_t gdt[GDT_ENTRIES] __attribute__((aligned(8))) = {
    [SEL_KCODE >> 3] = SEG_DESC(0, 0xFFFFF, ACC_CODE, FLAGS_32_4K),
    [SEL_KDATA >> 3] = SEG_DESC(0, 0xFFFFF, ACC_DATA, FLAGS_32_4K),
    [SEL_UCODE >> 3] = SEG_DESC(0, 0xFFFFF, ACC_CODE | ACC_DPL(3), FLAGS_32_4K),
    [SEL_UDATA >> 3] = SEG_DESC(0, 0xFFFFF, ACC_DATA | ACC_DPL(3), FLAGS_32_4K),
};

uint64_t idt[256] __attribute__((aligned(8)));
struct tss_io tss_io __attribute__((aligned(128)));

uint64_t seg_desc(uint32_t base, uint32_t limit, uint8_t access, uint8_t flags)
{
    return SEG_DESC(base, limit, access, flags);
}

/* SDM 5.8.3: offset split around selector, parameter count 0, type 0xC. */
uint64_t call_gate_desc(uint16_t sel, uint32_t off, int dpl)
{
    return (off & 0xFFFF) | ((uint64_t)sel << 16) |
           ((uint64_t)(0x80 | (dpl << 5) | 0xC) << 40) | ((uint64_t)(off >> 16) << 48);
}

void gdt_load(void)
{
    struct dtr d = { sizeof(gdt) - 1, (uint32_t)gdt };

    lgdt(&d);
    /* A far jump is the only way to reload CS at the same privilege level. */
    __asm__ __volatile__("ljmp %0, $1f\n1:" : : "i"(SEL_KCODE) : "memory");
    load_ss(SEL_KDATA);
    load_ds(SEL_KDATA);
    load_es(SEL_KDATA);
    load_fs(SEL_KDATA);
    load_gs(SEL_KDATA);
}

void idt_set_raw(int vec, uint64_t desc)
{
    idt[vec] = desc;
}

/* SDM 6.11: interrupt (0xE) or trap (0xF) gate to SEL_KCODE:off. */
void idt_set_gate(int vec, uint32_t off, int type, int dpl)
{
    idt[vec] = (off & 0xFFFF) | ((uint64_t)SEL_KCODE << 16) |
               ((uint64_t)(0x80 | (dpl << 5) | type) << 40) | ((uint64_t)(off >> 16) << 48);
}

void idt_restore(int vec)
{
    idt_set_gate(vec, (uint32_t)trap_stubs + TRAP_STUB_SIZE * vec, GATE_INT, 0);
}

void idt_load(void)
{
    struct dtr d = { sizeof(idt) - 1, (uint32_t)idt };

    for (int v = 0; v < 256; v++)
        idt_restore(v);
    lidt(&d);
}

void tss_init(uint32_t esp0)
{
    memset(&tss_io.tss, 0, sizeof(tss_io.tss));
    memset(tss_io.iobitmap, 0xFF, sizeof(tss_io.iobitmap));
    tss_io.tss.ss0 = SEL_KDATA;
    tss_io.tss.esp0 = esp0;
    tss_io.tss.iomap = offsetof(struct tss_io, iobitmap);
    gdt[SEL_TSS >> 3] = seg_desc((uint32_t)&tss_io, sizeof(tss_io) - 1, ACC_TSS, 0);
    ltr(SEL_TSS);
}

void tss_allow_ports(uint16_t first, uint16_t n)
{
    for (uint32_t p = first; p < (uint32_t)first + n; p++)
        tss_io.iobitmap[p / 8] &= (uint8_t)~(1u << (p % 8));
}

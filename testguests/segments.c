/* segments: GDT/IDT/TR/LDT registers, segment loads and far transfers, lar/lsl/verr/verw. */
#include "guest.h"

const char guest_name[] = "segments";

/* This guest's own descriptors (GDT entries 7..15). */
#define SEL_DATA2    0x38   /* flat data, a second selector for the same segment */
#define SEL_FSBUF    0x40   /* data, base = fsbuf, limit 0xfff bytes */
#define SEL_CODE2    0x48   /* flat code alias */
#define SEL_XONLY    0x50   /* execute-only code */
#define SEL_RONLY    0x58   /* read-only data */
#define SEL_GATE     0x60   /* call gate to SEL_KCODE:far_read_cs */
#define SEL_LDT      0x68   /* LDT descriptor for ldt[] */
#define SEL_NOTPRES  0x70   /* data, not present */
#define SEL_GSBUF    0x78   /* data, base = gsbuf, limit 0xff bytes */
#define SEL_LDT_DATA 0x0C   /* ldt[1]: flat data, TI=1 */

struct farptr {
    uint32_t off;
    uint16_t sel;
} __attribute__((packed));

uint32_t far_read_cs(void);
uint32_t ljmp_mem_read_cs(uint16_t sel);
uint32_t lcall_imm_read_cs(void);
uint32_t lcall_mem_pop4(uint16_t sel);
uint32_t lcall_gate(uint16_t sel);
uint32_t lss_read_ss(uint16_t sel);
uint32_t push_sreg_sizes(void);

static uint32_t fsbuf[1024] __attribute__((aligned(16)));
static uint32_t gsbuf[64] __attribute__((aligned(16)));
static uint64_t ldt[2] __attribute__((aligned(8)));
static uint8_t kstack[4096] __attribute__((aligned(16)));

static void setup_descriptors(void)
{
    gdt[SEL_DATA2 >> 3] = seg_desc(0, 0xFFFFF, ACC_DATA, FLAGS_32_4K);
    gdt[SEL_FSBUF >> 3] = seg_desc((uint32_t)fsbuf, 0xFFF, ACC_DATA, FLAGS_32_B);
    gdt[SEL_CODE2 >> 3] = seg_desc(0, 0xFFFFF, ACC_CODE, FLAGS_32_4K);
    gdt[SEL_XONLY >> 3] = seg_desc(0, 0xFFFFF, 0x99, FLAGS_32_4K);
    gdt[SEL_RONLY >> 3] = seg_desc(0, 0xFFFFF, 0x91, FLAGS_32_4K);
    gdt[SEL_GATE >> 3] = call_gate_desc(SEL_KCODE, (uint32_t)far_read_cs, 0);
    gdt[SEL_LDT >> 3] = seg_desc((uint32_t)ldt, sizeof(ldt) - 1, 0x82, 0);
    gdt[SEL_NOTPRES >> 3] = seg_desc(0, 0xFFFFF, ACC_DATA & 0x7F, FLAGS_32_4K);
    gdt[SEL_GSBUF >> 3] = seg_desc((uint32_t)gsbuf, 0xFF, ACC_DATA, FLAGS_32_B);
    ldt[1] = seg_desc(0, 0xFFFFF, ACC_DATA, FLAGS_32_4K);
}

static void test_table_registers(void)
{
    struct dtr g, i;

    sgdt(&g);
    sidt(&i);
    kprintf("sgdt: limit 0x%x base %s\n", g.limit, g.base == (uint32_t)gdt ? "gdt" : "WRONG");
    kprintf("sidt: limit 0x%x base %s\n", i.limit, i.base == (uint32_t)idt ? "idt" : "WRONG");

    /* A new GDTR takes effect at once; the old one comes back unchanged. */
    struct dtr small = { 8 * 8 - 1, (uint32_t)gdt }, back;
    lgdt(&small);
    sgdt(&back);
    kprintf("lgdt: limit 0x%x\n", back.limit);
    lgdt(&g);

    tss_init((uint32_t)kstack + sizeof(kstack));
    kprintf("str: 0x%04x\n", str());
    lldt(0);
    kprintf("sldt after lldt 0: 0x%04x\n", sldt());
    lldt(SEL_LDT);
    kprintf("sldt: 0x%04x\n", sldt());
}

static void test_msw(void)
{
    uint32_t cr0 = rcr0();

    /* PE|MP|ET|NE; ET is fixed at 1 on every CPU since the Pentium (SDM 2.5). */
    lcr0(CR0_PE | 0x2 | 0x20);
    kprintf("cr0: 0x%08x\n", rcr0());
    lmsw(0x0B);                   /* PE|MP|TS */
    kprintf("smsw after lmsw 0xb: 0x%04x\n", smsw());
    clts();
    kprintf("smsw after clts: 0x%04x\n", smsw());
    lmsw(0x00);                   /* lmsw cannot clear PE (SDM "LMSW") */
    kprintf("smsw after lmsw 0: 0x%04x\n", smsw());
    lcr0(cr0 | 0x20);
}

static void test_loads(void)
{
    load_ds(SEL_DATA2);
    load_es(SEL_DATA2);
    load_fs(SEL_DATA2);
    load_gs(SEL_DATA2);
    load_ss(SEL_DATA2);
    kprintf("mov to sreg: ds 0x%x es 0x%x fs 0x%x gs 0x%x ss 0x%x\n",
            read_ds(), read_es(), read_fs(), read_gs(), read_ss());
    load_ss(SEL_KDATA);
    load_ds(SEL_KDATA);
    load_es(SEL_KDATA);
    load_gs(SEL_KDATA);

    /* 32-bit mov from a segment register zero-extends; 16-bit keeps the top half. */
    uint32_t wide = 0xFFFFFFFF, narrow = 0xFFFFFFFF;
    __asm__ __volatile__("movl %%ds, %0" : "+r"(wide));
    __asm__ __volatile__("movw %%ds, %w0" : "+r"(narrow));
    kprintf("mov from ds: 32-bit 0x%08x 16-bit 0x%08x\n", wide, narrow);

    uint32_t sizes = push_sreg_sizes();
    kprintf("push ds: pushl %u bytes, pushw %u bytes, es 0x%x\n", sizes & 0xFFFF, sizes >> 16,
            read_es());

    load_fs(SEL_LDT_DATA);
    kprintf("ldt selector: fs 0x%x\n", read_fs());
    load_fs(SEL_KDATA);

    kprintf("lss: ss 0x%x\n", lss_read_ss(SEL_DATA2));
    kprintf("after lss: ss 0x%x\n", read_ss());
}

static void test_far_pointer_loads(void)
{
    static struct farptr fp;
    uint32_t r;

    fp.off = 0x12345678;
    fp.sel = SEL_DATA2;
    __asm__ __volatile__("lds %1, %0" : "=r"(r) : "m"(fp) : "memory");
    kprintf("lds: reg 0x%x ds 0x%x\n", r, read_ds());
    load_ds(SEL_KDATA);
    fp.off = 0x11;
    __asm__ __volatile__("les %1, %0" : "=r"(r) : "m"(fp) : "memory");
    kprintf("les: reg 0x%x es 0x%x\n", r, read_es());
    fp.off = 0x22;
    fp.sel = SEL_FSBUF;
    __asm__ __volatile__("lfs %1, %0" : "=r"(r) : "m"(fp) : "memory");
    kprintf("lfs: reg 0x%x fs 0x%x\n", r, read_fs());
    fp.off = 0x33;
    fp.sel = SEL_GSBUF;
    __asm__ __volatile__("lgs %1, %0" : "=r"(r) : "m"(fp) : "memory");
    kprintf("lgs: reg 0x%x gs 0x%x\n", r, read_gs());
    load_es(SEL_KDATA);
}

/* fs and gs with a nonzero base, as Linux uses them for per-CPU data and the
 * stack canary: offsets through them land in fsbuf and gsbuf. */
static void test_based_segments(void)
{
    uint32_t a, b;

    fsbuf[0] = 0xF00D0000;
    fsbuf[1] = 0xF00D0001;
    gsbuf[0] = 0x6500;
    gsbuf[3] = 0x6503;
    load_fs(SEL_FSBUF);
    load_gs(SEL_GSBUF);
    __asm__ __volatile__("movl %%fs:4, %0" : "=r"(a));
    __asm__ __volatile__("movl %%gs:12, %0" : "=r"(b));
    kprintf("fs:4 = 0x%x gs:12 = 0x%x\n", a, b);
    __asm__ __volatile__("movl %0, %%fs:8" : : "r"(0xBEEF0002u) : "memory");
    __asm__ __volatile__("movl %0, %%gs:(%1)" : : "r"(0x65040004u), "r"(16) : "memory");
    kprintf("stores: fsbuf[2] = 0x%x gsbuf[4] = 0x%x\n", fsbuf[2], gsbuf[4]);
    load_fs(SEL_KDATA);
    load_gs(SEL_KDATA);
}

/* Loading a selector again after its descriptor changed gives the new descriptor (SDM vol. 3,
 * 3.4.3: a load always reads the table), whether by mov from a register, pop, or mov from
 * memory; ring3's runtime repeats a load without the monitor only while the descriptor reads
 * the same. */
static void test_reload_after_change(void)
{
    uint32_t a, b, c;

    fsbuf[1] = 0xA1;
    gsbuf[1] = 0xB2;
    __asm__ __volatile__("mov %w1, %%fs; mov %w1, %%fs; movl %%fs:4, %0" : "=r"(a) : "r"(SEL_FSBUF));
    gdt[SEL_FSBUF >> 3] = seg_desc((uint32_t)gsbuf, 0xFF, ACC_DATA, FLAGS_32_B);
    __asm__ __volatile__("pushl %1; popl %%fs; movl %%fs:4, %0" : "=r"(b) : "i"(SEL_FSBUF) : "memory");
    gdt[SEL_FSBUF >> 3] = seg_desc((uint32_t)fsbuf, 0xFFF, ACC_DATA, FLAGS_32_B);
    __asm__ __volatile__("pushl %1; mov (%%esp), %%fs; addl $4, %%esp; movl %%fs:4, %0"
                         : "=r"(c) : "i"(SEL_FSBUF) : "memory", "cc");
    kprintf("reload after descriptor change: 0x%x 0x%x 0x%x\n", a, b, c);
    load_fs(SEL_KDATA);
}

static void test_far_transfers(void)
{
    uint32_t cs;

    __asm__ __volatile__("ljmp %1, $1f\n1:\n\tmovw %%cs, %w0\n\tljmp %2, $2f\n2:"
                         : "=r"(cs) : "i"(SEL_CODE2), "i"(SEL_KCODE));
    kprintf("ljmp imm: cs 0x%x, back 0x%x\n", cs & 0xFFFF, read_cs());
    kprintf("ljmp mem: cs 0x%x, back 0x%x\n", ljmp_mem_read_cs(SEL_CODE2), read_cs());
    kprintf("lcall imm: cs 0x%x\n", lcall_imm_read_cs());
    kprintf("lcall mem + lret $4: cs 0x%x\n", lcall_mem_pop4(SEL_CODE2));
    kprintf("lcall gate: cs 0x%x\n", lcall_gate(SEL_GATE));
}

static void print_field(int ok, uint32_t v)
{
    if (ok)
        kprintf(" 0x%08x", v);
    else
        kprintf(" %10s", "-");
}

/* SDM "LAR", "LSL", "VERR/VERW": ZF=0 for null, out-of-limit, and wrong-type selectors. */
static void test_inspect(void)
{
    static const uint16_t sels[] = {
        0, SEL_KCODE, SEL_KDATA, SEL_UCODE, SEL_UDATA, SEL_TSS, SEL_DATA2, SEL_FSBUF,
        SEL_XONLY, SEL_RONLY, SEL_GATE, SEL_LDT, SEL_NOTPRES, SEL_GSBUF, SEL_LDT_DATA, 0x400,
    };

    kprintf("selector  lar         lsl         verr verw\n");
    for (unsigned i = 0; i < sizeof(sels) / sizeof(sels[0]); i++) {
        int lok, sok;
        uint32_t ar = lar(sels[i], &lok);
        uint32_t lim = lsl(sels[i], &sok);
        kprintf("0x%04x   ", sels[i]);
        print_field(lok, ar);
        print_field(sok, lim);
        kprintf("  %d    %d\n", verr(sels[i]), verw(sels[i]));
    }
}

int guest_main(void)
{
    setup_descriptors();
    test_table_registers();
    test_msw();
    test_loads();
    test_far_pointer_loads();
    test_based_segments();
    test_reload_after_change();
    test_far_transfers();
    test_inspect();
    return 0;
}

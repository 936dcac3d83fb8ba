/* exceptions: #DE #UD #BP #OF #GP #NP #SS #PF and int n at CPL 0: vector, error code, resumption. */
#include "guest.h"

const char guest_name[] = "exceptions";

#define SEL_XONLY   0x38   /* execute-only code */
#define SEL_RONLY   0x40   /* read-only data */
#define SEL_NOTPRES 0x48   /* data, not present */
#define SEL_CODE_NP 0x50   /* code, not present */
#define SEL_RCODE   0x58   /* execute/read code */

#define RESTORE_DS "\n\tmovw $" TG_XSTR(SEL_KDATA) ", %%ax\n\tmovw %%ax, %%ds"
#define RESTORE_ES "\n\tmovw $" TG_XSTR(SEL_KDATA) ", %%ax\n\tmovw %%ax, %%es"

static uint8_t kstack[4096] __attribute__((aligned(16)));

static void test_arithmetic_and_opcodes(void)
{
    kprintf("arithmetic and opcodes:\n");
    PROBE_FULL("divl by zero", "movl $1, %%eax\n\txorl %%edx, %%edx\n\txorl %%ecx, %%ecx",
               "divl %%ecx", "");
    PROBE_FULL("idivl overflow", "movl $0x80000000, %%eax\n\tcltd\n\tmovl $-1, %%ecx",
               "idivl %%ecx", "");
    PROBE("ud2", "ud2");
    PROBE("mov to cr1", "movl %%eax, %%cr1");
    PROBE("int3", "int3");
    PROBE_FULL("into with OF", "movl $0x7fffffff, %%eax\n\taddl $1, %%eax", "into", "");
    PROBE_FULL("into without OF", "xorl %%eax, %%eax", "into", "");
    PROBE("int $0x30", "int $0x30");
    PROBE("int $0xff", "int $0xff");

    uint32_t esi;
    probe_arm();
    __asm__ __volatile__("movl $0x600DF00D, %%esi\n\t" PROBE_ASM("int3 keeps esi", "int3")
                         "movl %%esi, %0"
                         : "=r"(esi) : : "esi", "memory");
    probe_report("int3 keeps esi");
    kprintf("  esi after int3: 0x%08x\n", esi);
}

/* SDM 3.4.3 and "MOV": the checks made when a selector is loaded. */
static void test_segment_loads(void)
{
    kprintf("segment loads:\n");
    PROBE("ds <- 0x1000 beyond GDT limit", "movw %w0, %%ds", "r"(0x1000));
    PROBE("ds <- tss", "movw %w0, %%ds", "r"(SEL_TSS));
    PROBE("ds <- execute-only code", "movw %w0, %%ds", "r"(SEL_XONLY));
    PROBE("ds <- rpl 3 of dpl 0 data", "movw %w0, %%ds", "r"(SEL_KDATA | 3));
    PROBE("ds <- not present", "movw %w0, %%ds", "r"(SEL_NOTPRES));
    PROBE("fs <- not present", "movw %w0, %%fs", "r"(SEL_NOTPRES));
    PROBE("es <- ldt selector, ldtr null", "movw %w0, %%es", "r"(0x0C));
    PROBE_FULL("ds <- null", "", "movw %w0, %%ds", RESTORE_DS, "r"(0));
    PROBE_FULL("ds <- readable code", "", "movw %w0, %%ds", RESTORE_DS, "r"(SEL_RCODE));
    PROBE_FULL("es <- dpl 3 data", "", "movw %w0, %%es", RESTORE_ES, "r"(SEL_UDATA));
    PROBE("ss <- null", "movw %w0, %%ss", "r"(0));
    PROBE("ss <- read-only data", "movw %w0, %%ss", "r"(SEL_RONLY));
    PROBE("ss <- dpl 3 data", "movw %w0, %%ss", "r"(SEL_UDATA));
    PROBE("ss <- not present", "movw %w0, %%ss", "r"(SEL_NOTPRES));
    PROBE("ljmp to data segment", "ljmp $" TG_XSTR(SEL_KDATA) ", $0");
    PROBE("lcall to not-present code", "lcall $" TG_XSTR(SEL_CODE_NP) ", $0");
    PROBE("ltr busy tss", "ltr %w0", "r"(SEL_TSS));
    PROBE("ltr data segment", "ltr %w0", "r"(SEL_KDATA));
    PROBE("lldt data segment", "lldt %w0", "r"(SEL_KDATA));
}

static uint32_t gate_eflags_saved, gate_eflags_inside;

static void record_if(struct trapframe *tf)
{
    gate_eflags_saved = tf->eflags;
    gate_eflags_inside = read_eflags();
}

/* SDM 6.12.1.3: an interrupt gate clears IF, a trap gate leaves it. */
static void test_gates(void)
{
    kprintf("gates:\n");
    idt_set_raw(0x41, (uint64_t)0x0E << 40);                     /* present bit clear */
    idt_set_raw(0x43, (uint64_t)(0x80 | 0x1) << 40);             /* reserved type */
    PROBE("int $0x41, gate not present", "int $0x41");
    PROBE("int $0x43, bad gate type", "int $0x43");

    struct dtr full, small = { 0x44 * 8 - 1, (uint32_t)idt };
    sidt(&full);
    lidt(&small);
    PROBE("int $0x44, beyond IDT limit", "int $0x44");
    lidt(&full);

    trap_set_handler(0x45, record_if);
    trap_set_handler(0x46, record_if);
    idt_set_gate(0x46, (uint32_t)trap_stubs + TRAP_STUB_SIZE * 0x46, GATE_TRAP, 0);
    pic_init();   /* every IRQ masked: nothing but the int below can interrupt */
    sti();
    __asm__ __volatile__("int $0x45" : : : "memory");
    kprintf("  interrupt gate: IF saved %u, inside %u\n", (gate_eflags_saved >> 9) & 1,
            (gate_eflags_inside >> 9) & 1);
    __asm__ __volatile__("int $0x46" : : : "memory");
    kprintf("  trap gate: IF saved %u, inside %u\n", (gate_eflags_saved >> 9) & 1,
            (gate_eflags_inside >> 9) & 1);
    cli();
    kprintf("  after cli: IF %u\n", (read_eflags() >> 9) & 1);
}

static void test_page_faults(void)
{
    uint32_t *pd = paging_identity(PTE_W);
    uint8_t *ro = page_alloc();

    kprintf("page faults:\n");
    map_page(pd, 0x00800000, (uint32_t)ro, 0);
    ro[0] = 0x5A;
    paging_enable(pd);
    PROBE("read 0x00c00000, no page table", "movl 0x00c00000, %%eax");
    PROBE("write 0x00c00004, no page table", "movl %%eax, 0x00c00004");
    PROBE("read 0x00801000, pte not present", "movl 0x00801000, %%eax");
    PROBE("read 0x00800000, read-only", "movb 0x00800000, %%al");
    PROBE("write 0x00800000, read-only", "movb %%al, 0x00800000");
    kprintf("  read-only byte still 0x%02x\n", *(volatile uint8_t *)0x00800000);
}

int guest_main(void)
{
    gdt[SEL_XONLY >> 3] = seg_desc(0, 0xFFFFF, 0x99, FLAGS_32_4K);
    gdt[SEL_RONLY >> 3] = seg_desc(0, 0xFFFFF, 0x91, FLAGS_32_4K);
    gdt[SEL_NOTPRES >> 3] = seg_desc(0, 0xFFFFF, ACC_DATA & 0x7F, FLAGS_32_4K);
    gdt[SEL_CODE_NP >> 3] = seg_desc(0, 0xFFFFF, ACC_CODE & 0x7F, FLAGS_32_4K);
    gdt[SEL_RCODE >> 3] = seg_desc(0, 0xFFFFF, ACC_CODE, FLAGS_32_4K);
    tss_init((uint32_t)kstack + sizeof(kstack));
    lldt(0);

    test_arithmetic_and_opcodes();
    test_segment_loads();
    test_gates();
    test_page_faults();
    return 0;
}

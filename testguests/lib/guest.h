/* The test guests' runtime: console, exit, descriptor tables, traps, probes, PIC, PIT, paging. */
#ifndef TG_GUEST_H
#define TG_GUEST_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "x86.h"

/* ---- what each guest defines ---- */

/* The guest's name, printed in its last line. */
extern const char guest_name[];

/* The guest's body; runs after the runtime set up the GDT, IDT and UART with
 * interrupts off. Its return value is added to the failed checks. */
int guest_main(void);

/* ---- console (16550 UART at COM1, polled) and exit ---- */

#define COM1 0x3F8

void uart_init(void);
void uart_putc(char c);
void kputs(const char *s);
/* printf subset: %c %s %d %u %x, flag 0, width; no floating point. */
void kprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kvprintf(const char *fmt, va_list ap);

/* isa-debug-exit (QEMU -device isa-debug-exit,iobase=0xf4,iosize=0x04; ring3
 * implements the same port): writing V ends the machine with status V*2+1. */
#define DEBUG_EXIT_PORT 0xF4
enum guest_status { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_PANIC = 2 };
void guest_exit(enum guest_status st) __attribute__((noreturn));
void panic(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Counts a failed check and prints "FAIL: what" when cond is false. */
void check(int cond, const char *what);
extern int check_failures;

/* ---- multiboot command line ---- */

/* Value of "key=N" (decimal or 0x hex) on the multiboot command line, else dflt. */
uint32_t cmdline_uint(const char *key, uint32_t dflt);
/* True if the loader handed over multiboot information (magic and cmdline). */
extern int multiboot_ok;

/* ---- small helpers ---- */

#define TG_STR(x)  #x
#define TG_XSTR(x) TG_STR(x)

void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);

/* ---- GDT layout shared by all guests ----
 * The x86-64 Linux layout: user code and data are 0x23 and 0x2b, the host's
 * compat-mode user selectors, so that unrewritten user code is valid on both
 * sides (see DESIGN.md); kernel code and data sit 16 bytes below them, as
 * sysenter/sysexit require (SDM "SYSEXIT": CS = SYSENTER_CS + 16). Entry 1
 * is left empty. */
#define SEL_KCODE 0x10
#define SEL_KDATA 0x18
#define SEL_UCODE 0x23
#define SEL_UDATA 0x2B
#define SEL_TSS   0x30
#define GDT_FIRST_FREE 7      /* entries 7..GDT_ENTRIES-1 are the guest's own */
#define GDT_ENTRIES    16

/* Descriptor type bytes (P, DPL, S, type), all with the accessed bit set so
 * that loading a selector does not change the table (SDM 3.4.5.1). */
#define ACC_CODE    0x9B   /* present, DPL0, execute/read, accessed */
#define ACC_DATA    0x93   /* present, DPL0, read/write, accessed */
#define ACC_DPL(n)  ((n) << 5)
#define ACC_TSS     0x89   /* present, DPL0, available 32-bit TSS */
#define FLAGS_32_4K 0xC    /* G=1, D/B=1 */
#define FLAGS_32_B  0x4    /* G=0, D/B=1 */

/* A segment descriptor (SDM 3.4.5); flags are G, D/B, L, AVL in bits 3..0. */
#define SEG_DESC(base, limit, access, flags)                                  \
    (((uint64_t)(limit) & 0xFFFF) | (((uint64_t)(base) & 0xFFFFFF) << 16) |   \
     ((uint64_t)(access) << 40) | ((((uint64_t)(limit) >> 16) & 0xF) << 48) | \
     ((uint64_t)(flags) << 52) | (((uint64_t)(base) >> 24) << 56))

extern uint64_t gdt[GDT_ENTRIES];
uint64_t seg_desc(uint32_t base, uint32_t limit, uint8_t access, uint8_t flags);
/* A 32-bit call gate (type 0xC) to sel:off with DPL dpl and no parameters. */
uint64_t call_gate_desc(uint16_t sel, uint32_t off, int dpl);
void gdt_load(void);      /* lgdt of gdt[], limit covering all entries */

/* ---- IDT and traps ---- */

#define GATE_INT  0xE
#define GATE_TRAP 0xF

/* The frame trap_common builds: segment registers, pushal, vector, error
 * code (0 if the CPU pushed none), then what the CPU pushed. esp and ss are
 * valid only when the trap came from a lower privilege level (cs & 3). */
struct trapframe {
    uint32_t gs, fs, es, ds;
    uint32_t edi, esi, ebp, esp_pushal, ebx, edx, ecx, eax;
    uint32_t vector, err;
    uint32_t eip, cs, eflags;
    uint32_t esp, ss;
};

typedef void (*trap_handler)(struct trapframe *tf);

extern const char trap_stubs[];      /* 256 stubs, TRAP_STUB_SIZE bytes apart */
#define TRAP_STUB_SIZE 16
extern uint64_t idt[256];
void idt_set_gate(int vec, uint32_t off, int type, int dpl);
void idt_set_raw(int vec, uint64_t desc);
void idt_restore(int vec);  /* back to the runtime's default: stub, interrupt gate, DPL0 */
void idt_load(void);
/* Installs a C handler for vec; it runs instead of probe matching. */
void trap_set_handler(int vec, trap_handler h);
const char *trap_name(uint32_t vec);

/* ---- probes: one instruction that may fault ----
 * PROBE("name", "insn", inputs...) runs insn between two labels recorded in
 * the section "probes". If it traps, the handler prints one line naming the
 * probe, the vector, the error code (and CR2 for #PF), the saved CS, and
 * whether the saved EIP was the start ("fault") or the end ("trap") of the
 * instruction, then resumes at the end. Otherwise PROBE prints "no fault".
 * Offsets, never addresses, so the transcript is the same for every build.
 * PROBE_FULL adds asm before (setup) and after (tail) the instruction; both
 * may use %eax, %ecx and %edx freely, so inputs go in other registers. */
struct probe {
    uint32_t start, end;
    const char *name;
};

#define PROBE_ASM(name, insn)                                               \
    "1:\n\t" insn "\n2:\n\t"                                                \
    ".pushsection probes, \"a\"\n\t.long 1b, 2b, 3f\n\t.popsection\n\t"       \
    ".pushsection .rodata.probe_names, \"a\"\n3:\t.asciz \"" name "\"\n\t.popsection\n\t"

#define PROBE_FULL(name, setup, insn, tail, ...)                            \
    do {                                                                    \
        probe_arm();                                                        \
        __asm__ __volatile__(setup "\n\t" PROBE_ASM(name, insn) tail        \
                             : : __VA_ARGS__ : "memory", "cc", "eax", "ecx", "edx"); \
        probe_report(name);                                                 \
    } while (0)

#define PROBE(name, insn, ...) PROBE_FULL(name, "", insn, "", __VA_ARGS__)

void probe_arm(void);
void probe_report(const char *name);
/* The last probe hit: vector, error code, cr2 (for #PF). */
struct probe_hit {
    int count;
    uint32_t vector, err, cr2;
};
extern volatile struct probe_hit probe_last;

/* ---- TSS and user mode ---- */

struct tss {
    uint32_t link, esp0, ss0, esp1, ss1, esp2, ss2, cr3, eip, eflags;
    uint32_t eax, ecx, edx, ebx, esp, ebp, esi, edi;
    uint32_t es, cs, ss, ds, fs, gs, ldt;
    uint16_t trap, iomap;
} __attribute__((packed));

/* The TSS and the I/O permission bitmap after it (SDM 19.5.2): at CPL > IOPL a
 * port is allowed only if its bit is clear; the byte after the map must be 0xff. */
struct tss_io {
    struct tss tss;
    uint8_t iobitmap[65536 / 8 + 1];
} __attribute__((packed));

extern struct tss_io tss_io;
/* Fills the TSS (ss0:esp0, every port denied), writes its descriptor at SEL_TSS and runs ltr. */
void tss_init(uint32_t esp0);
/* Allows ports first..first+n-1 at CPL 3, as Linux's ioperm() does. */
void tss_allow_ports(uint16_t first, uint16_t n);

/* Enters ring 3 at eip with stack esp and the given EFLAGS through iret.
 * Returns (with the value passed) when a kernel handler calls user_return. */
uint32_t user_enter(uint32_t eip, uint32_t esp, uint32_t eflags);
void user_return(uint32_t value) __attribute__((noreturn));

/* ---- 8259A PIC and 8254 PIT ---- */

#define IRQ_BASE 0x20
void pic_init(void);                /* ICW1-4: master at 0x20, slave at 0x28, all masked */
void pic_unmask(int irq);
void pic_mask(int irq);
void pic_eoi(int irq);
uint16_t pic_read_isr(void);
uint16_t pic_read_irr(void);
uint16_t pic_read_imr(void);

#define PIT_HZ 1193182u
void pit_periodic(uint16_t divisor);  /* channel 0, mode 2, lobyte/hibyte */
uint16_t pit_read0(void);             /* latch and read channel 0 */

/* CMOS RTC seconds (binary), waiting out an update in progress. */
int rtc_seconds(void);

/* ---- paging (two levels, 4 KiB and 4 MiB pages) ---- */

#define PTE_P   0x001
#define PTE_W   0x002
#define PTE_U   0x004
#define PTE_A   0x020
#define PTE_D   0x040
#define PTE_PS  0x080
#define PTE_G   0x100
#define CR0_PE  0x00000001u
#define CR0_WP  0x00010000u
#define CR0_PG  0x80000000u
#define CR4_PSE 0x00000010u
#define CR4_PGE 0x00000080u

/* A zeroed 4 KiB page from a static pool; panics when the pool is empty. */
void *page_alloc(void);
/* Maps va -> pa with flags (PTE_P added), creating a page table as needed
 * (the PDE gets P|W|U so that the PTE alone decides). */
void map_page(uint32_t *pd, uint32_t va, uint32_t pa, uint32_t flags);
/* The PTE for va, or 0 if its page table is absent. */
uint32_t *pte_of(uint32_t *pd, uint32_t va);
/* A new page directory mapping the first 4 MiB identically with 4 KiB pages. */
uint32_t *paging_identity(uint32_t flags);
/* Loads cr3, sets cr4.PSE and cr0.PG|WP. */
void paging_enable(uint32_t *pd);

#endif

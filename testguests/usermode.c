/* usermode: iret to ring 3, int $0x80 and sysenter back, the crossing frame, CPL 3 faults, ioperm. */
#include "guest.h"
#include "user.h"
#include "usermode.h"

const char guest_name[] = "usermode";

#define VA_SUPER    0x40000000u   /* present, supervisor only */
#define VA_USER_RO  0x40001000u   /* present, user, read-only */

#define MSR_SYSENTER_CS  0x174
#define MSR_SYSENTER_ESP 0x175
#define MSR_SYSENTER_EIP 0x176

#define EFLAGS_IF   0x200
#define EFLAGS_IOPL 0x3000

static uint8_t kstack0[8192] __attribute__((aligned(16)));
static uint8_t sysenter_stack[4096] __attribute__((aligned(16)));
static uint8_t user_stack[8192] __attribute__((aligned(16)));

/* Filled by sysenter_entry (usermode.S). */
extern volatile uint16_t sysenter_cs, sysenter_ss;
extern volatile uint32_t sysenter_esp;
void sysenter_entry(void);

static void sys_frame(struct trapframe *tf)
{
    int on_esp0 = (uint32_t)(&tf->ss + 1) == tss_io.tss.esp0;

    kprintf("kernel: int 0x80 from cs 0x%04x ss 0x%04x, user esp %s, frame %s, IF %u\n",
            tf->cs & 0xFFFF, tf->ss & 0xFFFF, tf->esp == tf->ebx ? "ok" : "WRONG",
            on_esp0 ? "at tss.esp0" : "WRONG", (read_eflags() & EFLAGS_IF) ? 1 : 0);
}

static void on_syscall(struct trapframe *tf)
{
    switch (tf->eax) {
    case SYS_EXIT:
        user_return(tf->ebx);
    case SYS_PUTC:
        uart_putc((char)tf->ebx);
        break;
    case SYS_GETPID:
        tf->eax = GETPID_ANSWER;
        break;
    case SYS_FRAME:
        sys_frame(tf);
        break;
    case SYS_ARM:
        probe_arm();
        break;
    case SYS_REPORT:
        probe_report((const char *)tf->ebx);
        break;
    default:
        panic("unknown system call %u", tf->eax);
    }
}

/* Called from ring 3. At CPL 3 with IOPL 0, cli and sti raise #GP(0) and popf leaves IF as it
 * was (SDM vol. 3, 6.8.1; vol. 2, POPF); with IOPL 3 cli and sti are allowed. The probes'
 * names match the ones ring 3 reports with. */
void kernel_cli(void)
{
    __asm__ __volatile__(PROBE_ASM("kernel's cli at CPL 3", "cli") : : : "memory");
}

void kernel_sti(void)
{
    __asm__ __volatile__(PROBE_ASM("kernel's sti at CPL 3", "sti") : : : "memory");
}

void kernel_popf_if_clear(void)
{
    __asm__ __volatile__("pushfl\n\tandl $~0x200, (%%esp)\n\t"
                         PROBE_ASM("kernel's popf at CPL 3", "popfl") : : : "memory", "cc");
}

static void setup(void)
{
    uint32_t *pd = paging_identity(PTE_W | PTE_U);

    map_page(pd, VA_SUPER, (uint32_t)page_alloc(), PTE_W);
    map_page(pd, VA_USER_RO, (uint32_t)page_alloc(), PTE_U);
    paging_enable(pd);

    tss_init((uint32_t)kstack0 + sizeof(kstack0));
    idt_set_gate(0x80, (uint32_t)trap_stubs + TRAP_STUB_SIZE * 0x80, GATE_TRAP, 3);
    idt_set_gate(3, (uint32_t)trap_stubs + TRAP_STUB_SIZE * 3, GATE_TRAP, 3);
    trap_set_handler(0x80, on_syscall);
    wrmsr(MSR_SYSENTER_CS, SEL_KCODE);
    wrmsr(MSR_SYSENTER_ESP, (uint32_t)sysenter_stack + sizeof(sysenter_stack));
    wrmsr(MSR_SYSENTER_EIP, (uint32_t)sysenter_entry);
    pic_init();
}

static void report(void)
{
    kprintf("ring 3 saw: cs 0x%x ss 0x%x ds 0x%x es 0x%x fs 0x%x gs 0x%x\n", seen.cs, seen.ss,
            seen.ds, seen.es, seen.fs, seen.gs);
    kprintf("ring 3 saw: IF %u IOPL %u, pid %u, IF after popf clearing it %u, after the "
            "kernel's %u\n", (seen.eflags & EFLAGS_IF) ? 1 : 0, (seen.eflags & EFLAGS_IOPL) >> 12,
            seen.pid, seen.popf_if, seen.kernel_popf_if);
    kprintf("sysenter: kernel cs 0x%x ss 0x%x esp %s; sysexit to cs 0x%x ss 0x%x, eax %u\n",
            sysenter_cs, sysenter_ss,
            sysenter_esp == (uint32_t)sysenter_stack + sizeof(sysenter_stack) ? "= msr" : "WRONG",
            seen.sysexit_cs, seen.sysexit_ss, seen.sysenter_ret);
}

int guest_main(void)
{
    setup();

    /* iret to an outer level nulls the data segment registers that level
     * may not use (SDM "IRET"): gs holds kernel data, fs user data. */
    load_fs(SEL_UDATA);
    load_gs(SEL_KDATA);
    uint32_t v = user_enter((uint32_t)user_main, (uint32_t)user_stack + sizeof(user_stack),
                            0x2 | EFLAGS_IF);
    load_fs(SEL_KDATA);
    load_gs(SEL_KDATA);
    kprintf("kernel: back from ring 3 with %u\n", v);
    report();

    v = user_enter((uint32_t)user_main_iopl, (uint32_t)user_stack + sizeof(user_stack),
                   0x2 | EFLAGS_IF | EFLAGS_IOPL);
    cli();
    kprintf("kernel: back from ring 3 at IOPL 3 with %u\n", v);

    tss_allow_ports(COM1, 8);
    v = user_enter((uint32_t)user_main_ioperm, (uint32_t)user_stack + sizeof(user_stack),
                   0x2 | EFLAGS_IF);
    kprintf("kernel: back from ring 3 with %u\n", v);
    return 0;
}

/* usermode, ring 3 half: observes its own state, makes system calls, and faults on purpose. */
#include "user.h"
#include "usermode.h"

#define EFLAGS_IF 0x200

struct user_seen seen;

static void uputs(const char *s)
{
    while (*s)
        usys(SYS_PUTC, (uint8_t)*s++);
}

static void observe(void)
{
    seen.cs = read_cs();
    seen.ss = read_ss();
    seen.ds = read_ds();
    seen.es = read_es();
    seen.fs = read_fs();
    seen.gs = read_gs();
    seen.eflags = read_eflags();
    seen.pid = usys(SYS_GETPID, 0);
    /* popf at CPL 3 with IOPL 0 leaves IF alone without faulting (SDM "POPF"). */
    write_eflags(read_eflags() & ~EFLAGS_IF);
    seen.popf_if = (read_eflags() & EFLAGS_IF) != 0;
}

/* Each of these traps on the real CPU under ring3 and must reach the guest kernel
 * as the fault the guest's own tables describe. */
static void probes(void)
{
    UPROBE("cli", "cli");
    UPROBE("sti", "sti");
    UPROBE("hlt", "hlt");
    UPROBE("inb", "inb $0x80, %%al");
    UPROBE("outb", "outb %%al, $0x80");
    UPROBE("mov from cr0", "movl %%cr0, %%eax");
    UPROBE("lgdt", "lgdt (%%esp)");
    UPROBE("ltr", "ltr %%ax");
    UPROBE("rdmsr", "rdmsr");
    UPROBE("invlpg", "invlpg (%%esp)");
    UPROBE("int $0x81, dpl 0 gate", "int $0x81");
    UPROBE("int3, dpl 3 gate", "int3");
    UPROBE("ud2", "ud2");
    UPROBE("ds <- kernel data", "movw %w0, %%ds", "r"(SEL_KDATA));
    UPROBE("ds <- user data", "movw %w0, %%ds", "r"(SEL_UDATA));
    UPROBE("lcall kernel code", "lcall $" TG_XSTR(SEL_KCODE) ", $0");
    UPROBE("read supervisor page", "movl 0x40000000, %%eax");
    UPROBE("write supervisor page", "movl %%eax, 0x40000004");
    UPROBE("read user read-only page", "movl 0x40001000, %%eax");
    UPROBE("write user read-only page", "movl %%eax, 0x40001008");
    UPROBE("read unmapped page", "movl 0x40002000, %%eax");
    /* The top of the address space, which this guest's tables leave unmapped, and where
     * ring3 keeps its runtime: a user access there is the guest's #PF all the same. */
    UPROBE("read unmapped page at 0xffff1000", "movl 0xffff1000, %%eax");
    UPROBE("write unmapped page at 0xffff0000", "movl %%eax, 0xffff0000");
    /* The kernel's own cli, sti and popf, which the ring3 build rewrote, run at CPL 3. */
    UPROBE("kernel's cli at CPL 3", "call *%0", "r"(kernel_cli));
    UPROBE("kernel's sti at CPL 3", "call *%0", "r"(kernel_sti));
    UPROBE("kernel's popf at CPL 3", "call *%0", "r"(kernel_popf_if_clear));
    seen.kernel_popf_if = (read_eflags() & EFLAGS_IF) != 0;
}

void user_main(void)
{
    uputs("user: hello from ring 3\n");
    observe();
    __asm__ __volatile__("movl %%esp, %%ebx\n\tint $0x80" : : "a"(SYS_FRAME) : "ebx", "memory");
    probes();
    seen.sysenter_ret = usysenter();
    seen.sysexit_cs = read_cs();
    seen.sysexit_ss = read_ss();
    uexit(7);
}

static void uart_puts_direct(const char *s)
{
    for (; *s; s++) {
        while (!(inb(COM1 + 5) & 0x20))
            ;
        outb(COM1, (uint8_t)*s);
    }
}

/* Runs at CPL 3 with IOPL 3: port I/O, cli and sti are allowed (SDM 19.5.1, "CLI"). */
void user_main_iopl(void)
{
    uart_puts_direct("user: direct uart output at IOPL 3\n");
    UPROBE("cli at IOPL 3", "cli");
    UPROBE("sti at IOPL 3", "sti");
    UPROBE("kernel's cli at CPL 3, IOPL 3", "call *%0", "r"(kernel_cli));
    UPROBE("kernel's sti at CPL 3, IOPL 3", "call *%0", "r"(kernel_sti));
    UPROBE("outb to port 0x80 at IOPL 3", "outb %%al, $0x80");
    uexit(5);
}

/* Runs at CPL 3 with IOPL 0 and COM1's ports allowed in the TSS I/O bitmap, the way
 * Linux grants ioperm() and, since 5.5, iopl(3) (SDM 19.5.2): other ports and cli
 * still fault. */
void user_main_ioperm(void)
{
    uart_puts_direct("user: direct uart output through the I/O bitmap\n");
    UPROBE_FULL("inb from com1 scratch", "movw $0x3ff, %%dx", "inb %%dx, %%al", "");
    UPROBE_FULL("inb from port 0x2f8", "movw $0x2f8, %%dx", "inb %%dx, %%al", "");
    UPROBE_FULL("inw across the allowed range's end", "movw $0x3ff, %%dx", "inw %%dx, %%ax", "");
    UPROBE("outb to port 0x80", "outb %%al, $0x80");
    UPROBE("cli with ports allowed", "cli");
    uexit(3);
}

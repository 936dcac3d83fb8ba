/* syscall-loop: count= getpid-like round trips: far calls through a call gate in ring 0 (each a
 * pair of monitor gate calls under ring3), then int $0x80 and sysenter from ring 3; and the
 * flags an outb in ring 0 and an int $0x80 from ring 3 leave as they were. */
#include "guest.h"
#include "syscall-loop.h"
#include "user.h"

const char guest_name[] = "syscall-loop";

#define SEL_GATE   0x38             /* DPL 0 call gate to SEL_KCODE:gate_getpid */
#define MSR_SYSENTER_CS  0x174
#define MSR_SYSENTER_ESP 0x175
#define MSR_SYSENTER_EIP 0x176

static uint8_t kstack0[8192] __attribute__((aligned(16)));
static uint8_t sysenter_stack[4096] __attribute__((aligned(16)));
static uint8_t user_stack[8192] __attribute__((aligned(16)));

/* syscall-loop.S */
extern volatile uint32_t gate_calls, sysenter_calls;
void gate_getpid(void);
void sysenter_getpid(void);
/* syscall-loop.user.c */
extern uint32_t user_count;
void user_loop(void);

static uint32_t int80_calls;

static void on_syscall(struct trapframe *tf)
{
    if (tf->eax == SYS_EXIT)
        user_return(tf->ebx);
    if (tf->eax == SYS_NOP)
        return;
    int80_calls++;
    tf->eax = tf->eax == SYS_GETPID ? GETPID_ANSWER : (uint32_t)-1;
}

static uint32_t kernel_loop(uint32_t count)
{
    uint32_t bad = 0, r;

    for (uint32_t i = 0; i < count; i++) {
        __asm__ __volatile__("lcall $" TG_XSTR(SEL_GATE) ", $0" : "=a"(r) : : "memory");
        bad += r != GETPID_ANSWER;
    }
    return bad;
}

int guest_main(void)
{
    uint32_t count = cmdline_uint("count", 1000000);

    pic_init();
    tss_init((uint32_t)kstack0 + sizeof(kstack0));
    gdt[SEL_GATE >> 3] = call_gate_desc(SEL_KCODE, (uint32_t)gate_getpid, 0);
    idt_set_gate(0x80, (uint32_t)trap_stubs + TRAP_STUB_SIZE * 0x80, GATE_INT, 3);
    trap_set_handler(0x80, on_syscall);
    wrmsr(MSR_SYSENTER_CS, SEL_KCODE);
    wrmsr(MSR_SYSENTER_ESP, (uint32_t)sysenter_stack + sizeof(sysenter_stack));
    wrmsr(MSR_SYSENTER_EIP, (uint32_t)sysenter_getpid);

    uint32_t bad_kernel = kernel_loop(count);
    uint32_t kernel_flags_kept = FLAGS_ACROSS("outb %%al, $0x80", 0);   /* a gate call under ring3 */
    user_count = count;
    uint32_t bad_user = user_enter((uint32_t)user_loop,
                                   (uint32_t)user_stack + sizeof(user_stack), 0x202);
    kprintf("syscall-loop: %u call gate, %u int $0x80, %u sysenter round trips\n", gate_calls,
            int80_calls, sysenter_calls);
    kprintf("syscall-loop: %u wrong results in ring 0, %u in ring 3\n", bad_kernel, bad_user);
    kprintf("syscall-loop: flags 0x%x set, 0x%x of them kept by an outb in ring 0, 0x%x by an "
            "int $0x80 from ring 3\n", KEPT_FLAGS, kernel_flags_kept, user_flags_kept);
    check(int80_calls == count && gate_calls == count && sysenter_calls == count, "call counts");
    return 0;
}

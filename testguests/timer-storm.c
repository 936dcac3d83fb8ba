/* timer-storm: count= PIT interrupts at hz= taken while halted, in ring 0 code and in ring 3 code,
 * with a checksum loop that must never see its state disturbed. */
#include "guest.h"
#include "user.h"
#include "timer-storm.h"

const char guest_name[] = "timer-storm";

static uint8_t kstack0[8192] __attribute__((aligned(16)));
static uint8_t user_stack[8192] __attribute__((aligned(16)));

static void on_tick(struct trapframe *tf)
{
    (void)tf;
    storm_ticks++;
    pic_eoi(0);
}

static void on_syscall(struct trapframe *tf)
{
    if (tf->eax == SYS_EXIT)
        user_return(tf->ebx);
    panic("unknown system call %u", tf->eax);
}

/* (a / na) as a percentage of (b / nb), in 32-bit arithmetic (no libgcc here): TSC spans are
 * taken in units of 1024 ticks. */
static uint32_t percent_of(uint64_t a, uint32_t na, uint64_t b, uint32_t nb)
{
    uint32_t per_a = (uint32_t)(a >> 10) / na, per_b = (uint32_t)(b >> 10) / nb;
    return per_b >= 100 ? per_a / (per_b / 100) : 0;
}

int guest_main(void)
{
    uint32_t count = cmdline_uint("count", 1000000);
    uint32_t hz = cmdline_uint("hz", 50000);
    uint32_t divisor = hz ? PIT_HZ / hz : 0;
    uint32_t third = count / 3;

    if (divisor < 2 || divisor > 0xFFFF)
        panic("hz=%u is outside what the PIT can do", hz);
    for (unsigned i = 0; i < STORM_WORDS; i++)
        storm_data[i] = i * 0x9E3779B9u;
    storm_reference = storm_checksum();

    tss_init((uint32_t)kstack0 + sizeof(kstack0));
    idt_set_gate(0x80, (uint32_t)trap_stubs + TRAP_STUB_SIZE * 0x80, GATE_INT, 3);
    trap_set_handler(0x80, on_syscall);
    trap_set_handler(IRQ_BASE + 0, on_tick);
    pic_init();
    pit_periodic((uint16_t)divisor);
    pic_unmask(0);

    uint64_t t0 = rdtsc();
    storm_target = third;
    while (storm_ticks < storm_target)
        sti_hlt();
    cli();
    kprintf("timer-storm: %u taken halted\n", third);

    uint64_t t1 = rdtsc();
    storm_target += third;
    sti();
    uint32_t wrong_kernel = storm_busy();
    cli();
    kprintf("timer-storm: %u taken in ring 0 code\n", third);

    uint64_t t2 = rdtsc();
    storm_target = count;
    uint32_t wrong_user = user_enter((uint32_t)storm_user_busy,
                                     (uint32_t)user_stack + sizeof(user_stack), 0x202);
    cli();
    pic_mask(0);
    uint64_t t3 = rdtsc();

    kprintf("timer-storm: %u taken in ring 3 code, %u in all\n", count - 2 * third, count);
    kprintf("timer-storm: wrong checksums: %u in ring 0, %u in ring 3\n", wrong_kernel, wrong_user);
    if (cmdline_uint("timing", 0))
        kprintf("timer-storm: time per interrupt, as a percentage of the halted phase's: "
                "ring 0 code %u, ring 3 code %u\n", percent_of(t2 - t1, third, t1 - t0, third),
                percent_of(t3 - t2, count - 2 * third, t1 - t0, third));
    check(storm_ticks >= count, "tick count");
    return 0;
}

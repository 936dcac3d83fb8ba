/* Benchmark guest: count= repetitions of one event=: clisti, gate, softint or irq.
 *
 * bench/run.py times it with count=0 and count=N under ring3 and under QEMU
 * and divides the difference by N: the cost of one event, start-up excluded.
 *   clisti   a cli/sti pair (rewritten: an inline store and the sti stub)
 *   gate     a round trip through the monitor's gate (mov from %cr0)
 *   softint  int $0x30 through an IDT interrupt gate and iret
 *   irq      count= steps of a computation with the PIT interrupting at 10 kHz;
 *            busy     the same computation without interrupts: run.py charges the
 *            difference to the interrupts counted (a PIT interrupt injected + iret)
 */
#include "guest.h"
#include "x86.h"

const char guest_name[] = "bench-events";

static volatile uint32_t irqs;

static void on_irq(struct trapframe *tf)
{
    (void)tf;
    irqs++;
    outb(0x20, 0x20);
}

static void on_soft(struct trapframe *tf)
{
    (void)tf;
}

int guest_main(void)
{
    uint32_t count = cmdline_uint("count", 100000);
    uint32_t kind = cmdline_uint("event", 0);
    uint32_t sink = 0;

    /* Under QEMU the BIOS leaves IRQ0 unmasked at vector 8 with the PIT running:
     * mask everything before the first sti. */
    pic_init();
    switch (kind) {
    case 0:
        for (uint32_t i = 0; i < count; i++) {
            __asm__ __volatile__("cli" ::: "memory");
            __asm__ __volatile__("sti" ::: "memory");
        }
        break;
    case 1:
        for (uint32_t i = 0; i < count; i++) {
            uint32_t cr0;
            __asm__ __volatile__("mov %%cr0, %0" : "=r"(cr0));
            sink += cr0;
        }
        break;
    case 2:
        trap_set_handler(0x30, on_soft);
        for (uint32_t i = 0; i < count; i++)
            __asm__ __volatile__("int $0x30" ::: "memory");
        break;
    case 3:
        trap_set_handler(IRQ_BASE + 0, on_irq);
        pit_periodic(PIT_HZ / 10000);
        pic_unmask(0);
        __asm__ __volatile__("sti" ::: "memory");
        __attribute__((fallthrough));   /* the same computation as "busy" */
    case 4:
        for (uint32_t i = 0; i < count; i++) {
            sink = sink * 1664525u + 1013904223u;
            __asm__ __volatile__("" : "+r"(sink));
        }
        __asm__ __volatile__("cli" ::: "memory");
        break;
    }
    kprintf("bench-events: event %u count %u irqs %u done %u\n", kind, count, irqs, sink & 1);
    return 0;
}

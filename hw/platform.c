/* The PC platform: one call creates and wires every legacy device. */
#include "platform.h"

#include "pci_host.h"

int platform_init(struct platform *p, const struct platform_config *cfg)
{
    *p = (struct platform){ 0 };
    p->clock = cfg->clock ? cfg->clock : &hw_clock_monotonic;
    int64_t wall = cfg->wall_ns ? cfg->wall_ns : hw_wall_ns();

    p->io = io_bus_new();
    if (p->io == NULL)
        goto fail;
    p->pic = pic_init(p->io, cfg->intr);
    p->pit = p->pic ? pit_init(p->io, pic_irq(p->pic, 0), p->clock) : NULL;
    p->com1 = p->pic ? uart_init(p->io, UART_COM1_BASE, pic_irq(p->pic, UART_COM1_IRQ),
                                 cfg->console_tx, cfg->console_opaque, "com1") : NULL;
    p->rtc = p->pic ? rtc_init(p->io, pic_irq(p->pic, RTC_IRQ), p->clock, wall) : NULL;
    p->pci = pci_init(p->io);
    if (p->pci && pci_host_init(p->pci))
        goto fail;
    p->port80 = port80_init(p->io);
    p->i8042 = i8042_init(p->io);
    if (!cfg->no_debugexit) {
        p->debugexit = debugexit_init(p->io, DEBUGEXIT_BASE, DEBUGEXIT_LEN,
                                      cfg->exit_notify, cfg->exit_opaque);
        if (p->debugexit == NULL)
            goto fail;
    }
    if (!p->pic || !p->pit || !p->com1 || !p->rtc || !p->pci || !p->port80 || !p->i8042)
        goto fail;
    rtc_set_memory(p->rtc, cfg->mem_bytes);
    return 0;
fail:
    platform_destroy(p);
    return -1;
}

void platform_destroy(struct platform *p)
{
    debugexit_free(p->debugexit);
    i8042_free(p->i8042);
    port80_free(p->port80);
    pci_free(p->pci);
    rtc_free(p->rtc);
    uart_free(p->com1);
    pit_free(p->pit);
    pic_free(p->pic);
    io_bus_free(p->io);
    *p = (struct platform){ 0 };
}

void platform_update(struct platform *p, uint64_t now)
{
    pit_update(p->pit, now);
    rtc_update(p->rtc, now);
}

uint64_t platform_next_deadline(struct platform *p, uint64_t now)
{
    uint64_t a = pit_next_deadline(p->pit, now);
    uint64_t b = rtc_next_deadline(p->rtc, now);
    return a < b ? a : b;
}

/* Trap dispatch: per-vector C handlers, then probes, else a panic that names the trap. */
#include "guest.h"

extern const struct probe __start_probes[], __stop_probes[];

static trap_handler handlers[256];
volatile struct probe_hit probe_last;

void trap_dispatch(struct trapframe *tf);

static const char *const exc_names[32] = {
    "#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM", "#DF", "CSO", "#TS",
    "#NP", "#SS", "#GP", "#PF", "#15", "#MF", "#AC", "#MC", "#XM", "#VE", "#CP",
};

const char *trap_name(uint32_t vec)
{
    static char buf[8] = "int 0x";

    if (vec < 32 && exc_names[vec])
        return exc_names[vec];
    buf[6] = "0123456789abcdef"[(vec >> 4) & 0xF];
    buf[7] = "0123456789abcdef"[vec & 0xF];
    return buf;
}

static int has_error_code(uint32_t vec)
{
    return vec == 8 || (vec >= 10 && vec <= 14) || vec == 17 || vec == 21;
}

void trap_set_handler(int vec, trap_handler h)
{
    handlers[vec] = h;
}

void probe_arm(void)
{
    probe_last.count = 0;
}

void probe_report(const char *name)
{
    if (!probe_last.count)
        kprintf("  %s: no fault\n", name);
}

/* SDM 6.5: a fault saves the EIP of the faulting instruction, a trap the
 * EIP after it; the probe's two labels tell which one the frame holds. */
static int probe_catch(struct trapframe *tf)
{
    for (const struct probe *p = __start_probes; p < __stop_probes; p++) {
        if (tf->eip != p->start && tf->eip != p->end)
            continue;
        probe_last.count++;
        probe_last.vector = tf->vector;
        probe_last.err = tf->err;
        kprintf("  %s: %s", p->name, trap_name(tf->vector));
        if (has_error_code(tf->vector))
            kprintf("(0x%04x)", tf->err);
        if (tf->vector == 14) {
            probe_last.cr2 = rcr2();
            kprintf(" cr2=0x%08x", probe_last.cr2);
        }
        kprintf(" cs=0x%04x %s\n", tf->cs & 0xFFFF, tf->eip == p->start ? "fault" : "trap");
        tf->eip = p->end;
        return 1;
    }
    return 0;
}

void trap_dispatch(struct trapframe *tf)
{
    if (handlers[tf->vector & 0xFF]) {
        handlers[tf->vector & 0xFF](tf);
        return;
    }
    if (probe_catch(tf))
        return;
    kprintf("unexpected %s err=0x%x at cs=0x%04x eip=0x%08x",
            trap_name(tf->vector), tf->err, tf->cs & 0xFFFF, tf->eip);
    if (tf->vector == 14)
        kprintf(" cr2=0x%08x", rcr2());
    kprintf("\n");
    panic("unexpected trap");
}

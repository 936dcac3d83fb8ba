/* `ring3 run`: set up guest memory, devices and the vcpu, then enter the guest. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "run.h"

#include "boot/loader.h"
#include "lib/fail.h"
#include "lib/tsc.h"
#include "machine/platform.h"
#include "memory/guestmem.h"
#include "monitor/gdb/gdbstub.h"
#include "monitor/prompt/prompt.h"
#include "monitor/cpu/cpu_model.h"
#include "monitor/cpu/emulate.h"
#include "monitor/cpu/fast_syscall.h"
#include "monitor/cpu/runtime.h"
#include "monitor/cpu/segment.h"
#include "monitor/cpu/vcpu.h"
#include "monitor/mmu/aspace.h"
#include "monitor/mmu/mmu.h"

#include "console.h"
#include "events.h"
#include "guest_console.h"
#include "host_probe.h"
#include "options.h"
#include "signals.h"
#include "stats.h"

struct vcpu the_vcpu;
static struct guestmem gm;
static struct disk_image *export_images[OPTIONS_MAX_DISKS];    /* --disk FILE,export=NAME */
static struct platform plat;
static FILE *serial_out;

static void serial_tx(void *opaque, uint8_t byte)
{
    (void)opaque;
    guest_console_putc(byte);
}

/* The options and the devices' configuration live as long as the run, as the above do: a run
 * that stops at bad input leaves what they hold (the disks' names, the images opened and
 * locked) to exit, reachable, and not leaked. */
static struct r3_options o;
static struct platform_config cfg = {.console_tx = serial_tx};

static double seconds_since(uint64_t t0)
{
    return (double)(events_now() - t0) / 1e9;
}

_Noreturn void monitor_exit(struct vcpu *v, int status)
{
    guest_console_flush();
    fflush(stdout);
    console_restore();
    /* --cmd: a guest that powered off reports the command's status; one that
     * powered off before the command ended (its own `poweroff`) reports 0. */
    if (v->booting_linux && status == 0 && guest_console_cmd_mode())
        guest_console_cmd_status(&status);
    gdb_exited(status);
    if (v->report_time) {
        if (v->first_user_ns)
            fprintf(stderr, "ring3: %.3f s to the first guest process, %.3f s in all\n",
                    (double)(v->first_user_ns - v->start_ns) / 1e9, seconds_since(v->start_ns));
        else
            fprintf(stderr, "ring3: no guest process ran; %.3f s in all\n", seconds_since(v->start_ns));
    }
    if (stats_enabled)
        stats_report(stderr, seconds_since(v->start_ns));
    if (v->plat)
        platform_io_close(v->plat);
    exit(status);
}

static void start_state(struct vcpu *v, const struct boot_state *bs)
{
    struct r3_shared *sh = v->sh;
    v->cr0 = bs->cr0;
    v->cpl = 0;
    seg_reset_flat(v, bs->cs, bs->ds);
    memset(sh->regs, 0, sizeof sh->regs);
    sh->regs[REG_EAX] = bs->eax;
    sh->regs[REG_EBX] = bs->ebx;
    sh->regs[REG_ESI] = bs->esi;
    v->gdtr.base = bs->gdt_base;
    v->gdtr.limit = bs->gdt_limit;
    sh->regs[REG_ESP] = bs->esp;
    sh->eip = bs->entry;
    sh->eflags = 0x202;              /* real IF stays set; the guest's is virtual */
    sh->vif = !!(bs->eflags & FL_IF);
    sh->fsbase = sh->gsbase = 0;
    cpu_reset(v);
}

/* The kernel command line the user's --append becomes (malloc'd; NULL if out
 * of memory). --cmd keeps the kernel's own messages off the console the
 * command prints to; the default guest's console learns this terminal's
 * size (guest/initramfs/init). */
static char *guest_append(const struct r3_options *o)
{
    char winsize[48] = "", *append;
    struct winsize ws;

    if (o->kernel_default && o->serial == R3_SERIAL_STDIO && !o->cmd &&
        ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
        snprintf(winsize, sizeof winsize, "ring3.rows=%u ring3.cols=%u ", ws.ws_row, ws.ws_col);
    if (asprintf(&append, "%s%s%s", o->cmd ? "quiet " : "", winsize, o->append) < 0)
        return NULL;
    return append;
}

_Static_assert(OPTIONS_MAX_DISKS == PLATFORM_MAX_DISKS, "one --disk per disk slot");

/* Open and lock every --disk image, before anything else is set up. Returns
 * 0, or 2 after one line on stderr. */
static int open_disks(const struct r3_options *o, struct platform_config *cfg)
{
    char err[512];
    for (unsigned i = 0; i < o->ndisks; i++) {
        if (o->disks[i].served)
            continue;                   /* open_served, once guest RAM is there */
        cfg->disks[i] = disk_image_open(&o->disks[i], err, sizeof err);
        if (cfg->disks[i] == NULL) {
            while (i--)
                disk_image_close(cfg->disks[i]);
            return bad_input("%s", err);
        }
    }
    for (unsigned i = 0; i < o->nexports; i++) {
        export_images[i] = disk_image_open(&o->exports[i], err, sizeof err);
        if (export_images[i] == NULL)
            return bad_input("%s", err);
    }
    cfg->ndisks = o->ndisks;
    memcpy(cfg->nics, o->nets, sizeof o->nets[0] * o->nnets);
    cfg->nnics = o->nnets;
    return 0;
}

/* Join the IKC group for the disks served to this guest and by it: a served disk is attached
 * now (its server answers, or one line says why not). Returns 0, or 2 after one line. */
static int open_served(const struct r3_options *o, struct platform_config *cfg)
{
    char err[512];
    for (unsigned i = 0; i < o->ndisks; i++) {
        if (!o->disks[i].served)
            continue;
        cfg->remotes[i] = disk_remote_open(o->ikc, o->disks[i].served, o->disks[i].readonly, &gm,
                                           err, sizeof err);
        if (cfg->remotes[i] == NULL)
            return bad_input("--disk ikc:%s: %s", o->disks[i].served, err);
        /* Two disks from one server would share its one answer ring to this member, and each
         * would drop the other's answers (block/remote.c). */
        for (unsigned j = 0; j < i; j++)
            if (cfg->remotes[j] &&
                disk_remote_server(cfg->remotes[j]) == disk_remote_server(cfg->remotes[i]))
                return bad_input("--disk ikc:%s: the member serving ikc:%s serves it too; ring3 "
                                 "takes one disk from each serving member", o->disks[i].served,
                                 o->disks[j].served);
    }
    for (unsigned i = 0; i < o->nexports; i++) {
        struct disk_export *e = disk_export_new(o->ikc, o->exports[i].export_name,
                                                export_images[i], &gm, err, sizeof err);
        if (e == NULL)
            return bad_input("--disk %s,export=%s: %s", o->exports[i].path,
                             o->exports[i].export_name, err);
        cfg->exports[i] = e;
    }
    cfg->nexports = o->nexports;
    return 0;
}

int run_main(int argc, char **argv)
{
    struct boot_state bs;
    struct vcpu *v = &the_vcpu;
    uint8_t *cmd_archive = NULL;
    size_t cmd_len = 0;
    char *append;
    v->start_ns = events_now();
    int r = options_parse(argc, argv, &o);
    if (r != OPTIONS_RUN)
        return r;
    if ((r = open_disks(&o, &cfg)))
        return r;
    v->host_sysenter_pad = host_probe_sysenter();
    if ((r = guestmem_init(&gm, o.mem_size)) || (r = open_served(&o, &cfg)))
        return r;
    serial_out = stdout;
    if (o.serial == R3_SERIAL_FILE && !(serial_out = fopen(o.serial_path, "w")))
        return bad_input("cannot open serial file '%s': %s", o.serial_path, strerror(errno));
    if (guest_console_init(serial_out, o.cmd, &cmd_archive, &cmd_len)) {
        fprintf(stderr, "ring3: cannot prepare --cmd: %s\n", strerror(errno));
        return EXIT_HOST;
    }
    if (!(append = guest_append(&o))) {
        fprintf(stderr, "ring3: out of memory\n");
        return EXIT_HOST;
    }
    /* The guest's TSC is the host's: tell Linux its rate rather than let it
     * calibrate against the emulated PIT, and that it is constant and
     * synchronised (the host has constant_tsc and nonstop_tsc to give). */
    char linux_defaults[64];
    snprintf(linux_defaults, sizeof linux_defaults, "tsc_early_khz=%u tsc=reliable", tsc_khz());
    r = loader_load(&gm, o.kernel, append, linux_defaults, o.initrd, cmd_archive, cmd_len, &bs);
    free(cmd_archive);
    free(append);
    if (r)
        return r;
    if (o.cmd && !bs.linux_boot)
        return bad_input("--cmd needs a Linux kernel with ring3's initramfs; '%s' is a "
                "Multiboot kernel", o.kernel);
    v->booting_linux = bs.linux_boot;
    v->report_time = o.time;
    if (o.stats)
        stats_init();
    if (o.trace) {
        v->trace = o.trace_file ? fopen(o.trace_file, "w") : stderr;
        if (!v->trace)
            return bad_input("cannot open trace file '%s': %s", o.trace_file, strerror(errno));
        setvbuf(v->trace, NULL, _IOLBF, 0);
    }
    cfg.mem_bytes = gm.size;
    cfg.gm = &gm;
    cfg.clock = &events_guest_clock;
    cfg.intr = &v->intr;                /* level only: the monitor looks at the PIC at its gates */
    char why[200];
    if (platform_init(&plat, &cfg, why, sizeof why)) {
        fprintf(stderr, "ring3: cannot set up the devices: %s\n", why);
        return EXIT_HOST;
    }
    v->gm = &gm;
    v->plat = &plat;
    /* Not with gdb, whose stepping holds interrupts (vcpu_check_interrupts). */
    v->fast_syscalls = o.isolation_none && !o.gdb;
    if (runtime_install(emulate_gate, v->fast_syscalls ? fast_syscall : NULL)) {
        fprintf(stderr, "ring3: cannot map the runtime page at %08x: %s\n", R3_RUNTIME_BASE, strerror(errno));
        return EXIT_HOST;
    }
    v->sh = r3_shared_page;
    size_t xsave_size;
    v->fpu_image = runtime_xsave(&xsave_size);
    mmu_init(v);
    v->isolation = o.isolation_none ? ISOLATION_NONE : ISOLATION_PROCESS;
    if (v->isolation == ISOLATION_PROCESS && aspace_init(v, o.stubs, o.sysemu ? STUB_SYSEMU : STUB_SUD, o.placement))
        return EXIT_HOST;
    start_state(v, &bs);
    if (signals_init(v) || events_init(v)) {
        fprintf(stderr, "ring3: cannot set up signals and timers: %s\n", strerror(errno));
        return EXIT_HOST;
    }
    /* before the terminal goes raw: a failure returns, and -S waits here with a message */
    if ((o.monitor && prompt_listen(o.monitor)) || (o.gdb && gdb_start(v, o.gdb, o.gdb_wait)))
        return EXIT_HOST;
    if (o.serial == R3_SERIAL_STDIO)
        console_raw();
    TRACE(v, "start at %08x, eax %08x ebx %08x", bs.entry, bs.eax, bs.ebx);
    events_arm(v);
    seg_publish(v);
    runtime_enter_guest();
}

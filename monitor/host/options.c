/* The command line of `ring3 run`: qemu-like flags parsed with getopt_long_only. */
#include "options.h"

#include "ikc/channel.h"
#include "lib/fail.h"
#include "lib/listen.h"
#include "lib/optlist.h"
#include "lib/version.h"
#include "memory/guestmem.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Values for options that have no one-letter form. */
enum {
    OPT_APPEND = 256,
    OPT_INITRD,
    OPT_SERIAL,
    OPT_TRACE,
    OPT_TRACE_FILE,
    OPT_VERSION,
    OPT_CMD,
    OPT_TIME,
    OPT_STATS,
    OPT_ISOLATION,
    OPT_STUBS,
    OPT_SYSCALLS,
    OPT_PLACEMENT,
    OPT_DISK,
    OPT_NET,
    OPT_IKC,
    OPT_GDB,
    OPT_GDB_WAIT,
    OPT_MONITOR,
};

/* getopt_long_only also takes each of these with a single dash, as qemu
 * spells them (-append, -initrd, -serial). */
static const struct option long_options[] = {
    { "append",     required_argument, NULL, OPT_APPEND },
    { "initrd",     required_argument, NULL, OPT_INITRD },
    { "serial",     required_argument, NULL, OPT_SERIAL },
    { "trace",      no_argument,       NULL, OPT_TRACE },
    { "trace-file", required_argument, NULL, OPT_TRACE_FILE },
    { "cmd",        required_argument, NULL, OPT_CMD },
    { "time",       no_argument,       NULL, OPT_TIME },
    { "stats",      no_argument,       NULL, OPT_STATS },
    { "isolation",  required_argument, NULL, OPT_ISOLATION },
    { "stubs",      required_argument, NULL, OPT_STUBS },
    { "syscalls",   required_argument, NULL, OPT_SYSCALLS },
    { "placement",  required_argument, NULL, OPT_PLACEMENT },
    { "disk",       required_argument, NULL, OPT_DISK },
    { "net",        required_argument, NULL, OPT_NET },
    { "ikc",        required_argument, NULL, OPT_IKC },
    { "gdb",        required_argument, NULL, OPT_GDB },
    { "gdb-wait",   no_argument,       NULL, OPT_GDB_WAIT },
    { "monitor",    required_argument, NULL, OPT_MONITOR },
    { "help",       no_argument,       NULL, 'h' },
    { "version",    no_argument,       NULL, OPT_VERSION },
    { NULL, 0, NULL, 0 },
};

/* build/bin/ring3 -> build/guest/(name), or "" when this executable's path is unknown. */
static const char *build_file(char *buf, size_t size, const char *name)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash;

    if (n <= 0)
        return "";
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) {
        if (!(slash = strrchr(exe, '/')))
            return "";
        *slash = '\0';
    }
    snprintf(buf, size, "%s/guest/%s", exe, name);
    return buf;
}

/* vmlinux rather than bzImage: the loader places an ELF itself, and the
 * bzImage's decompressor (xz) would take longer than the rest of the boot. */
const char *options_default_kernel(void)
{
    static char path[4200];
    return build_file(path, sizeof path, "vmlinux");
}

const char *options_default_initrd(void)
{
    static char path[4200];
    return build_file(path, sizeof path, "initramfs.cpio.gz");
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ring3 run [options] [KERNEL]\n"
            "Runs the i386 kernel KERNEL as this process: a Linux bzImage or vmlinux (built with\n"
            "ring3-as), or a Multiboot ELF. Without KERNEL: the default Linux and initramfs,\n"
            "  %s\n  %s\n"
            "\n"
            "  -m SIZE              guest memory, 16M to 16G (default 256M; a plain number is MiB)\n"
            "  --append CMDLINE     kernel command line (Linux: added to ring3's default one)\n"
            "  --initrd FILE        initial ramdisk (a Multiboot module for Multiboot kernels);\n"
            "                       alone, it replaces the default initramfs and keeps the kernel\n"
            "  --cmd 'COMMAND'      boot the default Linux, run COMMAND in its shell with output\n"
            "                       on stdout, power off, and exit with COMMAND's status\n"
            "  --time               at exit, print the time to the first guest process and in all\n"
            "  --stats              at exit, print a table of monitor events: gate calls by\n"
            "                       entry, host signals by kind, exceptions, interrupts, cr3\n"
            "                       writes, stub hand-offs and stubs lost, with counts and\n"
            "                       monitor time (like kvm_stat)\n"
            "  --isolation process|none\n"
            "                       where guest processes run: each guest address space in a\n"
            "                       host process of its own, which cannot reach the guest kernel\n"
            "                       or ring3 (process, the default); or in ring3's own process,\n"
            "                       faster but open to a hostile guest process (none)\n"
            "  --gdb tcp:[HOST]:PORT|unix:PATH\n"
            "                       let gdb attach there (target remote): it stops the guest,\n"
            "                       reads and writes its registers and memory, sets breakpoints\n"
            "                       and steps; HOST is 127.0.0.1 when left out\n"
            "  -s                   --gdb tcp::1234, as qemu\n"
            "  -S, --gdb-wait       wait for gdb before the guest's first instruction (on\n"
            "                       tcp::1234 unless --gdb says where)\n"
            "  --monitor unix:PATH  the monitor's commands (info registers, info stats, x,\n"
            "                       stop, cont, quit; help lists them) on a UNIX socket, as\n"
            "                       on the terminal after Ctrl-A c; one client at a time\n"
            "  --syscalls sud|sysemu\n"
            "                       how a guest process's system calls leave its host process:\n"
            "                       a seccomp trap that the process hands to ring3 (sud, the\n"
            "                       default), or a ptrace stop (sysemu, the paper's\n"
            "                       PTRACE_SYSEMU; slower here, see bench/RESULTS.md)\n"
            "  --placement auto|spread|shared\n"
            "                       where ring3 and the stub process it runs sit: on any cores,\n"
            "                       each spinning for the other's answer (spread); on one core,\n"
            "                       each sleeping at once so that the other runs (shared); or\n"
            "                       the faster of the two as measured while the guest runs\n"
            "                       (auto, the default)\n"
            "  --disk FILE[,readonly=on][,snapshot=on]\n"
            "                       a raw disk image as a virtio disk: the first is /dev/vda,\n"
            "                       then vdb.. (up to %u); readonly=on: the guest cannot write;\n"
            "                       snapshot=on: writes go to a temporary overlay, dropped at exit\n"
            "  --disk FILE,export=NAME\n"
            "                       serve the image as NAME to one other ring3 of the --ikc\n"
            "                       group (this guest does not see it)\n"
            "  --disk ikc:NAME[,readonly=on]\n"
            "                       the disk NAME another ring3 of the --ikc group serves, as\n"
            "                       this guest's next virtio disk\n"
            "  --net user[,hostfwd=tcp::HOSTPORT-:GUESTPORT][,restrict=on][,mtu=N][,mac=MAC]\n"
            "                       a virtio NIC (eth0, then eth1.. up to %u) on user-mode\n"
            "                       networking, the default as in qemu: the guest is 10.0.2.15\n"
            "                       by DHCP, the host 10.0.2.2, DNS 10.0.2.3; hostfwd (tcp or\n"
            "                       udp, repeatable) forwards a host port to the guest, e.g.\n"
            "                       --net user,hostfwd=tcp::2222-:22; restrict=on: the guest\n"
            "                       reaches nothing outside; the MTU is 65520 unless mtu= says\n"
            "                       otherwise (1500 on stream and tap)\n"
            "  --net stream,path=SOCKET[,server=on][,mac=MAC]\n"
            "  --net stream,[host=HOST,]port=PORT[,server=on][,mac=MAC]\n"
            "                       a virtio NIC joined to a peer over a UNIX or TCP socket in\n"
            "                       qemu's -netdev stream format: another ring3, a qemu or\n"
            "                       passt; server=on listens for it, else ring3 connects (and\n"
            "                       reconnects); the link is up while the peer is there, e.g.\n"
            "                       --net stream,path=/tmp/lan.sock,server=on\n"
            "  --net tap,ifname=NAME[,mac=MAC]\n"
            "                       a virtio NIC on the host's TAP device NAME, e.g. one made\n"
            "                       with: sudo ip tuntap add dev tap0 mode tap user $USER;\n"
            "                       the guest's checksum and TCP segmentation offloads reach\n"
            "                       the host kernel through its vnet headers\n"
            "  --net ikc[,group=NAME][,mac=MAC]\n"
            "                       a port of the Ethernet switch of the ring3 instances in\n"
            "                       IKC group NAME on this host (`ring3 ikc list NAME`);\n"
            "                       frames go guest to guest through shared memory\n"
            "  --ikc NAME           the IKC group of --disk ikc:NAME, of export=NAME and of\n"
            "                       --net ikc when it names none\n"
            "  --net none           no network device\n"
            "  --stubs N            guest address spaces that keep their host process, 1 to %u\n"
            "                       (default %u; the least recently run one is reused)\n"
            "  --serial stdio|file:PATH\n"
            "                       where the serial console goes (default stdio)\n"
            "  --trace              log every emulated event to stderr\n"
            "  --trace-file PATH    log them to PATH instead (implies --trace)\n"
            "  --help, --version\n"
            "Options may also be written with one dash (-append, -initrd), as qemu does.\n",
            options_default_kernel(), options_default_initrd(), OPTIONS_MAX_DISKS, OPTIONS_MAX_NICS,
            OPTIONS_MAX_STUBS,
            OPTIONS_DEFAULT_STUBS);
}

/* --(option) (arg), one of two words: (off), the default, or (on), which sets *(out). */
static int parse_either(const char *option, const char *arg, const char *off, const char *on, bool *out)
{
    if (!strcmp(arg, off))
        *out = false;
    else if (!strcmp(arg, on))
        *out = true;
    else
        return bad_input("--%s '%s' is neither '%s' nor '%s'", option, arg, off, on);
    return 0;
}

static int parse_placement(const char *arg, struct r3_options *o)
{
    static const char *const names[] = { [PLACE_AUTO] = "auto", [PLACE_SPREAD] = "spread", [PLACE_SHARED] = "shared" };
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(arg, names[i])) {
            o->placement = (enum stub_placement)i;
            return 0;
        }
    return bad_input("--placement '%s' is none of 'auto', 'spread' and 'shared'", arg);
}

static int parse_stubs(const char *arg, struct r3_options *o)
{
    unsigned long n;
    if (opt_decimal(arg, 1, OPTIONS_MAX_STUBS, &n))
        return bad_input("--stubs '%s' is not a number from 1 to %u", arg, OPTIONS_MAX_STUBS);
    o->stubs = (unsigned)n;
    return 0;
}

/* An on/off value of a --disk flag, as qemu spells them. */
static int parse_switch(const char *value, bool *out)
{
    if (!strcmp(value, "on") || !strcmp(value, "true") || !strcmp(value, "yes"))
        *out = true;
    else if (!strcmp(value, "off") || !strcmp(value, "false") || !strcmp(value, "no"))
        *out = false;
    else
        return -1;
    return 0;
}

/* FILE[,readonly=on|off][,snapshot=on|off]. What it allocates the options keep on success, and
 * it frees on failure: a caller may parse again (the fuzz target does, many times). */
static int parse_disk(const char *arg, struct r3_options *o)
{
    struct disk_spec d;
    size_t n = strcspn(arg, ",");
    char *path = strndup(arg, n);
    if (path == NULL || n == 0) {
        fprintf(stderr, "ring3: --disk '%s' names no file; give --disk FILE[,readonly=on]"
                "[,snapshot=on]\n", arg);
        free(path);
        return 2;
    }
    d = (struct disk_spec){ .path = path };
    if (!strncmp(path, "ikc:", 4)) {
        d = (struct disk_spec){ .served = path + 4 };
        if (!ikc_name_ok(d.served)) {
            free(path);
            return bad_input("--disk '%s': a served disk's name is 1 to 32 of A-Z a-z 0-9 _ . - "
                    "(--disk ikc:NAME)", arg);
        }
    }
    struct opt_flag f;
    for (const char *p = arg + n; opt_next_flag(&p, &f); ) {
        if (f.value && !strcmp(f.key, "export") && !d.served && ikc_name_ok(f.value)) {
            free((char *)d.export_name);        /* the last export= counts */
            d.export_name = strdup(f.value);
            continue;
        }
        bool *target = f.value == NULL ? NULL :
                       !strcmp(f.key, "readonly") ? &d.readonly :
                       !strcmp(f.key, "snapshot") && !d.served ? &d.snapshot : NULL;
        if (target == NULL || parse_switch(f.value, target)) {
            free(path);
            free((char *)d.export_name);
            return bad_input("--disk '%s': '%.*s' is not readonly=on|off, snapshot=on|off or "
                    "export=NAME (file names with commas are not supported; ikc:NAME takes "
                    "readonly= only)", arg, f.len, f.text);
        }
    }
    bool export = d.export_name != NULL;
    if (export && o->nexports == 1) {
        /* Two exports of one monitor would share its one request ring from each user, and
         * each would answer the other's requests (block/export.c). */
        const char *first = o->exports[0].export_name;
        free(path);
        free((char *)d.export_name);
        return bad_input("--disk %s: this ring3 serves export=%s already, and serves one disk "
                         "only; serve the second from another ring3 in the group", arg, first);
    }
    unsigned *count = export ? &o->nexports : &o->ndisks;
    if (*count == OPTIONS_MAX_DISKS) {
        free(path);
        free((char *)d.export_name);
        return bad_input("too many --disk options; ring3 has %u disk slots", OPTIONS_MAX_DISKS);
    }
    (export ? o->exports : o->disks)[(*count)++] = d;
    return 0;
}

/* --net none, or one more NIC. */
static int parse_net(const char *arg, struct r3_options *o)
{
    if (!strcmp(arg, "none")) {
        o->net_none = true;
        return 0;
    }
    if (o->nnets == OPTIONS_MAX_NICS)
        return bad_input("too many --net options; ring3 has %u NIC slots", OPTIONS_MAX_NICS);
    int err = net_spec_parse(arg, o->nnets, &o->nets[o->nnets]);
    if (!err)
        o->nnets++;
    return err;
}

/* Multiply a saturating 128-bit value, so that absurd sizes stay absurd. */
static unsigned __int128 sat_mul(unsigned __int128 a, unsigned __int128 b)
{
    const unsigned __int128 cap = (unsigned __int128)1 << 100;

    return (a > cap || b > cap) ? cap : (a * b > cap ? cap : a * b);
}

int options_parse_size(const char *s, uint64_t *bytes)
{
    unsigned __int128 whole = 0, frac = 0, frac_div = 1, unit = 1 << 20, total;
    const char *p = s;

    if (!isdigit((unsigned char)*p))
        return -1;
    for (; isdigit((unsigned char)*p); p++)
        whole = sat_mul(whole, 10) + (unsigned)(*p - '0');
    if (*p == '.') {
        if (!isdigit((unsigned char)*++p))
            return -1;
        for (; isdigit((unsigned char)*p); p++)
            if (frac_div < 1000000000) {   /* nine digits are finer than a byte */
                frac = frac * 10 + (unsigned)(*p - '0');
                frac_div *= 10;
            }
    }
    switch (toupper((unsigned char)*p)) {
    case '\0': break;
    case 'B': unit = 1; break;
    case 'K': unit = 1ull << 10; break;
    case 'M': unit = 1ull << 20; break;
    case 'G': unit = 1ull << 30; break;
    case 'T': unit = 1ull << 40; break;
    default: return -1;
    }
    if (*p && p[1])
        return -1;
    total = sat_mul(whole, unit) + (frac * unit + frac_div - 1) / frac_div;
    total = (total + GM_PAGE_SIZE - 1) & ~(unsigned __int128)(GM_PAGE_SIZE - 1);
    /* Saturated, still a whole number of pages (options.h). */
    *bytes = total > UINT64_MAX ? UINT64_MAX & ~(uint64_t)(GM_PAGE_SIZE - 1) : (uint64_t)total;
    return 0;
}

static int parse_mem(const char *arg, struct r3_options *o)
{
    if (options_parse_size(arg, &o->mem_size) < 0)
        return bad_input("invalid memory size '-m %s'; give a size such as 256M or 1G "
                "(16M to 16G)", arg);
    if (o->mem_size < GM_MIN_SIZE || o->mem_size > GM_MAX_SIZE)
        return bad_input("-m %s is too %s; guest memory must be 16M to 16G",
                arg, o->mem_size < GM_MIN_SIZE ? "small" : "large");
    return 0;
}

static int parse_serial(const char *arg, struct r3_options *o)
{
    if (!strcmp(arg, "stdio")) {
        o->serial = R3_SERIAL_STDIO;
        o->serial_path = NULL;
        return 0;
    }
    if (!strncmp(arg, "file:", 5) && arg[5]) {
        o->serial = R3_SERIAL_FILE;
        o->serial_path = arg + 5;
        return 0;
    }
    return bad_input("--serial takes 'stdio' or 'file:PATH', not '%s'", arg);
}

/* getopt_long_only also rejects an abbreviation that fits several options. */
static bool ambiguous(const char *name)
{
    int fits = 0;

    name += strspn(name, "-");
    for (const struct option *lo = long_options; lo->name; lo++)
        fits += *name && !strncmp(lo->name, name, strlen(name));
    return fits > 1;
}

/* One line for an option getopt rejected; (c) is '?' or ':'. */
static int bad_option(int c, char **argv)
{
    char name[64];
    const char *text = argv[optind - 1];

    if (optopt > 0 && optopt < 256 && optopt != 'h' && optopt != 'm') {
        snprintf(name, sizeof(name), "-%c", optopt);
    } else {
        /* A long option: its text without any "=value". */
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(text, "="), text);
    }
    if (c == '?' && optopt == 0 && ambiguous(name))
        return bad_input("ambiguous option '%s'; try 'ring3 run --help'", name);
    if (c == ':')
        return bad_input("option '%s' needs an argument; try 'ring3 run --help'", name);
    if (optopt == OPT_TRACE || optopt == OPT_TIME || optopt == OPT_STATS || optopt == OPT_VERSION || optopt == 'h' ||
        optopt == OPT_GDB_WAIT)
        return bad_input("option '%s' takes no argument; try 'ring3 run --help'", name);
    return bad_input("unknown option '%s'; try 'ring3 run --help'", name);
}

int options_parse(int argc, char **argv, struct r3_options *o)
{
    int c, err;

    *o = (struct r3_options){
        .mem_size = OPTIONS_DEFAULT_MEM,
        .append = "",
        .serial = R3_SERIAL_STDIO,
        .stubs = OPTIONS_DEFAULT_STUBS,
    };
    opterr = 0;     /* we print our own one-line messages */
    optind = 0;     /* glibc: start afresh, even if getopt ran before */
    /* The leading ':' makes a missing argument return ':' rather than '?'. */
    while ((c = getopt_long_only(argc, argv, ":m:hsS", long_options, NULL)) != -1) {
        err = 0;
        switch (c) {
        case 'm': err = parse_mem(optarg, o); break;
        case OPT_APPEND: o->append = optarg; break;
        case OPT_INITRD: o->initrd = optarg; break;
        case OPT_SERIAL: err = parse_serial(optarg, o); break;
        case OPT_TRACE: o->trace = true; break;
        case OPT_TRACE_FILE: o->trace = true; o->trace_file = optarg; break;
        case OPT_CMD: o->cmd = optarg; break;
        case OPT_TIME: o->time = true; break;
        case OPT_STATS: o->stats = true; break;
        case OPT_ISOLATION: err = parse_either("isolation", optarg, "process", "none", &o->isolation_none); break;
        case OPT_STUBS: err = parse_stubs(optarg, o); break;
        case OPT_SYSCALLS: err = parse_either("syscalls", optarg, "sud", "sysemu", &o->sysemu); break;
        case OPT_PLACEMENT: err = parse_placement(optarg, o); break;
        case OPT_DISK: err = parse_disk(optarg, o); break;
        case OPT_NET: err = parse_net(optarg, o); break;
        case OPT_IKC:
            o->ikc = optarg;
            if (!ikc_name_ok(optarg))
                return bad_input("--ikc '%s': a group name is 1 to 32 of A-Z a-z 0-9 _ . -", optarg);
            break;
        case 's': o->gdb = "tcp::1234"; break;
        case 'S':
        case OPT_GDB_WAIT: o->gdb_wait = true; break;
        case OPT_GDB:
            if (!listen_spec_valid(optarg, true))
                return bad_input("--gdb '%s': give tcp:[HOST]:PORT (e.g. tcp::1234) or unix:PATH", optarg);
            o->gdb = optarg;
            break;
        case OPT_MONITOR:
            if (!listen_spec_valid(optarg, false))
                return bad_input("--monitor '%s': give unix:PATH", optarg);
            o->monitor = optarg;
            break;
        case 'h': usage(stdout); return 0;
        case OPT_VERSION: printf("ring3 %s\n", RING3_VERSION); return 0;
        default: return bad_option(c, argv);
        }
        if (err)
            return err;
    }
    if (o->gdb_wait && !o->gdb)
        o->gdb = "tcp::1234";
    if (o->sysemu && o->isolation_none)
        return bad_input("--syscalls sysemu redirects the system calls of stub processes; "
                         "it needs --isolation process, not none");
    if (o->placement != PLACE_AUTO && o->isolation_none)
        return bad_input("--placement places the stub processes of --isolation process; "
                         "with --isolation none there are none");
    if (o->net_none && o->nnets)
        return bad_input("--net none and another --net: give one or the other");
    bool served = o->nexports > 0;
    for (unsigned i = 0; i < o->ndisks; i++)
        served |= o->disks[i].served != NULL;
    if (served && o->ikc == NULL)
        return bad_input("a disk served to or by another ring3 needs their group: add --ikc NAME");
    for (unsigned i = 0; i < o->nnets; i++) {
        struct net_ikc_options *ikc = &o->nets[i].ikc;
        if (o->nets[i].kind != NET_IKC || ikc->group[0])
            continue;
        if (o->ikc == NULL)
            return bad_input("--net ikc needs its group: --net ikc,group=NAME, or --ikc NAME");
        snprintf(ikc->group, sizeof ikc->group, "%s", o->ikc);
    }
    if (!o->net_none && !o->nnets && net_spec_parse("user", 0, &o->nets[o->nnets++]))
        return 2;
    if (optind >= argc) {
        o->kernel = options_default_kernel();
        o->kernel_default = true;
        if (!o->initrd)
            o->initrd = options_default_initrd();
        if (access(o->kernel, R_OK) || access(o->initrd, R_OK))
            return bad_input("the default kernel '%s' or initramfs '%s' is not built; "
                    "run 'make' first, or pass a KERNEL", o->kernel, o->initrd);
        return OPTIONS_RUN;
    }
    if (optind + 1 < argc)
        return bad_input("unexpected argument '%s' after the kernel '%s'; "
                "pass the kernel's command line with --append", argv[optind + 1], argv[optind]);
    o->kernel = argv[optind];
    return OPTIONS_RUN;
}

/* The command line of `ring3 run [options] KERNEL`. */
#ifndef RING3_OPTIONS_H
#define RING3_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "block/image.h"
#include "net/backend.h"
#include "stub/placement.h"

#define OPTIONS_DEFAULT_MEM (256ull << 20)
#define OPTIONS_DEFAULT_STUBS 16
#define OPTIONS_MAX_STUBS 256
#define OPTIONS_MAX_DISKS 4      /* = PLATFORM_MAX_DISKS */
#define OPTIONS_MAX_NICS 4       /* = PLATFORM_MAX_NICS */

/* options_parse's return value when the guest should be run. */
#define OPTIONS_RUN (-1)

enum r3_serial { R3_SERIAL_STDIO, R3_SERIAL_FILE };

/* Strings point into argv. */
struct r3_options {
    uint64_t mem_size;          /* -m: bytes of guest physical memory, a page multiple */
    const char *kernel;         /* KERNEL, as typed (it starts the Multiboot command line) */
    const char *append;         /* --append: kernel command line, "" when not given */
    const char *initrd;         /* --initrd: file, NULL when not given */
    enum r3_serial serial;      /* --serial: where the first UART goes */
    const char *serial_path;    /* --serial file:PATH: the PATH, else NULL */
    bool trace;                 /* --trace: log every emulated event */
    const char *trace_file;     /* --trace-file: log there, NULL = stderr */
    const char *cmd;            /* --cmd: a shell command to run in the guest, NULL for none */
    bool time;                  /* --time: report boot and total time at exit */
    bool stats;                 /* --stats: report monitor events at exit */
    bool kernel_default;        /* no KERNEL given: the default kernel and initramfs */
    bool isolation_none;        /* --isolation none: guest processes run in this process */
    unsigned stubs;             /* --stubs: address spaces that keep a stub */
    bool sysemu;                /* --syscalls sysemu: a stub's system calls stop it in ptrace */
    enum stub_placement placement;  /* --placement: where ring3 and the stub it runs sit */
    struct disk_spec disks[OPTIONS_MAX_DISKS];  /* --disk, in order: vda, vdb, ... */
    unsigned ndisks;
    struct disk_spec exports[OPTIONS_MAX_DISKS];    /* --disk FILE,export=NAME */
    unsigned nexports;
    struct net_spec nets[OPTIONS_MAX_NICS];     /* --net, in order: eth0, eth1, ...; */
    unsigned nnets;                             /* none given: one user NIC, as qemu */
    bool net_none;                              /* --net none: no NIC at all */
    const char *gdb;                            /* --gdb, -s: where gdb attaches; NULL: nowhere */
    bool gdb_wait;                              /* -S, --gdb-wait: stop before the first instruction */
    const char *monitor;                        /* --monitor unix:PATH: the prompt's socket */
    const char *ikc;                            /* --ikc NAME: the group of --net ikc, of
                                                 * --disk ikc:NAME and of export=NAME */
};

/* The default kernel and initramfs, found from this executable's place in
 * the build tree (build/bin/ring3 -> build/guest/...); "" when unknown. */
const char *options_default_kernel(void);
const char *options_default_initrd(void);

/* Parse (argc, argv) of `ring3 run` (argv[0] is "run") into (o). Returns
 * OPTIONS_RUN when the guest should be run, or else the process exit status:
 * 0 after printing --help or --version to stdout, 2 after printing one line
 * about a bad or missing option to stderr. */
int options_parse(int argc, char **argv, struct r3_options *o);

/* Parse a memory size in qemu's -m syntax into (bytes): a number with an
 * optional fraction and an optional unit B, K, M, G or T (case-insensitive;
 * no unit means MiB), rounded up to a whole page. Returns 0, or -1 when (s)
 * is not a size. */
int options_parse_size(const char *s, uint64_t *bytes);

#endif

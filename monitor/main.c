/* ring3: command-line entry; dispatches to the `run` and `audit` subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_vfail(const char *who, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    return 2;
}

int bad_input(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = cli_vfail("ring3", fmt, ap);
    va_end(ap);
    return r;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ring3 run [options] KERNEL   run an i386 kernel as this process\n"
            "       ring3 audit [--allow FILE] ELF\n"
            "                                     list sensitive instructions left in ELF\n"
            "       ring3 --help | --version\n"
            "`ring3 run --help` lists the options of run.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "run"))
        return run_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "audit"))
        return audit_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ring3 %s\n", RING3_VERSION);
        return 0;
    }
    fprintf(stderr, "ring3: unknown command '%s'; try 'ring3 --help'\n", argv[1]);
    return 2;
}

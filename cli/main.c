/* ring3: the command; dispatches to its subcommands, `run` (the monitor) and `audit`. */
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "ikc/channel.h"
#include "lib/fail.h"
#include "lib/version.h"
#include "monitor/host/run.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ring3 run [options] KERNEL   run an i386 kernel as this process\n"
            "       ring3 audit [--allow FILE] ELF\n"
            "                                     list sensitive instructions left in ELF\n"
            "       ring3 ikc list NAME           the members of IKC group NAME\n"
            "       ring3 --help | --version\n"
            "`ring3 run --help` lists the options of run.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    if (!strcmp(argv[1], "run"))
        return run_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "audit"))
        return audit_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "ikc")) {
        if (argc == 4 && !strcmp(argv[2], "list"))
            return ikc_list(argv[3]);
        return bad_input("usage: ring3 ikc list NAME");
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ring3 %s\n", RING3_VERSION);
        return 0;
    }
    return bad_input("unknown command '%s'; try 'ring3 --help'", argv[1]);
}

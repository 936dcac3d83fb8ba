/* Runs insert mode's decoder (monitor/cpu/insert_decode.c) on instruction bytes, for tests/test_rewriter.py.
 *
 * Each line of stdin is "ud HEX" or "gp HEX": the bytes at a trapping address, and whether the
 * trap was #UD or #GP. Each line of stdout is "ENTRY DESC AUX LEN MARKED" in hex, or "none".
 */
#include <stdio.h>
#include <string.h>

#include "monitor/cpu/insert.h"

int main(void)
{
    csh cs;
    char line[256], kind[8], hex[200];

    if (cs_open(CS_ARCH_X86, CS_MODE_32, &cs) != CS_ERR_OK || cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON))
        return 2;
    cs_insn *insn = cs_malloc(cs);
    while (fgets(line, sizeof line, stdin)) {
        uint8_t code[64];
        size_t len = 0;
        unsigned byte;
        struct insert_site site;

        if (sscanf(line, "%7s %199s", kind, hex) != 2)
            return 2;
        for (const char *p = hex; len < sizeof code && sscanf(p, "%2x", &byte) == 1; p += 2)
            code[len++] = (uint8_t)byte;
        if (insert_decode(cs, insn, code, len, !strcmp(kind, "ud"), &site) != INSERT_SITE)
            printf("none\n");
        else
            printf("%x %x %x %x %d\n", site.entry, site.desc, site.aux, site.len, site.marked);
    }
    cs_free(insn, 1);
    cs_close(&cs);
    return 0;
}

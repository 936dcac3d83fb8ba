/* The monitor's commands (commands.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

#include "memory/guestmem.h"
#include "monitor/host/console.h"
#include "monitor/host/events.h"
#include "monitor/host/run.h"
#include "monitor/host/stats.h"
#include "monitor/mmu/paging.h"

#define X_MAX_UNITS 1024                /* x/N: at most this many units at once */

/* What the caller must do after a command. */
enum action { NONE, STOP, CONT, QUIT };

bool prompt_stopped;

static const char help[] =
    "help                 this list\n"
    "info registers       the vcpu's registers\n"
    "info stats           the --stats table so far\n"
    "info status          whether the guest runs or is stopped\n"
    "x/N[bhw] ADDR        N bytes, halfwords or words (the default) at guest-virtual ADDR,\n"
    "                     through the page tables in force\n"
    "xp/N[bhw] ADDR       the same at guest-physical ADDR\n"
    "stop                 stop the guest\n"
    "cont, c              let it run again\n"
    "quit, q              end the run (as Ctrl-A x)\n"
    "ADDR is a number (0x for hex) or a register: $eax .. $edi, $eip.\n";

static bool word_is(const char **s, const char *word)
{
    size_t n = strlen(word);
    if (strncmp(*s, word, n) || ((*s)[n] && !isspace((unsigned char)(*s)[n])))
        return false;
    *s += n;
    while (isspace((unsigned char)**s))
        (*s)++;
    return true;
}

/* ADDR: a number (strtoull base 0) or $reg. */
static bool parse_address(struct vcpu *v, const char *s, uint64_t *addr)
{
    static const char *const regs[8] = { "eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi" };
    char *end;
    if (*s == '$') {
        for (unsigned i = 0; i < 8; i++)
            if (!strcmp(s + 1, regs[i])) {
                *addr = v->sh->regs[i];
                return true;
            }
        if (!strcmp(s + 1, "eip")) {
            *addr = v->sreg[SREG_CS].base + v->sh->eip;
            return true;
        }
        return false;
    }
    if (!isdigit((unsigned char)*s))
        return false;
    *addr = strtoull(s, &end, 0);
    while (isspace((unsigned char)*end))
        end++;
    return *end == 0;
}

/* The host address of (n) bytes at (addr): guest-virtual through the tables, or physical. */
static const uint8_t *memory_at(struct vcpu *v, uint64_t addr, unsigned n, bool physical)
{
    if (physical)
        return guestmem_ptr(v->gm, addr, n);
    uint64_t phys;
    uint32_t room;
    if (addr > UINT32_MAX)
        return NULL;
    const uint8_t *p = paging_peek(v, (uint32_t)addr, &phys, &room);
    return p && room >= n ? p : NULL;
}

/* x/N[bhw] ADDR and xp/N[bhw] ADDR, qemu's layout: the address, then up to 16 bytes' worth of
 * units, each 0x-prefixed. (s) is what follows "x" or "xp". */
static void examine(struct vcpu *v, const char *s, bool physical, FILE *out)
{
    unsigned long count = 1;
    unsigned size = 4;
    char *end;
    if (*s == '/') {
        s++;
        if (isdigit((unsigned char)*s)) {
            count = strtoul(s, &end, 10);
            s = end;
        }
        for (; *s && !isspace((unsigned char)*s); s++) {
            if (*s == 'b' || *s == 'h' || *s == 'w')
                size = *s == 'b' ? 1 : *s == 'h' ? 2 : 4;
            else if (*s != 'x') {
                fprintf(out, "x: format '%c' is not known; x/N[bhw] ADDR prints hex\n", *s);
                return;
            }
        }
    }
    while (isspace((unsigned char)*s))
        s++;
    uint64_t addr;
    if (!parse_address(v, s, &addr) || count == 0 || count > X_MAX_UNITS) {
        fprintf(out, "usage: x/N[bhw] ADDR (N from 1 to %u, ADDR a number or $reg)\n", X_MAX_UNITS);
        return;
    }
    unsigned per_line = 16 / size;
    for (unsigned long i = 0; i < count; i++, addr += size) {
        const uint8_t *p = memory_at(v, addr, size, physical);
        if (i % per_line == 0)
            fprintf(out, "%s%0*llx:", i ? "\n" : "", physical ? 16 : 8, (unsigned long long)addr);
        if (!p) {
            fprintf(out, physical ? " outside guest memory" : " not mapped");
            break;
        }
        uint32_t unit = 0;
        memcpy(&unit, p, size);
        fprintf(out, " 0x%0*x", (int)size * 2, unit);
    }
    fputc('\n', out);
}

/* One command; (stopped): whether the guest is held, for `info status`. */
static enum action command(struct vcpu *v, const char *line, bool stopped, FILE *out)
{
    const char *s = line;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return NONE;
    if (word_is(&s, "help") || word_is(&s, "?")) {
        fputs(help, out);
    } else if (word_is(&s, "info")) {
        if (word_is(&s, "registers"))
            vcpu_dump(v, out);
        else if (word_is(&s, "status"))
            fprintf(out, "the guest is %s\n", stopped ? "stopped" : "running");
        else if (!word_is(&s, "stats"))
            fprintf(out, "info: give registers, stats or status\n");
        else if (stats_enabled)
            stats_report(out, (double)(events_now() - v->start_ns) / 1e9);
        else
            fprintf(out, "info stats: ring3 counts events only with --stats; run it with --stats\n");
    } else if (!strncmp(s, "xp", 2) && (s[2] == '/' || isspace((unsigned char)s[2]))) {
        examine(v, s + 2, true, out);
    } else if (s[0] == 'x' && (s[1] == '/' || isspace((unsigned char)s[1]))) {
        examine(v, s + 1, false, out);
    } else if (word_is(&s, "stop")) {
        return STOP;
    } else if (word_is(&s, "cont") || word_is(&s, "c")) {
        return CONT;
    } else if (word_is(&s, "quit") || word_is(&s, "q")) {
        return QUIT;
    } else {
        fprintf(out, "unknown command: '%s' (help lists them)\n", s);
    }
    return NONE;
}

char *prompt_run(struct vcpu *v, const char *line, bool gdb, size_t *len)
{
    char *text = NULL;
    FILE *out = open_memstream(&text, len);
    if (!out)
        return NULL;
    enum action a = command(v, line, gdb || prompt_stopped, out);
    if (a == QUIT) {
        fclose(out);
        free(text);
        fflush(stdout);
        console_restore();
        fprintf(stderr, gdb ? "ring3: terminated (monitor quit, from gdb)\n" : "\nring3: terminated (monitor quit)\n");
        monitor_exit(v, 0);
    }
    if ((a == STOP || a == CONT) && gdb)
        fputs("gdb holds the guest: its continue and Ctrl-C run and stop it\n", out);
    else if (a == STOP || a == CONT)
        prompt_stopped = a == STOP;
    fclose(out);
    return text;
}

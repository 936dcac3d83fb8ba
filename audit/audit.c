/* ring3 audit: lists the sensitive instructions left unrewritten in a linked i386 ELF. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <capstone/capstone.h>

#include "audit.h"

#include "ring3/abi.h"

#include "lib/fail.h"
#include "x86/sensitive.h"

#include "elf_file.h"
#include "symbols.h"

/* Undecodable bytes are normal in small numbers (data between functions);
 * beyond this many, say so, since a sensitive instruction could hide there. */
#define AUDIT_UNDECODABLE_WARN 16

struct allow_entry {
    char *sym;
    char *reason;
    unsigned line;
    unsigned hits;
};

struct audit {
    const char *allow_path;
    bool insert_mode;
    struct elf_file elf;
    struct sym *syms;
    size_t nsyms;
    struct allow_entry *allow;
    size_t nallow;
    csh cs;
    cs_insn *insn;
    unsigned long reported, allowed, undecodable;
    uint32_t first_undecodable;
};

/* The current section's view during the sweep. */
struct section {
    const char *name;
    uint32_t addr;
    const uint8_t *data;
    uint32_t size;
    const struct sym *syms;  /* this section's symbols, sorted by address */
    size_t nsyms;
};

int audit_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = fail_vbad_input("ring3 audit", fmt, ap);
    va_end(ap);
    return r;
}

static void audit_usage(FILE *out)
{
    fprintf(out,
            "usage: ring3 audit [--allow FILE] [--insert] ELF\n"
            "  Disassembles every executable section of a linked i386 ELF and lists\n"
            "  each sensitive instruction left unrewritten; exit 0 when none is left.\n"
            "  --allow FILE  lines `SYMBOL reason...`: code that provably never runs\n"
            "                in the guest; `#` starts a comment line\n"
            "  --insert      insert mode: accept sensitive unprivileged instructions\n"
            "                preceded by the marker ud1 %%edi,%%edi; privileged ones trap\n");
}

/* ---- the allow list ---- */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

static int load_allow(struct audit *a)
{
    FILE *f = fopen(a->allow_path, "r");
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc = 0;

    if (!f)
        return audit_error("%s: cannot open: %s", a->allow_path, strerror(errno));
    while (!rc && getline(&line, &cap, f) >= 0) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#')
            continue;
        size_t symlen = strcspn(s, " \t");
        char *reason = trim(s + symlen);
        s[symlen] = '\0';
        if (!*reason) {
            rc = audit_error("%s:%u: allow entry '%s' has no reason; say why it never runs in the guest",
                             a->allow_path, lineno, s);
            break;
        }
        for (size_t i = 0; i < a->nallow; i++)
            if (!strcmp(a->allow[i].sym, s))
                rc = audit_error("%s:%u: '%s' is already allowed on line %u", a->allow_path,
                                 lineno, s, a->allow[i].line);
        if (rc)
            break;
        struct allow_entry *grown = realloc(a->allow, (a->nallow + 1) * sizeof *grown);
        if (grown)
            a->allow = grown;
        char *sym = strdup(s), *why = strdup(reason);
        if (!grown || !sym || !why) {
            free(sym);
            free(why);
            rc = audit_error("out of memory reading %s", a->allow_path);
            break;
        }
        a->allow[a->nallow++] = (struct allow_entry){ .sym = sym, .reason = why, .line = lineno };
    }
    free(line);
    fclose(f);
    return rc;
}

static struct allow_entry *allow_find(struct audit *a, const char *sym)
{
    for (size_t i = 0; i < a->nallow; i++)
        if (!strcmp(a->allow[i].sym, sym))
            return &a->allow[i];
    return NULL;
}

/* ---- the sweep ---- */

static void format_location(const struct section *sec, uint32_t addr, char *buf, size_t len,
                            const char **symname)
{
    const struct sym *s = sym_for(sec->syms, sec->nsyms, addr);
    if (s) {
        snprintf(buf, len, "%s+0x%x", s->name, addr - s->addr);
        *symname = s->name;
    } else {
        snprintf(buf, len, "%s+0x%x", sec->name, addr - sec->addr);
        *symname = NULL;
    }
}

static void report(struct audit *a, const struct section *sec, uint32_t addr, const char *text)
{
    char where[512];
    const char *symname;
    struct allow_entry *allow;

    format_location(sec, addr, where, sizeof where, &symname);
    if (symname && (allow = allow_find(a, symname))) {
        allow->hits++;
        a->allowed++;
        fprintf(stderr, "allowed: %08x %s  %s  (%s: %s)\n", addr, where, text, a->allow_path,
                allow->reason);
        return;
    }
    a->reported++;
    printf("%08x %s  %s\n", addr, where, text);
}

/* Whether a sensitive instruction still needs reporting. In insert mode a
 * privileged one traps on its own, and an unprivileged one is fine when
 * the marker sits right before it. */
static bool needs_report(const struct audit *a, const struct sens_info *info, bool marked)
{
    if (info->cls == SENS_NONE)
        return false;
    if (!a->insert_mode)
        return true;
    return info->cls == SENS_UNPRIVILEGED && !marked;
}

/* Sync points: every symbol's start and every sized symbol's end are
 * instruction boundaries, so the linear sweep restarts there, and data or
 * padding before a function cannot swallow its first instructions. */
static int offset_cmp(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return a < b ? -1 : a > b;
}

static uint32_t *sync_points(const struct section *sec, size_t *count)
{
    uint32_t *pts = malloc((2 * sec->nsyms + 1) * sizeof *pts);
    size_t n = 0;

    if (!pts)
        return NULL;
    for (size_t i = 0; i < sec->nsyms; i++) {
        const struct sym *s = &sec->syms[i];
        pts[n++] = s->addr - sec->addr;
        if (s->size && sym_end(s) - sec->addr < sec->size)
            pts[n++] = sym_end(s) - sec->addr;
    }
    qsort(pts, n, sizeof *pts, offset_cmp);
    *count = n;
    return pts;
}

static int sweep_section(struct audit *a, const struct section *sec)
{
    size_t nsync, k = 0;
    uint32_t *sync = sync_points(sec, &nsync);
    uint32_t off = 0;
    bool marked = false, fpu_site = false;

    if (!sync)
        return audit_error("out of memory");
    while (off < sec->size) {
        while (k < nsync && sync[k] <= off)
            k++;
        uint32_t limit = k < nsync ? sync[k] : sec->size;
        const uint8_t *p = sec->data + off;
        size_t avail = limit - off;
        uint32_t addr = sec->addr + off;
        struct sens_info info;
        size_t len;

        if (!a->insert_mode && sens_is_fpu_site(p, avail)) {
            off += R3_CALL_LEN;
            fpu_site = true;
            continue;
        }
        if (sens_is_insert_marker(p, avail)) {
            off += R3_INSERT_MARKER_LEN;
            marked = true;
            continue;
        }
        if (sens_is_rewritten_pushf(p, avail)) {
            off += 1;               /* the call that follows is decoded as usual */
            marked = fpu_site = false;
            continue;
        }
        if (*p == 0xCC) {
            /* int3 is not sensitive (x86/sensitive.c); runs of it are also the
             * linker's padding between functions. */
            off += 1;
            marked = fpu_site = false;
            continue;
        }

        char text[sizeof a->insn->mnemonic + sizeof a->insn->op_str + 1];
        bool vector = false;
        len = sens_decode_extra(p, avail, &info);
        if (len) {
            snprintf(text, sizeof text, "%s", info.name);
        } else {
            const uint8_t *code = p;
            uint64_t iaddr = addr;
            if (!cs_disasm_iter(a->cs, &code, &avail, &iaddr, a->insn)) {
                if (!a->undecodable++)
                    a->first_undecodable = addr;
                off++;
                marked = fpu_site = false;
                continue;
            }
            len = a->insn->size;
            info = sens_classify(a->insn);
            vector = sens_touches_vector_state(a->insn);
            if (info.cls != SENS_NONE)
                snprintf(text, sizeof text, "%s%s%s", info.name ? info.name : a->insn->mnemonic,
                         a->insn->op_str[0] ? " " : "", a->insn->op_str);
        }
        if (needs_report(a, &info, marked))
            report(a, sec, addr, text);
        else if (vector && !a->insert_mode && !fpu_site) {
            char why[sizeof text + 48];
            snprintf(why, sizeof why, "%s%s%s (vector state, no FPU site before it)",
                     a->insn->mnemonic, a->insn->op_str[0] ? " " : "", a->insn->op_str);
            report(a, sec, addr, why);
        }
        off += (uint32_t)len;
        marked = false;
        fpu_site = false;
    }
    free(sync);
    return 0;
}

static int sweep_all(struct audit *a)
{
    const struct elf_file *e = &a->elf;
    size_t symi = 0;

    for (size_t i = 1; i < e->shnum; i++) {
        Elf32_Shdr sh;
        elf_shdr(e, i, &sh);
        if (!(sh.sh_flags & SHF_EXECINSTR) || sh.sh_type == SHT_NOBITS || !sh.sh_size)
            continue;
        struct section sec = {
            .name = elf_section_name(e, &sh), .addr = sh.sh_addr,
            .data = e->data + sh.sh_offset, .size = sh.sh_size,
        };
        while (symi < a->nsyms && a->syms[symi].shndx < i)
            symi++;
        sec.syms = a->syms + symi;
        while (symi < a->nsyms && a->syms[symi].shndx == i)
            symi++;
        sec.nsyms = (size_t)(a->syms + symi - sec.syms);
        int rc = sweep_section(a, &sec);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_args(struct audit *a, int argc, char **argv, const char **path)
{
    *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            audit_usage(stdout);
            exit(0);
        } else if (!strcmp(arg, "--insert")) {
            a->insert_mode = true;
        } else if (!strcmp(arg, "--allow")) {
            if (++i == argc)
                return audit_error("--allow needs a FILE; try 'ring3 audit --help'");
            a->allow_path = argv[i];
        } else if (!strncmp(arg, "--allow=", 8)) {
            a->allow_path = arg + 8;
        } else if (arg[0] == '-' && arg[1]) {
            return audit_error("unknown option '%s'; try 'ring3 audit --help'", arg);
        } else if (*path) {
            return audit_error("one ELF file at a time ('%s' and '%s'); try 'ring3 audit --help'",
                               *path, arg);
        } else {
            *path = arg;
        }
    }
    if (!*path)
        return audit_error("no ELF file given; try 'ring3 audit --help'");
    return 0;
}

static void audit_free(struct audit *a)
{
    if (a->insn)
        cs_free(a->insn, 1);
    if (a->cs)
        cs_close(&a->cs);
    for (size_t i = 0; i < a->nallow; i++) {
        free(a->allow[i].sym);
        free(a->allow[i].reason);
    }
    free(a->allow);
    free(a->syms);
    elf_close(&a->elf);
}

static int audit_run(struct audit *a, const char *path)
{
    int rc;

    if (a->allow_path && (rc = load_allow(a)))
        return rc;
    if ((rc = elf_open(&a->elf, path)) || (rc = elf_check_sections(&a->elf)) ||
        (rc = symbols_load(&a->elf, &a->syms, &a->nsyms)))
        return rc;
    if (cs_open(CS_ARCH_X86, CS_MODE_32, &a->cs) != CS_ERR_OK)
        return audit_error("cannot open the Capstone x86-32 disassembler");
    /* Details give operands and opcode bytes to the classifier; AT&T syntax
     * matches the kernel's assembly source. */
    cs_option(a->cs, CS_OPT_DETAIL, CS_OPT_ON);
    cs_option(a->cs, CS_OPT_SYNTAX, CS_OPT_SYNTAX_ATT);
    a->insn = cs_malloc(a->cs);
    if (!a->insn)
        return audit_error("out of memory");
    return sweep_all(a);
}

int audit_main(int argc, char **argv)
{
    struct audit a = { 0 };
    const char *path;
    int rc;

    if ((rc = parse_args(&a, argc, argv, &path)))
        return rc;
    rc = audit_run(&a, path);
    if (rc) {
        audit_free(&a);
        return rc;
    }

    for (size_t i = 0; i < a.nallow; i++)
        if (!a.allow[i].hits)
            fprintf(stderr, "ring3 audit: warning: %s:%u: allow entry '%s' matched nothing\n",
                    a.allow_path, a.allow[i].line, a.allow[i].sym);
    if (a.undecodable > AUDIT_UNDECODABLE_WARN)
        fprintf(stderr, "ring3 audit: warning: %lu bytes could not be decoded (the first at %08x); "
                "a sensitive instruction could hide there\n", a.undecodable, a.first_undecodable);
    printf("%lu unrewritten sensitive instructions", a.reported);
    if (a.allow_path)
        printf(" (%lu allowed by %s)", a.allowed, a.allow_path);
    printf("\n");
    audit_free(&a);
    return a.reported ? 1 : 0;
}

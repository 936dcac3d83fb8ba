/* ring3 audit: lists the sensitive instructions left unrewritten in a linked i386 ELF. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <capstone/capstone.h>

#include "cli.h"
#include "ring3/abi.h"
#include "sensitive.h"

/* Undecodable bytes are normal in small numbers (data between functions);
 * beyond this many, say so, since a sensitive instruction could hide there. */
#define AUDIT_UNDECODABLE_WARN 16

struct elf_file {
    const char *path;
    const uint8_t *data;
    size_t size;
    Elf32_Ehdr eh;
    size_t shnum;
    size_t shstrndx;
};

struct sym {
    const char *name;
    uint32_t addr;
    uint32_t size;
    uint32_t cover_end;  /* max end of the functions among this and the
                          * earlier symbols of its section (0: none) */
    uint16_t shndx;
    uint8_t type;
    uint8_t rank;        /* naming preference among symbols at one address */
};

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

static int audit_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = cli_vfail("ring3 audit", fmt, ap);
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

/* ---- ELF reading: every offset is checked against the file size ---- */

static bool in_file(const struct elf_file *e, uint64_t off, uint64_t len)
{
    return off <= e->size && len <= e->size - off;
}

static void elf_shdr(const struct elf_file *e, size_t i, Elf32_Shdr *sh)
{
    memcpy(sh, e->data + e->eh.e_shoff + i * sizeof *sh, sizeof *sh);
}

/* The NUL-terminated string at (off) of string-table section (strndx), or
 * NULL. Names with control or non-ASCII bytes come only from a damaged file
 * and are refused rather than printed to a terminal. */
static const char *elf_string(const struct elf_file *e, size_t strndx, uint32_t off)
{
    Elf32_Shdr sh;
    if (strndx == 0 || strndx >= e->shnum)
        return NULL;
    elf_shdr(e, strndx, &sh);
    if (sh.sh_type != SHT_STRTAB || !in_file(e, sh.sh_offset, sh.sh_size) || off >= sh.sh_size)
        return NULL;
    const char *s = (const char *)e->data + sh.sh_offset + off;
    for (uint32_t i = 0; i < sh.sh_size - off; i++) {
        if (!s[i])
            return s;
        if (s[i] < 0x20 || s[i] > 0x7e)
            return NULL;
    }
    return NULL;
}

static const char *machine_name(unsigned m)
{
    switch (m) {
    case EM_X86_64:  return "x86-64";
    case EM_ARM:     return "ARM";
    case EM_AARCH64: return "AArch64";
    case EM_RISCV:   return "RISC-V";
    case EM_PPC:     return "PowerPC";
    case EM_MIPS:    return "MIPS";
    }
    return "not i386";
}

static int elf_open(struct elf_file *e, const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY);

    e->path = path;
    if (fd < 0)
        return audit_error("%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return audit_error("%s: not a regular file", path);
    }
    e->size = (size_t)st.st_size;
    if (e->size < EI_NIDENT) {
        close(fd);
        return audit_error("%s: not an ELF file (%zu bytes)", path, e->size);
    }
    void *map = mmap(NULL, e->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return audit_error("%s: cannot map: %s", path, strerror(errno));
    e->data = map;

    const uint8_t *id = e->data;
    if (memcmp(id, ELFMAG, SELFMAG))
        return audit_error("%s: not an ELF file (no \\177ELF magic)", path);
    if (id[EI_CLASS] == ELFCLASS64)
        return audit_error("%s: 64-bit ELF (ELFCLASS64); ring3 audits i386 kernels (ELFCLASS32, EM_386)", path);
    if (id[EI_CLASS] != ELFCLASS32)
        return audit_error("%s: unknown ELF class %u; need ELFCLASS32", path, id[EI_CLASS]);
    if (id[EI_DATA] != ELFDATA2LSB)
        return audit_error("%s: not a little-endian ELF; need i386 (ELFDATA2LSB)", path);
    if (e->size < sizeof e->eh)
        return audit_error("%s: truncated ELF header (%zu bytes)", path, e->size);
    memcpy(&e->eh, e->data, sizeof e->eh);
    if (e->eh.e_machine != EM_386)
        return audit_error("%s: ELF machine %u (%s); need EM_386 (i386)", path,
                           e->eh.e_machine, machine_name(e->eh.e_machine));
    if (e->eh.e_shoff == 0)
        return audit_error("%s: no section headers", path);
    if (e->eh.e_shentsize != sizeof(Elf32_Shdr))
        return audit_error("%s: section header size %u, expected %zu", path,
                           e->eh.e_shentsize, sizeof(Elf32_Shdr));
    if (!in_file(e, e->eh.e_shoff, sizeof(Elf32_Shdr)))
        return audit_error("%s: truncated: section headers at offset %u are past the end (%zu bytes)",
                           path, e->eh.e_shoff, e->size);

    /* Extended numbering (gABI): a count or index that does not fit the
     * header is kept in section 0. */
    Elf32_Shdr sh0;
    elf_shdr(e, 0, &sh0);
    e->shnum = e->eh.e_shnum ? e->eh.e_shnum : sh0.sh_size;
    e->shstrndx = e->eh.e_shstrndx == SHN_XINDEX ? sh0.sh_link : e->eh.e_shstrndx;
    if (!in_file(e, e->eh.e_shoff, (uint64_t)e->shnum * sizeof(Elf32_Shdr)))
        return audit_error("%s: truncated: %zu section headers at offset %u end past the end (%zu bytes)",
                           path, e->shnum, e->eh.e_shoff, e->size);
    return 0;
}

static const char *section_name(const struct elf_file *e, const Elf32_Shdr *sh)
{
    const char *name = elf_string(e, e->shstrndx, sh->sh_name);
    return name ? name : "?";
}

/* Every fatal problem of the file is found here, before any warning. */
static int elf_check_sections(const struct elf_file *e)
{
    size_t nexec = 0;

    for (size_t i = 1; i < e->shnum; i++) {
        Elf32_Shdr sh;
        elf_shdr(e, i, &sh);
        if (!(sh.sh_flags & SHF_EXECINSTR) || sh.sh_type == SHT_NOBITS || !sh.sh_size)
            continue;
        if (!in_file(e, sh.sh_offset, sh.sh_size))
            return audit_error("%s: truncated: section %s ends past the end of the file",
                               e->path, section_name(e, &sh));
        if ((uint64_t)sh.sh_addr + sh.sh_size > (uint64_t)UINT32_MAX + 1)
            return audit_error("%s: section %s wraps around the 4 GiB address space",
                               e->path, section_name(e, &sh));
        nexec++;
    }
    if (!nexec)
        return audit_error("%s: no executable sections (SHF_EXECINSTR) to audit", e->path);
    return 0;
}

/* ---- symbols ---- */

/* Only FUNC symbols delimit code for the int3 rule: the kernel's sized
 * NOTYPE symbols (SYM_CODE_START) also cover data and 0xcc alignment, as in
 * irq_entries_start and x86_verw_sel. */
static bool is_code_range(const struct sym *s)
{
    return s->size && s->type == STT_FUNC;
}

/* One past the symbol's last byte, kept within the 4 GiB address space. */
static uint32_t sym_end(const struct sym *s)
{
    uint64_t end = (uint64_t)s->addr + s->size;
    return end > UINT32_MAX ? UINT32_MAX : (uint32_t)end;
}

static int sym_cmp(const void *pa, const void *pb)
{
    const struct sym *a = pa, *b = pb;
    if (a->shndx != b->shndx)
        return a->shndx < b->shndx ? -1 : 1;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    /* At one address the preferred name sorts last, where lookups find it. */
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return strcmp(b->name, a->name);
}

static int load_symbols(struct audit *a)
{
    const struct elf_file *e = &a->elf;
    Elf32_Shdr symtab = { 0 };
    size_t i;

    for (i = 1; i < e->shnum; i++) {
        elf_shdr(e, i, &symtab);
        if (symtab.sh_type == SHT_SYMTAB)
            break;
    }
    if (i == e->shnum) {
        fprintf(stderr, "ring3 audit: warning: %s has no symbol table: int3 padding cannot be "
                "told from int3 in code, and no int3 is reported\n", e->path);
        return 0;
    }
    if (!in_file(e, symtab.sh_offset, symtab.sh_size))
        return audit_error("%s: truncated: the symbol table ends past the end of the file", e->path);

    size_t count = symtab.sh_size / sizeof(Elf32_Sym);
    a->syms = calloc(count ? count : 1, sizeof *a->syms);
    if (!a->syms)
        return audit_error("out of memory for %zu symbols", count);
    for (size_t k = 1; k < count; k++) {
        Elf32_Sym es;
        Elf32_Shdr sec;
        memcpy(&es, e->data + symtab.sh_offset + k * sizeof es, sizeof es);
        unsigned type = ELF32_ST_TYPE(es.st_info), bind = ELF32_ST_BIND(es.st_info);
        if (type != STT_FUNC && type != STT_NOTYPE && type != STT_OBJECT)
            continue;
        if (es.st_shndx == SHN_UNDEF || es.st_shndx >= SHN_LORESERVE || es.st_shndx >= e->shnum)
            continue;
        elf_shdr(e, es.st_shndx, &sec);
        if (!(sec.sh_flags & SHF_EXECINSTR))
            continue;
        const char *name = elf_string(e, symtab.sh_link, es.st_name);
        if (!name || !*name)
            continue;
        /* In a relocatable object values are section offsets. */
        uint32_t addr = es.st_value + (e->eh.e_type == ET_REL ? sec.sh_addr : 0);
        if (addr < sec.sh_addr || addr - sec.sh_addr > sec.sh_size)
            continue;
        struct sym *s = &a->syms[a->nsyms++];
        s->name = name;
        s->addr = addr;
        s->size = es.st_size;
        s->shndx = es.st_shndx;
        s->type = type;
        s->rank = (type == STT_FUNC ? 4 : type == STT_NOTYPE && es.st_size ? 2 : 0) +
                  (bind == STB_GLOBAL);
    }
    qsort(a->syms, a->nsyms, sizeof *a->syms, sym_cmp);

    uint32_t cover = 0;
    for (size_t k = 0; k < a->nsyms; k++) {
        struct sym *s = &a->syms[k];
        if (k == 0 || s->shndx != s[-1].shndx)
            cover = 0;
        if (is_code_range(s) && sym_end(s) > cover)
            cover = sym_end(s);
        s->cover_end = cover;
    }
    return 0;
}

/* Index of the first symbol of (sec) above (addr). */
static size_t sym_upper(const struct section *sec, uint32_t addr)
{
    size_t lo = 0, hi = sec->nsyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sec->syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The innermost function holding (addr), or NULL. */
static const struct sym *code_range_at(const struct section *sec, uint32_t addr)
{
    size_t u = sym_upper(sec, addr);
    if (u == 0 || sec->syms[u - 1].cover_end <= addr)
        return NULL;
    for (size_t j = u; j-- > 0;) {
        const struct sym *s = &sec->syms[j];
        if (is_code_range(s) && addr - s->addr < s->size)
            return s;
    }
    return NULL;
}

/* The symbol to name (addr) by: the function holding it, else the nearest
 * symbol at or before it, else NULL (then the section names it). */
static const struct sym *sym_for(const struct section *sec, uint32_t addr)
{
    const struct sym *s = code_range_at(sec, addr);
    if (s)
        return s;
    size_t u = sym_upper(sec, addr);
    return u ? &sec->syms[u - 1] : NULL;
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
    const struct sym *s = sym_for(sec, addr);
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
    bool marked = false;

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

        if (sens_is_insert_marker(p, avail)) {
            off += R3_INSERT_MARKER_LEN;
            marked = true;
            continue;
        }
        if (sens_is_rewritten_pushf(p, avail)) {
            off += 1;               /* the call that follows is decoded as usual */
            marked = false;
            continue;
        }
        if (*p == 0xCC) {
            /* int3 is not sensitive (monitor/sensitive.c); runs of it are also the
             * linker's padding between functions. */
            off += 1;
            marked = false;
            continue;
        }

        char text[sizeof a->insn->mnemonic + sizeof a->insn->op_str + 1];
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
                marked = false;
                continue;
            }
            len = a->insn->size;
            info = sens_classify(a->insn);
            if (info.cls != SENS_NONE)
                snprintf(text, sizeof text, "%s%s%s", info.name ? info.name : a->insn->mnemonic,
                         a->insn->op_str[0] ? " " : "", a->insn->op_str);
        }
        if (needs_report(a, &info, marked))
            report(a, sec, addr, text);
        off += (uint32_t)len;
        marked = false;
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
            .name = section_name(e, &sh), .addr = sh.sh_addr,
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
    if (a->elf.data)
        munmap((void *)a->elf.data, a->elf.size);
}

static int audit_run(struct audit *a, const char *path)
{
    int rc;

    if (a->allow_path && (rc = load_allow(a)))
        return rc;
    if ((rc = elf_open(&a->elf, path)) || (rc = elf_check_sections(&a->elf)) ||
        (rc = load_symbols(a)))
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

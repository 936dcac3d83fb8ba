/* ring3 audit: the code symbols of the ELF, to name where each finding lies and to resync the sweep. */
#include <elf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols.h"

#include "audit.h"

/* Only FUNC symbols delimit code for the int3 rule: the kernel's sized
 * NOTYPE symbols (SYM_CODE_START) also cover data and 0xcc alignment, as in
 * irq_entries_start and x86_verw_sel. */
static bool is_code_range(const struct sym *s)
{
    return s->size && s->type == STT_FUNC;
}

uint32_t sym_end(const struct sym *s)
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

int symbols_load(const struct elf_file *e, struct sym **out, size_t *nout)
{
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
    if (!elf_in_file(e, symtab.sh_offset, symtab.sh_size))
        return audit_error("%s: truncated: the symbol table ends past the end of the file", e->path);

    size_t count = symtab.sh_size / sizeof(Elf32_Sym);
    struct sym *syms = calloc(count ? count : 1, sizeof *syms);
    size_t n = 0;
    if (!syms)
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
        struct sym *s = &syms[n++];
        s->name = name;
        s->addr = addr;
        s->size = es.st_size;
        s->shndx = es.st_shndx;
        s->type = type;
        s->rank = (type == STT_FUNC ? 4 : type == STT_NOTYPE && es.st_size ? 2 : 0) +
                  (bind == STB_GLOBAL);
    }
    qsort(syms, n, sizeof *syms, sym_cmp);

    uint32_t cover = 0;
    for (size_t k = 0; k < n; k++) {
        struct sym *s = &syms[k];
        if (k == 0 || s->shndx != s[-1].shndx)
            cover = 0;
        if (is_code_range(s) && sym_end(s) > cover)
            cover = sym_end(s);
        s->cover_end = cover;
    }
    *out = syms;
    *nout = n;
    return 0;
}

/* Index of the first of (syms) above (addr). */
static size_t sym_upper(const struct sym *syms, size_t nsyms, uint32_t addr)
{
    size_t lo = 0, hi = nsyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The innermost function holding (addr), or NULL. */
static const struct sym *code_range_at(const struct sym *syms, size_t nsyms, uint32_t addr)
{
    size_t u = sym_upper(syms, nsyms, addr);
    if (u == 0 || syms[u - 1].cover_end <= addr)
        return NULL;
    for (size_t j = u; j-- > 0;) {
        const struct sym *s = &syms[j];
        if (is_code_range(s) && addr - s->addr < s->size)
            return s;
    }
    return NULL;
}

const struct sym *sym_for(const struct sym *syms, size_t nsyms, uint32_t addr)
{
    const struct sym *s = code_range_at(syms, nsyms, addr);
    if (s)
        return s;
    size_t u = sym_upper(syms, nsyms, addr);
    return u ? &syms[u - 1] : NULL;
}

/* ring3 audit: the code symbols of the ELF, sorted by section and address. */
#ifndef RING3_AUDIT_SYMBOLS_H
#define RING3_AUDIT_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "elf_file.h"

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

/* Read the symbols of (e) that lie in executable sections into a new array
 * (*out, *n), sorted by section index, then address, the preferred name of
 * an address last. A file without a symbol table gives none, with a warning.
 * Returns 0, or 2 after one line on stderr. */
int symbols_load(const struct elf_file *e, struct sym **out, size_t *n);

/* One past the symbol's last byte, kept within the 4 GiB address space. */
uint32_t sym_end(const struct sym *s);

/* The symbol of one section's sorted (syms) to name (addr) by: the function
 * holding it, else the nearest symbol at or before it, else NULL (then the
 * section names it). */
const struct sym *sym_for(const struct sym *syms, size_t nsyms, uint32_t addr);

#endif

/* ring3 audit: a linked i386 ELF mapped read-only; every offset read from it is checked against its size. */
#ifndef RING3_AUDIT_ELF_FILE_H
#define RING3_AUDIT_ELF_FILE_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_file {
    const char *path;
    const uint8_t *data;
    size_t size;
    Elf32_Ehdr eh;
    size_t shnum;
    size_t shstrndx;
};

/* Map (path) and check that it is a little-endian i386 ELF whose section
 * headers lie inside the file. Returns 0, or 2 after one line on stderr. */
int elf_open(struct elf_file *e, const char *path);

/* Every fatal problem of the executable sections (one past the file's end,
 * one wrapping 4 GiB, none at all), found before any warning. Returns 0 or 2. */
int elf_check_sections(const struct elf_file *e);

/* Whether [off, off + len) lies inside the file. */
bool elf_in_file(const struct elf_file *e, uint64_t off, uint64_t len);

/* Section header (i), which elf_open checked lies inside the file. */
void elf_shdr(const struct elf_file *e, size_t i, Elf32_Shdr *sh);

/* The NUL-terminated string at (off) of string-table section (strndx), or
 * NULL. Names with control or non-ASCII bytes come only from a damaged file
 * and are refused rather than printed to a terminal. */
const char *elf_string(const struct elf_file *e, size_t strndx, uint32_t off);

/* The name of section (sh), or "?". */
const char *elf_section_name(const struct elf_file *e, const Elf32_Shdr *sh);

void elf_close(struct elf_file *e);

#endif

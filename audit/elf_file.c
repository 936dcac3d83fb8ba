/* ring3 audit: the i386 ELF file, read with every offset checked against its size. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_file.h"

#include "audit.h"

bool elf_in_file(const struct elf_file *e, uint64_t off, uint64_t len)
{
    return off <= e->size && len <= e->size - off;
}

void elf_shdr(const struct elf_file *e, size_t i, Elf32_Shdr *sh)
{
    memcpy(sh, e->data + e->eh.e_shoff + i * sizeof *sh, sizeof *sh);
}

const char *elf_string(const struct elf_file *e, size_t strndx, uint32_t off)
{
    Elf32_Shdr sh;
    if (strndx == 0 || strndx >= e->shnum)
        return NULL;
    elf_shdr(e, strndx, &sh);
    if (sh.sh_type != SHT_STRTAB || !elf_in_file(e, sh.sh_offset, sh.sh_size) || off >= sh.sh_size)
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

int elf_open(struct elf_file *e, const char *path)
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
    if (!elf_in_file(e, e->eh.e_shoff, sizeof(Elf32_Shdr)))
        return audit_error("%s: truncated: section headers at offset %u are past the end (%zu bytes)",
                           path, e->eh.e_shoff, e->size);

    /* Extended numbering (gABI): a count or index that does not fit the
     * header is kept in section 0. */
    Elf32_Shdr sh0;
    elf_shdr(e, 0, &sh0);
    e->shnum = e->eh.e_shnum ? e->eh.e_shnum : sh0.sh_size;
    e->shstrndx = e->eh.e_shstrndx == SHN_XINDEX ? sh0.sh_link : e->eh.e_shstrndx;
    if (!elf_in_file(e, e->eh.e_shoff, (uint64_t)e->shnum * sizeof(Elf32_Shdr)))
        return audit_error("%s: truncated: %zu section headers at offset %u end past the end (%zu bytes)",
                           path, e->shnum, e->eh.e_shoff, e->size);
    return 0;
}

const char *elf_section_name(const struct elf_file *e, const Elf32_Shdr *sh)
{
    const char *name = elf_string(e, e->shstrndx, sh->sh_name);
    return name ? name : "?";
}

int elf_check_sections(const struct elf_file *e)
{
    size_t nexec = 0;

    for (size_t i = 1; i < e->shnum; i++) {
        Elf32_Shdr sh;
        elf_shdr(e, i, &sh);
        if (!(sh.sh_flags & SHF_EXECINSTR) || sh.sh_type == SHT_NOBITS || !sh.sh_size)
            continue;
        if (!elf_in_file(e, sh.sh_offset, sh.sh_size))
            return audit_error("%s: truncated: section %s ends past the end of the file",
                               e->path, elf_section_name(e, &sh));
        if ((uint64_t)sh.sh_addr + sh.sh_size > (uint64_t)UINT32_MAX + 1)
            return audit_error("%s: section %s wraps around the 4 GiB address space",
                               e->path, elf_section_name(e, &sh));
        nexec++;
    }
    if (!nexec)
        return audit_error("%s: no executable sections (SHF_EXECINSTR) to audit", e->path);
    return 0;
}

void elf_close(struct elf_file *e)
{
    if (e->data)
        munmap((void *)e->data, e->size);
    e->data = NULL;
}

/* Multiboot v1: find the kernel's header, lay out and write the boot information (as QEMU does). */
#include "multiboot.h"

#include <string.h>

/* Offsets in the information structure (specification section 3.3). */
enum {
    MBI_FLAGS = 0,
    MBI_MEM_LOWER = 4,
    MBI_MEM_UPPER = 8,
    MBI_BOOT_DEVICE = 12,
    MBI_CMDLINE = 16,
    MBI_MODS_COUNT = 20,
    MBI_MODS_ADDR = 24,
    MBI_MMAP_LENGTH = 44,
    MBI_MMAP_ADDR = 48,
    MBI_BOOT_LOADER_NAME = 64,
    MBI_SIZE = 88,
    MB_MOD_SIZE = 16,           /* mod_start, mod_end, string, reserved */
    MB_MMAP_ENTRY_SIZE = 24,    /* size, base_addr (8), length (8), type */
};

/* The information we give, flagged as QEMU flags it: memory, boot device,
 * command line, modules, memory map, boot loader name. */
#define MBI_GIVEN 0x24Fu

/* QEMU reports "BIOS disk 0x80, no partition", so a guest printing it agrees. */
#define MBI_BOOT_DEVICE_VALUE 0x8000FFFFu

static const char boot_loader_name[] = "ring3";

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int multiboot_find(const uint8_t *head, size_t len, struct mb_header *h)
{
    if (len > MB_SEARCH_LEN)
        len = MB_SEARCH_LEN;
    for (size_t off = 0; off + 12 <= len; off += 4) {
        const uint8_t *p = head + off;

        if (get32(p) != MB_HEADER_MAGIC || get32(p) + get32(p + 4) + get32(p + 8) != 0)
            continue;
        memset(h, 0, sizeof(*h));
        h->offset = (uint32_t)off;
        h->flags = get32(p + 4);
        if ((h->flags & MB_FLAG_AOUT_KLUDGE) && off + 32 <= len) {
            h->header_addr = get32(p + 12);
            h->load_addr = get32(p + 16);
            h->load_end_addr = get32(p + 20);
            h->bss_end_addr = get32(p + 24);
            h->entry_addr = get32(p + 28);
        }
        return 0;
    }
    return -1;
}

static uint64_t page_up(uint64_t x)
{
    return (x + GM_PAGE_SIZE - 1) & ~(uint64_t)(GM_PAGE_SIZE - 1);
}

/* QEMU aligns relative to the image's start, not absolutely. */
void multiboot_layout(struct mb_layout *l)
{
    uint64_t strings;

    l->mods_addr = l->image_start + page_up(l->image_end - l->image_start);
    strings = l->mods_addr + (l->initrd ? MB_MOD_SIZE : 0);
    if (l->initrd)
        strings += strlen(l->initrd) + 1;
    strings += strlen(l->kernel) + 1 + strlen(l->append) + 1;
    strings += sizeof(boot_loader_name);
    l->module_addr = l->image_start + page_up(strings - l->image_start);
    l->end = l->module_addr + (l->initrd ? l->initrd_size : 0);
}

static int put32(struct guestmem *gm, uint64_t gpa, uint32_t v)
{
    uint8_t *p = guestmem_ptr(gm, gpa, 4);

    if (!p)
        return -1;
    memcpy(p, &v, 4);      /* the host is little-endian, like the guest */
    return 0;
}

static int put_string(struct guestmem *gm, uint64_t gpa, const char *a, const char *b)
{
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *p = guestmem_ptr(gm, gpa, la + (b ? 1 + lb : 0) + 1);

    if (!p)
        return -1;
    memcpy(p, a, la);
    if (b) {
        p[la] = ' ';
        memcpy(p + la + 1, b, lb);
        la += 1 + lb;
    }
    p[la] = '\0';
    return 0;
}

static int write_mmap(struct guestmem *gm, uint32_t *mem_lower, uint32_t *mem_upper, uint32_t *len)
{
    struct gm_region r[GM_MAX_REGIONS];
    int n = guestmem_regions(gm, r);
    uint8_t *p = guestmem_ptr(gm, MB_MMAP_ADDR, (uint64_t)n * MB_MMAP_ENTRY_SIZE);

    if (!p)
        return -1;
    *mem_lower = *mem_upper = 0;
    for (int i = 0; i < n; i++, p += MB_MMAP_ENTRY_SIZE) {
        /* "size" counts the entry's bytes after itself. */
        uint32_t size = MB_MMAP_ENTRY_SIZE - 4, type = r[i].type;

        memcpy(p, &size, 4);
        memcpy(p + 4, &r[i].base, 8);
        memcpy(p + 12, &r[i].len, 8);
        memcpy(p + 20, &type, 4);
        /* mem_lower: RAM from 0, in KiB; mem_upper: RAM from 1 MiB up to
         * the first hole, in KiB (section 3.3). */
        if (r[i].type == GM_RAM && r[i].base == 0)
            *mem_lower = (uint32_t)(r[i].len >> 10);
        if (r[i].type == GM_RAM && r[i].base == GM_HIGH_START)
            *mem_upper = (uint32_t)(r[i].len >> 10);
    }
    *len = (uint32_t)n * MB_MMAP_ENTRY_SIZE;
    return 0;
}

int multiboot_write_info(struct guestmem *gm, const struct mb_layout *l, struct boot_state *bs)
{
    uint8_t *info = guestmem_ptr(gm, MB_INFO_ADDR, MBI_SIZE);
    uint64_t s = l->mods_addr + (l->initrd ? MB_MOD_SIZE : 0);
    uint32_t mem_lower, mem_upper, mmap_len, cmdline, name;
    int err = 0;

    if (!info)
        return -1;
    memset(info, 0, MBI_SIZE);
    if (l->initrd) {
        /* The module's string is its file name, as QEMU passes it. */
        err |= put32(gm, l->mods_addr + 0, (uint32_t)l->module_addr);
        err |= put32(gm, l->mods_addr + 4, (uint32_t)(l->module_addr + l->initrd_size));
        err |= put32(gm, l->mods_addr + 8, (uint32_t)s);
        err |= put32(gm, l->mods_addr + 12, 0);
        err |= put_string(gm, s, l->initrd, NULL);
        s += strlen(l->initrd) + 1;
    }
    /* QEMU's command line is "KERNEL APPEND", with the space even when
     * APPEND is empty; match it so that transcripts agree. */
    cmdline = (uint32_t)s;
    err |= put_string(gm, s, l->kernel, l->append);
    s += strlen(l->kernel) + 1 + strlen(l->append) + 1;
    name = (uint32_t)s;
    err |= put_string(gm, s, boot_loader_name, NULL);
    err |= write_mmap(gm, &mem_lower, &mem_upper, &mmap_len);
    if (err)
        return -1;

    put32(gm, MB_INFO_ADDR + MBI_FLAGS, MBI_GIVEN);
    put32(gm, MB_INFO_ADDR + MBI_MEM_LOWER, mem_lower);
    put32(gm, MB_INFO_ADDR + MBI_MEM_UPPER, mem_upper);
    put32(gm, MB_INFO_ADDR + MBI_BOOT_DEVICE, MBI_BOOT_DEVICE_VALUE);
    put32(gm, MB_INFO_ADDR + MBI_CMDLINE, cmdline);
    put32(gm, MB_INFO_ADDR + MBI_MODS_COUNT, l->initrd ? 1 : 0);
    put32(gm, MB_INFO_ADDR + MBI_MODS_ADDR, (uint32_t)l->mods_addr);
    put32(gm, MB_INFO_ADDR + MBI_MMAP_LENGTH, mmap_len);
    put32(gm, MB_INFO_ADDR + MBI_MMAP_ADDR, MB_MMAP_ADDR);
    put32(gm, MB_INFO_ADDR + MBI_BOOT_LOADER_NAME, name);

    bs->eax = MB_BOOT_MAGIC;
    bs->ebx = MB_INFO_ADDR;
    return 0;
}

/* Fuzz target: the kernel-image parsers of boot/ (bzImage, ELF, Multiboot, initrd), which read the
 * user's files. The first byte picks a path:
 *   0  loader_load() on a kernel file (and initrd) holding the input's bytes: the whole loader,
 *      ELF program headers and Multiboot a.out kludge included, into guest RAM;
 *   1  linux_parse_bzimage(), linux_check_cmdline(), linux_initrd_addr(), linux_write_boot();
 *   2  multiboot_find(), multiboot_layout(), multiboot_write_info();
 *   3  linux_check_initrd().
 * Beyond "no crash" (guest RAM is fenced by inaccessible pages): what a parser accepts is what its
 * header promises (the setup code and payload inside the file, the entry point inside a loaded
 * segment, the initrd page-aligned above the kernel and below the top of RAM), and what it refuses
 * gets one line on stderr and exit status 2 (lib/fail.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "boot/linux.h"
#include "boot/loader.h"
#include "boot/multiboot.h"
#include "guest.h"
#include "lib/fail.h"

/* Twice GM_MIN_SIZE: room for a kernel at 16 MiB, Linux i386's CONFIG_PHYSICAL_START. */
#define MEM_BYTES (32u << 20)
#define USABLE (MEM_BYTES - GM_TOP_RESERVED)

static struct guestmem gm;

static uint64_t page_down(uint64_t x) { return x & ~(uint64_t)(GM_PAGE_SIZE - 1); }
static uint32_t le32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* What bad_input printed (fuzz_stderr_release). */
static const char *said;
static size_t said_len;

/* lib/fail.h: a refusal is exit status 2 and one line, "ring3: ..."; success says nothing. */
static void check_outcome(int rc)
{
    if (rc == 0 && said_len != 0)
        abort();
    if (rc != 0 && (rc != EXIT_BAD_INPUT || strncmp(said, "ring3: ", 7) ||
                    said[said_len - 1] != '\n' || memchr(said, '\n', said_len) != said + said_len - 1))
        abort();
}

/* A NUL-terminated string of at most (max) bytes from the input: its length byte, then the bytes. */
static void fuzz_string(struct fuzz_input *in, char *s, size_t max)
{
    size_t n = fuzz_u8(in) % (max + 1);
    fuzz_bytes(in, s, n);
    s[n] = '\0';
}

/* A file of these bytes with a name the harness picks: a memfd, opened again by its /proc path. */
static const char *file_of(int *fd, char *name, size_t name_size, const uint8_t *p, size_t len)
{
    if (*fd < 0 && (*fd = memfd_create("fuzz", 0)) < 0)
        abort();
    if (ftruncate(*fd, 0) || (len && pwrite(*fd, p, len, 0) != (ssize_t)len))
        abort();
    snprintf(name, name_size, "/proc/self/fd/%d", *fd);
    return name;
}

/* The initrd lies page-aligned in [floor, top), where linux_initrd_addr promises it. */
static void check_initrd_place(uint64_t addr, uint64_t size, uint64_t floor, uint64_t top)
{
    if (addr == 0)
        return;
    if (addr != page_down(addr) || addr < floor || size > top || addr > top - size)
        abort();
}

static void fuzz_loader(struct fuzz_input *in)
{
    static int kernel_fd = -1, initrd_fd = -1;
    char append[256], kname[64], iname[64];
    const uint8_t extra[4] = { 'T', 'R', 'L', 'R' };
    struct boot_state bs;

    uint8_t flags = fuzz_u8(in);
    fuzz_string(in, append, sizeof append - 1);
    size_t ilen = fuzz_u16(in) % 512;
    ilen = ilen < in->left ? ilen : in->left;
    const char *initrd = flags & 1 ? file_of(&initrd_fd, iname, sizeof iname, in->p, ilen) : NULL;
    in->p += ilen;
    in->left -= ilen;
    const char *kernel = file_of(&kernel_fd, kname, sizeof kname, in->p, in->left);
    size_t extra_len = flags & 2 ? sizeof extra : 0;

    fuzz_guestmem(&gm, MEM_BYTES);
    fuzz_stderr_catch();
    int rc = loader_load(&gm, kernel, append, "", initrd, extra, extra_len, &bs);
    said = fuzz_stderr_release(&said_len);
    check_outcome(rc);
    if (rc)
        return;
    /* Everything the loader placed lies in the usable RAM, above 1 MiB, the entry inside it. */
    if (bs.multiboot == bs.linux_boot || bs.image_start < LOADER_MIN_ADDR ||
        bs.image_start >= bs.image_end || bs.image_end > USABLE ||
        bs.entry < bs.image_start || bs.entry >= bs.image_end)
        abort();
    if (initrd) {
        uint64_t size = (uint64_t)bs.initrd_end - bs.initrd_start;
        if (size != (extra_len ? ((ilen + 3) & ~3u) + extra_len : ilen) || bs.initrd_end > USABLE ||
            bs.initrd_start < bs.image_end)
            abort();
    } else if (bs.initrd_start || bs.initrd_end) {
        abort();
    }
    if (bs.multiboot && (bs.eax != MB_BOOT_MAGIC || bs.ebx != MB_INFO_ADDR))
        abort();
    if (bs.linux_boot) {
        const uint8_t *zp = gm.phys + LINUX_ZERO_PAGE;
        const char *cmdline = (const char *)gm.phys + LINUX_CMDLINE;
        if (bs.esi != LINUX_ZERO_PAGE || le32(zp + 0x228) != LINUX_CMDLINE ||
            strncmp(cmdline, LINUX_DEFAULT_CMDLINE, strlen(LINUX_DEFAULT_CMDLINE)) ||
            le32(zp + 0x218) != bs.initrd_start || le32(zp + 0x21c) != bs.initrd_end - bs.initrd_start)
            abort();
        /* A bzImage's initrd also keeps clear of where the kernel decompresses itself. */
        const uint8_t *k = in->p;
        if (initrd && in->left >= 0x264 && linux_is_bzimage(k, in->left) &&
            bs.initrd_start < ((uint64_t)le32(k + 0x25c) << 32 | le32(k + 0x258)) + le32(k + 0x260))
            abort();
    }
}

static void fuzz_bzimage(struct fuzz_input *in)
{
    static struct linux_image li;
    char cmdline[GM_PAGE_SIZE + 8];
    struct boot_state bs;

    uint64_t file_size = fuzz_u32(in);
    uint32_t initrd_size = fuzz_u32(in) % (MEM_BYTES + GM_PAGE_SIZE);
    size_t n = fuzz_u16(in) % (sizeof cmdline - 1);
    n = fuzz_bytes(in, cmdline, n);
    cmdline[n] = '\0';
    n = strlen(cmdline);
    const uint8_t *head = in->p;
    size_t len = in->left < MB_SEARCH_LEN ? in->left : MB_SEARCH_LEN;
    file_size += in->left;                  /* the loader reads the head of a file at least so long */

    if (!linux_is_bzimage(head, len))
        return;
    fuzz_stderr_catch();
    int rc = linux_parse_bzimage("k", head, len, file_size, &li);
    said = fuzz_stderr_release(&said_len);
    check_outcome(rc);
    if (rc)
        return;
    /* linux.h: the protected-mode code is the file after the setup sectors, and the setup header
     * copied is the file's, within struct boot_params' header; the command line fits a page. */
    unsigned setup_sects = head[0x1f1] ? head[0x1f1] : 4;
    if (!li.bzimage || li.pm_offset != (setup_sects + 1) * 512ull || li.pm_offset >= file_size ||
        li.pm_offset + li.pm_size != file_size || li.hdr_len > sizeof li.hdr ||
        0x1f1 + li.hdr_len > len || memcmp(li.hdr, head + 0x1f1, li.hdr_len) ||
        li.cmdline_max == 0 || li.cmdline_max >= GM_PAGE_SIZE)
        abort();

    fuzz_stderr_catch();
    rc = linux_check_cmdline(&li, cmdline);
    said = fuzz_stderr_release(&said_len);
    check_outcome(rc);
    if ((rc == 0) != (n <= li.cmdline_max))
        abort();
    /* As loader_load places it: above the image and the decompressor's room, below the usable top. */
    uint64_t floor = LINUX_BZIMAGE_LOAD + li.pm_size;
    if (li.pref_address + li.init_size > floor)
        floor = li.pref_address + li.init_size;
    uint64_t top = USABLE;
    if (li.initrd_addr_max && (uint64_t)li.initrd_addr_max + 1 < top)
        top = (uint64_t)li.initrd_addr_max + 1;
    uint64_t addr = linux_initrd_addr(&li, initrd_size, USABLE, floor);
    check_initrd_place(addr, initrd_size, floor, top);
    if (rc)
        return;

    fuzz_guestmem(&gm, MEM_BYTES);
    linux_write_boot(&gm, &li, cmdline, (uint32_t)addr, addr ? initrd_size : 0, LINUX_BZIMAGE_LOAD, &bs);
    const uint8_t *zp = gm.phys + LINUX_ZERO_PAGE;
    if (bs.esi != LINUX_ZERO_PAGE || bs.entry != LINUX_BZIMAGE_LOAD || bs.cs != 0x10 ||
        le32(zp + 0x228) != LINUX_CMDLINE || strcmp((const char *)gm.phys + LINUX_CMDLINE, cmdline) ||
        le32(zp + 0x214) != LINUX_BZIMAGE_LOAD || zp[0x210] != 0xff || !(zp[0x211] & 1) ||
        le32(zp + 0x218) != (uint32_t)addr || zp[0x1e8] != 6)
        abort();
}

static void fuzz_multiboot(struct fuzz_input *in)
{
    char kernel[64], append[256], initrd[64];
    struct mb_header h;
    struct boot_state bs = { 0 };

    fuzz_string(in, kernel, sizeof kernel - 1);
    fuzz_string(in, append, sizeof append - 1);
    fuzz_string(in, initrd, sizeof initrd - 1);
    uint32_t initrd_size = fuzz_u32(in) % MEM_BYTES;
    uint64_t image_start = LOADER_MIN_ADDR + fuzz_u32(in) % MEM_BYTES;
    uint64_t image_end = image_start + 1 + fuzz_u32(in) % MEM_BYTES;
    const uint8_t *head = in->p;
    size_t len = in->left;

    if (multiboot_find(head, len, &h) == 0) {
        /* multiboot.h: 4-aligned in the first 8 KiB, the magic, the three words summing to 0. */
        const uint8_t *p = head + h.offset;
        bool kludge = (h.flags & MB_FLAG_AOUT_KLUDGE) && h.offset + 32 <= len && h.offset + 32 <= MB_SEARCH_LEN;
        if (h.offset % 4 || h.offset + 12 > len || h.offset + 12 > MB_SEARCH_LEN ||
            le32(p) != MB_HEADER_MAGIC || le32(p) + le32(p + 4) + le32(p + 8) != 0 || le32(p + 4) != h.flags ||
            h.load_addr != (kludge ? le32(p + 16) : 0) || h.entry_addr != (kludge ? le32(p + 28) : 0))
            abort();
    }

    struct mb_layout l = { .kernel = kernel, .append = append, .initrd = initrd[0] ? initrd : NULL,
                           .initrd_size = initrd_size, .image_start = image_start, .image_end = image_end };
    multiboot_layout(&l);
    /* The boot data follow the image, the module follows them, a page apart from the image's start. */
    if (l.mods_addr < image_end || (l.mods_addr - image_start) % GM_PAGE_SIZE ||
        l.module_addr < l.mods_addr || (l.module_addr - image_start) % GM_PAGE_SIZE ||
        l.end != l.module_addr + (l.initrd ? initrd_size : 0))
        abort();
    if (l.end > USABLE)
        return;                             /* loader_load refuses that: too_big() */
    fuzz_guestmem(&gm, MEM_BYTES);
    if (multiboot_write_info(&gm, &l, &bs) != 0)
        abort();
    const uint8_t *info = gm.phys + MB_INFO_ADDR;
    uint32_t cmdline = le32(info + 16), name = le32(info + 64);
    char expect[64 + 256 + 2];
    snprintf(expect, sizeof expect, "%s %s", kernel, append);
    if (bs.eax != MB_BOOT_MAGIC || bs.ebx != MB_INFO_ADDR || le32(info) != 0x24F ||
        cmdline < l.mods_addr || cmdline >= l.module_addr || name < l.mods_addr || name >= l.module_addr ||
        strcmp((const char *)gm.phys + cmdline, expect) || strcmp((const char *)gm.phys + name, "ring3") ||
        le32(info + 20) != (l.initrd ? 1u : 0u) || le32(info + 24) != l.mods_addr)
        abort();
    if (l.initrd && (le32(gm.phys + l.mods_addr) != l.module_addr ||
                     le32(gm.phys + l.mods_addr + 4) != l.module_addr + initrd_size ||
                     strcmp((const char *)gm.phys + le32(gm.phys + l.mods_addr + 8), initrd)))
        abort();
}

static void fuzz_initrd(struct fuzz_input *in)
{
    fuzz_stderr_catch();
    int rc = linux_check_initrd("i", in->p, in->left);
    said = fuzz_stderr_release(&said_len);
    check_outcome(rc);
    /* Accepted: a cpio's "0707" or a compressor's magic, so never an empty file or one of zeros. */
    if (rc == 0 && (in->left < 2 || (in->p[0] == 0 && in->p[1] == 0)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in = { data, size };
    switch (fuzz_u8(&in) % 4) {
    case 0: fuzz_loader(&in); break;
    case 1: fuzz_bzimage(&in); break;
    case 2: fuzz_multiboot(&in); break;
    case 3: fuzz_initrd(&in); break;
    }
    return 0;
}

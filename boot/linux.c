/* The Linux/x86 boot protocol, 32-bit entry (Documentation/arch/x86/boot.rst): the zero page, e820, initrd. */
#include "linux.h"

#include "ring3/abi.h"

#include "lib/fail.h"

#include <stdio.h>
#include <string.h>

/* Offsets in the file and in struct boot_params (arch/x86/include/uapi/asm/bootparam.h). */
#define BP_ALT_MEM_K     0x1e0
#define BP_E820_ENTRIES  0x1e8
#define BP_SENTINEL      0x1ef
#define BP_HDR           0x1f1
#define BP_E820_TABLE    0x2d0
#define BP_E820_MAX      128
#define HDR_END          0x290      /* the header ends before edd_mbr_sig_buffer */

#define OFF_SETUP_SECTS  0x1f1
#define OFF_SYSSIZE      0x1f4
#define OFF_VID_MODE     0x1fa
#define OFF_BOOT_FLAG    0x1fe
#define OFF_JUMP         0x200
#define OFF_HEADER       0x202
#define OFF_VERSION      0x206
#define OFF_TYPE_OF_LOADER 0x210
#define OFF_LOADFLAGS    0x211
#define OFF_CODE32_START 0x214
#define OFF_RAMDISK_IMAGE 0x218
#define OFF_RAMDISK_SIZE 0x21c
#define OFF_HEAP_END_PTR 0x224
#define OFF_CMD_LINE_PTR 0x228
#define OFF_INITRD_ADDR_MAX 0x22c
#define OFF_CMDLINE_SIZE 0x238
#define OFF_PREF_ADDRESS 0x258
#define OFF_INIT_SIZE    0x260

#define LOADED_HIGH      0x01       /* loadflags: protected-mode code at 1 MiB (bzImage) */
#define KEEP_SEGMENTS    0x40       /* obsolete; must be clear */
#define CAN_USE_HEAP     0x80
#define LOADER_UNDEFINED 0xff       /* type_of_loader: a loader with no assigned ID */

/* Protocol 2.06 added cmdline_size; 2.10 pref_address and init_size (Linux 2.6.31). */
#define MIN_VERSION      0x020a
/* Before 2.06 the command line was limited to 255 bytes; a vmlinux is
 * entered with COMMAND_LINE_SIZE (2048) in force. */
#define VMLINUX_CMDLINE_MAX 2047
#define DEFAULT_INITRD_ADDR_MAX 0x37FFFFFFu

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const uint8_t *p) { return get16(p) | (uint32_t)get16(p + 2) << 16; }
static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }

bool linux_is_bzimage(const uint8_t *head, size_t len)
{
    return len >= OFF_HEADER + 4 && !memcmp(head + OFF_HEADER, "HdrS", 4);
}

int linux_parse_bzimage(const char *name, const uint8_t *head, size_t len, uint64_t file_size,
                        struct linux_image *li)
{
    unsigned version, setup_sects, hdr_end;

    memset(li, 0, sizeof(*li));
    if (len < HDR_END)
        return bad_input("'%s' is truncated inside its Linux setup header", name);
    version = get16(head + OFF_VERSION);
    if (version < MIN_VERSION)
        return bad_input("'%s' uses Linux boot protocol %u.%02u; ring3 needs 2.10 or later (Linux 2.6.31+)",
                         name, version >> 8, version & 0xff);
    if (!(head[OFF_LOADFLAGS] & LOADED_HIGH))
        return bad_input("'%s' is a zImage (loaded below 1 MiB); build a bzImage", name);
    setup_sects = head[OFF_SETUP_SECTS] ? head[OFF_SETUP_SECTS] : 4;
    li->bzimage = true;
    li->pm_offset = (uint64_t)(setup_sects + 1) * 512;
    if (li->pm_offset >= file_size)
        return bad_input("'%s' is truncated: its setup code ends past the end of the file", name);
    li->pm_size = file_size - li->pm_offset;
    /* The header runs from 0x1f1 to 0x202 + the byte at 0x201 (the jump's offset). */
    hdr_end = 0x202 + head[OFF_JUMP + 1];
    if (hdr_end > HDR_END)
        hdr_end = HDR_END;
    li->hdr_len = hdr_end - BP_HDR;
    memcpy(li->hdr, head + BP_HDR, li->hdr_len);
    /* The command line must fit the page ring3 gives it, whatever the header says. */
    li->cmdline_max = get32(head + OFF_CMDLINE_SIZE);
    if (li->cmdline_max == 0 || li->cmdline_max >= GM_PAGE_SIZE)
        li->cmdline_max = li->cmdline_max ? GM_PAGE_SIZE - 1 : 255;
    li->initrd_addr_max = get32(head + OFF_INITRD_ADDR_MAX);
    li->pref_address = get64(head + OFF_PREF_ADDRESS);
    li->init_size = get32(head + OFF_INIT_SIZE);
    return 0;
}

void linux_vmlinux_image(struct linux_image *li)
{
    memset(li, 0, sizeof(*li));
    /* A made-up header: the fields a 32-bit entry reads, as a bzImage of protocol 2.15 has them.
     * Offsets into hdr are taken (OFF - BP_HDR) first: hdr + OFF alone points past the array,
     * which C leaves undefined (C11 6.5.6p8). */
    li->hdr_len = OFF_INIT_SIZE + 4 - BP_HDR;
    put16(li->hdr + (OFF_BOOT_FLAG - BP_HDR), 0xAA55);
    memcpy(li->hdr + (OFF_HEADER - BP_HDR), "HdrS", 4);
    put16(li->hdr + (OFF_VERSION - BP_HDR), 0x020f);
    put16(li->hdr + (OFF_VID_MODE - BP_HDR), 0xffff);       /* "normal" */
    li->hdr[OFF_LOADFLAGS - BP_HDR] = LOADED_HIGH;
    li->cmdline_max = VMLINUX_CMDLINE_MAX;
    li->initrd_addr_max = DEFAULT_INITRD_ADDR_MAX;
    put32(li->hdr + (OFF_INITRD_ADDR_MAX - BP_HDR), li->initrd_addr_max);
    put32(li->hdr + (OFF_CMDLINE_SIZE - BP_HDR), li->cmdline_max);
}

int linux_check_initrd(const char *name, const uint8_t *h, size_t n)
{
    static const struct { const char *magic; size_t len; } formats[] = {
        { "070701", 6 }, { "070702", 6 }, { "070707", 6 },   /* cpio: newc, crc, odc */
        { "\x1f\x8b", 2 }, { "\x1f\x9e", 2 },                /* gzip */
        { "BZh", 3 }, { "\x5d\x00\x00", 3 },                /* bzip2, lzma */
        { "\xfd" "7zXZ", 6 }, { "\x89LZO", 4 },              /* xz, lzo */
        { "\x02\x21\x4c\x18", 4 }, { "\x28\xb5\x2f\xfd", 4 }, /* lz4, zstd */
    };

    if (n == 0)
        return bad_input("initrd '%s' is empty; pass a cpio archive (e.g. made by cpio -H newc)", name);
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
        if (n >= formats[i].len && !memcmp(h, formats[i].magic, formats[i].len))
            return 0;
    return bad_input("initrd '%s' is not a cpio archive, plain or compressed; make one with "
                     "'find . | cpio -o -H newc | gzip'", name);
}

int linux_check_cmdline(const struct linux_image *li, const char *cmdline)
{
    size_t len = strlen(cmdline);

    if (len > li->cmdline_max)
        return bad_input("the kernel command line is %zu bytes; this kernel takes at most %u",
                         len, li->cmdline_max);
    return 0;
}

uint64_t linux_initrd_addr(const struct linux_image *li, uint64_t size, uint64_t usable_top,
                           uint64_t floor)
{
    uint64_t top = usable_top;

    if (li->initrd_addr_max && (uint64_t)li->initrd_addr_max + 1 < top)
        top = (uint64_t)li->initrd_addr_max + 1;
    /* Compare the address rounded down to its page with (floor): the rounding alone can move
     * the initrd below (floor), over the end of the kernel. */
    if (size > top || ((top - size) & ~(uint64_t)(GM_PAGE_SIZE - 1)) < floor)
        return 0;
    return (top - size) & ~(uint64_t)(GM_PAGE_SIZE - 1);
}

/* A GDT with the flat 4 GiB __BOOT_CS (entry 2) and __BOOT_DS (entry 3) that
 * the protocol says must be loaded at entry. */
static void write_boot_gdt(struct guestmem *gm)
{
    uint8_t *g = guestmem_ptr(gm, LINUX_BOOT_GDT, 32);

    memset(g, 0, 32);
    put64(g + 16, 0x00CF9B000000FFFFull);   /* code: base 0, limit 4 GiB, 32-bit, DPL 0 */
    put64(g + 24, 0x00CF93000000FFFFull);   /* data: the same, read/write */
}

void linux_write_boot(struct guestmem *gm, const struct linux_image *li, const char *cmdline,
                      uint32_t initrd_addr, uint32_t initrd_size, uint32_t entry,
                      struct boot_state *bs)
{
    uint8_t *bp = guestmem_ptr(gm, LINUX_ZERO_PAGE, GM_PAGE_SIZE);
    uint8_t *hdr = bp + BP_HDR;
    struct gm_region r[GM_MAX_REGIONS];
    int n = guestmem_regions(gm, r), e = 0;
    uint64_t above_1m = 0;

    /* "take setup_header and put it into a clean boot_params buffer" */
    memset(bp, 0, GM_PAGE_SIZE);
    memcpy(hdr, li->hdr, li->hdr_len);
    bp[OFF_TYPE_OF_LOADER] = LOADER_UNDEFINED;
    bp[OFF_LOADFLAGS] = (uint8_t)((bp[OFF_LOADFLAGS] | LOADED_HIGH) & ~(KEEP_SEGMENTS | CAN_USE_HEAP));
    put16(bp + OFF_HEAP_END_PTR, 0);
    put32(bp + OFF_CMD_LINE_PTR, LINUX_CMDLINE);
    put32(bp + OFF_RAMDISK_IMAGE, initrd_addr);
    put32(bp + OFF_RAMDISK_SIZE, initrd_size);
    if (li->bzimage)
        put32(bp + OFF_CODE32_START, LINUX_BZIMAGE_LOAD);
    memcpy(guestmem_ptr(gm, LINUX_CMDLINE, strlen(cmdline) + 1), cmdline, strlen(cmdline) + 1);

    /* The e820 map is the same PC layout Multiboot guests are told about. */
    for (int i = 0; i < n && e < BP_E820_MAX; i++, e++) {
        uint8_t *ent = bp + BP_E820_TABLE + 20 * e;

        put64(ent, r[i].base);
        put64(ent + 8, r[i].len);
        put32(ent + 16, r[i].type);
        if (r[i].type == GM_RAM && r[i].base == GM_HIGH_START)
            above_1m = r[i].len;
    }
    bp[BP_E820_ENTRIES] = (uint8_t)e;
    put32(bp + BP_ALT_MEM_K, (uint32_t)(above_1m >> 10));
    write_boot_gdt(gm);

    bs->entry = entry;
    bs->esi = LINUX_ZERO_PAGE;
    bs->eax = bs->ebx = 0;
    bs->esp = LINUX_STACK_TOP;
    bs->eflags = 0x2;
    bs->cr0 = 0x11;                 /* PE | ET: protected mode, paging off */
    bs->cs = 0x10;                  /* __BOOT_CS */
    bs->ds = 0x18;                  /* __BOOT_DS */
    bs->gdt_base = LINUX_BOOT_GDT;
    bs->gdt_limit = 31;
}

/* Linux writes ud1 only with a memory operand, so its code never holds the
 * marker; in compressed data three given bytes turn up about once in 16 MiB.
 * An insert-mode decompressor alone holds a few dozen. */
#define INSERT_MARKERS_MIN 8

bool linux_has_ring3_sites(const uint8_t *p, size_t len)
{
    unsigned markers = 0;

    /* call *%cs:abs32 is 2E FF 15 followed by the little-endian address
     * R3_TABLE + 4 * entry. */
    for (size_t i = 0; i + 7 <= len; i++) {
        if (p[i] == R3_INSERT_MARKER0 && p[i + 1] == R3_INSERT_MARKER1 && p[i + 2] == R3_INSERT_MARKER2 &&
            ++markers == INSERT_MARKERS_MIN)
            return true;
        if (p[i] != 0x2E || p[i + 1] != 0xFF || p[i + 2] != 0x15)
            continue;
        uint32_t a = get32(p + i + 3);

        if (a >= R3_TABLE && a < R3_TABLE + 4u * R3_ENTRY_COUNT && (a & 3) == 0)
            return true;
    }
    return false;
}

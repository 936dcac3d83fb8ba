/* Multiboot v1 (specification 0.6.96): the kernel's header and the boot information ring3 hands it. */
#ifndef RING3_MULTIBOOT_H
#define RING3_MULTIBOOT_H

#include <stddef.h>
#include <stdint.h>

#include "memory/guestmem.h"

#include "loader.h"

#define MB_HEADER_MAGIC 0x1BADB002u
#define MB_BOOT_MAGIC   0x2BADB002u     /* in EAX at entry */
#define MB_SEARCH_LEN   8192            /* the header lies within the image's first 8 KiB */

#define MB_FLAG_PAGE_ALIGN 0x00000001u  /* modules page-aligned: always done */
#define MB_FLAG_MEMINFO    0x00000002u  /* mem_* and mmap wanted: always given */
#define MB_FLAG_VIDEO      0x00000004u  /* video mode wanted: no display, none given (as QEMU) */
#define MB_FLAG_AOUT_KLUDGE 0x00010000u /* the address fields below are valid */
#define MB_FLAGS_REQUIRED  0x0000FFFFu  /* a loader must refuse bits here it cannot honour */

/* Where ring3 puts the memory map and the information structure: QEMU's
 * 0x9000 and 0x9500 moved up by 64 KiB, the least that keeps them at linear
 * addresses a host lets an unprivileged process map (vm.mmap_min_addr). */
#define MB_MMAP_ADDR 0x19000u
#define MB_INFO_ADDR 0x19500u
#define MB_STACK_TOP 0x19000u           /* the boot stack grows down from here */

struct mb_header {
    uint32_t offset;            /* of the header in the file */
    uint32_t flags;
    /* valid with MB_FLAG_AOUT_KLUDGE only */
    uint32_t header_addr, load_addr, load_end_addr, bss_end_addr, entry_addr;
};

/* Find the Multiboot header in the first (len) bytes (head) of a kernel
 * file: 4-aligned, the magic, and a checksum making the three words sum to 0.
 * Returns 0 and fills (h), or -1 when there is none. The a.out-kludge fields
 * are read only when the flag is set and the (len) bytes hold them. */
int multiboot_find(const uint8_t *head, size_t len, struct mb_header *h);

/* Placement of the boot data after the kernel image, the way QEMU's loader
 * places it so that the addresses a guest sees agree: the module list at the
 * page after the image, then the module's command line, the kernel's command
 * line and the boot loader's name, then the module at the next page. */
struct mb_layout {
    /* inputs */
    const char *kernel;         /* file name as typed; the command line starts with it */
    const char *append;         /* the rest of the command line */
    const char *initrd;         /* module 0's file name (its command line), NULL for none */
    uint32_t initrd_size;
    uint64_t image_start, image_end;
    /* set by multiboot_layout */
    uint64_t mods_addr, module_addr;
    uint64_t end;               /* first byte after everything */
};

/* Fill in the placement fields of (l) from its inputs. Touches no memory. */
void multiboot_layout(struct mb_layout *l);

/* Write the boot information for (l) into guest memory (gm), which must hold
 * [image_start, l->end) and the info page at MB_MMAP_ADDR, and the module
 * (if any) already loaded at l->module_addr; set (bs)'s EAX and EBX. Returns
 * 0, or -1 if some address fell outside guest memory. */
int multiboot_write_info(struct guestmem *gm, const struct mb_layout *l, struct boot_state *bs);

#endif

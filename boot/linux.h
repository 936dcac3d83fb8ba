/* The Linux/x86 boot protocol, 32-bit entry (Documentation/arch/x86/boot.rst): bzImage and vmlinux. */
#ifndef RING3_LINUX_H
#define RING3_LINUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/guestmem.h"

#include "loader.h"

/* Where ring3 puts what a boot loader hands a 32-bit kernel: a GDT with the
 * flat __BOOT_CS (0x10) and __BOOT_DS (0x18), the zero page (struct
 * boot_params) and the command line. Above the host's vm.mmap_min_addr,
 * since with paging off the kernel reaches them at the same linear address;
 * below 640 KiB, where the kernel expects boot data and reserves it. */
#define LINUX_BOOT_GDT   0x1F000u
#define LINUX_ZERO_PAGE  0x20000u
#define LINUX_CMDLINE    0x21000u
#define LINUX_STACK_TOP  LINUX_BOOT_GDT

/* What ring3 puts before the user's --append: the console on the first
 * UART, and the top 4 MiB of the address space kept free of the kernel's
 * fixmaps for ring3's runtime page (R3_RUNTIME_BASE; the kernel rounds
 * reservetop up to a page-directory entry). */
#define LINUX_DEFAULT_CMDLINE "console=ttyS0 earlyprintk=serial,ttyS0 reservetop=0x400000"

/* The protected-mode part of a bzImage goes to 1 MiB (boot.rst, "Loading
 * the rest of the kernel"). */
#define LINUX_BZIMAGE_LOAD 0x100000u

/* What the loader learns from a bzImage's setup header, or makes up for a
 * vmlinux (which has none). */
struct linux_image {
    bool bzimage;
    uint8_t hdr[0x290 - 0x1f1];     /* the setup header as in the file, copied to the zero page */
    size_t hdr_len;
    uint64_t pm_offset, pm_size;    /* bzImage: the protected-mode code in the file */
    uint32_t cmdline_max;           /* bytes, without the terminating NUL */
    uint32_t initrd_addr_max;       /* highest address the initrd may end at, inclusive */
    uint64_t pref_address, init_size;   /* where the kernel decompresses itself, and how much */
};

/* Whether the first (len) bytes (head) of a file are a bzImage's: the
 * "HdrS" signature at 0x202. */
bool linux_is_bzimage(const uint8_t *head, size_t len);

/* Read the setup header of bzImage (name) from its first (len) bytes (head)
 * of a (file_size)-byte file into (li). A zImage, an old protocol or a
 * truncated file print one line and return 2; success returns 0. */
int linux_parse_bzimage(const char *name, const uint8_t *head, size_t len, uint64_t file_size,
                        struct linux_image *li);

/* Fill (li) for a vmlinux ELF, which carries no setup header. */
void linux_vmlinux_image(struct linux_image *li);

/* Check the initrd's first (len) bytes (head): a cpio archive, plain or
 * compressed. Prints one line naming (name) and returns 2 if not. */
int linux_check_initrd(const char *name, const uint8_t *head, size_t len);

/* Whether (cmdline) fits the kernel's limit; prints one line and returns 2 if not. */
int linux_check_cmdline(const struct linux_image *li, const char *cmdline);

/* Where the initrd of (size) bytes goes: page-aligned at the top of RAM
 * below (usable_top) and the kernel's initrd_addr_max, as QEMU does.
 * Returns 0 when it cannot fit above (floor). */
uint64_t linux_initrd_addr(const struct linux_image *li, uint64_t size, uint64_t usable_top,
                           uint64_t floor);

/* Write the boot GDT, the zero page (setup header, e820 map from
 * guestmem_regions, command line, initrd) into guest memory (gm) and set
 * (bs)'s registers for the 32-bit entry at (entry): ESI = the zero page,
 * EBX = EBP = EDI = 0, paging off, interrupts off, CS = __BOOT_CS. */
void linux_write_boot(struct guestmem *gm, const struct linux_image *li, const char *cmdline,
                      uint32_t initrd_addr, uint32_t initrd_size, uint32_t entry,
                      struct boot_state *bs);

/* Whether the kernel image bytes (p, len) were assembled by ring3-as: they
 * hold call sites of the runtime (`call *%cs:ENTRY`, 2E FF 15 with an
 * address in the entry table), or, in insert mode, markers
 * (R3_INSERT_MARKER). A kernel assembled without ring3-as has neither. */
bool linux_has_ring3_sites(const uint8_t *p, size_t len);

#endif

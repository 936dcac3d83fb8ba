/* The kernel loader of `ring3 run`: an i386 ELF (or a Multiboot a.out-kludge image) into guest memory. */
#ifndef RING3_LOADER_H
#define RING3_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/guestmem.h"

/* Kernel segments must lie at or above 1 MiB (as GRUB legacy requires):
 * below it sit the PC's reserved areas and ring3's own boot data. */
#define LOADER_MIN_ADDR GM_HIGH_START

/* What the vcpu starts the guest with: the machine state of the Multiboot
 * specification (0.6.96, section 3.2) for every kernel, since a Linux vmlinux
 * entered at its physical startup_32 expects the same flat protected mode. */
struct boot_state {
    bool multiboot;             /* a Multiboot v1 header was found */
    bool linux_boot;            /* a bzImage, or an ELF without one: the Linux 32-bit boot protocol */
    uint32_t entry;             /* EIP, a physical address: paging is off */
    uint32_t eax, ebx;          /* Multiboot: 0x2BADB002 and the info structure's address; else 0 */
    uint32_t esi;               /* Linux: the zero page (struct boot_params); else 0 */
    uint32_t gdt_base;          /* GDTR at entry (Linux: a GDT holding __BOOT_CS and __BOOT_DS) */
    uint16_t gdt_limit;
    uint32_t esp;               /* undefined by Multiboot; a small stack in low memory, as QEMU leaves */
    uint32_t eflags;            /* 0x2: IF clear */
    uint32_t cr0;               /* PE and ET: protected mode, paging off; A20 is always on */
    uint16_t cs, ds;            /* flat 4 GiB 32-bit segments: code (cs) and data (ds, es, fs, gs,
                                   ss), base 0, DPL 0; the selector values QEMU uses */
    uint32_t image_start, image_end;    /* physical range the kernel's segments fill */
    uint32_t initrd_start, initrd_end;  /* physical range of the initrd, 0 and 0 when none
                                           (for Multiboot: module 0) */
};

/* Load the kernel file (kernel) into guest memory (gm), with the initrd file
 * (initrd, NULL for none) and the command line (append), and fill (bs).
 * A bzImage, or an ELF without a Multiboot header (a vmlinux), is booted by
 * the Linux 32-bit boot protocol (boot/linux.h) with the command line
 * LINUX_DEFAULT_CMDLINE, (linux_defaults), (append), and must have been
 * assembled by ring3-as.
 * For a Multiboot kernel also write the Multiboot information (command line
 * "(kernel) (append)" as QEMU gives it, the initrd as module 0, the memory
 * map of guestmem_regions). A bad, missing or unsupported file prints one
 * line naming it and what to do, and returns the exit status 2; success
 * returns 0. Never crashes on a malformed file. */
/* (extra, extra_len) are bytes appended to the initrd (4-byte aligned), such
 * as a second cpio archive; NULL and 0 for none. */
int loader_load(struct guestmem *gm, const char *kernel, const char *append,
                const char *linux_defaults, const char *initrd, const uint8_t *extra,
                size_t extra_len, struct boot_state *bs);

#endif

/* Guest physical memory (one memfd) and the guest's low 4 GiB of host address space. */
#ifndef RING3_GUESTMEM_H
#define RING3_GUESTMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GM_PAGE_SIZE 0x1000u
#define GM_4GIB      0x100000000ull

/* Limits of -m. 16 MiB: Linux i386 links itself at 16 MiB physical
 * (CONFIG_PHYSICAL_START) and the PC's first 16 MiB are the ISA DMA zone, so
 * less cannot hold a kernel with its page tables and initrd. 16 GiB: what a
 * PAE kernel (HIGHMEM64G) runs well with, its struct pages (about 144 MiB of
 * them) still fitting in its ~870 MiB of low memory; a kernel without PAE
 * uses the RAM below 4 GiB and says so at boot. */
#define GM_MIN_SIZE (16ull << 20)
#define GM_MAX_SIZE (16ull << 30)

/* RAM below 4 GiB ends at 3 GiB at most, as on QEMU's pc machine with that
 * much: with paging off (every Multiboot guest at entry) a guest reaches
 * physical memory at the same linear address, so all of it must stay clear
 * of the hole a PC opens below 4 GiB and of ring3's runtime page at the top
 * (0xFFFC0000). The rest of -m lies at 4 GiB, which only PAE paging reaches. */
#define GM_LOW_RAM_MAX 0xC0000000ull

/* The PC physical layout the guest is told about (Multiboot memory map, later
 * the e820 table). It copies what QEMU reports for `-m N` so that a test guest
 * prints the same numbers under QEMU and ring3:
 *   [0, 0x9FC00)            RAM (conventional memory)
 *   [0x9FC00, 0xA0000)      reserved (EBDA)
 *   [0xA0000, 0xF0000)      not listed (VGA and option ROMs)
 *   [0xF0000, 0x100000)     reserved (BIOS)
 *   [0x100000, size-128K)   RAM
 *   [size-128K, size)       reserved (SeaBIOS keeps tables here under QEMU;
 *                           ring3 keeps it for the monitor's own use)
 *   [0xFFFC0000, 4 GiB)     reserved (BIOS ROM; ring3's runtime page)
 *   [4 GiB, 4 GiB+high)     RAM beyond GM_LOW_RAM_MAX, when -m has any */
#define GM_LOW_FLOOR     0x10000u   /* below: the usual vm.mmap_min_addr; no guest image goes here */
#define GM_EBDA_START    0x9FC00u
#define GM_BIOS_START    0xF0000u
#define GM_HIGH_START    0x100000u
#define GM_TOP_RESERVED  0x20000u
#define GM_ROM_START     0xFFFC0000u

enum gm_region_type { GM_RAM = 1, GM_RESERVED = 2 };   /* Multiboot/e820 type numbers */

struct gm_region {
    uint64_t base, len;
    enum gm_region_type type;
};

#define GM_MAX_REGIONS 7

struct guestmem {
    int fd;              /* memfd holding guest physical memory, at its physical addresses */
    uint8_t *phys;       /* the physical window: all of it mapped once, above 4 GiB */
    uint64_t size;       /* bytes of RAM below 4 GiB, a multiple of GM_PAGE_SIZE */
    uint64_t high_size;  /* bytes of RAM at 4 GiB (0: none) */
    uint64_t low_base;   /* lowest guest linear address the host lets us map */
};

/* Set up (gm) with (size) bytes of zeroed guest RAM (the layout above), first
 * reserving the host's [vm.mmap_min_addr, 4 GiB) with a PROT_NONE mapping so
 * that no host library, heap or thread stack ever lands in the guest's
 * address space, and checking that the monitor's code, heap and stack all sit
 * above 4 GiB. Call once, early. On failure prints one line and returns the
 * process exit status (1); returns 0 on success. */
int guestmem_init(struct guestmem *gm, uint64_t size);

/* Check that (gpa) and (gpa + sz) are within guest memory (gm). Every guest
 * physical address the monitor touches passes through here or guestmem_ptr. */
static inline bool guestmem_ok(const struct guestmem *gm, uint64_t gpa, uint64_t sz)
{
    if (gpa <= gm->size)
        return sz <= gm->size - gpa;
    /* Without RAM at 4 GiB, 4 GiB is not the end of any RAM: nothing there, not even 0 bytes. */
    uint64_t high = gpa - GM_4GIB;
    return gpa >= GM_4GIB && gm->high_size && high <= gm->high_size && sz <= gm->high_size - high;
}

/* Host pointer to the (sz) bytes of guest physical memory at (gpa), or NULL
 * when any of them lie outside guest memory (gm): the caller then raises the
 * fault real hardware would, and never dereferences. */
static inline void *guestmem_ptr(const struct guestmem *gm, uint64_t gpa, uint64_t sz)
{
    return guestmem_ok(gm, gpa, sz) ? gm->phys + gpa : NULL;
}

/* Map (len) bytes of guest physical memory starting at (gpa) at guest linear
 * address (linear), with host protection (prot) (PROT_READ|PROT_WRITE|
 * PROT_EXEC), replacing whatever was there. (gpa), (linear) and (len) must be
 * page multiples, and [linear, linear+len) within [low_base, 4 GiB). Returns
 * 0, or -EINVAL for a bad range, or -errno from mmap. */
int guestmem_map(const struct guestmem *gm, uint64_t gpa, uint64_t linear,
                 uint64_t len, int prot);

/* Change the protection of the guest linear range [linear, linear+len),
 * which guestmem_map mapped, to (prot); e.g. read-only until the first
 * write, to emulate the dirty bit. Returns 0, -EINVAL or -errno. */
int guestmem_protect(const struct guestmem *gm, uint64_t linear, uint64_t len, int prot);

/* Drop the guest linear range [linear, linear+len) back to the PROT_NONE
 * reservation (not munmap, so that the hole stays reserved for the guest).
 * Returns 0, -EINVAL or -errno. */
int guestmem_unmap(const struct guestmem *gm, uint64_t linear, uint64_t len);

/* guestmem_unmap for a range no host mapping straddles, which works when the host refuses
 * guestmem_unmap because the process has as many mappings as vm.max_map_count allows, or
 * more: the range is unmapped first, and reserved again. Only for a process with no other
 * thread that maps memory (the hole would be theirs in between). Returns 0, -EINVAL or
 * -errno. */
int guestmem_unmap_all(const struct guestmem *gm, uint64_t linear, uint64_t len);

/* Fill (out) with the physical memory map the guest is told about, in
 * ascending order (see the layout above). Returns the number of regions,
 * at most GM_MAX_REGIONS. */
int guestmem_regions(const struct guestmem *gm, struct gm_region out[GM_MAX_REGIONS]);

#endif

/* Guest physical memory: one memfd, its window above 4 GiB, and the reserved low 4 GiB. */
#include "guestmem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/sysctl.h"

#define RESERVE_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

/* The host refuses unprivileged mappings below vm.mmap_min_addr, so the
 * guest's part of the address space starts there. */
static uint64_t host_mmap_min_addr(void)
{
    unsigned long long v = sysctl_number("vm/mmap_min_addr", GM_LOW_FLOOR);

    v = (v + GM_PAGE_SIZE - 1) & ~(unsigned long long)(GM_PAGE_SIZE - 1);
    return v ? v : GM_PAGE_SIZE;
}

/* The guest owns every address below 4 GiB, so the monitor must live above:
 * its code (a non-PIE binary would sit at 0x400000), its brk heap (which
 * follows the binary) and its stack. */
static int check_monitor_is_high(void)
{
    int on_stack = 0;
    void *heap = malloc(1);
    const struct { const char *what; uintptr_t addr; } parts[] = {
        { "code", (uintptr_t)&guestmem_init },
        { "heap", (uintptr_t)heap },
        { "stack", (uintptr_t)&on_stack },
    };
    int bad = -1;

    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (parts[i].addr < GM_4GIB && bad < 0)
            bad = (int)i;
    free(heap);
    if (bad < 0)
        return 0;
    fprintf(stderr,
            "ring3: the monitor's %s is at %#" PRIxPTR ", inside the low 4 GiB the guest needs; "
            "build ring3 as a position-independent executable (gcc -fPIE -pie)\n",
            parts[bad].what, parts[bad].addr);
    return 1;
}

/* Name the first host mapping inside [base, 4 GiB), for the error message
 * when the reservation cannot be made. */
static void describe_low_mapping(uint64_t base, char *out, size_t outlen)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];

    snprintf(out, outlen, "something");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long lo, hi;
        char path[256] = "";

        if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %255[^\n]", &lo, &hi, path) < 2)
            continue;
        if (lo < GM_4GIB && hi > base) {
            snprintf(out, outlen, "%s at %#llx", path[0] ? path : "an anonymous mapping", lo);
            break;
        }
    }
    fclose(f);
}

static int reserve_low(struct guestmem *gm)
{
    uint64_t base = host_mmap_min_addr();
    void *p;

    if (base >= GM_4GIB) {
        fprintf(stderr, "ring3: vm.mmap_min_addr is above 4 GiB; the guest has no room\n");
        return 1;
    }
    /* MAP_FIXED_NOREPLACE fails (EEXIST) rather than clobber anything already there. */
    p = mmap((void *)(uintptr_t)base, GM_4GIB - base, PROT_NONE,
             RESERVE_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || p != (void *)(uintptr_t)base) {
        char what[320];

        if (p != MAP_FAILED)      /* a kernel older than 4.17 took it as a hint */
            munmap(p, GM_4GIB - base);
        describe_low_mapping(base, what, sizeof(what));
        fprintf(stderr, "ring3: cannot reserve the guest's low 4 GiB: %s; %s is already there\n",
                p == MAP_FAILED ? strerror(errno) : "placed elsewhere", what);
        return 1;
    }
    gm->low_base = base;
    return 0;
}

int guestmem_init(struct guestmem *gm, uint64_t size)
{
    memset(gm, 0, sizeof(*gm));
    gm->fd = -1;
    if (size < GM_MIN_SIZE || size > GM_MAX_SIZE || size % GM_PAGE_SIZE) {
        fprintf(stderr, "ring3: guest memory of %" PRIu64 " bytes is outside 16M to 16G\n", size);
        return 1;
    }
    if (check_monitor_is_high() || reserve_low(gm))
        return 1;
    uint64_t low = size < GM_LOW_RAM_MAX ? size : GM_LOW_RAM_MAX, high = size - low;
    uint64_t span = high ? GM_4GIB + high : low;    /* the hole below 4 GiB stays sparse */
    /* Sealed at its size: another ring3 of an IKC group that maps it (ikc/peers.c) can then
     * never find it shorter than it was told, and fault under a copy. */
    gm->fd = memfd_create("ring3-guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (gm->fd < 0 || ftruncate(gm->fd, (off_t)span) < 0 ||
        fcntl(gm->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        fprintf(stderr, "ring3: cannot create %" PRIu64 " MiB of guest memory: %s\n",
                size >> 20, strerror(errno));
        return 1;
    }
    /* The reservation holds the low 4 GiB, so the kernel places this above. */
    gm->phys = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, gm->fd, 0);
    if (gm->phys == MAP_FAILED) {
        gm->phys = NULL;
        fprintf(stderr, "ring3: cannot map %" PRIu64 " MiB of guest memory: %s\n",
                size >> 20, strerror(errno));
        return 1;
    }
    if ((uintptr_t)gm->phys < GM_4GIB) {
        fprintf(stderr, "ring3: guest memory was mapped at %p, inside the guest's 4 GiB\n",
                (void *)gm->phys);
        return 1;
    }
    gm->size = low;
    gm->high_size = high;
    return 0;
}

static bool linear_ok(const struct guestmem *gm, uint64_t linear, uint64_t len)
{
    return len && !((linear | len) & (GM_PAGE_SIZE - 1)) &&
           linear >= gm->low_base && linear < GM_4GIB && len <= GM_4GIB - linear;
}

int guestmem_map(const struct guestmem *gm, uint64_t gpa, uint64_t linear,
                 uint64_t len, int prot)
{
    void *p;

    if (!linear_ok(gm, linear, len) || gpa % GM_PAGE_SIZE || !guestmem_ok(gm, gpa, len))
        return -EINVAL;
    p = mmap((void *)(uintptr_t)linear, len, prot, MAP_SHARED | MAP_FIXED, gm->fd, (off_t)gpa);
    return p == MAP_FAILED ? -errno : 0;
}

int guestmem_protect(const struct guestmem *gm, uint64_t linear, uint64_t len, int prot)
{
    if (!linear_ok(gm, linear, len))
        return -EINVAL;
    return mprotect((void *)(uintptr_t)linear, len, prot) ? -errno : 0;
}

int guestmem_unmap(const struct guestmem *gm, uint64_t linear, uint64_t len)
{
    void *p;

    if (!linear_ok(gm, linear, len))
        return -EINVAL;
    p = mmap((void *)(uintptr_t)linear, len, PROT_NONE, RESERVE_FLAGS | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? -errno : 0;
}

int guestmem_unmap_all(const struct guestmem *gm, uint64_t linear, uint64_t len)
{
    void *p;

    if (!linear_ok(gm, linear, len))
        return -EINVAL;
    /* A mapping call is refused while the count is above the limit (do_mmap), and a munmap
     * or an mmap over the middle of a mapping may leave it above (vms_gather_munmap_vmas lets
     * it go "just above its limit temporarily"); a munmap that splits nothing is not. */
    if (munmap((void *)(uintptr_t)linear, len))
        return -errno;
    p = mmap((void *)(uintptr_t)linear, len, PROT_NONE, RESERVE_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
    return p == MAP_FAILED ? -errno : p == (void *)(uintptr_t)linear ? 0 : -EEXIST;
}

int guestmem_regions(const struct guestmem *gm, struct gm_region out[GM_MAX_REGIONS])
{
    const uint64_t top = gm->size - GM_TOP_RESERVED;
    const struct gm_region map[GM_MAX_REGIONS] = {
        { 0, GM_EBDA_START, GM_RAM },
        { GM_EBDA_START, 0xA0000 - GM_EBDA_START, GM_RESERVED },
        { GM_BIOS_START, GM_HIGH_START - GM_BIOS_START, GM_RESERVED },
        { GM_HIGH_START, top - GM_HIGH_START, GM_RAM },
        { top, GM_TOP_RESERVED, GM_RESERVED },
        { GM_ROM_START, GM_4GIB - GM_ROM_START, GM_RESERVED },
        { GM_4GIB, gm->high_size, GM_RAM },
    };

    memcpy(out, map, sizeof(map));
    return gm->high_size ? GM_MAX_REGIONS : GM_MAX_REGIONS - 1;
}

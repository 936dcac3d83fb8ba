/* The kernel loader: checks a kernel file, loads its segments and initrd, and sets the boot state. */
#include "loader.h"

#include "lib/fail.h"

#include "linux.h"
#include "multiboot.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* More program headers than this is no kernel (Linux has a handful), and
 * the overlap check below is quadratic. */
#define MAX_SEGMENTS 256

/* Multiboot's machine state (section 3.2), with the selectors and stack QEMU's
 * option ROM leaves. */
#define BOOT_CS     0x08
#define BOOT_DS     0x10
#define BOOT_EFLAGS 0x00000002u     /* bit 1 is always set; IF, VM clear */
#define BOOT_CR0    0x00000011u     /* PE | ET; PG clear */

/* A piece of the file to copy into guest memory, then zero up to memsz. */
struct segment {
    uint64_t paddr, offset, filesz, memsz;
    int index;                      /* program header number, for messages */
};

/* What loader_load learns about the kernel file. */
struct kernel {
    const char *name;
    int fd;
    uint64_t size;
    uint8_t head[MB_SEARCH_LEN];    /* the first bytes of the file */
    size_t head_len;
    struct segment seg[MAX_SEGMENTS];
    int nseg;
    uint64_t entry;
    bool linux_boot;
    struct linux_image li;          /* Linux kernels: the setup header */
};

/* Read exactly (len) bytes at (off); -1 with errno (EIO for a short file). */
static int read_at(int fd, void *buf, uint64_t len, uint64_t off)
{
    uint8_t *p = buf;

    while (len) {
        ssize_t n = pread(fd, p, len > (1u << 30) ? (1u << 30) : len, (off_t)off);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

/* Open (path) as a regular file; (what) is "kernel" or "initrd". */
static int open_file(const char *what, const char *path, int *fd, uint64_t *size)
{
    struct stat st;

    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return bad_input("cannot open %s '%s': %s", what, path, strerror(errno));
    if (fstat(*fd, &st) < 0)
        return bad_input("cannot stat %s '%s': %s", what, path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return bad_input("%s '%s' is a directory; pass a file", what, path);
    if (!S_ISREG(st.st_mode))
        return bad_input("%s '%s' is not a regular file", what, path);
    *size = (uint64_t)st.st_size;
    return 0;
}

static const char *machine_name(unsigned m)
{
    static const struct { unsigned m; const char *name; } names[] = {
        { EM_X86_64, "x86-64" }, { EM_386, "i386" }, { EM_ARM, "ARM" }, { EM_AARCH64, "AArch64" },
        { EM_RISCV, "RISC-V" }, { EM_MIPS, "MIPS" }, { EM_PPC, "PowerPC" },
        { EM_PPC64, "PowerPC64" }, { EM_S390, "s390" }, { EM_SPARC, "SPARC" },
        { EM_SPARCV9, "SPARC V9" }, { EM_IA_64, "IA-64" }, { EM_68K, "m68k" }, { EM_SH, "SuperH" },
        { EM_LOONGARCH, "LoongArch" }, { EM_PARISC, "PA-RISC" }, { EM_ALPHA, "Alpha" },
        { 0x9026, "Alpha" },    /* the number Linux's Alpha toolchain uses */
    };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].m == m)
            return names[i].name;
    return NULL;
}

/* The file starts with the ELF magic but is not an i386 one: say what it is. */
static int wrong_elf(const struct kernel *k)
{
    const uint8_t *id = k->head;
    unsigned cls = id[EI_CLASS], data = id[EI_DATA], m;
    const char *name;

    if (k->head_len < 20)
        return bad_input("'%s' is truncated: an ELF header needs %zu bytes but the file has %" PRIu64,
                         k->name, sizeof(Elf32_Ehdr), k->size);
    m = data == ELFDATA2MSB ? (unsigned)id[18] << 8 | id[19] : (unsigned)id[19] << 8 | id[18];
    name = machine_name(m);
    if (m == EM_X86_64)
        return bad_input("'%s' is an x86-64 ELF; ring3 runs i386 kernels (build with ARCH=i386)",
                         k->name);
    if (name && m != EM_386)
        return bad_input("'%s' is a %s %s ELF; ring3 runs i386 kernels", k->name,
                         cls == ELFCLASS64 ? "64-bit" : "32-bit", name);
    if (!name && m != EM_386)
        return bad_input("'%s' is an ELF for machine %u, not i386; ring3 runs i386 kernels",
                         k->name, m);
    if (cls != ELFCLASS32)
        return bad_input("'%s' is an i386 ELF with a bad class (%u); the file is corrupt", k->name, cls);
    return bad_input("'%s' is a big-endian i386 ELF; the file is corrupt", k->name);
}

/* Not ELF at all: recognise what people pass by mistake. */
static int not_elf(const struct kernel *k)
{
    const uint8_t *h = k->head;
    size_t n = k->head_len;

    if (k->size == 0)
        return bad_input("'%s' is empty; pass an i386 kernel ELF such as vmlinux", k->name);
    if ((n >= 2 && h[0] == 0x1f && h[1] == 0x8b) ||
        (n >= 6 && !memcmp(h, "\xfd" "7zXZ", 6)) ||
        (n >= 4 && !memcmp(h, "\x28\xb5\x2f\xfd", 4)))
        return bad_input("'%s' is compressed; decompress it to the i386 kernel ELF first", k->name);
    return bad_input("'%s' is not an ELF file; ring3 runs i386 kernel ELFs such as vmlinux", k->name);
}

/* Read the ELF and program headers into (k)'s segment list; check them. */
static int parse_elf(struct kernel *k)
{
    Elf32_Ehdr eh;
    Elf32_Phdr *ph;
    uint64_t ph_end;

    if (k->head_len < 20 || k->head[EI_CLASS] != ELFCLASS32 || k->head[EI_DATA] != ELFDATA2LSB ||
        (k->head[18] | k->head[19] << 8) != EM_386)
        return wrong_elf(k);
    if (k->head_len < sizeof(eh))
        return bad_input("'%s' is truncated: an ELF header needs %zu bytes but the file has %" PRIu64,
                         k->name, sizeof(eh), k->size);
    memcpy(&eh, k->head, sizeof(eh));
    switch (eh.e_type) {
    case ET_EXEC: break;
    case ET_REL: return bad_input("'%s' is an object file (ET_REL), not a linked kernel", k->name);
    case ET_DYN:
        return bad_input("'%s' is position-independent (ET_DYN); link the kernel at a fixed "
                         "address (ET_EXEC)", k->name);
    case ET_CORE: return bad_input("'%s' is a core dump, not a kernel", k->name);
    default: return bad_input("'%s' is not an executable ELF (type %u)", k->name, eh.e_type);
    }
    if (eh.e_phnum == 0)
        return bad_input("'%s' has no program headers; there is nothing to load", k->name);
    if (eh.e_phentsize != sizeof(Elf32_Phdr))
        return bad_input("'%s' has a corrupt ELF header (program header size %u, not %zu)",
                         k->name, eh.e_phentsize, sizeof(Elf32_Phdr));
    ph_end = (uint64_t)eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf32_Phdr);
    if (ph_end > k->size)
        return bad_input("'%s' is truncated: its program headers end at byte %" PRIu64
                         " but the file has %" PRIu64, k->name, ph_end, k->size);
    ph = calloc(eh.e_phnum, sizeof(*ph));
    if (!ph || read_at(k->fd, ph, (uint64_t)eh.e_phnum * sizeof(*ph), eh.e_phoff) < 0) {
        free(ph);
        return bad_input("cannot read kernel '%s': %s", k->name, strerror(errno));
    }
    for (int i = 0; i < eh.e_phnum; i++) {
        struct segment *s = &k->seg[k->nseg];

        if (ph[i].p_type == PT_INTERP || ph[i].p_type == PT_DYNAMIC) {
            free(ph);
            return bad_input("'%s' is a dynamically linked program, not a kernel", k->name);
        }
        if (ph[i].p_type != PT_LOAD || ph[i].p_memsz == 0)
            continue;
        if (k->nseg == MAX_SEGMENTS) {
            free(ph);
            return bad_input("'%s' has more than %d loadable segments; no kernel has so many",
                             k->name, MAX_SEGMENTS);
        }
        *s = (struct segment){ ph[i].p_paddr, ph[i].p_offset, ph[i].p_filesz, ph[i].p_memsz, i };
        k->nseg++;
    }
    /* e_entry is physical in a Linux vmlinux (phys_startup_32) and in most
     * Multiboot kernels; in a kernel linked high it is virtual, and like GRUB
     * we translate it through the segment that holds it. */
    k->entry = UINT64_MAX;
    for (int j = 0; j < k->nseg && k->entry == UINT64_MAX; j++)
        if (eh.e_entry >= k->seg[j].paddr && eh.e_entry - k->seg[j].paddr < k->seg[j].memsz)
            k->entry = eh.e_entry;
    for (int i = 0; i < eh.e_phnum && k->entry == UINT64_MAX; i++)
        if (ph[i].p_type == PT_LOAD && eh.e_entry >= ph[i].p_vaddr &&
            eh.e_entry - ph[i].p_vaddr < ph[i].p_memsz)
            k->entry = (uint64_t)eh.e_entry - ph[i].p_vaddr + ph[i].p_paddr;
    free(ph);
    if (k->nseg == 0)
        return bad_input("'%s' has no loadable segments; there is nothing to load", k->name);
    if (k->entry == UINT64_MAX)
        return bad_input("'%s' has its entry point 0x%x outside every loadable segment; "
                         "the file is corrupt", k->name, eh.e_entry);
    return 0;
}

/* A non-ELF Multiboot kernel whose header gives the load addresses
 * (the "a.out kludge", flag 16): one segment. */
static int parse_aout_kludge(struct kernel *k, const struct mb_header *h)
{
    uint64_t file_off, load_size, mem_size;

    if (h->offset + 32 > k->head_len)
        return bad_input("'%s' is truncated inside its Multiboot header", k->name);
    if (h->header_addr < h->load_addr || h->header_addr - h->load_addr > h->offset)
        return bad_input("'%s' has a Multiboot header whose header_addr 0x%x and load_addr 0x%x "
                         "do not fit the file", k->name, h->header_addr, h->load_addr);
    file_off = h->offset - (h->header_addr - h->load_addr);
    if (h->load_end_addr == 0) {
        load_size = k->size - file_off;
    } else if (h->load_end_addr < h->load_addr) {
        return bad_input("'%s' has a Multiboot header with load_end_addr 0x%x below load_addr 0x%x",
                         k->name, h->load_end_addr, h->load_addr);
    } else {
        load_size = h->load_end_addr - h->load_addr;
    }
    mem_size = load_size;
    if (h->bss_end_addr) {
        if (h->bss_end_addr < h->load_addr + load_size)
            return bad_input("'%s' has a Multiboot header with bss_end_addr 0x%x inside the image",
                             k->name, h->bss_end_addr);
        mem_size = h->bss_end_addr - h->load_addr;
    }
    if (h->entry_addr < h->load_addr || h->entry_addr - h->load_addr >= mem_size)
        return bad_input("'%s' has its Multiboot entry_addr 0x%x outside the image it loads",
                         k->name, h->entry_addr);
    k->seg[0] = (struct segment){ h->load_addr, file_off, load_size, mem_size, 0 };
    k->nseg = 1;
    k->entry = h->entry_addr;
    return 0;
}

static uint64_t mib_up(uint64_t bytes)
{
    return (bytes + (1u << 20) - 1) >> 20;
}

/* Everything but the size of guest memory: inside the file, above 1 MiB,
 * below 4 GiB, no two overlapping. Sets the image range. */
static int check_segments(const struct kernel *k, uint64_t *start, uint64_t *end)
{
    *start = UINT64_MAX;
    *end = 0;
    for (int i = 0; i < k->nseg; i++) {
        const struct segment *s = &k->seg[i];

        if (s->filesz > s->memsz)
            return bad_input("'%s' is corrupt: segment %d has more file bytes (%" PRIu64
                             ") than memory bytes (%" PRIu64 ")", k->name, s->index, s->filesz, s->memsz);
        if (s->offset + s->filesz > k->size)
            return bad_input("'%s' is truncated: segment %d needs file bytes up to %" PRIu64
                             " but the file has %" PRIu64, k->name, s->index,
                             s->offset + s->filesz, k->size);
        if (s->paddr + s->memsz > GM_4GIB)
            return bad_input("'%s': segment at 0x%" PRIx64 " runs past 4 GiB; the file is corrupt",
                             k->name, s->paddr);
        if (s->paddr < LOADER_MIN_ADDR)
            return bad_input("'%s': segment at 0x%" PRIx64 " lies below 1 MiB, which holds the PC's "
                             "reserved areas and ring3's boot data; link the kernel at 1 MiB or above",
                             k->name, s->paddr);
        for (int j = 0; j < i; j++) {
            const struct segment *o = &k->seg[j];

            if (s->paddr < o->paddr + o->memsz && o->paddr < s->paddr + s->memsz)
                return bad_input("'%s' is corrupt: segments %d and %d overlap at 0x%" PRIx64,
                                 k->name, o->index, s->index,
                                 s->paddr > o->paddr ? s->paddr : o->paddr);
        }
        if (s->paddr < *start)
            *start = s->paddr;
        if (s->paddr + s->memsz > *end)
            *end = s->paddr + s->memsz;
    }
    return 0;
}

/* Open the kernel, read its head, and parse it into segments. */
static int parse_kernel(struct kernel *k, struct mb_header *mb, bool *multiboot)
{
    int err = open_file("kernel", k->name, &k->fd, &k->size);

    if (err)
        return err;
    k->head_len = k->size < sizeof(k->head) ? (size_t)k->size : sizeof(k->head);
    if (read_at(k->fd, k->head, k->head_len, 0) < 0)
        return bad_input("cannot read kernel '%s': %s", k->name, strerror(errno));
    *multiboot = multiboot_find(k->head, k->head_len, mb) == 0;
    if (linux_is_bzimage(k->head, k->head_len)) {
        /* A bzImage carries a Multiboot header of its own on no arch; the setup header decides. */
        *multiboot = false;
        k->linux_boot = true;
        if ((err = linux_parse_bzimage(k->name, k->head, k->head_len, k->size, &k->li)))
            return err;
        k->seg[0] = (struct segment){ LINUX_BZIMAGE_LOAD, k->li.pm_offset, k->li.pm_size,
                                      k->li.pm_size, 0 };
        k->nseg = 1;
        k->entry = LINUX_BZIMAGE_LOAD;
        return 0;
    }
    if (k->head_len >= SELFMAG && !memcmp(k->head, ELFMAG, SELFMAG))
        err = parse_elf(k);
    else if (*multiboot && (mb->flags & MB_FLAG_AOUT_KLUDGE))
        err = parse_aout_kludge(k, mb);
    else if (*multiboot)
        return bad_input("'%s' is not an ELF file and its Multiboot header gives no load addresses "
                         "(flag 16); link it as an i386 ELF", k->name);
    else
        return not_elf(k);
    if (!err && *multiboot &&
        (mb->flags & MB_FLAGS_REQUIRED & ~(MB_FLAG_PAGE_ALIGN | MB_FLAG_MEMINFO | MB_FLAG_VIDEO)))
        return bad_input("'%s' requires Multiboot features ring3 does not provide (header flags 0x%x)",
                         k->name, mb->flags);
    if (!err && !*multiboot) {
        k->linux_boot = true;
        linux_vmlinux_image(&k->li);
    }
    return err;
}

static int load_segments(struct guestmem *gm, const struct kernel *k)
{
    for (int i = 0; i < k->nseg; i++) {
        const struct segment *s = &k->seg[i];
        uint8_t *dst = guestmem_ptr(gm, s->paddr, s->memsz);

        if (!dst)
            return bad_input("'%s': segment at 0x%" PRIx64 " is outside guest memory", k->name, s->paddr);
        if (read_at(k->fd, dst, s->filesz, s->offset) < 0)
            return bad_input("cannot read kernel '%s': %s", k->name, strerror(errno));
        memset(dst + s->filesz, 0, s->memsz - s->filesz);
    }
    return 0;
}

/* The initrd must be a cpio archive, plain or compressed (Linux unpacks nothing else). */
static int check_initrd_head(const char *name, int fd, uint64_t size)
{
    uint8_t head[8];
    size_t n = size < sizeof(head) ? (size_t)size : sizeof(head);

    if (read_at(fd, head, n, 0) < 0)
        return bad_input("cannot read initrd '%s': %s", name, strerror(errno));
    return linux_check_initrd(name, head, n);
}

/* Guest memory cannot hold [image, total): say how much would. */
static int too_big(const struct kernel *k, const char *initrd, uint64_t usable, uint64_t total)
{
    /* The top GM_TOP_RESERVED bytes are never the kernel's, so count them. The
     * image and the initrd go in the RAM below 4 GiB, whatever -m gives above. */
    uint64_t need = mib_up(total + GM_TOP_RESERVED);
    const uint64_t max = GM_LOW_RAM_MAX >> 20;
    const struct segment *s = NULL;

    if (need < GM_MIN_SIZE >> 20)
        need = GM_MIN_SIZE >> 20;
    for (int i = 0; i < k->nseg && !s; i++)
        if (k->seg[i].paddr + k->seg[i].memsz > usable)
            s = &k->seg[i];
    if (s && need > max)
        return bad_input("'%s': segment at 0x%" PRIx64 " needs %" PRIu64 " MiB of guest memory, "
                         "more than the %" PRIu64 " below 4 GiB; link the kernel lower",
                         k->name, s->paddr, need, max);
    if (s)
        return bad_input("'%s': segment at 0x%" PRIx64 " needs %" PRIu64 " MiB of guest memory; "
                         "use -m %" PRIu64 "M or more", k->name, s->paddr, need, need);
    if (initrd && need > max)
        return bad_input("initrd '%s' is too large: with the kernel it needs %" PRIu64 " MiB of guest "
                         "memory, more than the %" PRIu64 " below 4 GiB", initrd, need, max);
    if (initrd)
        return bad_input("'%s' with initrd '%s' needs %" PRIu64 " MiB of guest memory; use -m %"
                         PRIu64 "M or more", k->name, initrd, need, need);
    return bad_input("'%s' with its boot data needs %" PRIu64 " MiB of guest memory; use -m %"
                     PRIu64 "M or more", k->name, need, need);
}

int loader_load(struct guestmem *gm, const char *kernel, const char *append,
                const char *linux_defaults, const char *initrd, const uint8_t *extra,
                size_t extra_len, struct boot_state *bs)
{
    struct kernel *k = calloc(1, sizeof(*k));
    struct mb_header mb;
    struct mb_layout l = { .kernel = kernel, .append = append ? append : "", .initrd = initrd };
    uint64_t start = 0, end = 0, usable = gm->size - GM_TOP_RESERVED, initrd_size = 0;
    uint64_t initrd_addr = 0, total, file_size;
    char *cmdline = NULL;
    int initrd_fd = -1, err;
    bool multiboot = false;

    if (!k)
        return bad_input("out of memory");
    k->name = kernel;
    k->fd = -1;
    memset(bs, 0, sizeof(*bs));
    err = parse_kernel(k, &mb, &multiboot);
    if (!err)
        err = check_segments(k, &start, &end);
    if (!err && initrd)
        err = open_file("initrd", initrd, &initrd_fd, &initrd_size);
    if (err)
        goto out;
    file_size = initrd_size;
    if (initrd && extra_len)
        initrd_size = ((initrd_size + 3) & ~3ull) + extra_len;
    if (!multiboot && k->linux_boot) {
        size_t len = strlen(LINUX_DEFAULT_CMDLINE) + strlen(linux_defaults) + strlen(l.append) + 3;

        if (!(cmdline = malloc(len))) {
            err = bad_input("out of memory");
            goto out;
        }
        snprintf(cmdline, len, "%s %s%s%s", LINUX_DEFAULT_CMDLINE, linux_defaults,
                 *l.append ? " " : "", l.append);
        l.append = cmdline;
    }

    /* Where everything goes, then whether guest memory holds it. */
    if (multiboot) {
        l.image_start = start;
        l.image_end = end;
        l.initrd_size = initrd_size > UINT32_MAX ? UINT32_MAX : (uint32_t)initrd_size;
        multiboot_layout(&l);
        total = l.end > end ? l.end : end;
        initrd_addr = l.module_addr;
    } else {
        err = linux_check_cmdline(&k->li, l.append);
        if (!err && initrd)
            err = check_initrd_head(initrd, initrd_fd, file_size);
        if (err)
            goto out;
        /* A bzImage decompresses the kernel to pref_address and needs init_size there. */
        total = end;
        if (k->li.pref_address + k->li.init_size > total)
            total = k->li.pref_address + k->li.init_size;
        if (initrd) {
            initrd_addr = linux_initrd_addr(&k->li, initrd_size, usable, total);
            if (!initrd_addr)
                /* too_big says how much more is needed: the initrd starts on a page */
                total = ((total + GM_PAGE_SIZE - 1) & ~(uint64_t)(GM_PAGE_SIZE - 1)) + initrd_size;
        }
    }
    if (total > usable) {
        err = too_big(k, initrd, usable, total);
        goto out;
    }
    /* RAM holds it, but not below the kernel's initrd_addr_max ("the highest address that may
     * be occupied by the initial ramdisk", boot.rst): 0 is no address to put it at. */
    if (!multiboot && initrd && !initrd_addr) {
        err = bad_input("initrd '%s' does not fit between the kernel '%s' and the highest address "
                        "it takes an initrd at (initrd_addr_max 0x%x)", initrd, kernel,
                        k->li.initrd_addr_max);
        goto out;
    }

    err = load_segments(gm, k);
    if (!err && initrd) {
        uint8_t *dst = guestmem_ptr(gm, initrd_addr, initrd_size);

        if (!dst || read_at(initrd_fd, dst, file_size, 0) < 0)
            err = bad_input("cannot read initrd '%s': %s", initrd, dst ? strerror(errno) : "too large");
        else if (extra_len)
            memcpy(dst + initrd_size - extra_len, extra, extra_len);
    }
    if (!err && multiboot && multiboot_write_info(gm, &l, bs) < 0)
        err = bad_input("'%s': the Multiboot information does not fit in guest memory", kernel);
    if (!err && k->linux_boot && !linux_has_ring3_sites(guestmem_ptr(gm, start, end - start), end - start))
        err = bad_input("'%s' was not assembled by ring3-as (it has no ring3 call sites); build it "
                        "with 'make guest-kernel', or pass CC=\"gcc -B build/asbin/\" to Kbuild", kernel);
    if (err)
        goto out;

    bs->multiboot = multiboot;
    bs->linux_boot = k->linux_boot;
    bs->entry = (uint32_t)k->entry;
    bs->esp = MB_STACK_TOP;
    bs->eflags = BOOT_EFLAGS;
    bs->cr0 = BOOT_CR0;
    bs->cs = BOOT_CS;
    bs->ds = BOOT_DS;
    bs->image_start = (uint32_t)start;
    bs->image_end = (uint32_t)end;
    if (initrd) {
        bs->initrd_start = (uint32_t)initrd_addr;
        bs->initrd_end = (uint32_t)(initrd_addr + initrd_size);
    }
    if (k->linux_boot)
        linux_write_boot(gm, &k->li, l.append, bs->initrd_start, (uint32_t)initrd_size,
                         (uint32_t)k->entry, bs);
out:
    free(cmdline);
    if (k->fd >= 0)
        close(k->fd);
    if (initrd_fd >= 0)
        close(initrd_fd);
    free(k);
    return err;
}

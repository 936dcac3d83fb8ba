/* What the fuzz targets share (guest.h). */
#include "guest.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void fuzz_guestmem(struct guestmem *gm, uint64_t size)
{
    static uint8_t *ram;
    static uint64_t ram_size;
    if (!ram) {
        uint8_t *area = mmap(NULL, size + 2 * GM_PAGE_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (area == MAP_FAILED || mprotect(area + GM_PAGE_SIZE, size, PROT_READ | PROT_WRITE) != 0) {
            perror("fuzz_guestmem");
            abort();
        }
        ram = area + GM_PAGE_SIZE;
        ram_size = size;
    }
    /* Zeroed again by dropping its pages (a private anonymous mapping reads back zeros): only
     * the pages the last input touched cost anything, where a memset would cost all of them. */
    if (size != ram_size || madvise(ram, size, MADV_DONTNEED))
        abort();
    *gm = (struct guestmem){ .fd = -1, .phys = ram, .size = size };
}

size_t fuzz_bytes(struct fuzz_input *in, void *dst, size_t n)
{
    size_t k = n < in->left ? n : in->left;
    memcpy(dst, in->p, k);
    memset((uint8_t *)dst + k, 0, n - k);
    in->p += k;
    in->left -= k;
    return k;
}

uint8_t fuzz_u8(struct fuzz_input *in)
{
    uint8_t v;
    fuzz_bytes(in, &v, 1);
    return v;
}

uint16_t fuzz_u16(struct fuzz_input *in)
{
    uint16_t v;
    fuzz_bytes(in, &v, 2);
    return v;
}

uint32_t fuzz_u32(struct fuzz_input *in)
{
    uint32_t v;
    fuzz_bytes(in, &v, 4);
    return v;
}

static FILE *saved_stderr;
static char *caught;
static size_t caught_len;

void fuzz_stderr_catch(void)
{
    free(caught);
    caught = NULL;
    saved_stderr = stderr;
    if (!(stderr = open_memstream(&caught, &caught_len)))
        abort();
}

const char *fuzz_stderr_release(size_t *len)
{
    fclose(stderr);
    stderr = saved_stderr;
    *len = caught_len;
    return caught;
}

int fuzz_sealed_ram(uint64_t size, uint8_t **map)
{
    int fd = memfd_create("fuzz-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
        abort();
    *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*map == MAP_FAILED)
        abort();
    return fd;
}

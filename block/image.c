/* A raw disk image: open, QEMU-compatible locking, sector I/O, and the snapshot=on overlay.
 *
 * Locking follows QEMU's file driver (block/file-posix.c), so that a ring3
 * and a QEMU refuse each other as two QEMUs do: open file description locks
 * (F_OFD_SETLK, which belong to the open file and go with it, even on
 * kill -9) on single bytes. A user holds a shared lock on byte 100 + p for
 * each permission p it uses, and on byte 200 + p for each permission it does
 * not let others have. Permissions: 0 consistent read, 1 write, 2 write
 * unchanged, 3 resize. Another user's lock is seen with F_OFD_GETLK.
 */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_PERM_BASE   100
#define LOCK_SHARED_BASE 200
#define PERM_CONSISTENT_READ 0
#define PERM_WRITE           1
#define PERM_WRITE_UNCHANGED 2
#define PERM_RESIZE          3

#define MAX_IOV 1024

struct disk_image {
    int fd;             /* the image */
    int overlay_fd;     /* snapshot=on: the overlay, else -1 */
    uint8_t *written;   /* snapshot=on: one bit per sector, set once the overlay holds it */
    uint64_t size;
    bool writable;
};

static int lock_byte(int fd, off_t byte)
{
    struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
    return fcntl(fd, F_OFD_SETLK, &fl);
}

/* True when another open file holds a lock on (byte). */
static bool locked_by_other(int fd, off_t byte)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
    return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

/* A writer uses consistent read, write and write-unchanged, and shares
 * neither write nor resize; a reader (readonly=on, snapshot=on) uses
 * consistent read and does not share write, as QEMU's devices do. Locks
 * first, then looks for a conflict, so that two racing openers cannot both
 * miss each other. */
static int lock_image(int fd, bool write, const char *path, char *err, size_t errlen)
{
    const int use_w[] = { PERM_CONSISTENT_READ, PERM_WRITE, PERM_WRITE_UNCHANGED };
    const int unshared_w[] = { PERM_WRITE, PERM_RESIZE };
    const int use_r[] = { PERM_CONSISTENT_READ };
    const int unshared_r[] = { PERM_WRITE };
    const int *use = write ? use_w : use_r, *unshared = write ? unshared_w : unshared_r;
    size_t nuse = write ? 3 : 1, nunshared = write ? 2 : 1;

    for (size_t i = 0; i < nuse; i++)
        if (lock_byte(fd, LOCK_PERM_BASE + use[i]))
            goto fail;
    for (size_t i = 0; i < nunshared; i++)
        if (lock_byte(fd, LOCK_SHARED_BASE + unshared[i]))
            goto fail;
    for (size_t i = 0; i < nuse; i++)
        if (locked_by_other(fd, LOCK_SHARED_BASE + use[i]))
            goto busy;
    for (size_t i = 0; i < nunshared; i++)
        if (locked_by_other(fd, LOCK_PERM_BASE + unshared[i]))
            goto busy;
    return 0;
busy:
    snprintf(err, errlen, "--disk '%s': the image is in use by another ring3 or QEMU; "
             "stop it, or add snapshot=on to both", path);
    return -1;
fail:
    snprintf(err, errlen, "--disk '%s': cannot lock the image: %s", path, strerror(errno));
    return -1;
}

/* snapshot=on: an unnamed file in $TMPDIR (else /var/tmp, as QEMU), gone when closed. */
static int open_overlay(struct disk_image *d, char *err, size_t errlen)
{
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || *dir == '\0')
        dir = "/var/tmp";
    d->overlay_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (d->overlay_fd < 0 || ftruncate(d->overlay_fd, (off_t)d->size)) {
        snprintf(err, errlen, "snapshot=on: cannot make an overlay file in %s: %s; set TMPDIR "
                 "to a writable directory", dir, strerror(errno));
        return -1;
    }
    d->written = calloc(d->size / DISK_SECTOR / 8 + 1, 1);
    if (d->written == NULL) {
        snprintf(err, errlen, "snapshot=on: out of memory");
        return -1;
    }
    return 0;
}

struct disk_image *disk_image_open(const struct disk_spec *spec, char *err, size_t errlen)
{
    struct disk_image *d = calloc(1, sizeof *d);
    struct stat st;
    if (d == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->overlay_fd = -1;
    d->writable = !spec->readonly;
    bool write_file = d->writable && !spec->snapshot;
    d->fd = open(spec->path, (write_file ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (d->fd < 0) {
        snprintf(err, errlen, "--disk '%s': %s; give a raw disk image file%s", spec->path,
                 strerror(errno), errno == EACCES || errno == EROFS ?
                 " you may write, or add readonly=on or snapshot=on" : "");
        goto fail;
    }
    if (fstat(d->fd, &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--disk '%s': not a regular file; give a raw disk image file",
                 spec->path);
        goto fail;
    }
    d->size = (uint64_t)st.st_size;
    if (d->size == 0 || d->size % DISK_SECTOR) {
        snprintf(err, errlen, "--disk '%s': its size, %llu bytes, is not a positive multiple "
                 "of 512; a raw image holds whole sectors (truncate -s to fix)", spec->path,
                 (unsigned long long)d->size);
        goto fail;
    }
    if (lock_image(d->fd, write_file, spec->path, err, errlen))
        goto fail;
    if (spec->snapshot && d->writable && open_overlay(d, err, errlen))
        goto fail;
    return d;
fail:
    disk_image_close(d);
    return NULL;
}

void disk_image_close(struct disk_image *d)
{
    if (d == NULL)
        return;
    if (d->fd >= 0)
        close(d->fd);
    if (d->overlay_fd >= 0)
        close(d->overlay_fd);
    free(d->written);
    free(d);
}

uint64_t disk_image_size(const struct disk_image *d)
{
    return d->size;
}

bool disk_image_writable(const struct disk_image *d)
{
    return d->writable;
}

/* The (len) bytes of (iov) that start (skip) bytes in, as an iovec array in (out). */
static int iov_slice(const struct iovec *iov, int iovcnt, uint64_t skip, uint64_t len,
                     struct iovec out[MAX_IOV])
{
    int n = 0;
    for (int i = 0; i < iovcnt && len; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        uint64_t take = iov[i].iov_len - skip;
        if (take > len)
            take = len;
        if (n == MAX_IOV)
            return -1;
        out[n++] = (struct iovec){ (uint8_t *)iov[i].iov_base + skip, take };
        len -= take;
        skip = 0;
    }
    return n;
}

/* preadv or pwritev of all (len) bytes, (skip) bytes into (iov), at (off) of (fd). */
static int transfer(int fd, bool write, const struct iovec *iov, int iovcnt, uint64_t skip,
                    uint64_t off, uint64_t len)
{
    struct iovec part[MAX_IOV];
    while (len) {
        int n = iov_slice(iov, iovcnt, skip, len, part);
        if (n < 0)
            return -EINVAL;
        ssize_t r = write ? pwritev(fd, part, n, (off_t)off) : preadv(fd, part, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -EIO;    /* the file shrank under us */
        skip += (uint64_t)r;
        off += (uint64_t)r;
        len -= (uint64_t)r;
    }
    return 0;
}

static bool sector_written(const struct disk_image *d, uint64_t s)
{
    return d->written[s / 8] >> (s % 8) & 1;
}

int disk_image_read(struct disk_image *d, const struct iovec *iov, int iovcnt,
                    uint64_t off, uint64_t len)
{
    if (d->written == NULL)
        return transfer(d->fd, false, iov, iovcnt, 0, off, len);
    /* Runs of sectors that come from the same file. */
    uint64_t done = 0;
    while (done < len) {
        uint64_t s = (off + done) / DISK_SECTOR, run = 0;
        bool from_overlay = sector_written(d, s);
        while (done + run < len && sector_written(d, s + run / DISK_SECTOR) == from_overlay)
            run += DISK_SECTOR;
        int r = transfer(from_overlay ? d->overlay_fd : d->fd, false, iov, iovcnt, done,
                         off + done, run);
        if (r)
            return r;
        done += run;
    }
    return 0;
}

int disk_image_write(struct disk_image *d, const struct iovec *iov, int iovcnt,
                     uint64_t off, uint64_t len)
{
    if (!d->writable)
        return -EROFS;
    if (d->written == NULL)
        return transfer(d->fd, true, iov, iovcnt, 0, off, len);
    int r = transfer(d->overlay_fd, true, iov, iovcnt, 0, off, len);
    if (r)
        return r;
    for (uint64_t s = off / DISK_SECTOR; s < (off + len) / DISK_SECTOR; s++)
        d->written[s / 8] |= (uint8_t)(1u << (s % 8));
    return 0;
}

int disk_image_flush(struct disk_image *d)
{
    if (d->written != NULL || !d->writable)
        return 0;
    return fdatasync(d->fd) ? -errno : 0;
}

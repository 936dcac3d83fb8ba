/* A raw disk image on the host: opened and locked as QEMU does, read and written by sector, optionally through a throw-away overlay. */
#ifndef RING3_BLOCK_IMAGE_H
#define RING3_BLOCK_IMAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define DISK_SECTOR 512u

struct disk_spec {
    const char *path;       /* NULL for a disk another ring3 serves (served) */
    bool readonly;          /* readonly=on: the guest sees a read-only disk */
    bool snapshot;          /* snapshot=on: writes go to a temporary overlay, dropped at exit */
    const char *served;     /* ikc:NAME: the disk NAME a member of the IKC group serves */
    const char *export_name;    /* export=NAME: serve the image to the group, not this guest */
};

struct disk_image;

/* Open the image (spec) names and take QEMU's image locks on it. On failure
 * writes one line (what is wrong and what to do) into (err) and returns NULL. */
struct disk_image *disk_image_open(const struct disk_spec *spec, char *err, size_t errlen);

/* Close the image (its locks go with it; an overlay is deleted). */
void disk_image_close(struct disk_image *d);

/* Its size in bytes, a multiple of DISK_SECTOR. */
uint64_t disk_image_size(const struct disk_image *d);

/* False for readonly=on: the guest must not write. */
bool disk_image_writable(const struct disk_image *d);

/* Read or write the (len) bytes at byte (off) to or from (iov)/(iovcnt),
 * which hold exactly (len) bytes; (off) and (len) are sector multiples
 * inside the image. Returns 0 or -errno. */
int disk_image_read(struct disk_image *d, const struct iovec *iov, int iovcnt,
                    uint64_t off, uint64_t len);
int disk_image_write(struct disk_image *d, const struct iovec *iov, int iovcnt,
                     uint64_t off, uint64_t len);

/* Make everything written so far stable (fdatasync); nothing to do for an
 * overlay, which does not outlive the run. Returns 0 or -errno. */
int disk_image_flush(struct disk_image *d);

#endif

/* A disk one member of an IKC group serves to another (SHIMOS's virtual block device):
 * --disk FILE,export=NAME on the serving side (block/export.c), --disk ikc:NAME on the using side
 * (block/remote.c), whose guest sees it as a virtio disk.
 *
 * The serving monitor holds the image (and QEMU's lock on it); its own guest does not see the
 * disk. The user's requests name its guest's buffers in pieces (page transfer): the server
 * reads and writes the image straight into and out of the user's guest RAM, with no copy
 * between monitors, and answers. One user at a time: a second one is refused. A write is
 * answered once the image has it (in the host's page cache, as a local disk's), a flush once it
 * is on stable storage: a kill -9 of either side loses nothing the guest synced.
 */
#ifndef RING3_BLOCK_SERVED_H
#define RING3_BLOCK_SERVED_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ikc/channel.h"
#include "memory/guestmem.h"

#include "image.h"

/* The packets, on IKC_Q_BLK (user to server) and IKC_Q_BLK_DONE (server to user):
 *   SERVED_ATTACH    param[0..3]: the disk's name (32 bytes, NUL-padded), param[4]: 1 to write
 *   SERVED_ATTACHED  param[0]: its size in bytes, param[1]: 1 when the user may write
 *   SERVED_REFUSED   param[0]: SERVED_BUSY (param[1] the member using it, param[2] its pid),
 *                    SERVED_NO_DISK, or SERVED_READONLY
 *   SERVED_READ, SERVED_WRITE  param[0]: the request's id, param[1]: its byte offset,
 *                    param[2]: its length, param[3]: its piece count; data: their list
 *   SERVED_FLUSH     param[0]: the id
 *   SERVED_DONE      param[0]: the id, param[1]: 0 or an errno
 */
enum { SERVED_ATTACH = 1, SERVED_ATTACHED, SERVED_REFUSED, SERVED_READ, SERVED_WRITE,
       SERVED_FLUSH, SERVED_DONE };
enum { SERVED_BUSY = 1, SERVED_NO_DISK, SERVED_READONLY };

#define SERVED_MAX_PIECES 256u      /* a request's pieces: a virtqueue's chain at most */

/* ---- the serving side ---- */

struct disk_export;

/* Serve (image) as (name) to group (group), this guest's RAM being (gm). NULL with (err). */
struct disk_export *disk_export_new(const char *group, const char *name, struct disk_image *image,
                                    const struct guestmem *gm, char *err, size_t errlen);
void disk_export_fill(struct disk_export *e, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns);
void disk_export_dispatch(struct disk_export *e);
void disk_export_free(struct disk_export *e);

/* ---- the using side ---- */

struct disk_remote;

/* Told when request (id) is done: (err) 0 or an errno. */
typedef void disk_remote_done_fn(void *opaque, uint32_t id, int err);

/* Attach disk (name), served in group (group), for this guest with RAM (gm): waits (at most 10 s)
 * for the server to answer. NULL with (err): no such disk, no answer, in use by another member. */
struct disk_remote *disk_remote_open(const char *group, const char *name, bool readonly,
                                     const struct guestmem *gm, char *err, size_t errlen);
uint64_t disk_remote_size(const struct disk_remote *r);
int disk_remote_server(const struct disk_remote *r);   /* the member serving it, -1 once gone */
bool disk_remote_writable(const struct disk_remote *r);
void disk_remote_attach(struct disk_remote *r, disk_remote_done_fn *done, void *opaque);

/* Read or write (len) bytes at byte (off) into or from (iov, n), pieces of the guest's RAM; or
 * (cmd SERVED_FLUSH) make everything written stable. 0: sent, (done) follows; else an errno
 * now (the server is gone, or the ring is full). */
int disk_remote_submit(struct disk_remote *r, unsigned cmd, uint64_t off, uint64_t len,
                       const struct iovec *iov, unsigned n, uint32_t id);

void disk_remote_fill(struct disk_remote *r, struct pollfd *pfd, unsigned *n, unsigned max,
                      uint64_t *deadline_ns);
void disk_remote_dispatch(struct disk_remote *r);
void disk_remote_free(struct disk_remote *r);

#endif

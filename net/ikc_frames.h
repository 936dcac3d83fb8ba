/* The frames of the IKC switch (net/ikc.c) as packets on the channel (ikc/channel.h): what one
 * member's port sends another's. */
#ifndef RING3_NET_IKC_FRAMES_H
#define RING3_NET_IKC_FRAMES_H

#include <stdint.h>

#include "ikc/channel.h"

/* On IKC_Q_NET:
 *   IKC_FRAME: a frame in the sender's RAM, to be copied from there and answered with IKC_DONE.
 *     param[0] its id, param[1] its length, param[2..3] its virtio-net header (10 bytes, the
 *     wire's little-endian form), param[4] its piece count, data the bulk offset of its pieces
 *     (struct ikc_piece[count], the sender's units, freed by the receiver).
 *   IKC_FRAME_COPY: a frame in bulk units (data, param[1] bytes), freed by the receiver; no
 *     answer. param[2..3] as above.
 * On IKC_Q_NET_DONE:
 *   IKC_DONE: frame param[0] is copied (or dropped): its pieces may be reused. */
enum { IKC_FRAME = 1, IKC_FRAME_COPY = 2, IKC_DONE = 3 };

/* A frame's pieces fit one bulk unit (IKC_PIECES_PER_UNIT); a longer chain goes as
 * IKC_FRAME_COPY. */

#endif

/* gdb's remote serial protocol on one connection: packets, acknowledgements, Ctrl-C (rsp.c).
 *
 * A packet is `$data#cc`, cc the two hex digits of the sum of data's bytes modulo 256; the
 * receiver answers `+`, or `-` to ask for it again. `}` escapes a `#`, `$`, `}` or `*` as that
 * byte xor 0x20. A lone 0x03 byte is an interrupt request (gdb's Ctrl-C). (GDB manual,
 * "Remote Protocol": Overview, Packet Acknowledgment, Interrupts.) Knows nothing of the guest.
 */
#ifndef RING3_GDB_RSP_H
#define RING3_GDB_RSP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RSP_MAX 16384                   /* the PacketSize we offer; longer packets are refused */

struct rsp {
    int fd;                             /* the connection, -1: none */
    uint8_t in[RSP_MAX];                /* a packet being received: its data */
    size_t len;
    enum { RSP_IDLE, RSP_DATA, RSP_SUM1, RSP_SUM2 } state;
    uint8_t sum, want;
    bool overflow;                      /* more than RSP_MAX bytes of data: answered `-` */
    bool interrupt;                     /* a 0x03 came */
    uint8_t rbuf[4096];                 /* read but not yet fed: what followed a packet */
    size_t rat, rlen;
    char out[2 * RSP_MAX + 8];
};

/* Starts (r) on connection (fd). */
void rsp_init(struct rsp *r, int fd);

/* Feeds (n) received bytes. Returns true once a whole, well-summed packet is in r->in[0..len)
 * (NUL-terminated); the rest of (buf) is then left unread: *used says how much was taken.
 * A packet with a bad sum gets `-`, a good one `+`. */
bool rsp_feed(struct rsp *r, const uint8_t *buf, size_t n, size_t *used);

/* Reads from the connection until a packet is complete (true) or the connection ends or fails
 * (false). An interrupt byte sets r->interrupt and, when (stop_at_interrupt), returns false. */
bool rsp_read_packet(struct rsp *r, bool stop_at_interrupt);

/* Sends (data) as one packet (escaped, summed). Does not wait for its `+`: gdb sends one, which
 * the next read takes as it takes any byte outside a packet. False when the connection failed. */
bool rsp_send(struct rsp *r, const char *data);

/* Hex helpers. */
void rsp_hex(char *out, const void *bytes, size_t n);                   /* n bytes -> 2n digits + NUL */
bool rsp_unhex(void *bytes, const char *in, size_t n);                  /* 2n digits -> n bytes */
const char *rsp_number(const char *s, uint64_t *value);                 /* hex digits; NULL if none */

#endif

/* gdb's remote serial protocol on one connection (rsp.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "rsp.h"

#include "lib/sendall.h"

static const char digits[] = "0123456789abcdef";

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void rsp_init(struct rsp *r, int fd)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
}

bool rsp_feed(struct rsp *r, const uint8_t *buf, size_t n, size_t *used)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = buf[i];
        int h;
        switch (r->state) {
        case RSP_IDLE:
            if (c == '$') {
                r->state = RSP_DATA;
                r->len = 0;
                r->sum = 0;
                r->overflow = false;
            } else if (c == 0x03) {
                r->interrupt = true;
            }                           /* `+`, `-` and noise between packets are dropped */
            break;
        case RSP_DATA:
            if (c == '#') {
                r->state = RSP_SUM1;
                break;
            }
            r->sum = (uint8_t)(r->sum + c);
            if (r->len < RSP_MAX)
                r->in[r->len++] = c;
            else
                r->overflow = true;
            break;
        case RSP_SUM1:
            h = hexval(c);
            r->want = (uint8_t)((h < 0 ? 0 : h) << 4);
            r->state = h < 0 ? RSP_IDLE : RSP_SUM2;
            if (h < 0)
                send_all(r->fd, "-", 1);
            break;
        case RSP_SUM2:
            h = hexval(c);
            r->state = RSP_IDLE;
            if (h < 0 || (uint8_t)(r->want | h) != r->sum || r->overflow) {
                send_all(r->fd, "-", 1);
                break;
            }
            send_all(r->fd, "+", 1);
            /* undo the escapes: `}` x becomes x ^ 0x20 (run-length `*` only comes from a stub) */
            size_t w = 0;
            for (size_t k = 0; k < r->len; k++)
                r->in[w++] = r->in[k] == '}' && k + 1 < r->len ? r->in[++k] ^ 0x20 : r->in[k];
            r->len = w;
            r->in[w < RSP_MAX ? w : RSP_MAX - 1] = 0;
            *used = i + 1;
            return true;
        }
    }
    *used = n;
    return false;
}

bool rsp_read_packet(struct rsp *r, bool stop_at_interrupt)
{
    for (;;) {
        if (r->rat == r->rlen) {
            ssize_t k = read(r->fd, r->rbuf, sizeof r->rbuf);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return false;
            r->rat = 0;
            r->rlen = (size_t)k;
        }
        size_t used;
        bool whole = rsp_feed(r, r->rbuf + r->rat, r->rlen - r->rat, &used);
        r->rat += used;
        if (whole)
            return true;
        if (r->interrupt && stop_at_interrupt)
            return false;
    }
}

bool rsp_send(struct rsp *r, const char *data)
{
    size_t w = 0;
    uint8_t sum = 0;
    r->out[w++] = '$';
    for (const char *p = data; *p && w < sizeof r->out - 4; p++) {
        char c = *p;
        if (c == '$' || c == '#' || c == '}' || c == '*') {
            r->out[w++] = '}';
            sum = (uint8_t)(sum + '}');
            c ^= 0x20;
        }
        r->out[w++] = c;
        sum = (uint8_t)(sum + (uint8_t)c);
    }
    r->out[w++] = '#';
    r->out[w++] = digits[sum >> 4];
    r->out[w++] = digits[sum & 15];
    return send_all(r->fd, r->out, w);
}

void rsp_hex(char *out, const void *bytes, size_t n)
{
    const uint8_t *b = bytes;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = 0;
}

bool rsp_unhex(void *bytes, const char *in, size_t n)
{
    uint8_t *b = bytes;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval((uint8_t)in[2 * i]), lo = hi < 0 ? -1 : hexval((uint8_t)in[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

const char *rsp_number(const char *s, uint64_t *value)
{
    uint64_t v = 0;
    const char *p = s;
    for (int h; (h = hexval((uint8_t)*p)) >= 0 && p - s < 16; p++)
        v = v << 4 | (uint64_t)h;
    if (p == s)
        return NULL;
    *value = v;
    return p;
}

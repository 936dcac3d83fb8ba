/* What the guest prints on its serial console: `--cmd` markers and kernel panics.
 *
 * In --cmd mode guest/initramfs/init prints "TOKEN-begin\n", then runs the
 * command with the console as its terminal, then prints "TOKEN-end STATUS\n"
 * and powers off. The token is random per run, so nothing the command
 * prints can end it early by accident.
 */
#include "guest_console.h"

#include "lib/fail.h"
#include "monitor/cpu/vcpu.h"

#include "run.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define TOKEN_HEX 16
#define LINE_MAX_KEPT 512

static int out_fd = -1;                    /* where the console goes */
static bool out_tty;
static char pending[4096];                 /* console bytes not yet written */
static size_t pending_len;
static bool cmd_mode, panicking;
static enum { CMD_HIDDEN, CMD_SHOWN, CMD_STATUS, CMD_DONE } cmd_state;
static char begin_marker[TOKEN_HEX + 8], end_marker[TOKEN_HEX + 8];
static size_t begin_len, end_len;
static char held[TOKEN_HEX + 8];           /* shown output that may be the end marker's start */
static size_t held_len;
static int cmd_status;
static char line[LINE_MAX_KEPT];           /* the current console line, for the panic watch */
static size_t line_len;

/* ---- the archive ---- */

struct cpio {
    uint8_t *p;
    size_t len, cap;
    unsigned ino;
};

static int cpio_put(struct cpio *c, const void *data, size_t n)
{
    if (c->len + n + 4 > c->cap) {
        size_t cap = (c->cap + n + 4) * 2;
        uint8_t *p = realloc(c->p, cap);
        if (!p)
            return -1;
        c->p = p;
        c->cap = cap;
    }
    memcpy(c->p + c->len, data, n);
    c->len += n;
    while (c->len % 4)
        c->p[c->len++] = 0;     /* newc pads the name and the data to 4 bytes */
    return 0;
}

/* One entry of a "newc" cpio archive (Linux: Documentation/driver-api/early-userspace/buffer-format.rst). */
static int cpio_entry(struct cpio *c, const char *name, unsigned mode, const void *data, size_t n)
{
    char hdr[160];
    uint32_t name_len = (uint32_t)strlen(name) + 1;

    if (n > UINT32_MAX)
        return -1;
    snprintf(hdr, sizeof hdr, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
             c->ino++, mode, 0u, 0u, 1u, 0u, (uint32_t)n, 0u, 0u, 0u, 0u, name_len, 0u);
    /* The header is 110 bytes and the name follows it unpadded; pad after both. */
    size_t start = c->len;
    if (cpio_put(c, hdr, 110))
        return -1;
    c->len = start + 110;
    if (cpio_put(c, name, name_len) || (n && cpio_put(c, data, n)))
        return -1;
    return 0;
}

int guest_console_init(FILE *o, const char *cmd, uint8_t **archive, size_t *len)
{
    uint8_t raw[TOKEN_HEX / 2];
    char token[TOKEN_HEX + 2];
    struct cpio c = {0};

    out_fd = fileno(o);
    out_tty = isatty(out_fd);
    if (!cmd)
        return 0;
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return -1;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(token + 2 * i, 3, "%02x", raw[i]);
    begin_len = (size_t)snprintf(begin_marker, sizeof begin_marker, "%s-begin", token);
    end_len = (size_t)snprintf(end_marker, sizeof end_marker, "%s-end ", token);
    token[TOKEN_HEX] = '\n';
    token[TOKEN_HEX + 1] = '\0';
    if (cpio_entry(&c, "ring3", 040755, NULL, 0) ||
        cpio_entry(&c, "ring3/cmd", 0100644, cmd, strlen(cmd)) ||
        cpio_entry(&c, "ring3/token", 0100644, token, TOKEN_HEX + 1) ||
        cpio_entry(&c, "TRAILER!!!", 0, NULL, 0)) {
        free(c.p);
        errno = ENOMEM;
        return -1;
    }
    cmd_mode = true;
    cmd_state = CMD_HIDDEN;
    *archive = c.p;
    *len = c.len;
    return 0;
}

/* ---- the panic watch ---- */

static void watch_line(void)
{
    line[line_len] = '\0';
    if (strstr(line, "Kernel panic - not syncing"))
        panicking = true;
    if (panicking && (cmd_mode && cmd_state != CMD_SHOWN))
        fprintf(stderr, "%s\n", line);
    if (panicking && strstr(line, "---[ end Kernel panic")) {
        guest_console_flush();
        fprintf(stderr, "ring3: the guest kernel panicked (exit status %d)\n", EXIT_GUEST_PANIC);
        monitor_exit(&the_vcpu, EXIT_GUEST_PANIC);
    }
}

static void watch(uint8_t byte)
{
    if (byte == '\n') {
        watch_line();
        line_len = 0;
    } else if (byte != '\r' && line_len < LINE_MAX_KEPT - 1) {
        line[line_len++] = (char)byte;
    }
}

/* ---- the output ---- */

void guest_console_flush(void)
{
    size_t done = 0;
    /* Blocking writes, so that nothing the guest printed is lost while the
     * terminal reads slower than it prints; a write a host signal cut short
     * (EINTR), or one a terminal shared with a process that set O_NONBLOCK
     * turned away (EAGAIN), is tried again. */
    while (done < pending_len) {
        ssize_t n = write(out_fd, pending + done, pending_len - done);
        if (n > 0) {
            done += (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            struct pollfd room = {.fd = out_fd, .events = POLLOUT};
            poll(&room, 1, -1);
        } else if (!(n < 0 && errno == EINTR)) {
            break;              /* the terminal or pipe is gone: nothing can take it */
        }
    }
    pending_len = 0;
}

/* Console bytes to the output: on a terminal each one as the UART sends it,
 * elsewhere (a pipe, a file) a line at a time. */
static void show(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (pending_len == sizeof pending)
            guest_console_flush();
        pending[pending_len++] = p[i];
    }
    if (out_tty || memchr(p, '\n', n))
        guest_console_flush();
}

/* ---- the --cmd filter ---- */

/* Shown output: hold back what could be the start of the end marker. */
static void shown_byte(uint8_t byte)
{
    held[held_len++] = (char)byte;
    while (held_len) {
        if (held_len == end_len && !memcmp(held, end_marker, end_len)) {
            held_len = 0;
            cmd_state = CMD_STATUS;
            cmd_status = 0;
            return;
        }
        if (!memcmp(held, end_marker, held_len))
            return;     /* a prefix so far: wait for more */
        show(held, 1);
        memmove(held, held + 1, --held_len);
    }
}

static void cmd_byte(uint8_t byte)
{
    switch (cmd_state) {
    case CMD_HIDDEN:
        /* The line that begins the command's output is the begin marker, then CR LF or LF. */
        if (byte == '\n') {
            size_t n = line_len;
            if (n >= begin_len && !memcmp(line + n - begin_len, begin_marker, begin_len))
                cmd_state = CMD_SHOWN;
        }
        break;
    case CMD_SHOWN:
        shown_byte(byte);
        break;
    case CMD_STATUS:
        if (byte >= '0' && byte <= '9')
            cmd_status = cmd_status * 10 + (byte - '0');
        else if (byte == '\n')
            cmd_state = CMD_DONE;
        break;
    case CMD_DONE:
        break;
    }
}

void guest_console_putc(uint8_t byte)
{
    if (cmd_mode)
        cmd_byte(byte);
    else
        show((const char *)&byte, 1);
    watch(byte);
}

bool guest_console_cmd_status(int *status)
{
    *status = cmd_status;
    return cmd_state == CMD_DONE;
}

bool guest_console_cmd_mode(void)
{
    return cmd_mode;
}

/* The monitor prompt's doors (prompt.h): the terminal and the --monitor socket. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "prompt.h"

#include "lib/listen.h"
#include "lib/sendall.h"

#define LINE_MAX_BYTES 1024
#define BANNER "ring3 monitor - type 'help' for more information\n"
#define PROMPT "(ring3) "

/* One door's line being typed or received. */
struct line {
    char text[LINE_MAX_BYTES];
    size_t len;
    bool too_long;                      /* the rest of this line is dropped */
    bool after_cr;                      /* the last byte was \r */
};

static bool on_terminal;
static struct line typed;
static int listen_fd = -1, client_fd = -1;
static struct line received;

enum line_state { LINE_GOING, LINE_DONE, LINE_TOO_LONG };

/* Adds byte (c) to (l). LINE_DONE when it ended a line, which is then NUL-terminated in
 * l->text; LINE_TOO_LONG when it ended one that did not fit (dropped). A \r\n ends one line. */
static enum line_state line_add(struct line *l, uint8_t c)
{
    bool after_cr = l->after_cr;
    l->after_cr = c == '\r';
    if (c == '\n' && after_cr)
        return LINE_GOING;
    if (c == '\r' || c == '\n') {
        bool whole = !l->too_long;
        l->text[l->len] = 0;
        l->len = 0;
        l->too_long = false;
        return whole ? LINE_DONE : LINE_TOO_LONG;
    }
    if (l->len + 1 < sizeof l->text)
        l->text[l->len++] = (char)c;
    else
        l->too_long = true;
    return LINE_GOING;
}

/* Runs the line (l) ended with (state); its answer in a malloc'd string (*len bytes). */
static char *answer(struct vcpu *v, struct line *l, enum line_state state, size_t *len)
{
    if (state == LINE_DONE)
        return prompt_run(v, l->text, false, len);
    char *text = NULL;
    *len = (size_t)asprintf(&text, "the line is too long: at most %zu bytes\n", sizeof l->text - 1);
    return text;
}

/* ---- the terminal ---- */

bool prompt_on_terminal(void)
{
    return on_terminal;
}

void prompt_switch(struct vcpu *v)
{
    (void)v;
    on_terminal = !on_terminal;
    typed.len = 0;
    if (on_terminal)
        fputs("\n" BANNER PROMPT, stderr);
    else
        fputc('\n', stderr);
}

void prompt_key(struct vcpu *v, uint8_t c)
{
    if (c == 0x7f || c == '\b') {
        /* the raw terminal does not erase: back, blank, back */
        if (typed.len) {
            typed.len--;
            fputs("\b \b", stderr);
        }
        return;
    }
    if (c == 0x15) {                    /* Ctrl-U: the line is dropped */
        typed.len = 0;
        fputs("\n" PROMPT, stderr);
        return;
    }
    if (c != '\r' && c != '\n' && (c < 0x20 || c > 0x7e))
        return;                         /* other control keys mean nothing here */
    fputc(c == '\r' ? '\n' : c, stderr);
    enum line_state state = line_add(&typed, c);
    if (state == LINE_GOING)
        return;
    size_t len;
    char *text = answer(v, &typed, state, &len);
    if (text)
        fwrite(text, 1, len, stderr);
    free(text);
    if (on_terminal)
        fputs(PROMPT, stderr);
}

/* ---- the socket ---- */

int prompt_listen(const char *spec)
{
    if ((listen_fd = listen_on(spec)) < 0) {
        fprintf(stderr, "ring3: cannot listen for the monitor on %s: %s\n", spec, strerror(errno));
        return -1;
    }
    return 0;
}

int prompt_fd(void)
{
    return client_fd >= 0 ? client_fd : listen_fd;
}

static void hang_up(void)
{
    close(client_fd);
    client_fd = -1;
    received = (struct line){ .len = 0 };
}

void prompt_poll(struct vcpu *v)
{
    if (listen_fd < 0)
        return;
    if (client_fd < 0) {
        /* blocking once taken: the answers are written whole */
        if ((client_fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0 &&
            !send_all(client_fd, BANNER PROMPT, strlen(BANNER PROMPT)))
            hang_up();
        return;
    }
    uint8_t buf[512];
    ssize_t n = recv(client_fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        hang_up();                      /* gone: the guest goes on as it was */
        return;
    }
    for (ssize_t i = 0; i < n && client_fd >= 0; i++) {
        enum line_state state = line_add(&received, buf[i]);
        if (state == LINE_GOING)
            continue;
        size_t len = 0;
        char *text = answer(v, &received, state, &len);
        if ((text && !send_all(client_fd, text, len)) || !send_all(client_fd, PROMPT, strlen(PROMPT)))
            hang_up();
        free(text);
    }
}

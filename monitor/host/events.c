/* Time, host input and waiting: the devices' deadlines, stdin into the UART, hlt.
 *
 * Devices compute their state from the monotonic clock; this file only makes
 * sure the monitor looks at them in time. While the guest runs, one POSIX
 * timer (SIGALRM) is armed for the next device deadline, and each expiry also
 * moves the network's frames; in hlt the monitor sleeps in ppoll on stdin and
 * the descriptors of the network backends and the IKC disks, with that deadline as the
 * timeout. Nothing spins.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "events.h"

#include "hw/clock.h"
#include "hw/pic.h"
#include "hw/uart.h"
#include "lib/fail.h"
#include "machine/platform.h"
#include "monitor/cpu/vcpu.h"
#include "monitor/gdb/gdbstub.h"

#include "console.h"
#include "guest_console.h"
#include "run.h"

#define ESCAPE_CHAR 0x01        /* Ctrl-A, then x to quit */

static timer_t host_timer;
static uint64_t armed_for = UINT64_MAX;     /* the deadline the host timer is set to */
static uint64_t last_input_check;
static uint8_t input[256];
static size_t input_len;
static bool input_eof, escape_seen, input_is_stdin;

uint64_t events_now(void)
{
    return hw_clock_now(&hw_clock_monotonic);
}

/* Reads host input while the UART has room, keeping what it cannot take yet. */
static void pump_input(struct vcpu *v)
{
    struct uart *u = v->plat->com1;
    while (uart_rx_room(u)) {
        if (!input_len && !input_eof) {
            /* Only what is there: stdin stays blocking (see events_init). */
            struct pollfd ready = {.fd = STDIN_FILENO, .events = POLLIN};
            if (poll(&ready, 1, 0) != 1)
                break;
            ssize_t n = read(STDIN_FILENO, input, sizeof input);
            if (n == 0)
                input_eof = true;
            if (n <= 0)
                break;
            input_len = (size_t)n;
            if (input_is_stdin) {
                /* Ctrl-A x ends the run; Ctrl-A h lists the escapes; Ctrl-A Ctrl-A sends one
                 * Ctrl-A (qemu -nographic's keys). */
                size_t w = 0;
                for (size_t i = 0; i < input_len; i++) {
                    if (escape_seen) {
                        escape_seen = false;
                        if (input[i] == 'x' || input[i] == 'X') {
                            console_restore();
                            fprintf(stderr, "\nring3: terminated (Ctrl-A x)\n");
                            monitor_exit(v, 0);
                        }
                        if (input[i] == 'h' || input[i] == 'H') {
                            /* the terminal is raw: each line ends in \r\n */
                            fputs("\r\nC-a h    print this help\r\nC-a x    exit ring3\r\n"
                                  "C-a C-a  send C-a to the guest\r\n", stderr);
                            continue;
                        }
                        input[w++] = input[i];
                    } else if (input[i] == ESCAPE_CHAR) {
                        escape_seen = true;
                    } else {
                        input[w++] = input[i];
                    }
                }
                input_len = w;
            }
        }
        if (!input_len)
            break;
        size_t took = uart_receive(u, input, input_len);
        memmove(input, input + took, input_len - took);
        input_len -= took;
        if (!took)
            break;
    }
}

void events_poll(struct vcpu *v)
{
    platform_update(v->plat, events_now());
    platform_io_poll(v->plat);
}

/* Host input moves into the UART when the guest looks for it: when it reads
 * a UART register or waits in hlt. Like a terminal whose bytes arrive once
 * the program is ready, this keeps a guest's UART initialisation (which
 * empties the FIFO) from discarding what was typed ahead. At most once a
 * millisecond on the register path: a read per access costs more than the access. */
void events_input(struct vcpu *v)
{
    uint64_t now = events_now();
    if (now - last_input_check >= 1000000 || !last_input_check) {
        last_input_check = now;
        pump_input(v);
    }
}

static void arm_at(uint64_t t)
{
    if (t == armed_for)
        return;
    armed_for = t;
    struct itimerspec its = {0};
    if (t != UINT64_MAX) {
        its.it_value.tv_sec = (time_t)(t / NS_PER_SEC);
        its.it_value.tv_nsec = (long)(t % NS_PER_SEC);
    }
    timer_settime(host_timer, TIMER_ABSTIME, &its, NULL);
}

void events_arm(struct vcpu *v)
{
    uint64_t now = events_now();
    uint64_t when = platform_next_deadline(v->plat, now);
    /* A guest polling the UART also needs input while no timer runs: look again in 10 ms. */
    if (!input_eof && (when == PLATFORM_NO_DEADLINE || when > now + 10000000))
        when = armed_for > now && armed_for <= now + 10000000 ? armed_for : now + 10000000;
    arm_at(when == PLATFORM_NO_DEADLINE ? UINT64_MAX : when);
}

void events_arm_soon(struct vcpu *v)
{
    (void)v;
    /* From signal context, maybe in the middle of arm_at(): set the timer
     * directly and leave the cache saying "unknown", so the next arm_at()
     * always reaches the kernel. */
    uint64_t t = events_now() + 50000;
    struct itimerspec its = {.it_value = {(time_t)(t / NS_PER_SEC), (long)(t % NS_PER_SEC)}};
    timer_settime(host_timer, TIMER_ABSTIME, &its, NULL);
    armed_for = 0;
}

void events_alarm(void)
{
    armed_for = UINT64_MAX;     /* the one-shot timer has fired */
}

void events_wait(struct vcpu *v)
{
    for (;;) {
        events_poll(v);
        last_input_check = 0;
        events_input(v);
        if (pic_intr_pending(v->plat->pic)) {
            if (v->sh->vif)
                return;         /* the caller delivers it */
        }
        if (!v->sh->vif) {
            /* Linux powers off (and halts) so: with no power-off device, every CPU stops in
             * hlt with interrupts disabled (native_machine_halt). */
            if (!v->booting_linux) {
                fflush(stdout);
                console_restore();
                fprintf(stderr, "ring3: the guest halted with interrupts disabled; nothing can wake it\n");
            }
            monitor_exit(v, 0);
        }
        uint64_t now = events_now(), when = platform_next_deadline(v->plat, now);
        /* stdin first (fd -1, which poll skips, while the UART has no room), then the sockets
         * of the network backends */
        struct pollfd pfd[2 + PLATFORM_IO_MAX_FDS];
        bool want_input = !input_eof && !input_len && uart_rx_room(v->plat->com1);
        pfd[0] = (struct pollfd){.fd = want_input ? STDIN_FILENO : -1, .events = POLLIN};
        unsigned n = 1;
        platform_io_fill(v->plat, pfd, &n, 1 + PLATFORM_IO_MAX_FDS, &when);
        pfd[n++] = (struct pollfd){.fd = gdb_fd(), .events = POLLIN};      /* -1: skipped */
        struct timespec ts, *timeout = NULL;
        if (when != PLATFORM_NO_DEADLINE) {
            uint64_t d = when > now ? when - now : 0;
            ts.tv_sec = (time_t)(d / NS_PER_SEC);
            ts.tv_nsec = (long)(d % NS_PER_SEC);
            timeout = &ts;
        }
        if (!want_input && !timeout && n == 2 && pfd[1].fd < 0) {
            console_restore();
            fprintf(stderr, "ring3: the guest halted waiting for an interrupt that cannot come\n");
            monitor_exit(v, 0);
        }
        /* What the guest printed reaches the host before it sleeps: a prompt has no newline. */
        guest_console_flush();
        sigset_t none;
        sigemptyset(&none);
        if (ppoll(pfd, n, timeout, &none) < 0 && errno != EINTR) {
            perror("ring3: ppoll");
            monitor_exit(v, EXIT_HOST);
        }
        platform_io_dispatch(v->plat);
        if (pfd[n - 1].fd >= 0 && pfd[n - 1].revents)
            gdb_poll(v);
    }
}

int events_init(struct vcpu *v)
{
    (void)v;
    struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM};
    if (timer_create(CLOCK_MONOTONIC, &sev, &host_timer) != 0)
        return -1;
    /* stdin is not made non-blocking: a terminal's stdin and stdout are
     * usually one open file description, whose O_NONBLOCK would make the
     * console's writes fail (EAGAIN) and drop output whenever the terminal
     * reads slower than the guest prints. pump_input polls instead. */
    input_is_stdin = isatty(STDIN_FILENO);
    return 0;
}

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
#include "monitor/prompt/prompt.h"

#include "console.h"
#include "guest_console.h"
#include "run.h"

#define ESCAPE_CHAR 0x01        /* Ctrl-A, then a key for the monitor (escape_key) */

static timer_t host_timer;
static uint64_t armed_for = UINT64_MAX;     /* the deadline the host timer is set to */
static uint64_t last_input_check;
static uint8_t input[256];
static size_t input_len;
static bool input_eof, escape_seen, input_is_stdin;

/* The devices' clock: the host's monotonic one, less the time the guest stood still (gdb or
 * the monitor's stop held it), as a stopped machine's timers do not run. With the PIT as its
 * clock source (`make gdb` boots so), the guest's own time stands still too. */
static uint64_t stood_ns, stood_since;

static uint64_t guest_clock_ns(void *opaque)
{
    (void)opaque;
    return hw_clock_now(&hw_clock_monotonic) - stood_ns;
}

const struct hw_clock events_guest_clock = { guest_clock_ns, NULL };

void events_clock_stop(void)
{
    stood_since = hw_clock_now(&hw_clock_monotonic);
}

void events_clock_start(void)
{
    stood_ns += hw_clock_now(&hw_clock_monotonic) - stood_since;
}

uint64_t events_now(void)
{
    return hw_clock_now(&hw_clock_monotonic);
}

uint64_t events_next_deadline(struct vcpu *v, uint64_t now)
{
    uint64_t when = platform_next_deadline(v->plat, now - stood_ns);
    return when == PLATFORM_NO_DEADLINE ? when : when + stood_ns;
}

/* Ctrl-A then (c), qemu -nographic's keys: x ends the run, h lists the keys, c switches to the
 * monitor prompt and back. Returns true when (c) is a key for the guest (Ctrl-A Ctrl-A sends
 * one Ctrl-A; any other key after Ctrl-A goes to the guest as it is). */
static bool escape_key(struct vcpu *v, uint8_t c)
{
    switch (c) {
    case 'x':
    case 'X':
        fflush(stdout);
        console_restore();
        fprintf(stderr, "\nring3: terminated (Ctrl-A x)\n");
        monitor_exit(v, 0);
    case 'h':
    case 'H':
        fputs("\nC-a h    print this help\nC-a x    exit ring3\n"
              "C-a c    switch between the guest's console and the monitor prompt\n"
              "C-a C-a  send C-a to the guest\n", stderr);
        return false;
    case 'c':
    case 'C':
        prompt_switch(v);
        return false;
    default:
        return true;
    }
}

/* Reads what the terminal has, never blocking, after the input kept for the UART, taking out
 * the escapes and the keys typed at the monitor prompt. False when nothing was there. */
static bool read_terminal(struct vcpu *v)
{
    struct pollfd ready = {.fd = STDIN_FILENO, .events = POLLIN};
    if (input_eof || input_len == sizeof input || poll(&ready, 1, 0) != 1)
        return false;
    /* Only what is there: stdin stays blocking (see events_init). */
    ssize_t n = read(STDIN_FILENO, input + input_len, sizeof input - input_len);
    if (n == 0)
        input_eof = true;
    if (n <= 0)
        return false;
    if (!input_is_stdin) {
        input_len += (size_t)n;
        return true;
    }
    size_t w = input_len, end = input_len + (size_t)n;
    for (size_t i = input_len; i < end; i++) {
        uint8_t c = input[i];
        bool for_guest = escape_seen ? escape_key(v, c) : c != ESCAPE_CHAR;
        escape_seen = !escape_seen && c == ESCAPE_CHAR;
        if (!for_guest)
            continue;
        if (prompt_on_terminal())
            prompt_key(v, c);
        else
            input[w++] = c;
    }
    input_len = w;
    return true;
}

/* The monitor prompt takes what was typed for it, whether or not the UART has room. */
static void prompt_keys(struct vcpu *v)
{
    if (prompt_on_terminal())
        while (read_terminal(v))
            ;
}

/* Reads host input while the UART has room, keeping what it cannot take yet. */
static void pump_input(struct vcpu *v)
{
    struct uart *u = v->plat->com1;
    prompt_keys(v);
    while (uart_rx_room(u)) {
        if (!input_len && !read_terminal(v))
            break;
        size_t took = uart_receive(u, input, input_len);
        memmove(input, input + took, input_len - took);
        input_len -= took;
        if (!took && input_len)
            break;
    }
}

uint64_t events_poll(struct vcpu *v)
{
    uint64_t now = events_now();
    platform_update(v->plat, now - stood_ns);
    platform_io_poll(v->plat, now);
    return now;
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

void events_tick(struct vcpu *v)
{
    /* A process computing: host input (Ctrl-C, Ctrl-A x) reaches the UART now, not only when
     * the guest next reads it. The kernel gets it when it reads the UART or waits in hlt; the
     * prompt's keys are taken at once. */
    if (v->cpl == 3)
        events_input(v);
    else
        prompt_keys(v);
    gdb_poll(v);
    prompt_poll(v);
    events_hold(v);
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

void events_arm_at(struct vcpu *v, uint64_t now)
{
    uint64_t when = events_next_deadline(v, now);
    /* A guest polling the UART also needs input while no timer runs: look again in 10 ms. */
    if (!input_eof && (when == PLATFORM_NO_DEADLINE || when > now + 10000000))
        when = armed_for > now && armed_for <= now + 10000000 ? armed_for : now + 10000000;
    arm_at(when == PLATFORM_NO_DEADLINE ? UINT64_MAX : when);
}

void events_arm(struct vcpu *v)
{
    events_arm_at(v, events_now());
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
        uint64_t now = events_now(), when = events_next_deadline(v, now);
        /* stdin first (fd -1, which poll skips, while the UART has no room), then the sockets
         * of the network backends */
        struct pollfd pfd[3 + PLATFORM_IO_MAX_FDS];      /* stdin, the I/O, the prompt, gdb */
        bool want_input = !input_eof && ((!input_len && uart_rx_room(v->plat->com1)) || prompt_on_terminal());
        pfd[0] = (struct pollfd){.fd = want_input ? STDIN_FILENO : -1, .events = POLLIN};
        unsigned n = 1;
        platform_io_fill(v->plat, pfd, &n, 1 + PLATFORM_IO_MAX_FDS, &when);
        pfd[n++] = (struct pollfd){.fd = prompt_fd(), .events = POLLIN};   /* -1: skipped */
        pfd[n++] = (struct pollfd){.fd = gdb_fd(), .events = POLLIN};
        struct timespec ts, *timeout = NULL;
        if (when != PLATFORM_NO_DEADLINE) {
            uint64_t d = when > now ? when - now : 0;
            ts.tv_sec = (time_t)(d / NS_PER_SEC);
            ts.tv_nsec = (long)(d % NS_PER_SEC);
            timeout = &ts;
        }
        if (!want_input && !timeout && n == 3 && pfd[1].fd < 0 && pfd[2].fd < 0) {
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
        if (pfd[n - 2].fd >= 0 && pfd[n - 2].revents)
            prompt_poll(v);
        if (pfd[n - 1].fd >= 0 && pfd[n - 1].revents)
            gdb_poll(v);
        events_hold(v);
    }
}

void events_hold(struct vcpu *v)
{
    static bool holding;
    if (!prompt_stopped || holding)
        return;
    holding = true;
    sigset_t alarm, old;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    sigprocmask(SIG_BLOCK, &alarm, &old);
    guest_console_flush();
    events_clock_stop();
    while (prompt_stopped) {
        struct pollfd pfd[2] = {
            {.fd = !input_eof && input_len < sizeof input ? STDIN_FILENO : -1, .events = POLLIN},
            {.fd = prompt_fd(), .events = POLLIN},
        };
        if (pfd[0].fd < 0 && pfd[1].fd < 0)
            break;                      /* no door is left to say cont: run on */
        if (poll(pfd, 2, -1) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents)
            read_terminal(v);
        if (pfd[1].revents)
            prompt_poll(v);
    }
    prompt_stopped = false;
    events_clock_start();
    sigprocmask(SIG_SETMASK, &old, NULL);
    holding = false;
    events_arm(v);
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

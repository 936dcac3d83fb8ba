/* The host terminal: raw while the guest runs, restored on every way out. */
#include <stdbool.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#include "console.h"

#include "monitor/cpu/vcpu.h"

static struct termios saved;
static volatile bool raw_on;

void console_restore(void)
{
    if (raw_on) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        raw_on = false;
    }
}

/* Raw input so that every key reaches the guest's UART, Ctrl-C included;
 * the monitor's own escape is Ctrl-A x, as in qemu -nographic. */
void console_raw(void)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved) != 0)
        return;
    struct termios t = saved;
    cfmakeraw(&t);
    t.c_oflag |= OPOST | ONLCR;      /* keep the host's own messages readable */
    if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0) {
        raw_on = true;
        atexit(console_restore);
    }
}

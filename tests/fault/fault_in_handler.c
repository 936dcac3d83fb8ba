/* Fault injection for tests/test_internal_error.py, by LD_PRELOAD into build/bin/ring3: a
 * clock_gettime that monitor code calls on the monitor's signal stack (from its signal handler:
 * the timer's arming, the stubs' waits) touches an unmapped page, as a bug in monitor code that
 * the handler runs would. FAULT_AFTER=N: the one after N such calls (default 0: the first).
 * Every other call is the host's. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_gettime(clockid_t clock, struct timespec *ts)
{
    static long calls = -1, after;
    static int *volatile nowhere;       /* NULL, which the compiler cannot see */
    stack_t ss;
    if (calls < 0) {
        const char *n = getenv("FAULT_AFTER");
        after = n ? atol(n) : 0;
        calls = 0;
    }
    if (calls <= after && sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK) &&
        calls++ == after)
        *nowhere = 0;
    return (int)syscall(SYS_clock_gettime, clock, ts);
}

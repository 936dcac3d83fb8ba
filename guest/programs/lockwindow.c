/* lockwindow [N]: where asynchronous signals land in glibc's stdio locking.
 *
 * Flushes stdout in a loop under a 1 ms interval timer, and in each of N SIGALRM handlers
 * looks at stdout's lock (glibc's _IO_lock_t: lock word, count, owner): taken with an owner
 * (inside the locked region), or taken with none (between the `lock cmpxchg` and the owner's
 * store, or between the owner's reset and the releasing `xchg`). A handler that leaves by
 * longjmp in the second case leaves the lock taken by nobody (tools/ctrl_c_stress.py).
 * Natively the counts show how often hardware interrupts land there; under a guest, how
 * faithfully the guest's interrupts follow them. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

struct io_lock { int lock, cnt; void *owner; };

static volatile long half_taken, held, total;

static void on_alarm(int sig)
{
    (void)sig;
    const struct io_lock *l = (const struct io_lock *)stdout->_lock;
    if (l->lock && !l->owner)
        half_taken++;
    else if (l->lock)
        held++;
    total++;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every_ms = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &every_ms, NULL);
    while (total < n)
        fflush(stdout);
    printf("signals %ld: lock held %ld, taken by nobody %ld\n", total, held, half_taken);
    return 0;
}

/* fork COUNT: fork, _exit in the child, waitpid in the parent; ms per iteration. */
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv);

    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit((int)(i & 0x7f));
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid)
            bench_fail("fork: iteration %ld: fork or waitpid failed", i);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != (i & 0x7f))
            bench_fail("fork: iteration %ld: child status %#x", i, st);
    }
    double t1 = bench_now();
    bench_result("fork", (t1 - t0) / n, "ms");
    return 0;
}

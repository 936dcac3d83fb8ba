/* forkexec COUNT: fork, execve of a trivial static program (this one, which exits at once when
 * its only argument is "-exit"), waitpid; ms per iteration. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define CHILD_STATUS 42

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "-exit"))
        return CHILD_STATUS;
    long n = bench_count(argc, argv);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        bench_fail("forkexec: cannot read /proc/self/exe");
    self[len] = '\0';
    char *args[] = {self, "-exit", NULL}, *env[] = {NULL};

    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            execve(self, args, env);
            _exit(127);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid)
            bench_fail("forkexec: iteration %ld: fork or waitpid failed", i);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != CHILD_STATUS)
            bench_fail("forkexec: iteration %ld: child status %#x (execve of %s)", i, st, self);
    }
    double t1 = bench_now();
    bench_result("forkexec", (t1 - t0) / n, "ms");
    return 0;
}

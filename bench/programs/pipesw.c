/* pipesw COUNT: two processes pass one byte back and forth over two pipes, each round trip two
 * context switches; us per round trip. */
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv);
    int there[2], back[2];
    unsigned char b = 0;

    if (pipe(there) || pipe(back))
        bench_fail("pipesw: pipe failed");
    pid_t pid = fork();
    if (pid < 0)
        bench_fail("pipesw: fork failed");
    if (pid == 0) {
        /* The child answers each byte with the byte plus one, until the parent closes its end. */
        close(there[1]);
        close(back[0]);
        while (read(there[0], &b, 1) == 1) {
            b++;
            if (write(back[1], &b, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    close(there[0]);
    close(back[1]);
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        unsigned char sent = (unsigned char)i;
        if (write(there[1], &sent, 1) != 1 || read(back[0], &b, 1) != 1)
            bench_fail("pipesw: round trip %ld broke", i);
        if (b != (unsigned char)(sent + 1))
            bench_fail("pipesw: round trip %ld: sent %u, got %u back", i, sent, b);
    }
    double t1 = bench_now();
    close(there[1]);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        bench_fail("pipesw: the child did not exit cleanly");
    bench_result("pipesw", (t1 - t0) / n, "us");
    return 0;
}

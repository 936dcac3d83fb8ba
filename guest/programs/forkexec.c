/* forkexec [N]: N times fork, execve /bin/true and waitpid; prints the total time. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    struct timespec a, b;

    if (n < 1) {
        fprintf(stderr, "usage: forkexec [N>0]\n");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            char *args[] = {"true", NULL};
            execve("/bin/true", args, environ);
            _exit(127);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
            printf("forkexec: iteration %ld of %ld failed\n", i + 1, n);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    printf("forkexec: %ld in %.0f ms, %.3f ms each\n", n, ms, ms / n);
    return 0;
}

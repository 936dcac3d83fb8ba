/* /init of the User Mode Linux benchmark initramfs (mk/uml.mk, bench/envs/uml.py).
 *
 * The kernel hands it the words after `--` on the UML command line: a program of /bin and its
 * arguments. It mounts /proc, runs that program with its standard output on /dev/ttyS0 (UML's
 * ssl0, which the harness wires to a host pipe, so that the program's output arrives apart
 * from the kernel's messages) and its standard error on the console, reports the program's
 * exit status on the console as "uml-init: status N", and powers the machine off.
 *
 * Installed as /bin/true as well: run under that name it exits 0 at once (the trivial command
 * of the boot-time row). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static void power_off(void)
{
    fflush(NULL);
    reboot(RB_POWER_OFF);
    /* reboot() returns only on failure; PID 1 must not exit. */
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    const char *name = strrchr(argv[0], '/');
    if (!strcmp(name ? name + 1 : argv[0], "true"))
        return 0;

    int console = open("/dev/console", O_RDWR);
    if (console >= 0) {
        dup2(console, 1);
        dup2(console, 2);
    }
    if (mount("proc", "/proc", "proc", 0, NULL))
        fprintf(stderr, "uml-init: mount /proc: %s\n", strerror(errno));
    if (argc < 2) {
        fprintf(stderr, "uml-init: no program given (UML command line: ... -- PROGRAM ARGS)\n");
        power_off();
    }

    int out = open("/dev/ttyS0", O_WRONLY | O_NOCTTY);
    if (out < 0) {
        fprintf(stderr, "uml-init: /dev/ttyS0: %s\n", strerror(errno));
        power_off();
    }
    /* Raw: no \r before each \n, output bytes as the program wrote them. */
    struct termios t;
    if (tcgetattr(out, &t) == 0) {
        cfmakeraw(&t);
        tcsetattr(out, TCSANOW, &t);
    }

    char path[256];
    snprintf(path, sizeof path, "%s%s", strchr(argv[1], '/') ? "" : "/bin/", argv[1]);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out, 1);
        close(out);
        execv(path, argv + 1);
        fprintf(stderr, "uml-init: execv %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    int status = 0;
    if (pid < 0)
        fprintf(stderr, "uml-init: fork: %s\n", strerror(errno));
    else if (waitpid(pid, &status, 0) != pid)
        fprintf(stderr, "uml-init: waitpid: %s\n", strerror(errno));
    else if (WIFEXITED(status))
        fprintf(stderr, "uml-init: status %d\n", WEXITSTATUS(status));
    else
        fprintf(stderr, "uml-init: killed by signal %d\n", WTERMSIG(status));
    /* Wait until the serial line has written everything to the host. */
    tcdrain(out);
    close(out);
    power_off();
}

/* sigdfl COMMAND [ARG...]: run COMMAND with every signal at its default action and none blocked.
 *
 * /init starts the login shell with `&`, and a shell without job control starts an
 * asynchronous command with SIGINT and SIGQUIT ignored (POSIX, 2.11). A shell that finds
 * a signal ignored at its start keeps it ignored for good, in itself and in every command
 * it runs, so Ctrl-C would never reach the foreground job. No busybox applet resets a
 * signal's disposition before exec; this does. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    sigset_t none;

    if (argc < 2) {
        fprintf(stderr, "usage: sigdfl COMMAND [ARG...]\n");
        return 2;
    }
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);           /* fails harmlessly for SIGKILL, SIGSTOP and unused numbers */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}

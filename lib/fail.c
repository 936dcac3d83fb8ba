/* Bad input: one line on stderr, and exit status 2 for the caller to return. */
#include <stdio.h>

#include "fail.h"

int fail_vbad_input(const char *who, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    return EXIT_BAD_INPUT;
}

int bad_input(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = fail_vbad_input("ring3", fmt, ap);
    va_end(ap);
    return r;
}

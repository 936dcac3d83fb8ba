/* syscall-loop, ring 3 half: user_count getpid calls through int $0x80, then through sysenter. */
#include "user.h"

uint32_t user_count;
void user_loop(void) __attribute__((noreturn));

/* Exits with the number of calls that did not answer GETPID_ANSWER. */
void user_loop(void)
{
    uint32_t bad = 0;

    for (uint32_t i = 0; i < user_count; i++)
        bad += usys(SYS_GETPID, 0) != GETPID_ANSWER;
    for (uint32_t i = 0; i < user_count; i++)
        bad += usysenter() != GETPID_ANSWER;
    uexit(bad);
}

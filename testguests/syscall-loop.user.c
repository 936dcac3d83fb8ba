/* syscall-loop, ring 3 half: user_count getpid calls through int $0x80, then through sysenter;
 * then the flags across an int $0x80, which the kernel's iret gives back (SDM vol. 2, IRET). */
#include "syscall-loop.h"
#include "user.h"

uint32_t user_count, user_flags_kept;
void user_loop(void) __attribute__((noreturn));

/* Exits with the number of calls that did not answer GETPID_ANSWER. */
void user_loop(void)
{
    uint32_t bad = 0;

    for (uint32_t i = 0; i < user_count; i++)
        bad += usys(SYS_GETPID, 0) != GETPID_ANSWER;
    for (uint32_t i = 0; i < user_count; i++)
        bad += usysenter() != GETPID_ANSWER;
    user_flags_kept = FLAGS_ACROSS("int $0x80", SYS_NOP);
    uexit(bad);
}

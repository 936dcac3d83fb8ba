/* Guest memory layout of the stub test driver (tests/stub/test_stub.c, guest.S). */
#ifndef RING3_TEST_STUB_GUEST_H
#define RING3_TEST_STUB_GUEST_H

#define G_CODE       0x10000     /* linear address of guest.bin (guest-physical 0) */
#define G_STACK_GPA  0x100000
#define G_STACK      0x8F000     /* one page, %esp starts at its end */
#define G_DATA       0x200000    /* linear = guest-physical */
#define G_RO         0x201000
#define G_PATH       0x202000    /* a page holding strings and the forged signal frame */
#define G_FORGE_LIN  0x300000    /* what the forged map request asks for ... */
#define G_FORGE_GPA  0x3F0000    /* ... from where: never handed over */

/* guest.bin starts with a table of these addresses, as 32-bit words in this order */
#define GUEST_SYMS(X) X(t1) X(t1_after) X(t1_end) X(t2) X(t3) X(t3_ret) X(t3_shared) X(t4) X(t4_ret) \
    X(t5) X(g_jmp64) X(g_syscall64) X(g_forge) X(g_forge_tf) X(g_forge_keep) X(g_after64) X(g_probe) X(g_loop) X(g_sysloop) \
    X(g_gateloop) X(g_gateloop_ret) X(g_maploop) X(g_maploop_ret)

#endif

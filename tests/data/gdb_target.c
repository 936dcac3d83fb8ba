/* A guest process for tests/test_gdb.py: gdb stops at its main, then at probe(), where xmm1 and
 * st(0) hold known values that gdb reads and overwrites; the program prints what they hold after.
 * Linked at 0x30000000, where no other process of the guest has code, since a breakpoint is at a
 * virtual address in every process (as QEMU's are). */
#include <stdio.h>

__attribute__((noinline)) void probe(void)
{
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    (void)argv;
    printf("target argc=%d\n", argc);
    unsigned in[4] = { 0x11111111, 0x22222222, 0x33333333, 0x44444444 }, out[4];
    double top;
    /* probe() touches neither register: what changes them is gdb */
    __asm__ volatile("movdqu %2, %%xmm1\n\tfldpi\n\tcall probe\n\tmovdqu %%xmm1, %0\n\tfstpl %1"
                     : "=m"(out), "=m"(top) : "m"(in) : "xmm1", "memory");
    printf("xmm1 %08x %08x %08x %08x st0 %g\n", out[0], out[1], out[2], out[3], top);
    return argc + 40;
}

/* A guest process for tests/test_gdb.py: gdb stops at its main. Linked at 0x30000000, where no
 * other process of the guest has code, since a breakpoint is at a virtual address in every
 * process (as QEMU's are). */
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argv;
    printf("target argc=%d\n", argc);
    return argc + 40;
}

/* usermode: the sysenter entry point, which runs at CPL 0 on the stack IA32_SYSENTER_ESP names. */

    .text
    .globl sysenter_entry
sysenter_entry:
    movw %cs, sysenter_cs
    movw %ss, sysenter_ss
    movl %esp, sysenter_esp
    movl $43, %eax
    /* sysenter cleared IF; sysexit does not restore it (SDM "SYSENTER"). */
    sti
    sysexit

    .bss
    .balign 4
    .globl sysenter_cs, sysenter_ss, sysenter_esp
sysenter_esp:
    .space 4
sysenter_cs:
    .space 2
sysenter_ss:
    .space 2

/* syscall-loop: the ring 0 ends of the call gate and of sysenter; both answer 42 in %eax. */

    .text
/* Reached by a far call through a call gate to the same privilege level (SDM 5.8.5). */
    .globl gate_getpid
gate_getpid:
    incl gate_calls
    movl $42, %eax
    lret

/* sysenter: CPL 0, IF clear, stack from IA32_SYSENTER_ESP; user EIP in %edx, ESP in %ecx. */
    .globl sysenter_getpid
sysenter_getpid:
    incl sysenter_calls
    movl $42, %eax
    sti
    sysexit

    .bss
    .balign 4
    .globl gate_calls, sysenter_calls
gate_calls:
    .space 4
sysenter_calls:
    .space 4

/* Multiboot v1 header and the entry point: set a stack, then lib_start(magic, info). */

#define MB_MAGIC 0x1BADB002
#define MB_FLAGS 0x00000003     /* page-align modules, pass memory information */

    .section .multiboot, "a"
    .balign 4
    .long MB_MAGIC
    .long MB_FLAGS
    .long -(MB_MAGIC + MB_FLAGS)

    .text
    .globl _start
_start:
    /* The stack first: a rewritten sensitive instruction pushes its operands. */
    movl $boot_stack_top, %esp
    cli
    cld
    pushl %ebx
    pushl %eax
    call lib_start
1:  hlt
    jmp 1b

    .bss
    .balign 16
    .globl boot_stack_top
boot_stack:
    .space 16384
boot_stack_top:

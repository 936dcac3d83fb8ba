/* A Multiboot guest that triple-faults: an empty IDT, then ud2. The #UD cannot
 * be delivered (#GP), nor can the #GP (#DF), nor the #DF: shutdown. */
    .text
    .align 4
    .long 0x1BADB002, 0, -0x1BADB002
    .globl _start
_start:
    lidt idt_empty
    movl $0x12345678, %esi
    ud2
    .data
idt_empty:
    .word 0
    .long 0

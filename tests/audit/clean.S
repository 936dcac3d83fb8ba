/* Test input for tests/test_audit.py: code with no sensitive instruction left; the audit must report nothing. */

    .text
    .globl _start
    .type _start, @function
_start:
    call sum
    ret
    .size _start, . - _start

/* Ordinary arithmetic, memory and branches. */
    .p2align 4, 0xcc
    .globl sum
    .type sum, @function
sum:
    pushl %ebp
    movl %esp, %ebp
    movl 8(%ebp), %eax
    addl 12(%ebp), %eax
    leal (%eax,%eax,2), %eax
    testl %eax, %eax
    jz 1f
    imull $0xfa, %eax, %eax
1:  popl %ebp
    ret
    .size sum, . - sum

/* Rewritten sites: pushes of DESC and AUX words made of sensitive bytes,
 * then the absolute indirect call into the entry table. */
    .p2align 4, 0xcc
    .globl rewritten
    .type rewritten, @function
rewritten:
    .byte 0x2e, 0xff, 0x15, 0x00, 0x00, 0xff, 0xff /* call *%cs:0xffff0000 (cli) */
    .byte 0x68, 0x9c, 0xfa, 0x9d, 0xcf      /* pushl $0xcf9dfa9c */
    .byte 0x68, 0xcc, 0xf4, 0xcd, 0x80      /* pushl $0x80cdf4cc */
    .byte 0x2e, 0xff, 0x15, 0x18, 0x00, 0xff, 0xff /* call *%cs:0xffff0018 (in) */
    .byte 0x9c, 0x2e, 0xff, 0x15, 0x08, 0x00, 0xff, 0xff /* rewritten pushf: pushfl; call *%cs:0xffff0008 */
    .byte 0x2e, 0xff, 0x15, 0x10, 0x00, 0xff, 0xff /* call *%cs:0xffff0010 (iret): never returns */
    .byte 0xcc, 0xcc, 0xcc                  /* so this int3 run before the end is padding */
    .size rewritten, . - rewritten

/* Return-buffer stuffing (the kernel's FILL_RETURN_BUFFER): the call jumps
 * over the int3, which therefore never runs. */
    .p2align 4, 0xcc
    .globl rsb_fill
    .type rsb_fill, @function
rsb_fill:
    call 1f
    int3
1:  call 2f
    int3
2:  addl $8, %esp
    ret
    .size rsb_fill, . - rsb_fill

/* The insert-mode marker before harmless code is itself harmless. */
    .p2align 4, 0xcc
    .globl marker_alone
    .type marker_alone, @function
marker_alone:
    .byte 0x0f, 0xb9, 0xff
    xorl %eax, %eax
    ret
    .size marker_alone, . - marker_alone

/* Opcodes Capstone 4 cuts short or does not know: their ModRM bytes (here
 * fa, 9d, f1) must not be read as cli, popf or int1. */
    .p2align 4, 0xcc
    .globl traps
    .type traps, @function
traps:
    ud2
    .byte 0x0f, 0xb9, 0x40, 0xfa            /* ud1 -6(%eax), %eax */
    .byte 0x0f, 0xff, 0x9d, 0x00, 0x00, 0x00, 0x00 /* ud0 0(%ebp), %ebx */
    .byte 0x0f, 0x01, 0xe8                  /* serialize */
    .byte 0x66, 0x0f, 0xae, 0xf1            /* tpause %ecx: its f1 is not int1 */
    ret
    .size traps, . - traps

/* String moves, rep prefixes, calls and far-looking near forms. */
    .p2align 4, 0xcc
    .globl copy
    .type copy, @function
copy:
    rep movsb
    rep stosl
    call *%eax
    jmp *(%ebx)
    .size copy, . - copy

    .section .data
    .byte 0xfa, 0xfb, 0x9c, 0x9d, 0xcc, 0xcf, 0xf4, 0x0f, 0x01, 0x10

    .section .note.GNU-stack, "", @progbits

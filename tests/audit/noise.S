/* Test input for tests/test_audit.py: undecodable bytes between functions, which warn but do not hide the code after them. */

    .text
    .globl _start
    .type _start, @function
_start:
    ret
    .size _start, . - _start

    .globl noise
noise:
    .fill 40, 1, 0x0f

    .globl after_noise
    .type after_noise, @function
after_noise:
    cli
    ret
    .size after_noise, . - after_noise

    .section .note.GNU-stack, "", @progbits

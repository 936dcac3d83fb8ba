/* The 256 trap entry stubs, the common frame builder, and the ring 3 round trip. */

#define SEL_KDATA 0x18
#define SEL_UCODE 0x23
#define SEL_UDATA 0x2B

    .text
/* Stub for vector \vec: pushes a dummy error code where the CPU pushes none
 * (SDM 6.13: #DF, #TS, #NP, #SS, #GP, #PF, #AC and #CP push one). Each stub
 * is 16 bytes from the last, so the IDT can be filled by arithmetic. */
    .macro trap_stub vec
    .balign 16
    .if (\vec == 8) || ((\vec >= 10) && (\vec <= 14)) || (\vec == 17) || (\vec == 21)
    .else
    pushl $0
    .endif
    pushl $\vec
    jmp trap_common
    .endm

    .balign 16
    .globl trap_stubs
trap_stubs:
    .set vec, 0
    .rept 256
    trap_stub vec
    .set vec, vec + 1
    .endr

/* Builds struct trapframe (guest.h) and calls trap_dispatch(frame). */
trap_common:
    pushal
    pushl %ds
    pushl %es
    pushl %fs
    pushl %gs
    movw $SEL_KDATA, %ax
    movw %ax, %ds
    movw %ax, %es
    pushl %esp
    call trap_dispatch
    addl $4, %esp
    popl %gs
    popl %fs
    popl %es
    popl %ds
    popal
    addl $8, %esp
    iret

/* uint32_t user_enter(uint32_t eip, uint32_t esp, uint32_t eflags) */
    .globl user_enter
user_enter:
    pushl %ebx
    pushl %esi
    pushl %edi
    pushl %ebp
    movl %esp, user_saved_esp
    movl 20(%esp), %eax
    movl 24(%esp), %ecx
    movl 28(%esp), %edx
    movw $SEL_UDATA, %bx
    movw %bx, %ds
    movw %bx, %es
    pushl $SEL_UDATA
    pushl %ecx
    pushl %edx
    pushl $SEL_UCODE
    pushl %eax
    iret

/* void user_return(uint32_t value): back to user_enter's caller, from a kernel handler. */
    .globl user_return
user_return:
    movl 4(%esp), %eax
    movl user_saved_esp, %esp
    popl %ebp
    popl %edi
    popl %esi
    popl %ebx
    ret

    .bss
    .balign 4
user_saved_esp:
    .space 4

/* The runtime blob copied to R3_CODE: 32-bit entry stubs and the 64-bit gate.
 *
 * Rewritten guest code calls `*R3_TABLE+4*N`; the table points at the stubs
 * below. The fast stubs (sti, pushf fixup, popf) run in 32-bit compatibility
 * mode and touch only the shared page. Every other entry, and the fast ones
 * when an interrupt is pending, far-jumps to the 64-bit trampoline, which
 * saves the guest registers in the shared page, moves to the monitor's stack
 * and TLS base, and calls the monitor's gate handler. The way back is one
 * iretq, which loads CS, EIP, EFLAGS, SS and ESP at once.
 *
 * The blob is position-independent: it names the shared page and itself by
 * their fixed guest addresses, and its own labels only as offsets.
 */
#include "ring3/abi.h"
#include "shared.h"

#define HOST_CS64   0x33        /* the host's 64-bit user code segment */
#define SH(off)     (R3_SHARED + (off))
#define BLOB(label) (R3_CODE + ((label) - r3_blob))
#define GATE_STUB_SIZE 32
#define SUD_ALLOW   0           /* SYSCALL_DISPATCH_FILTER_ALLOW */
#define SUD_BLOCK   1           /* SYSCALL_DISPATCH_FILTER_BLOCK */
#define EFLAGS_IF   0x200
#define EFLAGS_IOPL 0x3000

/* The entry numbers as assembler symbols R3_E_<name>. */
#define R3_ASM_SET(num, name, words, path, contract) .set R3_E_##name, num;
R3_ENTRIES(R3_ASM_SET)

    .section .rodata.r3_blob, "a"
    .balign 64
    .globl r3_blob, r3_blob_end
r3_blob:
/* Header, read by monitor/runtime.c (struct r3_blob_header). */
    .long stub_sti - r3_blob
    .long stub_pushf - r3_blob
    .long stub_popf - r3_blob
    .long gate_stubs - r3_blob
    .long GATE_STUB_SIZE
    .long exit64 - r3_blob
mon_rsp:     .quad 0            /* filled in before the page is made read-only */
mon_fsbase:  .quad 0
mon_handler: .quad 0
mon_sud:     .quad 0            /* address of the Syscall User Dispatch selector byte */
mon_xsave:   .quad 0            /* 64-byte aligned XSAVE area for the guest's vector state */
gate_farptr: .long BLOB(tramp64)
             .word HOST_CS64
    .balign 16

    .code32
/* sti: virtual IF := 1; a waiting interrupt needs the monitor. */
stub_sti:
    movb $1, %ss:SH(SH_VIF)
    pushfl
    cmpb $0, %ss:SH(SH_PENDING)
    jne 1f
    popfl
    ret
1:  popfl
    jmp gate_stubs + GATE_STUB_SIZE * R3_E_STI

/* After an inline pushfl: put the virtual IF (and IOPL 0) into the image. */
stub_pushf:
    pushfl
    andl $~(EFLAGS_IF | EFLAGS_IOPL), 8(%esp)
    testb $1, %ss:SH(SH_VIF)
    jz 1f
    orl $EFLAGS_IF, 8(%esp)
1:  popfl
    ret

/* popf: arithmetic flags, DF, TF, AC, NT from the image; IF into the shared
 * page. At CPL 3 the CPU ignores the image's IF and IOPL (SDM vol. 2, POPF). */
stub_popf:
    testl $EFLAGS_IF, 4(%esp)
    jz 1f
    movb $1, %ss:SH(SH_VIF)
    cmpb $0, %ss:SH(SH_PENDING)
    jne 3f
    jmp 2f
1:  movb $0, %ss:SH(SH_VIF)
2:  pushl 4(%esp)
    popfl
    ret $4
3:  jmp gate_stubs + GATE_STUB_SIZE * R3_E_POPF

/* One stub per entry number: note the number, then far-jump to 64-bit code. */
    .balign GATE_STUB_SIZE
gate_stubs:
    .set entry_no, 0
    .rept R3_ENTRY_COUNT
    .balign GATE_STUB_SIZE
    movl %eax, %ss:SH(SH_EAX)
    movl $entry_no, %ss:SH(SH_ENTRY)
    ljmpl *%cs:BLOB(gate_farptr)
    .set entry_no, entry_no + 1
    .endr
    .balign GATE_STUB_SIZE

    .code64
/* The gate, now in 64-bit mode on the guest's stack with the guest's TLS base. */
tramp64:
    movl $R3_SHARED, %eax
    movl %ecx, SH_ECX(%rax)
    movl %edx, SH_EDX(%rax)
    movl %ebx, SH_EBX(%rax)
    movl %esp, SH_ESP(%rax)
    movl %ebp, SH_EBP(%rax)
    movl %esi, SH_ESI(%rax)
    movl %edi, SH_EDI(%rax)
    movq mon_rsp(%rip), %rsp
    movq mon_sud(%rip), %rcx    /* the monitor may make system calls again */
    movb $SUD_ALLOW, (%rcx)
    pushfq
    popq %rcx
    movl %ecx, SH_EFLAGS(%rax)
    movl %es, %ecx              /* a 32-bit register destination zero-extends */
    movl %ecx, SH_ES(%rax)
    movl %ds, %ecx
    movl %ecx, SH_DS(%rax)
    movl %fs, %ecx
    movl %ecx, SH_FS(%rax)
    movl %gs, %ecx
    movl %ecx, SH_GS(%rax)
    rdfsbase %rcx
    movq %rcx, SH_FSBASE(%rax)
    rdgsbase %rcx
    movq %rcx, SH_GSBASE(%rax)
    movq mon_fsbase(%rip), %rcx
    wrfsbase %rcx
    pushq $2                    /* DF, AC and TF clear for C code */
    popfq
    /* The guest's x87/SSE/AVX registers: monitor C code (and the libc it
     * calls) uses them, and a guest process's state may be live in them
     * while its kernel runs. XSAVE with every component of XCR0 (SDM vol. 1, 13.7). */
    movq mon_xsave(%rip), %rcx
    movl $-1, %eax
    movl $-1, %edx
    xsave64 (%rcx)
    call *mon_handler(%rip)
    /* fall through: back to the guest as the shared page now says */

/* Load the guest state from the shared page and iretq into it. Also the
 * first entry into the guest (monitor/runtime.c calls it). */
exit64:
    movq mon_xsave(%rip), %rcx
    movl $-1, %eax
    movl $-1, %edx
    xrstor64 (%rcx)
    movq mon_sud(%rip), %rcx    /* from here on, a system call is the guest's */
    movb $SUD_BLOCK, (%rcx)
    movl $R3_SHARED, %eax
    movw SH_ES(%rax), %es
    movw SH_DS(%rax), %ds
    movw SH_FS(%rax), %fs
    movw SH_GS(%rax), %gs
    movq SH_FSBASE(%rax), %rcx
    wrfsbase %rcx
    movq SH_GSBASE(%rax), %rcx
    wrgsbase %rcx
    movl SH_SS(%rax), %ecx
    pushq %rcx
    movl SH_ESP(%rax), %ecx
    pushq %rcx
    movl SH_EFLAGS(%rax), %ecx
    pushq %rcx
    movl SH_CS(%rax), %ecx
    pushq %rcx
    movl SH_EIP(%rax), %ecx
    pushq %rcx
    movl SH_ECX(%rax), %ecx
    movl SH_EDX(%rax), %edx
    movl SH_EBX(%rax), %ebx
    movl SH_EBP(%rax), %ebp
    movl SH_ESI(%rax), %esi
    movl SH_EDI(%rax), %edi
    movl SH_EAX(%rax), %eax
    iretq
r3_blob_end:

/* Host signal handlers start here, before any C: the guest may have left its
 * own FS base loaded, and glibc reads its TLS (errno, the stack canary)
 * through FS. The C handler returns the FS base to reinstate. */
    .text
    .globl r3_signal_entry
    .type r3_signal_entry, @function
r3_signal_entry:
    pushq %rbx
    pushq %r12
    subq $8, %rsp
    rdfsbase %rbx
    movq r3_monitor_fsbase(%rip), %rax
    wrfsbase %rax
    movzbl r3_sud_selector(%rip), %r12d
    movb $SUD_ALLOW, r3_sud_selector(%rip)
    movq %rbx, %rcx             /* 4th argument: the interrupted FS base */
    call r3_signal_c
    wrfsbase %rax
    movb %r12b, r3_sud_selector(%rip)
    addq $8, %rsp
    popq %r12
    popq %rbx
    ret
    .size r3_signal_entry, . - r3_signal_entry

/* The signal restorer, and the only code Syscall User Dispatch lets make a
 * system call while the selector blocks: rt_sigreturn must reach the kernel. */
    .globl r3_sigreturn, r3_sigreturn_end
    .type r3_sigreturn, @function
r3_sigreturn:
    movl $15, %eax              /* __NR_rt_sigreturn */
    syscall
    ud2                         /* the kernel checks the address after syscall: keep it in range */
r3_sigreturn_end:
    .size r3_sigreturn, . - r3_sigreturn

    .data
    .globl r3_sud_selector
r3_sud_selector:
    .byte SUD_ALLOW

    .section .note.GNU-stack, "", @progbits

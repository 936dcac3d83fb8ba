/* The stub's assembly: start, signal entry and restorer, the map site, the gate and the way back to guest code, the runtime blob. */
#include "ring3/abi.h"
#include "protocol.h"
#include "asm.h"

#define NR_CLOSE        3
#define NR_MMAP         9
#define NR_MUNMAP       11
#define NR_SET_THREAD_AREA_32 243           /* i386 syscall table */
#define MAP_SHARED_FIXED 0x11               /* MAP_SHARED | MAP_FIXED */
#define MAP_POPULATE    0x8000
#define PROT_WRITE      2
#define RT(label)       (R3_CODE + ((label) - rt_blob))

/* Load a data segment register from ctl->r.sel[n] (%rax = ctl). An unusable selector (VERR
 * fails: not readable at CPL 3, SDM vol. 2 VERR) becomes the null one instead of a #GP here. */
.macro LOADSEL sreg, n
    movzwl CTL_R_SEL(\n)(%rax), %ecx
    testl $0xFFFC, %ecx
    jz 1f
    verr %cx
    jz 2f
1:  xorl %ecx, %ecx
2:  movw %cx, \sreg
.endm

/* es, ds, fs and gs from ctl->r.sel (%rax = ctl). Loading a segment register reads its
 * descriptor (SDM vol. 3, 3.4.3), and FS and GS cost about 150 cycles each on AMD: one that
 * already holds its selector keeps it, with the descriptor it read, unless a TLS or LDT entry
 * changed since all four were last loaded (stub_desc_changed, cleared only once they are, so
 * a restart in the middle loads them all again). */
.macro LOADSELS
    movabsq $stub_desc_changed, %rcx
    cmpb $0, (%rcx)
    je 5f
    LOADSEL %es, 0
    LOADSEL %ds, 3
    LOADSEL %fs, 4
    LOADSEL %gs, 5
    movabsq $stub_desc_changed, %rcx
    movb $0, (%rcx)
    jmp 6f
5:  LOADSEL_CHANGED %es, 0
    LOADSEL_CHANGED %ds, 3
    LOADSEL_CHANGED %fs, 4
    LOADSEL_CHANGED %gs, 5
6:
.endm

.macro LOADSEL_CHANGED sreg, n
    movl \sreg, %ecx
    cmpw CTL_R_SEL(\n)(%rax), %cx
    je 4f
    LOADSEL \sreg, \n
4:
.endm

/* Range %ebx of the control area's list at (array), counted by (count) but never past
 * STUB_MAX_RANGES: %rcx its address, %edi its linear address, %rsi its length in bytes; or a
 * jump to (done) past the last. */
.macro RANGE count, array, done
    movabsq $STUB_CTL_ADDR, %rcx
    movl \count(%rcx), %eax
    cmpl $STUB_MAX_RANGES, %eax
    jbe 10f
    movl $STUB_MAX_RANGES, %eax
10: cmpl %eax, %ebx
    jae \done
    imulq $RANGE_SIZE, %rbx, %rdx
    leaq \array(%rcx,%rdx), %rcx
    movl RANGE_LINEAR(%rcx), %edi
    movl RANGE_PAGES(%rcx), %esi
    shlq $12, %rsi
.endm

    .text
    .code64
    .globl _start
_start:                                 /* the initial stack: argc, argv, envp, auxv (x86-64 psABI 3.4.1) */
    movq %rsp, %rdi
    movabsq $stub_stack_top, %rsp
    call stub_main
    ud2

/* Host signal handlers (SA_SIGINFO: %rdi sig, %rsi siginfo, %rdx ucontext). The kernel clears
 * DF and TF for a handler but leaves AC as guest code set it: clear it before any C. */
    .globl stub_sig_entry
stub_sig_entry:
    pushfq
    andq $~0x40500, (%rsp)              /* AC, DF, TF */
    popfq
    subq $8, %rsp
    call stub_signal
    addq $8, %rsp
    testl %eax, %eax
    jz 9f
    /* x86-64 rt_sigreturn restores neither DS, ES, FS, GS nor EFLAGS.NT and ID
     * (restore_sigcontext, FIX_EFLAGS): load them here, as guest code is to have them. Loading
     * FS and GS also loads their bases from the descriptors, as 32-bit code expects; one that
     * LOADSELS keeps has the base its last load gave it, which nothing in the stub changes. */
    movabsq $STUB_CTL_ADDR, %rax
    LOADSELS
    movl CTL_R_EFLAGS(%rax), %ecx
    andl $(EFLAGS_ID | EFLAGS_NT), %ecx
    pushfq
    andq $~(EFLAGS_ID | EFLAGS_NT), (%rsp)
    orq %rcx, (%rsp)
    popfq
9:  ret                                 /* to stub_restorer (sa_restorer) */

    .globl stub_restorer
stub_restorer:
    movl $15, %eax                      /* __NR_rt_sigreturn */
    syscall
    ud2

/* The map site (protocol.h, "Mapping"). Guest code may jump to the syscall below with any
 * registers and stack, so after it nothing depends on either until STUB_MEMFD is closed:
 * every value comes from a constant, the control area or the kernel's return value. The
 * unmaps come first: the monitor wrote them with the maps, once the call proved the stub here.
 * Returns 0 when the monitor answered the call, else the call's error (a refusal). */
    .globl stub_map, stub_map_syscall
stub_map:
    pushq %rbx
    movl $STUB_NR_MAP, %eax
stub_map_syscall:
    syscall
    testq %rax, %rax                    /* 0: a resume with nothing to map (a parked stub's, protocol.h) */
    jz 5f
    cmpq $STUB_MEMFD, %rax              /* the monitor's answer: the memfd installed there (ADDFD_FLAG_SEND), or an error */
    jne 6f
    xorl %ebx, %ebx
1:  RANGE CTL_NUNMAP, CTL_UNMAP, 2f
    movl $NR_MUNMAP, %eax
    syscall
    incl %ebx
    jmp 1b
2:  xorl %ebx, %ebx
4:  RANGE CTL_NMAP, CTL_MAP, 3f
    movl RANGE_PROT(%rcx), %edx
    movq RANGE_OFFSET(%rcx), %r9
    movl $MAP_SHARED_FIXED, %r10d
    movl $(MAP_SHARED_FIXED | MAP_POPULATE), %eax
    testl $PROT_WRITE, %edx
    cmovnzl %eax, %r10d
    movl $STUB_MEMFD, %r8d
    movl $NR_MMAP, %eax
    syscall
    incl %ebx
    jmp 4b
3:  movl $NR_CLOSE, %eax
    movl $STUB_MEMFD, %edi
    syscall
    xorl %eax, %eax                     /* answered */
5:  popq %rbx                           /* STUB_MEMFD is gone: the stack may matter again */
    ret
6:  movq %rax, %rbx                     /* refused: no descriptor came, but one may be left from guest code's own jump here */
    movl $NR_CLOSE, %eax
    movl $STUB_MEMFD, %edi
    syscall
    movq %rbx, %rax
    popq %rbx
    ret

/* set_thread_area(%edi) through the i386 table (int $0x80 takes 32-bit pointers). */
    .globl stub_set_thread_area
stub_set_thread_area:
    pushq %rbx
    movl %edi, %ebx
    movl $NR_SET_THREAD_AREA_32, %eax
    int $0x80
    popq %rbx
    ret

/* A traced hand-off (--syscalls=sysemu, protocol.h): the int3 stops us in the monitor, which
 * knows this site from READY and continues us after it. */
    .globl stub_trap, stub_trap_site
stub_trap:
    int3
stub_trap_site:
    ret

/* --syscalls=sysemu: the monitor points a stub it stopped in guest code here, with the commands
 * and the guest's registers in the control area (stub.c stub_cmd_c). */
    .globl stub_cmd_entry
stub_cmd_entry:
    movabsq $stub_stack_top, %rsp
    pushq $2                            /* DF, AC, TF clear for C code */
    popfq
    call stub_cmd_c
    jmp stub_exit64

/* A gate call, from rt_common64 below: guest %eax and the entry are in the control area, %rax
 * is lost, every other register is the guest's, as is the stack (%esp at the return address). */
    .globl stub_gate64
stub_gate64:
    movabsq $STUB_CTL_ADDR, %rax
    movl %ecx, CTL_R_REG(1)(%rax)
    movl %edx, CTL_R_REG(2)(%rax)
    movl %ebx, CTL_R_REG(3)(%rax)
    movl %esp, CTL_R_REG(4)(%rax)
    movl %ebp, CTL_R_REG(5)(%rax)
    movl %esi, CTL_R_REG(6)(%rax)
    movl %edi, CTL_R_REG(7)(%rax)
    movabsq $stub_stack_top, %rsp
    pushfq
    popq %rcx
    movl %ecx, CTL_R_EFLAGS(%rax)
    pushq $2                            /* DF, AC, TF clear for C code */
    popfq
    movl %es, %ecx                      /* a 32-bit destination zero-extends */
    movl %ecx, CTL_R_SEL(0)(%rax)
    movl $HOST_CS32, CTL_R_SEL(1)(%rax)
    movl %ss, %ecx
    movl %ecx, CTL_R_SEL(2)(%rax)
    movl %ds, %ecx
    movl %ecx, CTL_R_SEL(3)(%rax)
    movl %fs, %ecx
    movl %ecx, CTL_R_SEL(4)(%rax)
    movl %gs, %ecx
    movl %ecx, CTL_R_SEL(5)(%rax)
    rdfsbase %rcx
    movq %rcx, CTL_FSBASE(%rax)
    rdgsbase %rcx
    movq %rcx, CTL_GSBASE(%rax)
    call stub_gate_c
    /* fall through */

/* Back to guest code from ctl->r with one iretq (SDM vol. 2, IRET: to CPL 3 it loads CS, RIP,
 * RFLAGS, SS and RSP). A preemption signal that arrives in stub code only sets
 * stub_preempt_pending; the handler moves one that lands between stub_exit_restart and
 * stub_exit_end back to stub_exit_restart, so the check below is never missed. Everything
 * after the restart point is reloaded from constants and the control area. */
    .globl stub_exit64, stub_exit_restart, stub_exit_end
stub_exit64:
stub_exit_restart:
    movabsq $stub_stack_top, %rsp
    movabsq $stub_preempt_pending, %rax
    cmpb $0, (%rax)
    jne 8f
    movabsq $STUB_CTL_ADDR, %rax
    LOADSELS
    movzwl CTL_R_SEL(2)(%rax), %ecx
    pushq %rcx
    movl CTL_R_REG(4)(%rax), %ecx
    pushq %rcx
    movl CTL_R_EFLAGS(%rax), %ecx
    andl $EFLAGS_USER, %ecx
    orl $(EFLAGS_IF | 2), %ecx
    pushq %rcx
    movzwl CTL_R_SEL(1)(%rax), %ecx     /* an LDT selector with RPL 3, else the flat 0x23 (protocol.h) */
    movl %ecx, %edx
    andl $7, %edx
    cmpl $7, %edx
    je 3f
    movl $HOST_CS32, %ecx
3:  pushq %rcx
    movl CTL_R_EIP(%rax), %ecx
    pushq %rcx
    movl CTL_R_REG(1)(%rax), %ecx
    movl CTL_R_REG(2)(%rax), %edx
    movl CTL_R_REG(3)(%rax), %ebx
    movl CTL_R_REG(5)(%rax), %ebp
    movl CTL_R_REG(6)(%rax), %esi
    movl CTL_R_REG(7)(%rax), %edi
    xorl %r8d, %r8d
    xorl %r9d, %r9d
    xorl %r10d, %r10d
    xorl %r11d, %r11d
    xorl %r12d, %r12d
    xorl %r13d, %r13d
    xorl %r14d, %r14d
    xorl %r15d, %r15d
    movl CTL_R_REG(0)(%rax), %eax
    iretq
stub_exit_end:
8:  movb $0, (%rax)
    call stub_preempt_c
    jmp stub_exit_restart

    .bss
    .balign 16
stub_stack:
    .skip 65536
stub_stack_top:

/* The runtime blob, copied to R3_CODE (abi.h). PUSHF and POPF run inline at CPL 3; every other
 * entry far-jumps to 64-bit code of its own that saves %eax and the entry number in the
 * control area and jumps to stub_gate64. The blob names itself only by RT() addresses. */
    .section .rodata.rt, "a"
    .balign 64
    .globl rt_blob, rt_blob_end, rt_pushf, rt_popf, rt_gate32, rt_gate64
rt_blob:
    .code32
/* After an inline pushfl: at CPL 3 the virtual IF is always 1, IOPL 0. */
rt_pushf:
    pushfl
    andl $~(EFLAGS_IF | 0x3000), 8(%esp)
    orl $EFLAGS_IF, 8(%esp)
    popfl
    ret
/* At CPL 3 with IOPL 0 the CPU itself ignores the image's IF and IOPL (SDM vol. 2, POPF). */
rt_popf:
    pushl 4(%esp)
    popfl
    ret $4

    .balign 8
rt_gate32:
    .set entry_no, 0
    .rept R3_ENTRY_COUNT
    .balign 8
    ljmpl *%cs:RT(rt_farptrs + 8 * entry_no)
    .set entry_no, entry_no + 1
    .endr

    .balign 8
rt_farptrs:
    .set entry_no, 0
    .rept R3_ENTRY_COUNT
    .long RT(rt_gate64 + 32 * entry_no)
    .word HOST_CS64, 0
    .set entry_no, entry_no + 1
    .endr

    .code64
    .balign 32
rt_gate64:
    .set entry_no, 0
    .rept R3_ENTRY_COUNT
    .balign 32
    movabsl %eax, STUB_CTL_ADDR + CTL_R_REG(0)
    movl $entry_no, %eax
    jmp rt_common64
    .set entry_no, entry_no + 1
    .endr
rt_common64:
    movabsl %eax, STUB_CTL_ADDR + CTL_ENTRY
    movabsq $stub_gate64, %rax
    jmp *%rax
rt_blob_end:

    .section .note.GNU-stack, "", @progbits

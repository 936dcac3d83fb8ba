/* The runtime blob copied to R3_CODE: 32-bit entry stubs and the 64-bit gate.
 *
 * Rewritten guest code calls `*R3_TABLE+4*N`; the table points at the stubs
 * below. The fast stubs (sti, pushf fixup, popf, and the kernel's common
 * segment-register pushes and loads) run in 32-bit compatibility mode and
 * touch only the shared page, the guest's stack and its GDT. Every other entry, and the fast ones
 * when an interrupt is pending, far-jumps to the 64-bit trampoline, which
 * saves the guest registers in the shared page, moves to the monitor's stack
 * and TLS base, and calls the monitor's gate handler. The way back is an
 * lretq to 32-bit code here that loads the rest, or, with TF or RF, or to a
 * code segment of the guest's, one iretq, which loads CS, EIP, EFLAGS, SS and
 * ESP at once.
 *
 * The blob is position-independent: it names the shared page and itself by
 * their fixed guest addresses, and its own labels only as offsets.
 */
#include "ring3/abi.h"

#include "shared.h"

#define HOST_CS64   0x33        /* the host's 64-bit user code segment */
#define HOST_CS32   0x23        /* the host's 32-bit user code segment */
#define XSTATE_ALL_BUT_PKRU 0xFFFFFDFF  /* RFBM bits 31:0: XCR0 bit 9 (PKRU) clear */
#define SH(off)     (R3_SHARED + (off))
#define BLOB(label) (R3_CODE + ((label) - r3_blob))
#define GATE_STUB_SIZE 32
#define SUD_ALLOW   0           /* SYSCALL_DISPATCH_FILTER_ALLOW */
#define SUD_BLOCK   1           /* SYSCALL_DISPATCH_FILTER_BLOCK */
#define EFLAGS_IF   0x200
#define EFLAGS_IOPL 0x3000
#define EFLAGS_TF   0x100
#define EFLAGS_RF   0x10000
#define EFLAGS_DF   0x400
#define EFLAGS_NT   0x4000
#define EFLAGS_AC   0x40000
#define EFLAGS_ID   0x200000
/* ucontext_t: uc_flags, uc_link, uc_stack (24 bytes), then gregs[REG_EFL = 17] (x86-64 psABI, <sys/ucontext.h>) */
#define UC_EFLAGS   (40 + 8 * 17)

/* The entry numbers as assembler symbols R3_E_<name>. */
#define R3_ASM_SET(num, name, words, path, contract) .set R3_E_##name, num;
R3_ENTRIES(R3_ASM_SET)

    .section .rodata.r3_blob, "a"
    .balign 64
    .globl r3_blob, r3_blob_end
r3_blob:
/* Header, read by monitor/cpu/runtime.c (struct r3_blob_header). */
    .long stub_sti - r3_blob
    .long stub_pushf - r3_blob
    .long stub_popf - r3_blob
    .long gate_stubs - r3_blob
    .long GATE_STUB_SIZE
    .long exit64 - r3_blob
    .long stub_push_sreg - r3_blob
    .long stub_mov_to_sreg - r3_blob
    .long stub_pop_sreg - r3_blob
    .long stub_fpu - r3_blob
    .long stub_sysenter - r3_blob
    .long sysenter_lazy - r3_blob
    .long sysenter_lazy_eax - r3_blob
    .long 0                     /* the quads below are 8-byte aligned, as in C */
mon_rsp:     .quad 0            /* filled in before the page is made read-only */
mon_fsbase:  .quad 0
mon_handler: .quad 0
mon_sud:     .quad 0            /* address of the Syscall User Dispatch selector byte */
mon_xsave:   .quad 0            /* 64-byte aligned XSAVE area for the guest's vector state */
mon_xsaveopt: .quad 0           /* nonzero: the CPU has XSAVEOPT (CPUID.(EAX=0DH,ECX=1):EAX bit 0) */
mon_fast:    .quad 0            /* fast_syscall (fast_syscall.h), or 0: none */
    .balign 16

    .code32
/* Jump to (label) when the published CPL is 1, 2 or 3; 0 and 0xFF (no state
 * published yet, before the guest enters protected mode) stay. Changes the
 * arithmetic flags. */
.macro OUTSIDE_CPL0 label
    cmpl $0, %cs:SH(SH_CPL)
    je 0f
    cmpl $3, %cs:SH(SH_CPL)
    jbe \label
0:
.endm

/* sti: virtual IF := 1; a waiting interrupt needs the monitor. Outside CPL 0
 * the gate decides by IOPL (SDM vol. 3, 6.8.1); CPL is read through CS, the
 * one segment whose limit never stops below the shared page. */
stub_sti:
    pushfl
    OUTSIDE_CPL0 1f
    movb $1, %ss:SH(SH_VIF)
    cmpb $0, %ss:SH(SH_PENDING)
    jne 1f
    popfl
    ret
1:  popfl
    jmp gate_stubs + GATE_STUB_SIZE * R3_E_STI

/* After an inline pushfl: put the virtual IF (and IOPL 0) into the image;
 * outside CPL 0 the gate does. */
stub_pushf:
    pushfl
    OUTSIDE_CPL0 2f
    andl $~(EFLAGS_IF | EFLAGS_IOPL), 8(%esp)
    testb $1, %ss:SH(SH_VIF)
    jz 1f
    orl $EFLAGS_IF, 8(%esp)
1:  popfl
    ret
2:  popfl
    jmp gate_stubs + GATE_STUB_SIZE * R3_E_PUSHF

/* popf: arithmetic flags, DF, TF, AC, NT from the image; IF into the shared
 * page. At CPL 3 the CPU ignores the image's IF and IOPL (SDM vol. 2, POPF):
 * the gate applies that. An image with TF goes to the gate as well, whose
 * way back sets TF with the iretq that also ends the instruction, so that
 * the single-step trap comes after the next one, not after the stub's ret. */
stub_popf:
    OUTSIDE_CPL0 3f
    testl $EFLAGS_TF, 4(%esp)
    jnz 3f
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

/* push %sreg, 32-bit, at CPL 0: the virtual selector the monitor published,
 * zero-extended (SDM vol. 2, PUSH: the CPU writes 2 or 4 bytes; the rest
 * goes to the gate). The words of the site are reused: the AUX slot becomes
 * the pushed value and the return address moves up over DESC. */
stub_push_sreg:
    pushl %eax
    pushfl                      /* +8 return address, +12 DESC, +16 AUX */
    cmpl $0, %cs:SH(SH_CPL)
    jne 1f
    movl 12(%esp), %eax
    testb $0x80, %al            /* DESC SIZE 2: a 32-bit push */
    jz 1f
    andl $0xF, %eax
    cmpl $5, %eax
    ja 1f
    movl %ss:SH(SH_VSEL)(,%eax,4), %eax
    movl %eax, 16(%esp)
    movl 8(%esp), %eax
    movl %eax, 12(%esp)
    popfl
    popl %eax
    leal 4(%esp), %esp          /* lea keeps the flags */
    ret
1:  popfl
    popl %eax
    jmp gate_stubs + GATE_STUB_SIZE * R3_E_PUSH_SREG

/* mov r16/m16, %sreg and pop %sreg (32-bit) at CPL 0, for es, ds, fs and
 * gs: when the selector is the one the monitor last loaded into that register
 * (SH_SEGC) and its GDT descriptor still reads as it did, every check the CPU
 * makes (SDM vol. 2, MOV and POP) comes out as it did then, so the same host
 * selector goes into the register. mov takes a register, or memory at
 * disp(%esp); the rest, and any miss, go to the gate. The monitor takes the
 * new state from SH_FASTLOAD. %edi says which of the two is running. */
stub_pop_sreg:
    pushfl
    pushal                      /* +28 eax ... +0 edi, +32 flags, +36 return, +40 DESC, +44 AUX, +48 the word popped */
    movl $1, %edi
    testb $0x80, 40(%esp)       /* DESC SIZE 2: a 32-bit pop */
    jz 9f
    movzwl 48(%esp), %eax
    movl 40(%esp), %ecx
    jmp 2f

stub_mov_to_sreg:
    pushfl
    pushal                      /* as above */
    xorl %edi, %edi
    movl 40(%esp), %ebx
    movl %ebx, %ecx
    movl %ebx, %eax
    andl $0x30, %eax            /* KIND */
    cmpl $0x10, %eax
    je 1f
    cmpl $0x20, %eax
    jne 9f
    movl %ebx, %eax
    andl $0x1CFF00, %eax        /* BASE %esp, no INDEX, no segment override */
    cmpl $0x8400, %eax
    jne 9f
    movl 44(%esp), %eax
    movzwl 48(%esp,%eax), %eax  /* %esp at the site is %esp + 48 here */
    jmp 2f
1:  movl %ebx, %eax
    shrl $8, %eax
    andl $0xF, %eax             /* the source register, not %esp */
    cmpl $4, %eax
    je 9f
    cmpl $7, %eax
    ja 9f
    negl %eax
    movzwl 28(%esp,%eax,4), %eax
2:  /* %eax: the selector; %ecx: DESC, whose REG is the segment register */
    cmpl $0, %cs:SH(SH_CPL)
    jne 9f
    andl $0xF, %ecx
    cmpl $5, %ecx
    ja 9f
    movl $0x39, %ebx            /* es, ds, fs, gs */
    btl %ecx, %ebx
    jnc 9f
    movl %ecx, %edx
    shll $5, %edx               /* SEGC_SIZE */
    cmpl %ss:SH(SH_SEGC + SEGC_SEL)(%edx), %eax
    jne 9f
    movl %ss:SH(SH_SEGC + SEGC_ADDR)(%edx), %ebx
    testl %ebx, %ebx
    jz 3f
    movl %ss:(%ebx), %esi
    cmpl %ss:SH(SH_SEGC + SEGC_LO)(%edx), %esi
    jne 9f
    movl %ss:4(%ebx), %esi
    cmpl %ss:SH(SH_SEGC + SEGC_HI)(%edx), %esi
    jne 9f
3:  movl %eax, %ss:SH(SH_VSEL)(,%ecx,4)
    btsl %ecx, %ss:SH(SH_FASTLOAD)
    movl %ss:SH(SH_SEGC + SEGC_HOST)(%edx), %eax
    cmpl $3, %ecx
    jb 4f
    je 5f
    cmpl $4, %ecx
    je 6f
    movw %ax, %gs
    jmp 7f
4:  movw %ax, %es
    jmp 7f
5:  movw %ax, %ds
    jmp 7f
6:  movw %ax, %fs
7:  testl %edi, %edi
    jnz 8f
    popal
    popfl
    ret $8
8:  movl 36(%esp), %eax         /* pop: return with the popped word gone too */
    movl %eax, 48(%esp)
    popal
    popfl
    leal 12(%esp), %esp
    ret
9:  testl %edi, %edi
    jnz 10f
    popal
    popfl
    jmp gate_stubs + GATE_STUB_SIZE * R3_E_MOV_TO_SREG
10: popal
    popfl
    jmp gate_stubs + GATE_STUB_SIZE * R3_E_POP_SREG

/* Before an instruction that reads or writes the x87/SSE/AVX state (the FPU
 * entry): the registers hold the guest's state, unless SH_VEC_LAZY says that
 * it waits in the stub of the process that last ran; then the gate loads it.
 * A kernel that comes here marks its vector-state code, which SH_FPU_SITES
 * tells the monitor. Outside CPL 0 the registers are the process's own. */
stub_fpu:
    pushfl
    OUTSIDE_CPL0 2f
    movb $1, %ss:SH(SH_FPU_SITES)
    cmpb $0, %ss:SH(SH_VEC_LAZY)
    jne 1f
2:  popfl
    ret
1:  popfl
    jmp gate_stubs + GATE_STUB_SIZE * R3_E_FPU

/* SYSENTER from CPL 3 without entering the monitor, where fast_syscall.c armed it
 * (fast_syscall.h, "SYSENTER in the runtime"): SH_SYSENTER_TO is sysenter_lazy then, else the
 * gate. It does what fast_syscall.c's sysenter() does: the CPU's SYSENTER (SDM vol. 2: CS, SS,
 * ESP and EIP from the MSRs, IF clear; the process's EIP and ESP are not kept, nor is the
 * return address of the site) and CPL 0's flat DS and ES, all worked out in the shared page
 * beforehand; the monitor brings its own state up to date at its next entry
 * (SH_LAZY_ENTERED). First, that the process has loaded no segment register itself since the
 * monitor published them, for which EFLAGS and %eax go just below the return address: a
 * fault on either push (a stack page not mapped) takes the gate instead, with nothing changed
 * (runtime_sysenter_fault). The process's SS has base 0 (the monitor armed it so), and
 * the flat one that replaces it before the pops finds the same bytes. */
/* To 1f unless segment register (reg) holds the selector the shared page says at (off). */
.macro SAME_SEL reg, off
    movl %\reg, %eax
    cmpw %cs:SH(\off), %ax
    jne 1f
.endm

stub_sysenter:
    jmp *%cs:SH(SH_SYSENTER_TO)
sysenter_lazy:
    pushfl
sysenter_lazy_eax:
    pushl %eax
    movl %cs, %eax
    cmpw $HOST_CS32, %ax
    jne 1f
    SAME_SEL ss, SH_SS
    SAME_SEL ds, SH_DS
    SAME_SEL es, SH_ES
    SAME_SEL fs, SH_FS
    SAME_SEL gs, SH_GS
    movw %cs:SH(SH_LAZY_SS), %ss
    movl %cs:SH(SH_LAZY_SS), %eax
    movl %eax, %ss:SH(SH_SS)
    movl %cs:SH(SH_LAZY_ES), %eax
    movl %eax, %ss:SH(SH_ES)
    movw %ax, %es
    movl %cs:SH(SH_LAZY_DS), %eax
    movl %eax, %ss:SH(SH_DS)
    movw %ax, %ds
    movl %cs:SH(SH_LAZY_VCS), %eax
    movl %eax, %ss:SH(SH_VSEL + 4)
    movl %cs:SH(SH_LAZY_VSS), %eax
    movl %eax, %ss:SH(SH_VSEL + 8)
    movb $0, %ss:SH(SH_VIF)
    movl $0, %ss:SH(SH_CPL)
    movl $BLOB(gate_stubs + GATE_STUB_SIZE * R3_E_SYSENTER), %ss:SH(SH_SYSENTER_TO)
    movl $1, %ss:SH(SH_LAZY_ENTERED)
    popl %eax
    popfl
    movl %cs:SH(SH_LAZY_ESP), %esp
    jmp *%cs:SH(SH_LAZY_EIP)
1:  popl %eax
    popfl
    jmp gate_stubs + GATE_STUB_SIZE * R3_E_SYSENTER

/* The second half of the short way back (exit64): lretq left 64-bit mode for here with the
 * guest's EFLAGS, SS and data segments loaded; the rest comes from the shared page through
 * CS, whose limit never stops below it, and changes no flag. Here, not past r3_blob_end:
 * a host signal that arrives before the jmp is one in the runtime's stubs, not in guest
 * code (runtime_in_stubs), and a timer's then waits for the next look, as in the stubs
 * above (signals.c). */
exit32:
    movl %cs:SH(SH_ESP), %esp
    movl %cs:SH(SH_ECX), %ecx
    movl %cs:SH(SH_EDX), %edx
    movl %cs:SH(SH_EBX), %ebx
    movl %cs:SH(SH_EBP), %ebp
    movl %cs:SH(SH_ESI), %esi
    movl %cs:SH(SH_EDI), %edi
    movl %cs:SH(SH_EAX), %eax
    jmp *%cs:SH(SH_EIP)

/* One stub per entry number: far-jump at once to 64-bit code of its own,
 * which notes the number. Nothing here touches memory through a data or
 * stack segment, which at CPL 3 ends below the kernel's pages (segment.c),
 * so the vDSO's gate calls work at CPL 3 too. */
    .balign GATE_STUB_SIZE
gate_stubs:
    .set entry_no, 0
    .rept R3_ENTRY_COUNT
    .balign GATE_STUB_SIZE
    ljmpl *%cs:BLOB(gate_farptrs + 8 * entry_no)
    .set entry_no, entry_no + 1
    .endr
    .balign GATE_STUB_SIZE

gate_farptrs:
    .set entry_no, 0
    .rept R3_ENTRY_COUNT
    .long BLOB(gate_stubs64 + GATE_STUB_SIZE * entry_no)
    .word HOST_CS64, 0
    .set entry_no, entry_no + 1
    .endr

    .code64
/* In 64-bit mode segment limits do not apply (SDM vol. 3, 5.3.1); the shared
 * page is reached RIP-relative, at its fixed distance from this code. */
#define SH64(off) (r3_blob - R3_CODE + R3_SHARED + (off))
    .balign GATE_STUB_SIZE
gate_stubs64:
    .set entry_no, 0
    .rept R3_ENTRY_COUNT
    .balign GATE_STUB_SIZE
    movl %eax, SH64(SH_EAX)(%rip)
    movl $entry_no, SH64(SH_ENTRY)(%rip)
    jmp tramp64
    .set entry_no, entry_no + 1
    .endr
    .balign GATE_STUB_SIZE

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
     * while its kernel runs. XSAVE with every component of XCR0 (SDM vol. 1, 13.7)
     * but PKRU, which stays the monitor's (x86/xstate.h). XSAVEOPT where the
     * CPU has it: the area is the one exit64's XRSTOR loaded, so the CPU may
     * leave out what is unchanged since (13.9), and monitor code writes the
     * area only between this save and that restore. Neither happens while
     * the guest's state waits in a stub (SH_VEC_LAZY): the registers then
     * hold nothing of the guest's, and the monitor loads its image before
     * guest code reaches them (the FPU entry). */
    cmpb $0, SH_VEC_LAZY(%rax)
    jne 2f
    /* SYSENTER and SYSEXIT first try the path that leaves the registers alone; its
     * code uses none of them (fast_syscall.h). */
    cmpq $0, mon_fast(%rip)
    je 3f
    cmpl $R3_E_SYSENTER, SH_ENTRY(%rax)
    je 4f
    cmpl $R3_E_SYSEXIT, SH_ENTRY(%rax)
    jne 3f
4:  call *mon_fast(%rip)
    testl %eax, %eax
    jnz exit_vector_live
3:  movq mon_xsave(%rip), %rcx
    movl $XSTATE_ALL_BUT_PKRU, %eax
    movl $-1, %edx
    cmpq $0, mon_xsaveopt(%rip)
    je 1f
    xsaveopt64 (%rcx)
    jmp 2f
1:  xsave64 (%rcx)
2:  call *mon_handler(%rip)
    /* fall through: back to the guest as the shared page now says */

/* Load segment register (reg) from the shared page at (off) unless it holds that selector. */
.macro RELOAD_IF_CHANGED reg, off
    movl %\reg, %ecx
    cmpw \off(%rax), %cx
    je 7f
    movw \off(%rax), %\reg
7:
.endm

/* Load the guest state from the shared page and iretq into it. Also the
 * first entry into the guest (monitor/cpu/runtime.c calls it). */
exit64:
    movl $R3_SHARED, %eax
    cmpb $0, SH_VEC_LAZY(%rax)
    jne 3f
    movq mon_xsave(%rip), %rcx
    movl $XSTATE_ALL_BUT_PKRU, %eax
    movl $-1, %edx
    xrstor64 (%rcx)
3:
exit_vector_live:               /* the vector registers hold the guest's state already */
    movq mon_sud(%rip), %rcx    /* from here on, a system call is the guest's */
    movb $SUD_BLOCK, (%rcx)
    /* A data segment register that already holds its selector keeps it, and
     * the descriptor it was loaded from, as long as no host descriptor has
     * changed since the last time all four were loaded (SH_DESC_GEN): loading
     * FS or GS is dear (on AMD about 150 cycles each), and the gate's own
     * code never loads any. The generation read here is recorded only once
     * all four are loaded: a signal whose handler changes a descriptor in
     * between leaves it behind, and the next way back loads them all. The
     * bases come next, from the shared page. */
    movl $R3_SHARED, %eax
    movl SH_DESC_GEN(%rax), %edx
    cmpl SH_LOADED_GEN(%rax), %edx
    jne 5f
    RELOAD_IF_CHANGED es, SH_ES
    RELOAD_IF_CHANGED ds, SH_DS
    RELOAD_IF_CHANGED fs, SH_FS
    RELOAD_IF_CHANGED gs, SH_GS
    jmp 6f
5:  movw SH_ES(%rax), %es
    movw SH_DS(%rax), %ds
    movw SH_FS(%rax), %fs
    movw SH_GS(%rax), %gs
    movl %edx, SH_LOADED_GEN(%rax)
6:  movq SH_FSBASE(%rax), %rcx
    wrfsbase %rcx
    movq SH_GSBASE(%rax), %rcx
    wrgsbase %rcx
    /* The short way back, to ring3's own 32-bit code segment without TF or RF: SS loaded
     * only when it changes, EFLAGS by popfq, and lretq to exit32. iretq does all of that in
     * one instruction, but costs about twice an lretq: on a 2-core Intel Xeon VM, 260-280 TSC
     * ticks for an iretq within 64-bit mode against 140 for an lretq, and 61 for a load of
     * SS. TF and RF must come with the instruction that ends the way back, which only iretq
     * can do (stub_popf above); a guest code segment of its own (an LDT's) needs the far
     * transfer to load it. popfq at CPL 3 leaves IF and IOPL as iretq does (SDM vol. 2,
     * POPF and IRET); AC may be set from here on, and every access after it is aligned. */
    movl SH_SS(%rax), %ecx
    cmpl $HOST_CS32, SH_CS(%rax)
    jne 8f
    testl $(EFLAGS_TF | EFLAGS_RF), SH_EFLAGS(%rax)
    jnz 8f
    movl %ss, %edx
    cmpw %cx, %dx
    je 9f
    movw %cx, %ss
9:  pushq $HOST_CS32
    leaq exit32(%rip), %rcx
    pushq %rcx
    movl SH_EFLAGS(%rax), %ecx
    pushq %rcx
    popfq
    lretq
8:  pushq %rcx
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
    /* The host clears DF and TF for a handler but leaves AC as the guest set
     * it (popf): with the host's CR0.AM, C code would take #AC on its first
     * unaligned access. sigreturn restores the guest's from the frame. */
    pushfq
    andq $~(EFLAGS_AC | EFLAGS_DF | EFLAGS_TF), (%rsp)
    popfq
    pushq %rbx
    pushq %r12
    pushq %r13
    movq %rdx, %r13             /* the ucontext, for the flags below */
    rdfsbase %rbx
    movq r3_monitor_fsbase(%rip), %rax
    wrfsbase %rax
    movzbl r3_sud_selector(%rip), %r12d
    movb $SUD_ALLOW, r3_sud_selector(%rip)
    movq %rbx, %rcx             /* 4th argument: the interrupted FS base */
    call r3_signal_c
    /* An emulation in the handler (insert mode) may have changed what the
     * host's sigreturn does not restore from the frame: the FS and GS
     * selectors and the GS base (loaded as exit64 does; C code could not
     * load FS itself). */
    cmpb $0, r3_signal_reload_state(%rip)
    je 1f
    movb $0, r3_signal_reload_state(%rip)
    movl $R3_SHARED, %ecx
    movw SH_FS(%rcx), %fs
    movw SH_GS(%rcx), %gs
    movq SH_GSBASE(%rcx), %rdx
    wrgsbase %rdx
    /* Neither does it restore EFLAGS.NT and ID: x86-64 rt_sigreturn takes
     * only FIX_EFLAGS from the frame and keeps the rest as they are live at
     * its system call, and the host's signal delivery left them as the
     * interrupted code had them. A guest event may have changed them (NT
     * cleared by an exception's delivery, SDM vol. 3, 6.12.1): make them the
     * frame's now. */
1:  movq UC_EFLAGS(%r13), %rdx
    andl $(EFLAGS_NT | EFLAGS_ID), %edx
    pushfq
    andq $~(EFLAGS_NT | EFLAGS_ID), (%rsp)
    orq %rdx, (%rsp)
    popfq
    wrfsbase %rax
    movb %r12b, r3_sud_selector(%rip)
    popq %r13
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
    .globl r3_signal_reload_state
r3_signal_reload_state:
    .byte 0

    .section .note.GNU-stack, "", @progbits

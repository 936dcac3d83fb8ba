/* Hand-assembled guest code for tests/stub/test_stub.c: 32-bit routines, and 64-bit ones reached by ljmp to 0x33. */
#include "ring3/abi.h"
#include "protocol.h"
#include "asm.h"
#include "guest.h"

#define R3_ASM_SET(num, name, words, path, contract) .set R3_E_##name, num;
R3_ENTRIES(R3_ASM_SET)

#define GATE(n) call *%cs:(R3_TABLE + 4 * (n))

/* In 64-bit code: %r12 = the 64-bit address %edi:%esi (ZF set when it is 0). */
/* From 32-bit code: into 64-bit mode, and a gate event forged in the control area (%rax). */
.macro FORGE_GATE_EVENT
    ljmp $HOST_CS64, $1f
    .code64
1:  movabsq $STUB_CTL_ADDR, %rax
    movl $STUB_EV_GATE, CTL_KIND(%rax)
    movl $STUB_EVENT, CTL_STATE(%rax)
.endm

.macro TARGET64
    movl %esi, %r11d
    movl %edi, %r12d
    shlq $32, %r12
    orq %r11, %r12
.endm

    .text
    .code32
#define SYM_WORD(name) .long name;
    GUEST_SYMS(SYM_WORD)

/* 1: a system call round trip */
t1: movl $0x11111111, %ebx
    movl $0x22222222, %ecx
    movl $0x33333333, %edx
    movl $0x44444444, %esi
    movl $0x55555555, %edi
    movl $0x66666666, %ebp
    movl $4, %eax
    int $0x80
t1_after:
    movl %eax, %edi
    movl $5, %eax
    int $0x80
t1_end:

/* 2: page faults and mappings */
t2: movl G_DATA, %eax
    movl $0xcafef00d, G_RO
    movl $0x600dcafe, G_DATA + 4
    int $0x80

/* 3: a gate call, inline pushf/popf, the shared page absent */
t3: GATE(R3_E_IN)
t3_ret:
    pushfl
    GATE(R3_E_PUSHF)
    popl %eax
    pushl $0xCD5                    /* CF PF AF ZF SF DF OF */
    GATE(R3_E_POPF)
    pushfl
    popl %ebx
    cld
    int $0x80
t3_shared:
    movl R3_SHARED, %ecx
    int $0x80

/* 4: vector state through a signal event and a gate event */
t4: movl $0x11223344, %eax
    movd %eax, %xmm0
    int $0x80
    movd %xmm0, %ebx
    int $0x80
    movl $0x99aabbcc, %eax
    movd %eax, %xmm0
    GATE(R3_E_IN)
t4_ret:
    movd %xmm0, %ebx
    int $0x80

/* 5: a TLS descriptor */
t5: movl $0x63, %eax
    movw %ax, %gs
    movzbl %gs:0, %eax
    int $0x80

/* 6: hostile. 64-bit jump to %edi:%esi with %rax = %eax, %rdi = %ebx, %rsi = %ecx, %rdx = %edx,
 * %r10 = %ebp, %rsp = %esp. */
g_jmp64:
    ljmp $HOST_CS64, $1f
    .code64
1:  movl %esi, %r11d
    movl %edi, %r12d
    shlq $32, %r12
    orq %r11, %r12
    movl %eax, %eax
    movl %ebx, %edi
    movl %ecx, %esi
    movl %edx, %edx
    movl %ebp, %r10d
    movl %esp, %esp
    jmp *%r12
g_syscall64:
    syscall
    hlt
    .code32

/* A forged map request in the control area, then a jump to the map site (%edi:%esi). */
g_forge:
    ljmp $HOST_CS64, $1f
    .code64
1:  movabsq $STUB_CTL_ADDR, %rax
    movl $G_FORGE_LIN, CTL_MAP + RANGE_LINEAR(%rax)
    movl $1, CTL_MAP + RANGE_PAGES(%rax)
    movq $G_FORGE_GPA, CTL_MAP + RANGE_OFFSET(%rax)
    movl $1, CTL_MAP + RANGE_PROT(%rax)
    movl $1, CTL_NMAP(%rax)
    movl %esp, %esp
    leaq g_after64(%rip), %rcx
    pushq %rcx                      /* the map site's `ret` ... */
    pushq $0                        /* ... after its `pop %rbx` */
    TARGET64
    movl $STUB_NR_MAP, %eax
    jmp *%r12
g_after64:
    hlt
    .code32

/* 6g: a forged event, then, once the monitor answers it with a map, a jump to the map site
 * (%edi:%esi) with TF set by the iretq, so that a trap interrupts the map code right after
 * the call (SDM vol. 3, 18.3.1.4: single-step after the instruction that began with TF set) */
g_forge_tf:
    FORGE_GATE_EVENT
2:  pause
    cmpl $STUB_RUN, CTL_STATE(%rax)
    jne 2b
    TARGET64
    movl %esp, %esp
    movq %rsp, %rcx
    pushq $HOST_DS
    pushq %rcx
    pushfq
    orq $0x100, (%rsp)              /* TF */
    pushq $HOST_CS64
    pushq %r12
    movl $STUB_NR_MAP, %eax
    iretq
    .code32

/* 6h: a forged event, then guest code that goes on reading G_FORGE_LIN for ever, whatever the
 * monitor answers. Under sysemu the forged hand-off is a stop at the stub's own int3 (%edi:%esi,
 * the byte before its trap site), from which the stub's `ret` comes back here. */
g_forge_keep:
    FORGE_GATE_EVENT
    TARGET64
    jz 2f
    movl %esp, %esp
    leaq 2f(%rip), %rcx
    pushq %rcx
    jmp *%r12
2:  movl G_FORGE_LIN, %eax
    jmp 2b
    .code32

g_probe:
    movl G_FORGE_LIN, %eax
    int $0x80

g_loop:
    jmp g_loop

/* 7: round trips */
g_sysloop:
    int $0x80
    jmp g_sysloop
g_gateloop:
    GATE(R3_E_IN)
g_gateloop_ret:
    jmp g_gateloop

/* 8: a load from G_DATA and a gate call, in a loop */
g_maploop:
    movl G_DATA, %eax
    GATE(R3_E_IN)
g_maploop_ret:
    jmp g_maploop

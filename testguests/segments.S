/* segments: far transfers and stack-segment switches that C cannot express. */

#define SEL_KCODE 0x10
#define SEL_KDATA 0x18

    .text
/* Far-call target: returns its CS in %eax. */
    .globl far_read_cs
far_read_cs:
    xorl %eax, %eax
    movw %cs, %ax
    lret

/* Far-call target that drops one dword argument: lret $4. */
    .globl far_read_cs_pop4
far_read_cs_pop4:
    xorl %eax, %eax
    movw %cs, %ax
    lret $4

/* uint32_t ljmp_mem_read_cs(uint16_t sel): far jump through a memory
 * pointer into sel, read CS there, far jump back to SEL_KCODE directly. */
    .globl ljmp_mem_read_cs
ljmp_mem_read_cs:
    movl 4(%esp), %eax
    movw %ax, farptr + 4
    movl $1f, farptr
    ljmp *farptr
1:  xorl %eax, %eax
    movw %cs, %ax
    ljmp $SEL_KCODE, $2f
2:  ret

/* uint32_t lcall_imm_read_cs(void): a direct far call to SEL_KCODE:far_read_cs. */
    .globl lcall_imm_read_cs
lcall_imm_read_cs:
    lcall $SEL_KCODE, $far_read_cs
    ret

/* uint32_t lcall_mem_pop4(uint16_t sel): far call through memory to
 * sel:far_read_cs_pop4 with one pushed argument; returns CS seen there, or
 * 0xdead if the stack was not balanced afterwards. */
    .globl lcall_mem_pop4
lcall_mem_pop4:
    pushl %ebx
    movl 8(%esp), %eax
    movw %ax, farptr + 4
    movl $far_read_cs_pop4, farptr
    movl %esp, %ebx
    pushl $0x1234
    lcall *farptr
    cmpl %esp, %ebx
    je 1f
    movl $0xdead, %eax
1:  popl %ebx
    ret

/* uint32_t lcall_gate(uint16_t gate_sel): far call through a call gate (the
 * offset in the instruction is ignored, SDM 5.8.4); returns CS seen there. */
    .globl lcall_gate
lcall_gate:
    movl 4(%esp), %eax
    movw %ax, farptr + 4
    movl $0, farptr
    lcall *farptr
    ret

/* uint32_t lss_read_ss(uint16_t sel): lss to sel with the same esp, read SS,
 * lss back to SEL_KDATA; returns SS seen, or 0xdead if esp moved. */
    .globl lss_read_ss
lss_read_ss:
    movl 4(%esp), %eax
    movl %esp, farptr
    movw %ax, farptr + 4
    movl %esp, %ecx
    lss farptr, %esp
    xorl %eax, %eax
    movw %ss, %ax
    cmpl %esp, %ecx
    je 1f
    movl $0xdead, %eax
1:  movl %esp, farptr
    movw $SEL_KDATA, farptr + 4
    lss farptr, %esp
    ret

/* uint32_t push_sreg_sizes(void): bytes moved by pushl %ds (low 16 bits) and
 * pushw %ds (high 16 bits); both popped again into %es. */
    .globl push_sreg_sizes
push_sreg_sizes:
    movl %esp, %ecx
    pushl %ds
    movl %ecx, %eax
    subl %esp, %eax
    popl %es
    pushw %ds
    movl %ecx, %edx
    subl %esp, %edx
    popw %es
    shll $16, %edx
    orl %edx, %eax
    ret

    .bss
    .balign 4
farptr:
    .space 8

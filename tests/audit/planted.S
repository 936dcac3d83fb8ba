/* Test input for tests/test_audit.py: every sensitive instruction, as raw bytes, each in its own function.
 *
 * `plant NAME, CLASS, "TEXT", OFFSET, BYTES...` makes function NAME holding
 * BYTES and a ret; the audit must report the sensitive instruction at
 * NAME+OFFSET, its disassembly starting with TEXT. CLASS is P (privileged:
 * faults at CPL 3 by itself) or U (sensitive but unprivileged).
 * `marked NAME, CLASS, "TEXT", BYTES...` puts the insert-mode marker
 * (ud1 %edi,%edi = 0f b9 ff) before BYTES: reported at NAME+0x3, except
 * with --insert. The test reads these lines, so keep one per line.
 * Functions are aligned with int3 padding, which must not be reported. */

    .macro plant name, cls, text, off, bytes:vararg
    .p2align 4, 0xcc
    .globl \name
    .type \name, @function
\name:
    .byte \bytes
    ret
    .size \name, . - \name
    .endm

    .macro marked name, cls, text, bytes:vararg
    .p2align 4, 0xcc
    .globl \name
    .type \name, @function
\name:
    .byte 0x0f, 0xb9, 0xff
    .byte \bytes
    ret
    .size \name, . - \name
    .endm

    .text
    .globl _start
    .type _start, @function
_start:
    ret
    .size _start, . - _start

/* Interrupt flag, halting. */
    plant p_cli,        P, "cli",    0, 0xfa
    plant p_sti,        P, "sti",    0, 0xfb
    plant p_hlt,        P, "hlt",    0, 0xf4
    plant p_pushf,      U, "pushfl", 0, 0x9c
    plant p_pushfw,     U, "pushfw", 0, 0x66, 0x9c
    plant p_popf,       U, "popfl",  0, 0x9d
    plant p_popfw,      U, "popfw",  0, 0x66, 0x9d
/* Port I/O: immediate and %dx ports, 8/16/32 bits, string forms with rep and overrides. */
    plant p_inb_imm,    P, "inb",    0, 0xe4, 0x60
    plant p_inl_imm,    P, "inl",    0, 0xe5, 0x40
    plant p_inb_dx,     P, "inb",    0, 0xec
    plant p_inw_dx,     P, "inw",    0, 0x66, 0xed
    plant p_inl_dx,     P, "inl",    0, 0xed
    plant p_outb_imm,   P, "outb",   0, 0xe6, 0x80
    plant p_outb_dx,    P, "outb",   0, 0xee
    plant p_outw_dx,    P, "outw",   0, 0x66, 0xef
    plant p_outl_dx,    P, "outl",   0, 0xef
    plant p_insb,       P, "insb",   0, 0x6c
    plant p_rep_insw,   P, "rep insw", 0, 0xf3, 0x66, 0x6d
    plant p_rep_insl,   P, "rep insl", 0, 0xf3, 0x6d
    plant p_outsb,      P, "outsb",  0, 0x6e
    plant p_outsb_cs,   P, "outsb",  0, 0x2e, 0x6e
    plant p_rep_outsl,  P, "rep outsl", 0, 0xf3, 0x6f
/* 66 before f3: Capstone 4 prints this one as `rep outsl`; the CPU does words. */
    plant p_rep_outsw,  P, "rep outs", 0, 0x66, 0xf3, 0x6f
/* Descriptor tables and task register: memory forms with disp, base, index, overrides. */
    plant p_lgdt,       P, "lgdt",   0, 0x0f, 0x01, 0x10
    plant p_lgdt_abs,   P, "lgdt",   0, 0x0f, 0x01, 0x15, 0x00, 0x10, 0x00, 0xc1
    plant p_lgdt_cs_esp, P, "lgdt",  0, 0x2e, 0x0f, 0x01, 0x54, 0x24, 0x04
    plant p_lgdtw,      P, "lgdtw",  0, 0x66, 0x0f, 0x01, 0x10
    plant p_lidt,       P, "lidt",   0, 0x0f, 0x01, 0x18
    plant p_lidt_sib,   P, "lidt",   0, 0x0f, 0x01, 0x5c, 0x8b, 0x10
    plant p_sgdt,       U, "sgdt",   0, 0x0f, 0x01, 0x00
    plant p_sgdt_abs,   U, "sgdt",   0, 0x0f, 0x01, 0x05, 0x00, 0x20, 0x00, 0xc1
    plant p_sidt,       U, "sidt",   0, 0x0f, 0x01, 0x08
    plant p_sidt_fs,    U, "sidt",   0, 0x64, 0x0f, 0x01, 0x48, 0x08
    plant p_lldt_reg,   P, "lldt",   0, 0x0f, 0x00, 0xd0
    plant p_lldt_mem,   P, "lldt",   0, 0x0f, 0x00, 0x10
    plant p_ltr_reg,    P, "ltr",    0, 0x0f, 0x00, 0xd8
    plant p_ltr_mem,    P, "ltr",    0, 0x0f, 0x00, 0x58, 0x04
    plant p_sldt_reg,   U, "sldt",   0, 0x0f, 0x00, 0xc0
    plant p_sldt_mem,   U, "sldt",   0, 0x0f, 0x00, 0x00
    plant p_str_reg,    U, "str",    0, 0x0f, 0x00, 0xc8
    plant p_str_reg16,  U, "strw",   0, 0x66, 0x0f, 0x00, 0xc8
    plant p_str_mem,    U, "str",    0, 0x0f, 0x00, 0x0d, 0x00, 0x30, 0x00, 0xc1
/* CR0 low word, caches, TLB, MSRs, counters. */
    plant p_smsw_reg,   U, "smsw",   0, 0x0f, 0x01, 0xe0
    plant p_smsw_mem,   U, "smsw",   0, 0x0f, 0x01, 0x20
    plant p_lmsw_reg,   P, "lmsw",   0, 0x0f, 0x01, 0xf0
    plant p_lmsw_mem,   P, "lmsw",   0, 0x0f, 0x01, 0x30
    plant p_clts,       P, "clts",   0, 0x0f, 0x06
    plant p_invd,       P, "invd",   0, 0x0f, 0x08
    plant p_wbinvd,     P, "wbinvd", 0, 0x0f, 0x09
    plant p_wbnoinvd,   P, "wbnoinvd", 0, 0xf3, 0x0f, 0x09
    plant p_invlpg,     P, "invlpg", 0, 0x0f, 0x01, 0x38
    plant p_invlpg_esp, P, "invlpg", 0, 0x0f, 0x01, 0x7c, 0x24, 0x08
    plant p_invlpg_fs,  P, "invlpg", 0, 0x64, 0x0f, 0x01, 0x38
    plant p_rdmsr,      P, "rdmsr",  0, 0x0f, 0x32
    plant p_wrmsr,      P, "wrmsr",  0, 0x0f, 0x30
    plant p_wrmsr_ds,   P, "wrmsr",  0, 0x3e, 0x0f, 0x30
    plant p_wrmsrns,    P, "wrmsrns", 0, 0x0f, 0x01, 0xc6
    plant p_rdpmc,      P, "rdpmc",  0, 0x0f, 0x33
    plant p_cpuid,      U, "cpuid",  0, 0x0f, 0xa2
/* Returns from interrupts, system calls, software interrupts. */
    plant p_iret,       U, "iretl",  0, 0xcf
    plant p_iretw,      U, "iretw",  0, 0x66, 0xcf
    plant p_sysenter,   U, "sysenter", 0, 0x0f, 0x34
    plant p_sysexit,    P, "sysexit", 0, 0x0f, 0x35
    plant p_int_3,      U, "int",    0, 0xcd, 0x03
    plant p_into,       U, "into",   0, 0xce
    plant p_int1,       U, "int1",   0, 0xf1
/* Segment descriptors: access rights, limits, verification. */
    plant p_lar_reg,    U, "lar",    0, 0x0f, 0x02, 0xc1
    plant p_lar_mem,    U, "lar",    0, 0x0f, 0x02, 0x44, 0x24, 0x04
    plant p_lsl_reg,    U, "lsl",    0, 0x0f, 0x03, 0xc8
    plant p_lslw_mem,   U, "lslw",   0, 0x66, 0x0f, 0x03, 0x00
    plant p_verr_reg,   U, "verr",   0, 0x0f, 0x00, 0xe0
    plant p_verr_mem,   U, "verr",   0, 0x0f, 0x00, 0x20
    plant p_verw_reg,   U, "verw",   0, 0x0f, 0x00, 0xe8
    plant p_verw_mem,   U, "verw",   0, 0x26, 0x0f, 0x00, 0x2c, 0x9e
/* Control and debug registers. */
    plant p_mov_to_cr0, P, "movl",   0, 0x0f, 0x22, 0xc0
    plant p_mov_to_cr3, P, "movl",   0, 0x0f, 0x22, 0xd8
    plant p_mov_to_cr4, P, "movl",   0, 0x0f, 0x22, 0xe1
    plant p_mov_from_cr2, P, "movl", 0, 0x0f, 0x20, 0xd0
    plant p_mov_from_cr3, P, "movl", 0, 0x0f, 0x20, 0xdf
    plant p_mov_to_dr7, P, "movl",   0, 0x0f, 0x23, 0xf8
    plant p_mov_from_dr6, P, "movl", 0, 0x0f, 0x21, 0xf0
/* Segment registers: mov, push, pop, far pointer loads. */
    plant p_mov_to_ds,  U, "movl",   0, 0x8e, 0xd8
    plant p_mov_to_ss,  U, "movl",   0, 0x8e, 0xd0
    plant p_mov_to_fs_mem, U, "movw", 0, 0x8e, 0x60, 0x10
    plant p_mov_to_gs16, U, "movw",  0, 0x66, 0x8e, 0xe8
    plant p_mov_from_ds, U, "movl",  0, 0x8c, 0xd8
    plant p_mov_from_cs, U, "movl",  0, 0x8c, 0xc8
    plant p_mov_from_ss_mem, U, "movw", 0, 0x8c, 0x15, 0x00, 0x40, 0x00, 0xc1
    plant p_mov_from_fs16, U, "movw", 0, 0x66, 0x8c, 0xe0
    plant p_push_es,    U, "pushl",  0, 0x06
    plant p_push_cs,    U, "pushl",  0, 0x0e
    plant p_push_ss,    U, "pushl",  0, 0x16
    plant p_push_ds,    U, "pushl",  0, 0x1e
    plant p_push_fs,    U, "pushl",  0, 0x0f, 0xa0
    plant p_push_gs,    U, "pushl",  0, 0x0f, 0xa8
    plant p_pushw_ds,   U, "pushw",  0, 0x66, 0x1e
    plant p_pop_es,     U, "popl",   0, 0x07
    plant p_pop_ss,     U, "popl",   0, 0x17
    plant p_pop_ds,     U, "popl",   0, 0x1f
    plant p_pop_fs,     U, "popl",   0, 0x0f, 0xa1
    plant p_pop_gs,     U, "popl",   0, 0x0f, 0xa9
    plant p_lss,        U, "lssl",   0, 0x0f, 0xb2, 0x20
    plant p_lds,        U, "ldsl",   0, 0xc5, 0x06
    plant p_les,        U, "lesl",   0, 0xc4, 0x43, 0x08
    plant p_lfs,        U, "lfsl",   0, 0x0f, 0xb4, 0x04, 0x24
    plant p_lgs,        U, "lgsl",   0, 0x0f, 0xb5, 0x1d, 0x00, 0x50, 0x00, 0xc1
/* Far transfers: immediate pointers, memory pointers, returns with and without pops. */
    plant p_ljmp_imm,   U, "ljmp",   0, 0xea, 0x00, 0x10, 0x00, 0xc1, 0x10, 0x00
    plant p_ljmp_mem,   U, "ljmp",   0, 0xff, 0x2d, 0x00, 0x60, 0x00, 0xc1
    plant p_ljmpw_imm,  U, "ljmp",   0, 0x66, 0xea, 0x00, 0x10, 0x08, 0x00
    plant p_lcall_imm,  U, "lcall",  0, 0x9a, 0x00, 0x10, 0x00, 0xc1, 0x10, 0x00
    plant p_lcall_mem,  U, "lcall",  0, 0xff, 0x18
    plant p_lret,       U, "lret",   0, 0xcb
    plant p_lret_imm,   U, "lret",   0, 0xca, 0x08, 0x00
    plant p_lretw,      U, "lret",   0, 0x66, 0xcb
/* Newer system instructions. */
    plant p_xsetbv,     P, "xsetbv", 0, 0x0f, 0x01, 0xd1
    plant p_stac,       P, "stac",   0, 0x0f, 0x01, 0xcb
    plant p_clac,       P, "clac",   0, 0x0f, 0x01, 0xca
    plant p_xsaves,     P, "xsaves", 0, 0x0f, 0xc7, 0x2f
    plant p_xrstors,    P, "xrstors", 0, 0x0f, 0xc7, 0x5e, 0x40
    plant p_monitor,    P, "monitor", 0, 0x0f, 0x01, 0xc8
    plant p_mwait,      P, "mwait",  0, 0x0f, 0x01, 0xc9
    plant p_invpcid,    P, "invpcid", 0, 0x66, 0x0f, 0x38, 0x82, 0x01
    plant p_swapgs,     P, "swapgs", 0, 0x0f, 0x01, 0xf8
    plant p_sysret,     P, "sysret", 0, 0x0f, 0x07
    plant p_syscall,    U, "syscall", 0, 0x0f, 0x05
    plant p_rsm,        P, "rsm",    0, 0x0f, 0xaa
/* After harmless instructions, and after a marker that is not right before it. */
    plant p_cli_late,   P, "cli",    5, 0x89, 0xc8, 0x83, 0xc0, 0x01, 0xfa
    plant p_popf_gap,   U, "popfl",  4, 0x0f, 0xb9, 0xff, 0x90, 0x9d

/* Insert mode: the marker right before the instruction. */
    marked m_pushf,     U, "pushfl", 0x9c
    marked m_popf,      U, "popfl",  0x9d
    marked m_mov_to_ds, U, "movl",   0x8e, 0xd8
    marked m_lret,      U, "lret",   0xcb
    marked m_int81,     U, "int",    0xcd, 0x81
    marked m_cli,       P, "cli",    0xfa

/* A byte of data before a function: decoded from there, 0f would swallow
 * the cli and the ret as `psubd %mm3, %mm0`. The sweep restarts at the
 * symbol, so the cli is still found. */
    .p2align 4, 0xcc
    .byte 0x0f
    plant p_cli_after_data, P, "cli", 0, 0xfa

/* The symbol named is the function holding the instruction, not a label inside it. */
    .p2align 4, 0xcc
    .globl with_label
    .type with_label, @function
with_label:
    nop
    .globl inner_label
inner_label:
    .byte 0xfb              /* sti: reported at with_label+0x1 */
    ret
    .size with_label, . - with_label

/* A function whose size covers int3 padding after its ret: not reported. */
    .p2align 4, 0xcc
    .globl padded_tail
    .type padded_tail, @function
padded_tail:
    nop
    ret
    .byte 0xcc, 0xcc, 0xcc, 0xcc, 0xcc
    .size padded_tail, . - padded_tail

/* Like the kernel's static-call trampolines: the int3 after ret is a
 * speculation trap, never reached; 0f b9 cc is ud1 %esp,%ecx. */
    .p2align 4, 0xcc
    .globl sct_like
    .type sct_like, @function
sct_like:
    .byte 0xc3, 0xcc, 0x90, 0x90, 0x90, 0x0f, 0xb9, 0xcc
    .size sct_like, . - sct_like

/* The same after an unconditional jump. */
    .p2align 4, 0xcc
    .globl int3_after_jmp
    .type int3_after_jmp, @function
int3_after_jmp:
    jmp 1f
    .byte 0xcc
1:  ret
    .size int3_after_jmp, . - int3_after_jmp

/* Like SYM_CODE_START/END in the kernel: a sized symbol without a type,
 * holding data and 0xcc alignment, which are not reported, and a cli,
 * which is, named by it (code_region+0x8). */
    .p2align 4, 0xcc
    .globl code_region
code_region:
    .word 0x18
    .p2align 3, 0xcc
    .byte 0xfa
    .p2align 3, 0xcc
    .size code_region, . - code_region

/* int3 is not sensitive: it runs as it is and the host's SIGTRAP is the
 * guest's #BP. Not reported, even where it runs. */
    .p2align 4, 0xcc
    .globl int3_end
    .type int3_end, @function
int3_end:
    nop
    .byte 0xcc, 0xcc
    .size int3_end, . - int3_end

/* Harmless instructions, including rewritten sites whose pushed words hold
 * sensitive bytes: nothing here is reported. */
    .p2align 4, 0xcc
    .globl harmless
    .type harmless, @function
harmless:
    movl %eax, %ebx
    addl $0xfa, %eax
    movl data_bytes, %ecx
    .byte 0x68, 0x9c, 0xfa, 0x9d, 0xcf      /* pushl $0xcf9dfa9c */
    .byte 0x68, 0xcc, 0xf4, 0xcc, 0xcd      /* pushl $0xcdccf4cc */
    .byte 0x2e, 0xff, 0x15, 0x18, 0x00, 0xff, 0xff /* call *%cs:0xffff0018 */
    .byte 0x2e, 0xff, 0x15, 0x04, 0x00, 0xff, 0xff /* call *%cs:0xffff0004 */
    .byte 0x0f, 0xb9, 0xff                  /* a marker before a harmless instruction */
    leal 8(%esp), %esp
    pushl $0x0f22d8fa
    movw $0x10, %ax
    ret
    .size harmless, . - harmless

/* Code without .type: named by the nearest label; int3 here is not in any
 * function, so it is taken for padding. */
    .p2align 4, 0xcc
    .globl bare_code
bare_code:
    nop
    .byte 0xcc
    .byte 0x9c              /* pushf: reported at bare_code+0x2 */
    ret

    .section .data
data_bytes:
    .byte 0xfa, 0xfb, 0x9c, 0x9d, 0xcc, 0xcf, 0xf4, 0x0f, 0x01, 0x10

/* A second executable section, placed apart by the linker. */
    .section .entry.text, "ax", @progbits
    plant e_sysexit,    P, "sysexit", 0, 0x0f, 0x35
    plant e_iret,       U, "iretl",  0, 0xcf

    .section .note.GNU-stack, "", @progbits

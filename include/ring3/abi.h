/* The call ABI between rewritten guest code and the ring3 monitor.
 *
 * This one header is read by the monitor (C) and by the rewriter
 * (rewriter/ring3as/abi.py parses the #defines and the R3_ENTRIES table), so
 * adding an instruction means one row here, one emulation in the monitor and
 * one rule in the rewriter.
 *
 * Where the pieces live (guest linear addresses, the top 64 KiB of the 4 GiB
 * guest address space, kept free in Linux guests with reservetop=):
 *
 *   R3_TABLE   0xFFFF0000  entry table: 4-byte pointers, one per entry number
 *   R3_SHARED  0xFFFF1000  shared page: virtual IF, pending interrupt, ...
 *   R3_CODE    0xFFFF2000  runtime code: 32-bit stubs, 64-bit gate trampoline
 *
 * A rewritten site is
 *
 *       [.byte 0x68; .long AUX ]      pushl $AUX    (entries with 2 words)
 *       [.byte 0x68; .long DESC]      pushl $DESC
 *       call *%cs:R3_TABLE + 4*N      2e ff 15 <abs32>
 *
 * The pushes are always the 5-byte imm32 form and the call always the 7-byte
 * absolute indirect form through CS (the one segment register the guest
 * cannot make null or non-flat: its data segments may be either, and the
 * table must still be reachable), so a site is exactly R3_SITE_LEN(words) bytes and
 * the monitor finds its first byte as (return address - R3_SITE_LEN(words)).
 * Faults raised while emulating a site are reported at that first byte, which
 * the original instruction's label still names, so exception-table fixups
 * (rdmsr_safe, user copies) work unchanged. The indirect call through an
 * absolute address needs no relocation, so sites may be copied anywhere
 * (alternatives, the vDSO).
 *
 * Order on the stack at entry:  [esp] = return address, [esp+4] = DESC,
 * [esp+8] = AUX. The entry pops its words (like `ret $8`). Operands that
 * name %esp are relative to %esp at the first byte of the site; the monitor
 * adds R3_FRAME_LEN(words) to find it.
 *
 * Contract for every entry: all general registers, all arithmetic flags and
 * DF/TF/AC are preserved, except the registers and flags that the original
 * instruction defines (listed per entry below). Memory below %esp at the site
 * may be clobbered down to %esp - R3_STACK_SCRATCH, as an interrupt could.
 */
#ifndef RING3_ABI_H
#define RING3_ABI_H

#define R3_RUNTIME_BASE 0xFFFF0000u
#define R3_RUNTIME_SIZE 0x00010000u
#define R3_TABLE        0xFFFF0000u
#define R3_SHARED       0xFFFF1000u
#define R3_CODE         0xFFFF2000u

/* Shared page fields the rewriter inlines (offsets from R3_SHARED). */
#define R3_SH_VIF       0x00    /* byte: virtual EFLAGS.IF, 1 = enabled */
#define R3_SH_PENDING   0x01    /* byte: nonzero = an interrupt waits for VIF */
#define R3_VIF_ADDR     0xFFFF1000u

/* Site geometry (see above). */
#define R3_PUSH_LEN     5
#define R3_CALL_LEN     7
#define R3_SITE_LEN(words)  (R3_CALL_LEN + R3_PUSH_LEN * (words))
#define R3_FRAME_LEN(words) (4 + 4 * (words))
#define R3_STACK_SCRATCH    32

/* insert mode: this illegal instruction (ud1 %edi,%edi) is placed before each
 * sensitive unprivileged instruction; SIGILL on it means "emulate the
 * instruction that follows". Linux itself uses ud2 and ud1 with memory forms
 * only, so the register form with %edi is ours alone. */
#define R3_INSERT_MARKER_LEN 3
#define R3_INSERT_MARKER0    0x0F
#define R3_INSERT_MARKER1    0xB9
#define R3_INSERT_MARKER2    0xFF

/* ---- DESC: what the operands of the original instruction were ----
 *
 * REG    bits 0-3    the instruction's "reg" operand: a general register
 *                    (0 eax,1 ecx,2 edx,3 ebx,4 esp,5 ebp,6 esi,7 edi), or the
 *                    number of the control, debug or segment register
 *                    (0 es,1 cs,2 ss,3 ds,4 fs,5 gs), as the entry says
 * KIND   bits 4-5    the "rm" operand: 0 none, 1 register, 2 memory, 3 immediate
 * SIZE   bits 6-7    operand size: 0 byte, 1 word, 2 dword
 * BASE   bits 8-11   rm register (KIND 1) or memory base (KIND 2); 8 = none
 * INDEX  bits 12-15  memory index register; 8 = none
 * SCALE  bits 16-17  log2 of the index scale
 * SEG    bits 18-20  segment override: 0 default, else 1 + segment register
 * REP    bit  21     rep prefix (string I/O)
 * IMM16  bits 16-31  KIND 3 only: far-pointer selector, or lret's byte count
 *
 * AUX is the displacement of a memory operand, the value of an immediate
 * (port number, vector, far-pointer offset), else 0. For a register operand
 * of 8 bits, numbers 4-7 are ah, ch, dh, bh as in the ModRM encoding.
 */
#define R3_D_REG_SHIFT    0
#define R3_D_KIND_SHIFT   4
#define R3_D_SIZE_SHIFT   6
#define R3_D_BASE_SHIFT   8
#define R3_D_INDEX_SHIFT  12
#define R3_D_SCALE_SHIFT  16
#define R3_D_SEG_SHIFT    18
#define R3_D_REP_SHIFT    21
#define R3_D_IMM16_SHIFT  16

#define R3_KIND_NONE 0
#define R3_KIND_REG  1
#define R3_KIND_MEM  2
#define R3_KIND_IMM  3

#define R3_SIZE_8  0
#define R3_SIZE_16 1
#define R3_SIZE_32 2

#define R3_NOREG 8

#define R3_D_REG(d)   (((d) >> R3_D_REG_SHIFT) & 0xF)
#define R3_D_KIND(d)  (((d) >> R3_D_KIND_SHIFT) & 0x3)
#define R3_D_SIZE(d)  (((d) >> R3_D_SIZE_SHIFT) & 0x3)
#define R3_D_BASE(d)  (((d) >> R3_D_BASE_SHIFT) & 0xF)
#define R3_D_INDEX(d) (((d) >> R3_D_INDEX_SHIFT) & 0xF)
#define R3_D_SCALE(d) (((d) >> R3_D_SCALE_SHIFT) & 0x3)
#define R3_D_SEG(d)   (((d) >> R3_D_SEG_SHIFT) & 0x7)
#define R3_D_REP(d)   (((d) >> R3_D_REP_SHIFT) & 0x1)
#define R3_D_IMM16(d) (((d) >> R3_D_IMM16_SHIFT) & 0xFFFF)

/* ---- The entry table ----
 *
 * X(number, NAME, words, path, "contract")
 *   words  0: the site is a bare call; 2: DESC and AUX are pushed
 *   path   FAST: 32-bit code on the runtime page, no monitor entry in the
 *                common case (for the segment entries: at CPL 0, a load the
 *                monitor made before, see monitor/cpu/segment.c); GATE: far call into the 64-bit monitor;
 *          INLINE: the rewriter emits the whole site itself (no table slot
 *                  is called; the number is kept for insert mode and traces)
 * The contract names what the entry defines; everything else is preserved.
 */
#define R3_ENTRIES(X) \
    X(0x00, CLI,        0, INLINE, "virtual IF := 0 (movb $0, %ss:R3_VIF_ADDR)") \
    X(0x01, STI,        0, FAST,   "virtual IF := 1; a pending interrupt is taken after the next instruction (SDM 6.8.3)") \
    X(0x02, PUSHF,      0, FAST,   "site is `pushfl; call`: fixes IF and IOPL in the image at (%esp) to the virtual ones") \
    X(0x03, POPF,       0, FAST,   "pops EFLAGS: arithmetic, DF, TF, AC, NT from the image; IF and IOPL virtual") \
    X(0x04, IRET,       0, GATE,   "iret: pops EIP, CS, EFLAGS (and ESP, SS on a return to an outer level)") \
    X(0x05, HLT,        0, GATE,   "waits for the next interrupt") \
    X(0x06, IN,         2, GATE,   "in port(DESC rm: imm or %dx), size: defines al/ax/eax") \
    X(0x07, OUT,        2, GATE,   "out al/ax/eax to port(DESC rm: imm or %dx)") \
    X(0x08, INS,        2, GATE,   "ins: es:edi, edi and (rep) ecx") \
    X(0x09, OUTS,       2, GATE,   "outs: seg:esi, esi and (rep) ecx") \
    X(0x0A, LGDT,       2, GATE,   "GDTR := m16&32 (SIZE 16: 24-bit base)") \
    X(0x0B, LIDT,       2, GATE,   "IDTR := m16&32") \
    X(0x0C, SGDT,       2, GATE,   "m16&32 := GDTR") \
    X(0x0D, SIDT,       2, GATE,   "m16&32 := IDTR") \
    X(0x0E, LLDT,       2, GATE,   "LDTR := r/m16") \
    X(0x0F, LTR,        2, GATE,   "TR := r/m16; marks the TSS busy") \
    X(0x10, SLDT,       2, GATE,   "r/m := LDTR selector") \
    X(0x11, STR,        2, GATE,   "r/m := TR selector") \
    X(0x12, SMSW,       2, GATE,   "r/m := CR0 (low 16 bits to memory)") \
    X(0x13, LMSW,       2, GATE,   "CR0[3:0] := r/m16 (PE cannot be cleared)") \
    X(0x14, CLTS,       0, GATE,   "CR0.TS := 0") \
    X(0x15, INVD,       0, GATE,   "no effect on emulated caches") \
    X(0x16, WBINVD,     0, GATE,   "no effect on emulated caches") \
    X(0x17, INVLPG,     2, GATE,   "drops the translation of the page at the memory operand") \
    X(0x18, RDMSR,      0, GATE,   "edx:eax := MSR[ecx]; #GP(0) for an unknown MSR") \
    X(0x19, WRMSR,      0, GATE,   "MSR[ecx] := edx:eax; #GP(0) for an unknown MSR") \
    X(0x1A, RDPMC,      0, GATE,   "edx:eax := counter[ecx]") \
    X(0x1B, CPUID,      0, GATE,   "eax, ebx, ecx, edx := the filtered leaf eax/ecx") \
    X(0x1C, MOV_TO_CR,  2, GATE,   "CR[REG] := rm register") \
    X(0x1D, MOV_FROM_CR,2, GATE,   "rm register := CR[REG]") \
    X(0x1E, MOV_TO_DR,  2, GATE,   "DR[REG] := rm register") \
    X(0x1F, MOV_FROM_DR,2, GATE,   "rm register := DR[REG]") \
    X(0x20, MOV_TO_SREG,  2, FAST, "segment REG := r/m16, loading its descriptor") \
    X(0x21, MOV_FROM_SREG,2, GATE, "r/m := selector of segment REG (zero-extended to a 32-bit register)") \
    X(0x22, PUSH_SREG,  2, FAST,   "pushes the selector of segment REG (SIZE: 2 or 4 bytes)") \
    X(0x23, POP_SREG,   2, FAST,   "segment REG := popped selector") \
    X(0x24, LDS,        2, GATE,   "REG := m32 offset, ds := m16 selector") \
    X(0x25, LES,        2, GATE,   "REG := offset, es := selector") \
    X(0x26, LFS,        2, GATE,   "REG := offset, fs := selector") \
    X(0x27, LGS,        2, GATE,   "REG := offset, gs := selector") \
    X(0x28, LSS,        2, GATE,   "REG := offset, ss := selector") \
    X(0x29, LJMP,       2, GATE,   "far jump: DESC rm is imm (IMM16:AUX) or a memory m16:32") \
    X(0x2A, LCALL,      2, GATE,   "far call: pushes CS, EIP after the site") \
    X(0x2B, LRET,       2, GATE,   "far return: pops EIP, CS, then IMM16 bytes (KIND 3)") \
    X(0x2C, INT,        2, GATE,   "software interrupt, vector AUX (KIND 3)") \
    X(0x2D, INT3,       0, GATE,   "#BP, trap-like: EIP after the site") \
    X(0x2E, INTO,       0, GATE,   "#OF if EFLAGS.OF") \
    X(0x2F, SYSENTER,   0, GATE,   "fast system call: CS, EIP, ESP from the SYSENTER MSRs") \
    X(0x30, SYSEXIT,    0, GATE,   "fast return to CPL 3: EIP := edx, ESP := ecx") \
    X(0x31, LAR,        2, GATE,   "REG := access rights of the rm selector; defines ZF") \
    X(0x32, LSL,        2, GATE,   "REG := segment limit of the rm selector; defines ZF") \
    X(0x33, VERR,       2, GATE,   "ZF := segment readable at the current privilege") \
    X(0x34, VERW,       2, GATE,   "ZF := segment writable at the current privilege") \
    X(0x35, XSETBV,     0, GATE,   "XCR[ecx] := edx:eax") \
    X(0x36, STAC,       0, GATE,   "virtual EFLAGS.AC := 1") \
    X(0x37, CLAC,       0, GATE,   "virtual EFLAGS.AC := 0") \
    X(0x38, MONITOR,    0, GATE,   "no effect (no monitored range is emulated)") \
    X(0x39, MWAIT,      0, GATE,   "waits like hlt") \
    X(0x3A, WBNOINVD,   0, GATE,   "no effect on emulated caches") \
    X(0x3B, XSAVES,     2, GATE,   "xsaves of the memory operand, mask edx:eax") \
    X(0x3C, XRSTORS,    2, GATE,   "xrstors of the memory operand, mask edx:eax") \
    X(0x3D, INVPCID,    2, GATE,   "REG = type register, rm = memory descriptor") \
    X(0x3E, STI_HLT,    0, GATE,   "the atomic pair `sti; hlt`: enables and waits in one step (SDM 6.8.3)") \
    X(0x3F, FPU,        0, FAST,   "none: the instruction after the site, kept, reads or writes x87/SSE/AVX state")

#define R3_ENTRY_COUNT 0x40

#ifndef __ASSEMBLER__
enum r3_entry {
#define R3_ENUM(num, name, words, path, contract) R3_E_##name = num,
    R3_ENTRIES(R3_ENUM)
#undef R3_ENUM
};
#endif

#endif

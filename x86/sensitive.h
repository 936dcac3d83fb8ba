/* ring3: which decoded x86-32 instructions are sensitive, and the ABI entry each one maps to. */
#ifndef RING3_SENSITIVE_H
#define RING3_SENSITIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <capstone/capstone.h>

/* How an instruction behaves when the guest kernel runs it at host CPL 3. */
enum sens_class {
    SENS_NONE = 0,      /* same effect at CPL 3 as at CPL 0: runs natively */
    SENS_PRIVILEGED,    /* faults at CPL 3 by itself (#GP, or #UD here), so it
                         * traps even without an insert-mode marker */
    SENS_UNPRIVILEGED,  /* runs at CPL 3 without a fault but does something
                         * other than at CPL 0 (Robin & Irvine): must be
                         * rewritten, or marked in insert mode */
};

/* The entry of a sensitive instruction that has no row in R3_ENTRIES
 * (int1, syscall, sysret, swapgs, rsm, ...): ring3 does not emulate it. */
#define SENS_NO_ENTRY (-1)

struct sens_info {
    enum sens_class cls;
    int entry;          /* enum r3_entry, or SENS_NO_ENTRY; meaningless for SENS_NONE */
    const char *name;   /* mnemonic to print instead of Capstone's, or NULL */
};

/* Classify (insn), decoded by Capstone in CS_MODE_32 with CS_OPT_DETAIL on,
 * in either syntax (operand order is never relied on: directions come from
 * the opcode bytes). */
struct sens_info sens_classify(const cs_insn *insn);

/* Decode the instruction at (p, len) if it is one that Capstone 4.0 gets
 * wrong or does not know: ud0/ud1 (which take a ModRM operand, where
 * Capstone stops after the opcode and desynchronises) and opcodes newer than
 * it (wrmsrns, serialize, tpause, enqcmds, ...). Returns its length and
 * fills (info), or 0 when the bytes are none of these (then ask Capstone). */
size_t sens_decode_extra(const uint8_t *p, size_t len, struct sens_info *info);

/* Whether (insn) reads or writes the x87, MMX, SSE or AVX state (SDM vol. 1, 8.1, 10.2,
 * 13.1): an x87 or vector instruction, a vector register operand, or one of the state's own
 * (fxsave, xsave, ldmxcsr, fwait, emms, xgetbv, ...). In a rewritten kernel each must follow
 * an FPU site (include/ring3/abi.h, R3_E_FPU). */
bool sens_touches_vector_state(const cs_insn *insn);

/* Whether (p, len) starts with the FPU site `call *%cs:R3_TABLE+4*R3_E_FPU` (R3_CALL_LEN). */
bool sens_is_fpu_site(const uint8_t *p, size_t len);

/* True when (p, len) starts with the insert-mode marker R3_INSERT_MARKER*
 * (ud1 %edi,%edi), which announces that the next instruction is sensitive. */
bool sens_is_insert_marker(const uint8_t *p, size_t len);

/* Whether (p) starts a rewritten pushf: the real pushfl the site keeps,
 * followed by its call to the PUSHF entry that fixes IF in the image. */
bool sens_is_rewritten_pushf(const uint8_t *p, size_t len);

#endif

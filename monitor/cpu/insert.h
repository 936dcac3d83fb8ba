/* Insert mode: the trapping instruction's bytes, decoded by Capstone, as an ABI entry and its DESC/AUX words. */
#ifndef RING3_INSERT_H
#define RING3_INSERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <capstone/capstone.h>

struct vcpu;

/* What insert_decode() found at a trapping address. */
struct insert_site {
    unsigned entry;     /* enum r3_entry */
    uint32_t desc, aux; /* the words a rewritten site of the same instruction pushes (0 if none) */
    uint32_t len;       /* bytes from the trapping address to the next instruction */
    bool marked;        /* it follows the marker R3_INSERT_MARKER (any CPL); else it faulted
                         * by itself, which is emulated at CPL 0 only */
};

enum insert_decoded {
    INSERT_SITE,        /* (site) is filled */
    INSERT_NONE,        /* not a sensitive instruction ring3 emulates in this form */
    INSERT_SHORT,       /* (code, len) ends inside the instruction: fetch more and retry */
};

/* Decode the instruction that trapped at the start of (code, len): after the marker when
 * (undefined_opcode) (#UD) and the marker is there, else the instruction itself (#GP, or #UD
 * of stac, clac, monitor, mwait). `sti; hlt` is one STI_HLT site when the hlt is within
 * (len). (cs) is an x86-32 Capstone handle with CS_OPT_DETAIL on and the default (Intel)
 * syntax, whose operand order this relies on; (insn) is its cs_malloc() buffer. */
enum insert_decoded insert_decode(csh cs, cs_insn *insn, const uint8_t *code, size_t len,
                                  bool undefined_opcode, struct insert_site *site);

/* insert.c: a trap of guest code at sh->eip: (undefined_opcode) for #UD, else #GP. If it
 * is the insert-mode marker followed by a sensitive instruction (at any CPL), or a
 * sensitive instruction that faulted at virtual CPL 0, emulate that instruction through
 * its entry, leave EIP after it and return true; faults it raises are reported at
 * sh->eip. Otherwise return false and change nothing. */
bool insert_emulate(struct vcpu *v, bool undefined_opcode);

#endif

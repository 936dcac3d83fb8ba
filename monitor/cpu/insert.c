/* Insert mode (the paper's PE-Insert): the guest kernel's sensitive instructions trap, and the
 * monitor emulates each one through the entry a rewritten site would call.
 *
 * ring3-as --ring3-mode=insert leaves the privileged instructions as they are (they fault at
 * host CPL 3: #GP, or #UD for stac, clac, monitor and mwait) and puts the marker
 * R3_INSERT_MARKER (ud1 %edi,%edi) before each sensitive unprivileged one, which would
 * otherwise run with another effect. Either way the host signal lands here; insert_decode()
 * (Capstone) turns the bytes into the entry and DESC/AUX words, and emulate_entry() runs them
 * as the gate would. A fault it raises is reported at the trapping address (the marker's,
 * which the original instruction's label names), so exception-table fixups work unchanged.
 */
#include <string.h>

#include "insert.h"

#include "lib/fail.h"
#include "monitor/host/run.h"
#include "monitor/host/stats.h"
#include "monitor/mmu/mmu.h"

#include "emulate.h"
#include "fetch.h"
#include "runtime.h"
#include "vcpu.h"

/* The marker, an instruction, and the hlt of `sti; hlt`. */
#define FETCH_MAX (R3_INSERT_MARKER_LEN + FETCH_INSN_MAX + 1u)

bool insert_emulate(struct vcpu *v, bool undefined_opcode)
{
    uint32_t eip = v->sh->eip;
    uint8_t code[FETCH_MAX];
    struct insert_site site;
    csh cs;
    cs_insn *insn;

    if (!undefined_opcode && v->cpl != 0)
        return false;               /* only a marker (#UD) makes a trap at CPL 3 insert mode's */
    fetch_capstone(v, &cs, &insn);
    /* The bytes up to the end of the page first: a short instruction at the end of a page
     * must not fault on the next one. Only an instruction that goes on there reads it. */
    uint32_t at = v->sreg[SREG_CS].base + eip;     /* a code segment of the guest's LDT may have a base */
    size_t in_page = 0x1000u - (at & 0xFFFu), len = in_page < FETCH_MAX ? in_page : FETCH_MAX;
    mmu_read(v, at, code, (uint32_t)len, false);
    enum insert_decoded r = insert_decode(cs, insn, code, len, undefined_opcode, &site);
    if (r == INSERT_SHORT && len < FETCH_MAX) {
        len = FETCH_MAX;
        mmu_read(v, at, code, (uint32_t)len, false);
        r = insert_decode(cs, insn, code, len, undefined_opcode, &site);
    }
    if (r != INSERT_SITE || (!site.marked && v->cpl != 0)) {
        if (site.marked)
            TRACE(v, "insert: no sensitive instruction after the marker at %08x", eip);
        return false;       /* the host's fault stands: the marker's own #UD, or the #GP */
    }
    TRACE(v, "insert: %s at %08x desc %08x aux %08x", emulate_entry_name(site.entry), eip, site.desc,
          site.aux);
    stats_insert(site.entry);
    v->sh->eip = eip + site.len;    /* the entries act as from after the instruction */
    r3_signal_reload_state = 1;     /* it may load FS or GS (mov, lfs, iret...) */
    emulate_entry(v, site.entry, site.desc, site.aux);
    return true;
}

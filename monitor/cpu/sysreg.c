/* System registers: the control and debug registers, LDTR and TR, and the selector queries. */
#include <string.h>

#include "monitor/gdb/gdbstub.h"
#include "monitor/host/stats.h"
#include "monitor/mmu/mmu.h"
#include "monitor/mmu/paging.h"

#include "access.h"
#include "emulate.h"
#include "ldt.h"
#include "segment.h"
#include "vcpu.h"

/* A mov to CR0 or CR4 that leaves PAE paging in force reloads the PDPTEs when
 * it changes PG, PAE, PGE or PSE (SDM vol. 3, 4.4.1); a reserved bit in them
 * is #GP(0), the register unchanged. */
static void reload_pdptes(struct vcpu *v, uint32_t *reg, uint32_t old, uint32_t changed)
{
    if (changed && !paging_load_pdptes(v)) {
        *reg = old;
        vcpu_raise(v, VEC_GP, 0);
    }
}

void sysreg_write_cr(struct vcpu *v, unsigned n, uint32_t value)
{
    uint32_t old;
    switch (n) {
    case 0:
        if ((value & CR0_PG) && !(value & CR0_PE))
            vcpu_raise(v, VEC_GP, 0);
        old = v->cr0;
        v->cr0 = value | CR0_ET;
        reload_pdptes(v, &v->cr0, old, (old ^ v->cr0) & CR0_PG);
        if ((old ^ v->cr0) & (CR0_PG | CR0_WP | CR0_PE))
            mmu_flush(v, false);
        break;
    case 2:
        v->cr2 = value;
        break;
    case 3:
        uint64_t t0 = stats_start();
        old = v->cr3;
        v->cr3 = value;
        if (!paging_load_pdptes(v)) {
            v->cr3 = old;
            vcpu_raise(v, VEC_GP, 0);
        }
        mmu_new_cr3(v);
        stats_cr3(t0);
        break;
    case 4:
        /* What 32-bit and PAE paging need; VMXE, SMEP, SMAP and the rest are
         * refused. FSGSBASE is the host's, on whatever the guest says. */
        if (value & ~(CR4_PSE | CR4_PAE | CR4_PGE | 0x200u /* OSFXSR */ | 0x400u /* OSXMMEXCPT */ |
                      CR4_OSXSAVE | 0x8u /* DE */ | 0x4u /* TSD */ | 0x100u /* PCE */ |
                      0x10000u /* FSGSBASE */))
            vcpu_raise(v, VEC_GP, 0);
        old = v->cr4;
        v->cr4 = value;
        reload_pdptes(v, &v->cr4, old, (old ^ value) & (CR4_PAE | CR4_PGE | CR4_PSE));
        if ((old ^ value) & (CR4_PSE | CR4_PAE | CR4_PGE))
            mmu_flush(v, false);
        break;
    default:
        vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
    }
    if (n != 2)
        gdb_paging_changed(v);          /* a breakpoint gdb set where nothing was mapped yet */
    TRACE(v, "cr%u <- %08x", n, value);
}

uint32_t sysreg_read_cr(struct vcpu *v, unsigned n)
{
    switch (n) {
    case 0: return v->cr0;
    case 2: return v->cr2;
    case 3: return v->cr3;
    case 4: return v->cr4;
    default: vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
    }
}

unsigned sysreg_dr_index(struct vcpu *v, unsigned n)
{
    if (n == 4 || n == 5) {
        if (v->cr4 & CR4_DE)
            vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
        return n + 2;
    }
    return n;
}

void sysreg_write_dr(struct vcpu *v, unsigned n, uint32_t value)
{
    v->dr[sysreg_dr_index(v, n)] = value;
    if (v->isolation == ISOLATION_NONE)
        bp_sync(&v->bp, 0, v->dr);
}

void sysreg_load_system_segment(struct vcpu *v, bool task, uint16_t sel)
{
    struct seg *dst = task ? &v->tr : &v->ldtr;
    if ((sel & ~3u) == 0) {
        if (task)
            vcpu_raise(v, VEC_GP, 0);
        memset(dst, 0, sizeof *dst);
        ldt_loaded(v);
        return;
    }
    uint64_t raw;
    if ((sel & 4) || !seg_read_descriptor(v, sel, &raw))
        vcpu_raise(v, VEC_GP, sel & ~3u);
    struct seg s;
    seg_decode(raw, sel, &s);
    unsigned type = s.attr & 0x1F;
    if (task ? (type != 0x09 && type != 0x01) : type != 0x02)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    if (!(s.attr & 0x80))
        vcpu_raise(v, VEC_NP, sel & ~3u);
    if (task) {
        /* ltr marks the TSS busy in its descriptor (SDM vol. 2, LTR). */
        uint8_t b = (uint8_t)((raw >> 40) | 2);
        mmu_write(v, v->gdtr.base + (sel & ~7u) + 5, &b, 1, true);
        s.attr |= 2;
    }
    *dst = s;
    TRACE(v, "%s <- %04x base %08x limit %08x", task ? "tr" : "ldtr", sel, s.base, s.limit);
    if (!task)
        ldt_loaded(v);
}

void sysreg_selector_query(struct vcpu *v, unsigned entry, uint32_t desc, uint32_t aux)
{
    uint16_t sel = (uint16_t)rm_read(v, desc, aux, 2);
    uint64_t raw;
    if ((sel & ~3u) == 0 || !seg_read_descriptor(v, sel, &raw)) {
        set_zf(v, false);
        return;
    }
    struct seg s;
    seg_decode(raw, sel, &s);
    unsigned type = s.attr & 0x1F, dpl = (s.attr >> 5) & 3, rpl = sel & 3;
    bool code = (type & 0x18) == 0x18, data = (type & 0x18) == 0x10;
    bool conforming = code && (type & 4);
    bool privileged_ok = conforming || (dpl >= v->cpl && dpl >= rpl);
    bool ok;
    switch (entry) {
    case R3_E_LAR:
        ok = (code || data || type == 1 || type == 2 || type == 3 || type == 4 || type == 5 ||
              type == 9 || type == 0xB || type == 0xC) && privileged_ok;
        if (ok)
            reg_write(regs(v), R3_D_REG(desc), operand_bytes(desc), (uint32_t)(raw >> 32) & 0x00F0FF00u);
        break;
    case R3_E_LSL:
        ok = (code || data || type == 1 || type == 2 || type == 3 || type == 9 || type == 0xB) &&
             privileged_ok;
        if (ok)
            reg_write(regs(v), R3_D_REG(desc), operand_bytes(desc), s.limit);
        break;
    case R3_E_VERR:
        ok = (data || (code && (type & 2))) && privileged_ok;
        break;
    default:
        ok = data && (type & 2) && privileged_ok;
        break;
    }
    set_zf(v, ok);
}

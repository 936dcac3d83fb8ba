/* The ABI entries (include/ring3/abi.h): each sensitive instruction as the SDM defines it. */
#include <string.h>

#include "aspace.h"
#include "guest_console.h"
#include "runtime.h"
#include "stats.h"
#include "vcpu.h"

#include "../hw/debugexit.h"
#include "../hw/i8042.h"
#include "../hw/io.h"
#include "../hw/platform.h"
#include "../hw/uart.h"

static const unsigned char entry_words[R3_ENTRY_COUNT] = {
#define R3_WORDS(num, name, words, path, contract) [num] = words,
    R3_ENTRIES(R3_WORDS)
#undef R3_WORDS
};

static const char *const entry_names[R3_ENTRY_COUNT] = {
#define R3_NAME(num, name, words, path, contract) [num] = #name,
    R3_ENTRIES(R3_NAME)
#undef R3_NAME
};

const char *emulate_entry_name(unsigned entry)
{
    return entry < R3_ENTRY_COUNT ? entry_names[entry] : "?";
}

static void need_cpl0(struct vcpu *v)
{
    if (v->cpl != 0)
        vcpu_raise(v, VEC_GP, 0);
}

static uint32_t *regs(struct vcpu *v) { return v->sh->regs; }

static uint16_t mmu_read16_sup(struct vcpu *v, uint32_t linear)
{
    uint16_t x;
    mmu_read(v, linear, &x, 2, true);
    return x;
}

static uint32_t mem_linear(struct vcpu *v, uint32_t desc, uint32_t aux, uint32_t len)
{
    return seg_linear(v, operand_segment(desc), operand_offset(desc, aux, regs(v), 0), len);
}

static uint32_t rm_read(struct vcpu *v, uint32_t desc, uint32_t aux, unsigned bytes)
{
    if (R3_D_KIND(desc) == R3_KIND_REG)
        return reg_read(regs(v), R3_D_BASE(desc), bytes);
    uint32_t x = 0;
    mmu_read(v, mem_linear(v, desc, aux, bytes), &x, bytes, false);
    return x;
}

static void rm_write(struct vcpu *v, uint32_t desc, uint32_t aux, unsigned bytes, uint32_t value)
{
    if (R3_D_KIND(desc) == R3_KIND_REG) {
        reg_write(regs(v), R3_D_BASE(desc), bytes, value);
        return;
    }
    mmu_write(v, mem_linear(v, desc, aux, bytes), &value, bytes, false);
}

static void stack_push(struct vcpu *v, uint32_t value, unsigned bytes)
{
    uint32_t esp = regs(v)[REG_ESP] - bytes;
    mmu_write(v, seg_linear(v, SREG_SS, esp, bytes), &value, bytes, false);
    regs(v)[REG_ESP] = esp;
}

static uint32_t stack_peek(struct vcpu *v, uint32_t offset, unsigned bytes)
{
    uint32_t x = 0;
    mmu_read(v, seg_linear(v, SREG_SS, regs(v)[REG_ESP] + offset, bytes), &x, bytes, false);
    return x;
}

static void set_zf(struct vcpu *v, bool on)
{
    v->sh->eflags = (v->sh->eflags & ~FL_ZF) | (on ? FL_ZF : 0);
}

static uint16_t port_of(struct vcpu *v, uint32_t desc, uint32_t aux)
{
    return (uint16_t)(R3_D_KIND(desc) == R3_KIND_IMM ? aux & 0xFF : regs(v)[REG_EDX] & 0xFFFF);
}

/* cli and sti at CPL > IOPL fault (SDM vol. 3, 6.8.1). */
static void need_iopl(struct vcpu *v)
{
    if (v->cpl > (v->iopl >> 12))
        vcpu_raise(v, VEC_GP, 0);
}

/* Port I/O at CPL > IOPL is allowed port by port by the TSS's I/O permission
 * bitmap: every bit of the accessed ports must be clear and inside the TSS
 * limit (SDM vol. 1, 18.5.2). */
static void need_io(struct vcpu *v, uint16_t port, unsigned bytes)
{
    if (v->cpl <= (v->iopl >> 12))
        return;
    if ((v->tr.attr & 0x1F) != 0x0B && (v->tr.attr & 0x1F) != 0x09)
        vcpu_raise(v, VEC_GP, 0);
    if (v->tr.limit < 0x67)
        vcpu_raise(v, VEC_GP, 0);
    uint16_t base = mmu_read16_sup(v, v->tr.base + 0x66);
    uint32_t first = base + port / 8u, last = base + (port + bytes - 1u) / 8u;
    if (last > v->tr.limit)
        vcpu_raise(v, VEC_GP, 0);
    uint16_t bits = 0;
    mmu_read(v, v->tr.base + first, &bits, last - first + 1, true);
    if ((bits >> (port % 8u)) & ((1u << bytes) - 1u))
        vcpu_raise(v, VEC_GP, 0);
}

static void check_debug_exit(struct vcpu *v)
{
    int status;
    if (v->plat->debugexit && debugexit_requested(v->plat->debugexit, &status)) {
        TRACE(v, "debug exit %d", status);
        monitor_exit(v, status);
    }
    /* A reboot ends the run, as `qemu -no-reboot` does; under --cmd it is a power-off. */
    if (i8042_reset_requested(v->plat->i8042)) {
        TRACE(v, "reset through the 8042");
        guest_console_flush();
        console_restore();
        if (!guest_console_cmd_mode())
            fprintf(stderr, "\r\nring3: the guest reset the machine; ring3 does not restart it\n");
        monitor_exit(v, 0);
    }
}

static void string_io(struct vcpu *v, bool in, uint32_t desc)
{
    unsigned bytes = operand_bytes(desc);
    uint32_t count = R3_D_REP(desc) ? regs(v)[REG_ECX] : 1;
    unsigned idx = in ? REG_EDI : REG_ESI;
    unsigned seg = in ? SREG_ES : (R3_D_SEG(desc) ? R3_D_SEG(desc) - 1 : SREG_DS);
    int32_t step = v->sh->eflags & FL_DF ? -(int32_t)bytes : (int32_t)bytes;
    uint16_t port = (uint16_t)regs(v)[REG_EDX];
    for (; count; count--) {
        uint32_t value = 0, at = seg_linear(v, seg, regs(v)[idx], bytes);
        if (in) {
            value = io_in(v->plat->io, port, bytes);
            mmu_write(v, at, &value, bytes, false);
        } else {
            mmu_read(v, at, &value, bytes, false);
            io_out(v->plat->io, port, bytes, value);
        }
        regs(v)[idx] += (uint32_t)step;
        if (R3_D_REP(desc))
            regs(v)[REG_ECX]--;
        /* Progress is kept after each element, as a fault mid-way would leave it. */
        v->fault_regs[idx] = regs(v)[idx];
        v->fault_regs[REG_ECX] = regs(v)[REG_ECX];
    }
}

/* Writes to control registers (SDM vol. 3, 2.5): paging changes drop the host TLB. */
static void write_cr(struct vcpu *v, unsigned n, uint32_t value)
{
    uint32_t old;
    switch (n) {
    case 0:
        if ((value & CR0_PG) && !(value & CR0_PE))
            vcpu_raise(v, VEC_GP, 0);
        old = v->cr0;
        v->cr0 = value | CR0_ET;
        if ((old ^ v->cr0) & (CR0_PG | CR0_WP | CR0_PE))
            mmu_flush(v, false);
        break;
    case 2:
        v->cr2 = value;
        break;
    case 3:
        uint64_t t0 = stats_start();
        v->cr3 = value;
        mmu_new_cr3(v);
        stats_cr3(t0);
        break;
    case 4:
        /* Only what 2-level paging needs; PAE, VMXE, SMEP and the rest are refused.
         * FSGSBASE is the host's, on whatever the guest says. */
        if (value & ~(CR4_PSE | CR4_PGE | 0x200u /* OSFXSR */ | 0x400u /* OSXMMEXCPT */ |
                      0x40000u /* OSXSAVE */ | 0x8u /* DE */ | 0x4u /* TSD */ | 0x100u /* PCE */ |
                      0x10000u /* FSGSBASE */))
            vcpu_raise(v, VEC_GP, 0);
        old = v->cr4;
        v->cr4 = value;
        if ((old ^ value) & (CR4_PSE | CR4_PGE))
            mmu_flush(v, false);
        break;
    default:
        vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
    }
    TRACE(v, "cr%u <- %08x", n, value);
}

static uint32_t read_cr(struct vcpu *v, unsigned n)
{
    switch (n) {
    case 0: return v->cr0;
    case 2: return v->cr2;
    case 3: return v->cr3;
    case 4: return v->cr4;
    default: vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
    }
}

/* DR4 and DR5 alias DR6 and DR7 while CR4.DE is clear (SDM vol. 3, 17.2.2). */
static unsigned dr_index(struct vcpu *v, unsigned n)
{
    if (n == 4 || n == 5) {
        if (v->cr4 & 0x8u)
            vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
        return n + 2;
    }
    return n;
}

/* System-segment loads: lldt and ltr take GDT selectors of the right type. */
static void load_system_segment(struct vcpu *v, bool task, uint16_t sel)
{
    struct seg *dst = task ? &v->tr : &v->ldtr;
    if ((sel & ~3u) == 0) {
        if (task)
            vcpu_raise(v, VEC_GP, 0);
        memset(dst, 0, sizeof *dst);
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
}

/* lar, lsl, verr, verw (SDM vol. 2): never fault on the selector, report in ZF. */
static void selector_query(struct vcpu *v, unsigned entry, uint32_t desc, uint32_t aux)
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

/* Reads the descriptor of a far-transfer target that must be a code segment. */
static void code_target(struct vcpu *v, uint16_t sel, struct seg *s)
{
    uint64_t raw;
    if ((sel & ~3u) == 0)
        vcpu_raise(v, VEC_GP, 0);
    if (!seg_read_descriptor(v, sel, &raw))
        vcpu_raise(v, VEC_GP, sel & ~3u);
    seg_decode(raw, sel, s);
    if ((s->attr & 0x18) != 0x18)
        vcpu_raise(v, VEC_GP, sel & ~3u);
}

/* Guest code segments must be flat, since the host's own CS is. */
static void enter_code(struct vcpu *v, struct seg *s, uint16_t sel, uint32_t eip, unsigned cpl)
{
    if (!(s->attr & 0x80))
        vcpu_raise(v, VEC_NP, sel & ~3u);
    if (s->base != 0 || s->limit != 0xFFFFFFFFu)
        vcpu_triple_fault(v, "code segments with a base or limit are not emulated");
    s->sel = (uint16_t)((sel & ~3u) | cpl);
    v->sreg[SREG_CS] = *s;
    v->sh->eip = eip;
    mmu_set_cpl(v, cpl);
}

/* A far call or jump through a 32-bit call gate (SDM vol. 3, 5.8.4-5.8.5):
 * a call to a more privileged non-conforming segment switches to the stack
 * the TSS names for that level and copies the gate's parameter count. */
static void through_call_gate(struct vcpu *v, uint64_t gate, uint16_t gate_sel, bool call,
                              uint32_t ret_eip)
{
    unsigned gdpl = (unsigned)(gate >> 45) & 3, params = (unsigned)(gate >> 32) & 0x1F;
    if (gdpl < v->cpl || gdpl < (gate_sel & 3u))
        vcpu_raise(v, VEC_GP, gate_sel & ~3u);
    if (!(gate >> 47 & 1))
        vcpu_raise(v, VEC_NP, gate_sel & ~3u);
    uint16_t sel = (uint16_t)(gate >> 16);
    uint32_t offset = (uint32_t)(gate & 0xFFFF) | (uint32_t)((gate >> 32) & 0xFFFF0000u);
    struct seg s;
    code_target(v, sel, &s);
    unsigned dpl = (s.attr >> 5) & 3;
    bool conforming = s.attr & 4;
    if (dpl > v->cpl)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    uint32_t *r = regs(v);
    uint16_t old_cs = v->sreg[SREG_CS].sel;
    if (!conforming && dpl < v->cpl) {
        if (!call)
            vcpu_raise(v, VEC_GP, sel & ~3u);
        uint16_t old_ss = v->sreg[SREG_SS].sel;
        uint32_t old_esp = r[REG_ESP], args[31];
        for (unsigned i = 0; i < params; i++)
            args[i] = stack_peek(v, 4 * i, 4);
        uint32_t new_esp = mmu_read32(v, v->tr.base + 4 + 8 * dpl, true);
        unsigned old_cpl = v->cpl;
        seg_load_at_cpl(v, SREG_SS, (uint16_t)mmu_read32(v, v->tr.base + 8 + 8 * dpl, true), dpl);
        v->cpl = dpl;
        r[REG_ESP] = new_esp;
        stack_push(v, old_ss, 4);
        stack_push(v, old_esp, 4);
        for (unsigned i = params; i-- > 0;)
            stack_push(v, args[i], 4);
        stack_push(v, old_cs, 4);
        stack_push(v, ret_eip, 4);
        v->cpl = old_cpl;
        enter_code(v, &s, sel, offset, dpl);
        return;
    }
    if (call) {
        stack_push(v, old_cs, 4);
        stack_push(v, ret_eip, 4);
    }
    enter_code(v, &s, sel, offset, v->cpl);
}

/* A far jump or call (SDM vol. 3, 5.8.1-5.8.2): to a code segment at the
 * same privilege, or through a call gate. */
static void far_jump_or_call(struct vcpu *v, uint16_t sel, uint32_t eip, bool call, unsigned bytes)
{
    if (!(v->cr0 & CR0_PE))
        vcpu_triple_fault(v, "far transfers in real mode are not emulated");
    uint64_t raw;
    if ((sel & ~3u) == 0)
        vcpu_raise(v, VEC_GP, 0);
    if (!seg_read_descriptor(v, sel, &raw))
        vcpu_raise(v, VEC_GP, sel & ~3u);
    struct seg s;
    seg_decode(raw, sel, &s);
    unsigned type = s.attr & 0x1F, dpl = (s.attr >> 5) & 3, rpl = sel & 3;
    uint32_t ret = v->sh->eip;
    uint32_t esp = regs(v)[REG_ESP];
    if (type == 0x0C) {
        through_call_gate(v, raw, sel, call, ret);
        return;
    }
    if (type == 0x05 || type == 0x09 || type == 0x0B)
        vcpu_triple_fault(v, "task switches are not emulated");
    if ((type & 0x18) != 0x18)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    if ((type & 4) ? dpl > v->cpl : (rpl > v->cpl || dpl != v->cpl))
        vcpu_raise(v, VEC_GP, sel & ~3u);
    if (call) {
        stack_push(v, v->sreg[SREG_CS].sel, bytes);
        stack_push(v, ret, bytes);
    }
    jmp_buf jb, *outer = v->fault_jmp;
    v->fault_jmp = &jb;
    if (setjmp(jb)) {
        regs(v)[REG_ESP] = esp;
        v->fault_jmp = outer;
        vcpu_raise(v, (unsigned)v->pending_vector, v->pending_error);
    }
    enter_code(v, &s, sel, eip, v->cpl);
    v->fault_jmp = outer;
}

static void far_pointer(struct vcpu *v, uint32_t desc, uint32_t aux, uint16_t *sel, uint32_t *off)
{
    unsigned bytes = operand_bytes(desc);
    if (R3_D_KIND(desc) == R3_KIND_IMM) {
        *sel = (uint16_t)R3_D_IMM16(desc);
        *off = aux;
        return;
    }
    uint32_t at = mem_linear(v, desc, aux, bytes + 2);
    *off = 0;
    mmu_read(v, at, off, bytes, false);
    *sel = mmu_read16(v, at + bytes);
}

/* lret (SDM vol. 2, RET): same level, or to an outer level with ESP and SS. */
static void lret(struct vcpu *v, uint32_t desc)
{
    unsigned bytes = operand_bytes(desc);
    uint32_t eip = stack_peek(v, 0, bytes);
    uint16_t sel = (uint16_t)stack_peek(v, bytes, bytes);
    uint32_t extra = R3_D_KIND(desc) == R3_KIND_IMM ? R3_D_IMM16(desc) : 0;
    unsigned rpl = sel & 3;
    struct seg s;
    if (rpl < v->cpl)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    code_target(v, sel, &s);
    unsigned dpl = (s.attr >> 5) & 3;
    if ((s.attr & 4) ? dpl > rpl : dpl != rpl)
        vcpu_raise(v, VEC_GP, sel & ~3u);
    if (rpl == v->cpl) {
        regs(v)[REG_ESP] += 2 * bytes + extra;
        enter_code(v, &s, sel, eip, rpl);
        return;
    }
    uint32_t new_esp = stack_peek(v, 2 * bytes + extra, bytes);
    seg_load_at_cpl(v, SREG_SS, (uint16_t)stack_peek(v, 3 * bytes + extra, bytes), rpl);
    regs(v)[REG_ESP] = new_esp + extra;
    seg_null_inaccessible(v, rpl);
    enter_code(v, &s, sel, eip, rpl);
}

static void sysenter(struct vcpu *v)
{
    if (!(v->cr0 & CR0_PE) || (v->sysenter_cs & ~3u) == 0)
        vcpu_raise(v, VEC_GP, 0);
    /* SYSENTER (SDM vol. 2): flat CS and SS from IA32_SYSENTER_CS, CPL 0, IF cleared. */
    struct seg cs = {(uint16_t)(v->sysenter_cs & ~3u), 0, 0xFFFFFFFFu, 0xC09B};
    struct seg ss = {(uint16_t)((v->sysenter_cs & ~3u) + 8), 0, 0xFFFFFFFFu, 0xC093};
    v->sreg[SREG_CS] = cs;
    seg_set(v, SREG_SS, ss.sel, &ss);
    v->sh->vif = 0;
    v->sh->eflags &= ~FL_RF;
    v->sh->eip = v->sysenter_eip;
    regs(v)[REG_ESP] = v->sysenter_esp;
    mmu_set_cpl(v, 0);
}

static void sysexit(struct vcpu *v)
{
    need_cpl0(v);
    if ((v->sysenter_cs & ~3u) == 0)
        vcpu_raise(v, VEC_GP, 0);
    struct seg cs = {(uint16_t)((v->sysenter_cs + 16) | 3), 0, 0xFFFFFFFFu, 0xC0FB};
    struct seg ss = {(uint16_t)((v->sysenter_cs + 24) | 3), 0, 0xFFFFFFFFu, 0xC0F3};
    v->sreg[SREG_CS] = cs;
    mmu_set_cpl(v, 3);
    seg_set(v, SREG_SS, ss.sel, &ss);
    v->sh->eip = regs(v)[REG_EDX];
    regs(v)[REG_ESP] = regs(v)[REG_ECX];
}

static void halt(struct vcpu *v)
{
    need_cpl0(v);
    TRACE(v, "hlt");
    events_wait(v);
}

void emulate_entry(struct vcpu *v, unsigned entry, uint32_t desc, uint32_t aux)
{
    struct r3_shared *sh = v->sh;
    unsigned reg = R3_D_REG(desc), bytes = operand_bytes(desc);
    uint32_t value, *r = regs(v);
    uint16_t sel;
    uint64_t msr;

    switch (entry) {
    case R3_E_CLI: need_iopl(v); sh->vif = 0; break;
    case R3_E_STI: need_iopl(v); sh->vif = 1; break;
    case R3_E_PUSHF: stack_push(v, (sh->eflags & FL_USER) | (sh->vif ? FL_IF : 0) | v->iopl | 2, 4); break;
    case R3_E_POPF:
        value = stack_peek(v, 0, 4);
        r[REG_ESP] += 4;
        sh->eflags = (sh->eflags & ~FL_USER) | (value & FL_USER);
        if (v->cpl == 0)
            v->iopl = value & FL_IOPL;
        if (v->cpl <= (v->iopl >> 12))
            sh->vif = !!(value & FL_IF);
        break;
    case R3_E_IRET: vcpu_iret(v); break;
    case R3_E_HLT: halt(v); break;
    case R3_E_STI_HLT: need_cpl0(v); sh->vif = 1; halt(v); break;
    case R3_E_IN:
        need_io(v, port_of(v, desc, aux), bytes);
        if ((port_of(v, desc, aux) & ~7u) == UART_COM1_BASE)
            events_input(v);
        reg_write(r, REG_EAX, bytes, io_in(v->plat->io, port_of(v, desc, aux), bytes));
        break;
    case R3_E_OUT:
        need_io(v, port_of(v, desc, aux), bytes);
        io_out(v->plat->io, port_of(v, desc, aux), bytes, reg_read(r, REG_EAX, bytes));
        check_debug_exit(v);
        break;
    case R3_E_INS:
        need_io(v, (uint16_t)r[REG_EDX], bytes);
        string_io(v, true, desc);
        break;
    case R3_E_OUTS:
        need_io(v, (uint16_t)r[REG_EDX], bytes);
        string_io(v, false, desc);
        check_debug_exit(v);
        break;
    case R3_E_LGDT: case R3_E_LIDT: {
        need_cpl0(v);
        uint32_t at = mem_linear(v, desc, aux, 6);
        uint16_t limit = mmu_read16(v, at);
        uint32_t base = mmu_read32(v, at + 2, false) & (bytes == 2 ? 0xFFFFFFu : 0xFFFFFFFFu);
        if (entry == R3_E_LGDT) { v->gdtr.limit = limit; v->gdtr.base = base; seg_forget_fast_loads(v); }
        else { v->idtr.limit = limit; v->idtr.base = base; }
        TRACE(v, "%s %08x/%04x", entry == R3_E_LGDT ? "lgdt" : "lidt", base, limit);
        break;
    }
    case R3_E_SGDT: case R3_E_SIDT: {
        uint32_t at = mem_linear(v, desc, aux, 6);
        uint8_t img[6];
        uint16_t limit = entry == R3_E_SGDT ? v->gdtr.limit : v->idtr.limit;
        uint32_t base = entry == R3_E_SGDT ? v->gdtr.base : v->idtr.base;
        memcpy(img, &limit, 2);
        memcpy(img + 2, &base, 4);
        mmu_write(v, at, img, 6, false);
        break;
    }
    case R3_E_LLDT: need_cpl0(v); load_system_segment(v, false, (uint16_t)rm_read(v, desc, aux, 2)); break;
    case R3_E_LTR: need_cpl0(v); load_system_segment(v, true, (uint16_t)rm_read(v, desc, aux, 2)); break;
    case R3_E_SLDT: rm_write(v, desc, aux, bytes, v->ldtr.sel); break;
    case R3_E_STR: rm_write(v, desc, aux, bytes, v->tr.sel); break;
    case R3_E_SMSW:
        rm_write(v, desc, aux, bytes, R3_D_KIND(desc) == R3_KIND_REG && bytes == 4 ? v->cr0 : v->cr0 & 0xFFFF);
        break;
    case R3_E_LMSW:
        /* LMSW loads PE, MP, EM, TS; it can set PE but never clear it. */
        need_cpl0(v);
        value = rm_read(v, desc, aux, 2);
        write_cr(v, 0, (v->cr0 & ~0xEu) | (value & 0xF) | (v->cr0 & CR0_PE));
        break;
    case R3_E_CLTS: need_cpl0(v); v->cr0 &= ~CR0_TS; break;
    case R3_E_INVD: case R3_E_WBINVD: case R3_E_WBNOINVD: need_cpl0(v); break;
    case R3_E_INVLPG:
        need_cpl0(v);
        mmu_flush_page(v, operand_offset(desc, aux, r, 0) + v->sreg[operand_segment(desc)].base);
        break;
    case R3_E_RDMSR:
        need_cpl0(v);
        if (!cpu_rdmsr(v, r[REG_ECX], &msr))
            vcpu_raise(v, VEC_GP, 0);
        r[REG_EAX] = (uint32_t)msr;
        r[REG_EDX] = (uint32_t)(msr >> 32);
        break;
    case R3_E_WRMSR:
        need_cpl0(v);
        if (!cpu_wrmsr(v, r[REG_ECX], (uint64_t)r[REG_EDX] << 32 | r[REG_EAX]))
            vcpu_raise(v, VEC_GP, 0);
        break;
    case R3_E_RDPMC: vcpu_raise(v, VEC_GP, 0);
    case R3_E_CPUID: {
        uint32_t out[4];
        cpu_cpuid(v, r[REG_EAX], r[REG_ECX], out);
        r[REG_EAX] = out[0];
        r[REG_EBX] = out[1];
        r[REG_ECX] = out[2];
        r[REG_EDX] = out[3];
        break;
    }
    case R3_E_MOV_TO_CR: need_cpl0(v); write_cr(v, reg, r[R3_D_BASE(desc)]); break;
    case R3_E_MOV_FROM_CR: need_cpl0(v); r[R3_D_BASE(desc)] = read_cr(v, reg); break;
    case R3_E_MOV_TO_DR: need_cpl0(v); v->dr[dr_index(v, reg)] = r[R3_D_BASE(desc)]; break;
    case R3_E_MOV_FROM_DR:
        need_cpl0(v);
        value = v->dr[dr_index(v, reg)];
        if (dr_index(v, reg) == 6)
            value |= 0xFFFF0FF0u;     /* DR6 reserved bits read as 1 */
        if (dr_index(v, reg) == 7)
            value |= 0x400u;
        r[R3_D_BASE(desc)] = value;
        break;
    case R3_E_MOV_TO_SREG:
        if (reg == SREG_CS || reg > SREG_GS)
            vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
        seg_load(v, reg, (uint16_t)rm_read(v, desc, aux, 2));
        break;
    case R3_E_MOV_FROM_SREG:
        rm_write(v, desc, aux, R3_D_KIND(desc) == R3_KIND_REG ? bytes : 2, v->sreg[reg].sel);
        break;
    case R3_E_PUSH_SREG: stack_push(v, v->sreg[reg].sel, bytes); break;
    case R3_E_POP_SREG:
        seg_load(v, reg, (uint16_t)stack_peek(v, 0, bytes));
        r[REG_ESP] += bytes;
        break;
    case R3_E_LDS: case R3_E_LES: case R3_E_LFS: case R3_E_LGS: case R3_E_LSS: {
        static const unsigned which[] = {SREG_DS, SREG_ES, SREG_FS, SREG_GS, SREG_SS};
        uint32_t at = mem_linear(v, desc, aux, bytes + 2);
        value = 0;
        mmu_read(v, at, &value, bytes, false);
        seg_load(v, which[entry - R3_E_LDS], mmu_read16(v, at + bytes));
        reg_write(r, reg, bytes, value);
        break;
    }
    case R3_E_LJMP: case R3_E_LCALL:
        far_pointer(v, desc, aux, &sel, &value);
        far_jump_or_call(v, sel, value, entry == R3_E_LCALL, bytes);
        break;
    case R3_E_LRET: lret(v, desc); break;
    case R3_E_INT: vcpu_soft_int(v, aux & 0xFF); break;
    case R3_E_INT3: vcpu_soft_int(v, VEC_BP); break;
    case R3_E_INTO: if (sh->eflags & FL_OF) vcpu_soft_int(v, VEC_OF); break;
    case R3_E_SYSENTER: sysenter(v); break;
    case R3_E_SYSEXIT: sysexit(v); break;
    case R3_E_LAR: case R3_E_LSL: case R3_E_VERR: case R3_E_VERW: selector_query(v, entry, desc, aux); break;
    case R3_E_XSETBV: need_cpl0(v); break;
    case R3_E_STAC: case R3_E_CLAC: need_cpl0(v); break;
    case R3_E_MONITOR: need_cpl0(v); break;
    case R3_E_MWAIT: need_cpl0(v); if (sh->vif) halt(v); break;
    default:
        /* xsaves, xrstors and invpcid are hidden in CPUID: #UD as on a CPU without them. */
        vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
    }
}

void emulate_gate(void)
{
    struct vcpu *v = &the_vcpu;
    struct r3_shared *sh = v->sh;
    unsigned entry = sh->entry < R3_ENTRY_COUNT ? sh->entry : 0;
    unsigned words = entry_words[entry];
    uint64_t t0 = stats_start();
    jmp_buf jb;
    seg_take_fast_loads(v);
    v->fault_jmp = &jb;
    /* Until the site is known, a fault reports the state at the call. */
    memcpy(v->fault_regs, sh->regs, sizeof v->fault_regs);
    v->fault_eip = sh->eip;
    v->fault_esp = sh->regs[REG_ESP];
    if (setjmp(jb)) {
        vcpu_take_exception(v);
        goto out;
    }
    if (v->cpl == 3) {
        /* The trampoline saved the real selectors and bases in the shared page. */
        uint16_t real[6];
        for (unsigned i = 0; i < 6; i++)
            real[i] = (uint16_t)sh->sel[i];
        seg_sync_user(v, real, sh->fsbase, sh->gsbase);
    }
    uint32_t esp = sh->regs[REG_ESP], base = v->sreg[SREG_SS].base;
    uint32_t ret = mmu_read32(v, base + esp, false);
    uint32_t desc = words ? mmu_read32(v, base + esp + 4, false) : 0;
    uint32_t aux = words ? mmu_read32(v, base + esp + 8, false) : 0;
    /* Unwind the site: the instruction acts from its first byte, which is
     * also where a fault is reported (the original instruction's label). */
    sh->regs[REG_ESP] = esp + R3_FRAME_LEN(words);
    sh->eip = ret;
    memcpy(v->fault_regs, sh->regs, sizeof v->fault_regs);
    v->fault_eip = ret - R3_SITE_LEN(words);
    v->fault_esp = sh->regs[REG_ESP];
    if (v->trace)
        TRACE(v, "%s at %08x desc %08x aux %08x", entry_names[entry], v->fault_eip, desc, aux);
    emulate_entry(v, entry, desc, aux);
    /* sysenter clears IF and touches no device: no interrupt can be taken
     * now and no deadline moved, so the devices need not be looked at. */
    if (entry == R3_E_SYSENTER)
        goto publish;
out:
    events_poll(v);
    vcpu_check_interrupts(v);
    events_arm(v);
publish:
    seg_publish(v);
    stats_gate(entry, t0);
    if (v->cpl == 3 && v->isolation == ISOLATION_PROCESS) {
        /* User code runs in its stub; back here once it enters the kernel.
         * The gate keeps the guest's vector registers in its XSAVE image. */
        size_t size;
        aspace_run_user(v, runtime_xsave(&size));
    }
}

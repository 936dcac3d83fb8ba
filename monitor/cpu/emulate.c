/* The ABI entries (include/ring3/abi.h): each sensitive instruction as the SDM defines it. */
#include <string.h>

#include "emulate.h"

#include "hw/debugexit.h"
#include "hw/i8042.h"
#include "hw/io.h"
#include "hw/uart.h"
#include "machine/platform.h"
#include "monitor/host/console.h"
#include "monitor/host/events.h"
#include "monitor/host/guest_console.h"
#include "monitor/host/run.h"
#include "monitor/host/stats.h"
#include "monitor/mmu/aspace.h"
#include "monitor/mmu/mmu.h"

#include "access.h"
#include "cpu_model.h"
#include "runtime.h"
#include "segment.h"
#include "vcpu.h"

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
    case R3_E_LLDT: need_cpl0(v); sysreg_load_system_segment(v, false, (uint16_t)rm_read(v, desc, aux, 2)); break;
    case R3_E_LTR: need_cpl0(v); sysreg_load_system_segment(v, true, (uint16_t)rm_read(v, desc, aux, 2)); break;
    case R3_E_SLDT: rm_write(v, desc, aux, bytes, v->ldtr.sel); break;
    case R3_E_STR: rm_write(v, desc, aux, bytes, v->tr.sel); break;
    case R3_E_SMSW:
        rm_write(v, desc, aux, bytes, R3_D_KIND(desc) == R3_KIND_REG && bytes == 4 ? v->cr0 : v->cr0 & 0xFFFF);
        break;
    case R3_E_LMSW:
        /* LMSW loads PE, MP, EM, TS; it can set PE but never clear it. */
        need_cpl0(v);
        value = rm_read(v, desc, aux, 2);
        sysreg_write_cr(v, 0, (v->cr0 & ~0xEu) | (value & 0xF) | (v->cr0 & CR0_PE));
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
        aspace_cpuid_answered(v, r[REG_EAX], r[REG_ECX], out);
        r[REG_EAX] = out[0];
        r[REG_EBX] = out[1];
        r[REG_ECX] = out[2];
        r[REG_EDX] = out[3];
        break;
    }
    case R3_E_MOV_TO_CR: need_cpl0(v); sysreg_write_cr(v, reg, r[R3_D_BASE(desc)]); break;
    case R3_E_MOV_FROM_CR: need_cpl0(v); r[R3_D_BASE(desc)] = sysreg_read_cr(v, reg); break;
    case R3_E_MOV_TO_DR: need_cpl0(v); sysreg_write_dr(v, reg, r[R3_D_BASE(desc)]); break;
    case R3_E_MOV_FROM_DR:
        need_cpl0(v);
        value = v->dr[sysreg_dr_index(v, reg)];
        if (sysreg_dr_index(v, reg) == 6)
            value |= DR6_FIXED1;
        if (sysreg_dr_index(v, reg) == 7)
            value |= DR7_FIXED1;
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
    case R3_E_LJMP: case R3_E_LCALL: transfer_far(v, desc, aux, entry == R3_E_LCALL); break;
    case R3_E_LRET: transfer_lret(v, desc); break;
    case R3_E_INT: vcpu_soft_int(v, aux & 0xFF); break;
    case R3_E_INT3: vcpu_soft_int(v, VEC_BP); break;
    case R3_E_INTO: if (sh->eflags & FL_OF) vcpu_soft_int(v, VEC_OF); break;
    case R3_E_SYSENTER: transfer_sysenter(v); break;
    case R3_E_SYSEXIT: transfer_sysexit(v); break;
    case R3_E_LAR: case R3_E_LSL: case R3_E_VERR: case R3_E_VERW: sysreg_selector_query(v, entry, desc, aux); break;
    case R3_E_XSETBV:
        /* #UD unless CR4.OSXSAVE, then #GP(0) at CPL > 0 or for a value the CPU refuses (SDM vol. 2, XSETBV). */
        if (!(v->cr4 & CR4_OSXSAVE))
            vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
        need_cpl0(v);
        if (!cpu_xsetbv(v, r[REG_ECX], (uint64_t)r[REG_EDX] << 32 | r[REG_EAX]))
            vcpu_raise(v, VEC_GP, 0);
        aspace_cpuid_changed(v);        /* leaf 0xD says what XCR0 enables */
        break;
    case R3_E_STAC: case R3_E_CLAC: need_cpl0(v); break;
    case R3_E_FPU:
        /* The kernel is about to reach the vector registers: they must hold the guest's state
         * (SDM vol. 1, 13.1), which may still wait in the stub that last ran. A process's own
         * code has its registers already. */
        if (v->cpl == 0)
            aspace_vec_load(v);
        break;
    case R3_E_MONITOR: need_cpl0(v); break;
    case R3_E_MWAIT: need_cpl0(v); if (sh->vif) halt(v); break;
    default:
        /* xsaves, xrstors and invpcid are hidden in CPUID: #UD as on a CPU without them. */
        vcpu_raise(v, VEC_UD, NO_ERROR_CODE);
    }
}

/* The site whose return address is at [esp] (entry (entry)): its words
 * popped, EIP after it, faults reported at its first byte (the original
 * instruction's label), then the entry emulated. PUSHF's site is `pushfl;
 * call`: the image the inline pushfl left is popped and pushed again as the
 * entry makes it, which is the fast path's fix in place. */
static void emulate_site(struct vcpu *v, unsigned entry)
{
    bool fixup = entry == R3_E_PUSHF;
    struct r3_shared *sh = v->sh;
    unsigned words = entry_words[entry];
    uint32_t esp = sh->regs[REG_ESP], base = v->sreg[SREG_SS].base;
    uint32_t ret = mmu_read32(v, base + esp, false);
    uint32_t desc = words ? mmu_read32(v, base + esp + 4, false) : 0;
    uint32_t aux = words ? mmu_read32(v, base + esp + 8, false) : 0;
    sh->regs[REG_ESP] = esp + R3_FRAME_LEN(words) + (fixup ? 4 : 0);
    sh->eip = ret;
    memcpy(v->fault_regs, sh->regs, sizeof v->fault_regs);
    v->fault_eip = ret - R3_SITE_LEN(words) - (fixup ? 1 : 0);
    v->fault_esp = sh->regs[REG_ESP];
    if (v->trace)
        TRACE(v, "%s at %08x desc %08x aux %08x", entry_names[entry], v->fault_eip, desc, aux);
    emulate_entry(v, entry, desc, aux);
}

void emulate_gate(void)
{
    struct vcpu *v = &the_vcpu;
    struct r3_shared *sh = v->sh;
    unsigned entry = sh->entry < R3_ENTRY_COUNT ? sh->entry : 0;
    uint64_t t0 = stats_start();
    jmp_buf jb;
    fast_take_sysenter(v);
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
    emulate_site(v, entry);
    /* sysenter clears IF and touches no device: no interrupt can be taken
     * now and no deadline moved, so the devices need not be looked at. */
    if (entry == R3_E_SYSENTER || entry == R3_E_FPU)
        goto publish;
    /* Nor does sysexit touch a device, so the host timer armed at the last gate or signal that
     * could move a deadline still stands for the earliest one, and one that expires in monitor
     * code is armed again at once (signals.c, events_arm_soon). Only an interrupt already
     * pending may be taken here (Linux's `sti; sysexit`). The I/O backends are polled at the
     * other gates, at each timer signal and whenever the guest waits. */
    if (entry == R3_E_SYSEXIT) {
        vcpu_check_interrupts(v);
        goto publish;
    }
out:;
    uint64_t now = events_poll(v);
    vcpu_check_interrupts(v);
    events_arm_at(v, now);
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

/* The entry whose site call ends at (ret): `call *%cs:R3_TABLE+4*N` in the 7
 * bytes before it. False when those bytes are no such call, or not readable. */
static bool site_entry(struct vcpu *v, uint32_t ret, unsigned *entry)
{
    uint8_t call[R3_CALL_LEN];
    uint32_t slot;
    uint32_t at = ret - R3_CALL_LEN;
    if (!mmu_readable(v, at) || !mmu_readable(v, ret - 1))
        return false;
    mmu_read(v, at, call, sizeof call, false);
    memcpy(&slot, call + 3, 4);
    if (call[0] != 0x2E || call[1] != 0xFF || call[2] != 0x15 || slot < R3_TABLE ||
        (slot - R3_TABLE) % 4 || (slot - R3_TABLE) / 4 >= R3_ENTRY_COUNT)
        return false;
    *entry = (slot - R3_TABLE) / 4;
    return true;
}

uint32_t emulate_fault_eip(struct vcpu *v, uint32_t eip)
{
    unsigned entry;
    return site_entry(v, eip, &entry) && entry == R3_E_FPU ? eip - R3_CALL_LEN : eip;
}

bool emulate_site_entry_at(struct vcpu *v, uint32_t eip, unsigned *entry, bool *inside)
{
    uint8_t b[R3_PUSH_LEN];
    unsigned pushes = 0;
    *inside = false;
    if (!mmu_readable(v, eip) || !mmu_readable(v, eip + R3_PUSH_LEN - 1))
        return false;
    mmu_read(v, eip, b, sizeof b, false);
    if (b[0] == 0x68)
        pushes = 1;
    if (!site_entry(v, eip + pushes * R3_PUSH_LEN + R3_CALL_LEN, entry))
        return false;
    /* Inside when the site's earlier instructions ran: its AUX push (a push
     * and the call left), both pushes (the call of a two-word entry), or the
     * inline pushfl of PUSHF. */
    *inside = entry_words[*entry] == 2 || (pushes == 0 && *entry == R3_E_PUSHF);
    return true;
}

bool emulate_stepped_site(struct vcpu *v, bool step)
{
    struct r3_shared *sh = v->sh;
    uint32_t ret_at = v->sreg[SREG_SS].base + sh->regs[REG_ESP];
    unsigned entry;
    if (!mmu_readable(v, ret_at) || !mmu_readable(v, ret_at + 3) ||
        !site_entry(v, mmu_read32(v, ret_at, false), &entry))
        return false;
    /* INT n, INT3 and INTO (taken) clear TF on their way through the IDT,
     * and no single-step trap follows them (SDM vol. 3, 17.3.1.4). */
    bool soft_int = entry == R3_E_INT || entry == R3_E_INT3 ||
                    (entry == R3_E_INTO && (sh->eflags & FL_OF));
    emulate_site(v, entry);
    if (step && !soft_int)
        vcpu_single_step(v);
    return true;
}

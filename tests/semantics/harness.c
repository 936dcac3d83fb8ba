/* Runs i386 snippets in compatibility mode, rewritten (against a fake entry table) or native.
 *
 * usage: harness rewrite|native IMAGE CASES
 *   IMAGE  flat binary linked at SNIPPET_BASE (tests/test_semantics.py builds it)
 *   CASES  lines "name offset"
 *
 * Each case starts from the same registers, flags, stack and data, runs up
 * to its end marker (a literal `call *` through the HLT slot) and prints the
 * state it left: general registers, EFLAGS, the stack from %esp up, the data
 * area, the segment selectors and, for rewritten runs, the fake machine
 * state the entries changed. The fake entries model each instruction as the
 * SDM defines it; selectors, lar/lsl/verr/verw and cpuid use the host's real
 * values, so that a rewritten run and a native run of an unprivileged
 * instruction must print the same state.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "monitor/cpu/operand.h"
#include "monitor/cpu/runtime.h"

#define SNIPPET_BASE 0x10000000u
#define STACK_BASE   0x20000000u
#define STACK_SIZE   0x10000u
#define DATA_BASE    0x30000000u
#define DATA_SIZE    0x1000u
#define STACK_START  (STACK_BASE + STACK_SIZE - 0x100)
#define SHOW_STACK   64

struct fake {
    uint32_t cr[8], dr[8], msr_lo[4], msr_hi[4];
    uint32_t gdtr_base, idtr_base, cr0_msw_writes;
    uint16_t gdtr_limit, idtr_limit, ldtr, tr;
    uint16_t sreg[6];
    uint32_t port_log[16][3];    /* port, size, value of each out */
    unsigned nports;
    uint32_t invlpg, vector, ac, misc;
};
static int rewrite_mode;

static struct fake fake;
static sigjmp_buf back;
static const char *fault_name;
static uint32_t fault_eip;
static struct r3_shared final;

static uint32_t rd32(uint32_t a) { uint32_t v; memcpy(&v, (void *)(uintptr_t)a, 4); return v; }
static uint16_t rd16(uint32_t a) { uint16_t v; memcpy(&v, (void *)(uintptr_t)a, 2); return v; }
static void wr32(uint32_t a, uint32_t v) { memcpy((void *)(uintptr_t)a, &v, 4); }
static void wr16(uint32_t a, uint16_t v) { memcpy((void *)(uintptr_t)a, &v, 2); }

static uint32_t mem_ea(uint32_t desc, uint32_t aux, const uint32_t *regs)
{
    /* Flat segments: every selector the snippets use has base 0. */
    return operand_offset(desc, aux, regs, 0);
}

static uint32_t rm_read(uint32_t desc, uint32_t aux, uint32_t *regs, unsigned bytes)
{
    if (R3_D_KIND(desc) == R3_KIND_REG)
        return reg_read(regs, R3_D_BASE(desc), bytes);
    uint32_t a = mem_ea(desc, aux, regs);
    return bytes == 4 ? rd32(a) : bytes == 2 ? rd16(a) : *(uint8_t *)(uintptr_t)a;
}

static void rm_write(uint32_t desc, uint32_t aux, uint32_t *regs, unsigned bytes, uint32_t v)
{
    if (R3_D_KIND(desc) == R3_KIND_REG) {
        reg_write(regs, R3_D_BASE(desc), bytes, v);
        return;
    }
    uint32_t a = mem_ea(desc, aux, regs);
    if (bytes == 4)
        wr32(a, v);
    else
        wr16(a, (uint16_t)v);
}

static uint32_t push32(uint32_t *regs, uint32_t v)
{
    regs[REG_ESP] -= 4;
    wr32(regs[REG_ESP], v);
    return v;
}

static uint32_t pop32(uint32_t *regs)
{
    uint32_t v = rd32(regs[REG_ESP]);
    regs[REG_ESP] += 4;
    return v;
}

#define ZF 0x40u
#define ARITH 0x8d5u

/* lar/lsl/verr/verw, run for real on the host so results match a native run. */
static void selector_query(unsigned entry, uint16_t sel, uint32_t *out, int *zf)
{
    uint32_t v = 0;
    uint8_t z = 0;
    switch (entry) {
    case R3_E_LAR: __asm__ volatile("lar %2, %0; setz %1" : "=r"(v), "=q"(z) : "r"((uint32_t)sel) : "cc"); break;
    case R3_E_LSL: __asm__ volatile("lsl %2, %0; setz %1" : "=r"(v), "=q"(z) : "r"((uint32_t)sel) : "cc"); break;
    case R3_E_VERR: __asm__ volatile("verr %1; setz %0" : "=q"(z) : "r"((uint16_t)sel) : "cc"); break;
    default: __asm__ volatile("verw %1; setz %0" : "=q"(z) : "r"((uint16_t)sel) : "cc"); break;
    }
    *out = v;
    *zf = z;
}

static void set_zf(struct r3_shared *sh, int zf)
{
    sh->eflags = (sh->eflags & ~ZF) | (zf ? ZF : 0);
}

static uint16_t *sreg_slot(unsigned n) { return &fake.sreg[n]; }

static void fake_gate(void)
{
    struct r3_shared *sh = r3_shared_page;
    uint32_t *regs = sh->regs;
    unsigned entry = sh->entry, words = 0;
#define R3_WORDS(num, name, w, path, contract) if (entry == num) words = w;
    R3_ENTRIES(R3_WORDS)
#undef R3_WORDS
    uint32_t ret = rd32(regs[REG_ESP]);
    uint32_t desc = words ? rd32(regs[REG_ESP] + 4) : 0, aux = words ? rd32(regs[REG_ESP] + 8) : 0;
    /* Unwind the site first: the instruction then acts as if at its first byte. */
    regs[REG_ESP] += R3_FRAME_LEN(words);
    sh->eip = ret;
    unsigned reg = R3_D_REG(desc), bytes = operand_bytes(desc);
    uint32_t v, sel;
    int zf;

    switch (entry) {
    case R3_E_HLT:
        final = *sh;
        siglongjmp(back, 1);
    case R3_E_STI: case R3_E_STI_HLT:
        sh->vif = 1;
        break;
    case R3_E_POPF:
        v = pop32(regs);
        sh->vif = !!(v & 0x200);
        sh->eflags = (sh->eflags & ~0x254dd5u) | (v & 0x254dd5u & ~0x200u);
        break;
    case R3_E_MOV_TO_CR: fake.cr[reg] = regs[R3_D_BASE(desc)]; break;
    case R3_E_MOV_FROM_CR: regs[R3_D_BASE(desc)] = fake.cr[reg]; break;
    case R3_E_MOV_TO_DR: fake.dr[reg] = regs[R3_D_BASE(desc)]; break;
    case R3_E_MOV_FROM_DR: regs[R3_D_BASE(desc)] = fake.dr[reg]; break;
    case R3_E_IN:
        v = 0xA5A5A5A5u ^ (R3_D_KIND(desc) == R3_KIND_IMM ? aux : reg_read(regs, REG_EDX, 2));
        reg_write(regs, REG_EAX, bytes, v);
        break;
    case R3_E_OUT:
        if (fake.nports < 16) {
            fake.port_log[fake.nports][0] = R3_D_KIND(desc) == R3_KIND_IMM ? aux : reg_read(regs, REG_EDX, 2);
            fake.port_log[fake.nports][1] = bytes;
            fake.port_log[fake.nports++][2] = reg_read(regs, REG_EAX, bytes);
        }
        break;
    case R3_E_INS: case R3_E_OUTS: {
        uint32_t count = R3_D_REP(desc) ? regs[REG_ECX] : 1;
        unsigned idx = entry == R3_E_INS ? REG_EDI : REG_ESI;
        for (; count; count--) {
            if (entry == R3_E_INS)
                memcpy((void *)(uintptr_t)regs[idx], &(uint32_t){0x5A5A5A5Au}, bytes);
            else if (fake.nports < 16) {
                fake.port_log[fake.nports][0] = reg_read(regs, REG_EDX, 2);
                fake.port_log[fake.nports][1] = bytes;
                memcpy(&fake.port_log[fake.nports++][2], (void *)(uintptr_t)regs[idx], bytes);
            }
            regs[idx] += bytes;
            if (R3_D_REP(desc))
                regs[REG_ECX]--;
        }
        break;
    }
    case R3_E_LGDT: case R3_E_LIDT: {
        uint32_t a = mem_ea(desc, aux, regs);
        uint32_t base = rd32(a + 2) & (bytes == 2 ? 0xFFFFFFu : 0xFFFFFFFFu);
        if (entry == R3_E_LGDT) { fake.gdtr_limit = rd16(a); fake.gdtr_base = base; }
        else { fake.idtr_limit = rd16(a); fake.idtr_base = base; }
        break;
    }
    case R3_E_SGDT: case R3_E_SIDT: {
        uint32_t a = mem_ea(desc, aux, regs);
        wr16(a, entry == R3_E_SGDT ? fake.gdtr_limit : fake.idtr_limit);
        wr32(a + 2, entry == R3_E_SGDT ? fake.gdtr_base : fake.idtr_base);
        break;
    }
    case R3_E_LLDT: fake.ldtr = (uint16_t)rm_read(desc, aux, regs, 2); break;
    case R3_E_LTR: fake.tr = (uint16_t)rm_read(desc, aux, regs, 2); break;
    case R3_E_LMSW: fake.cr[0] = (fake.cr[0] & ~0xEu) | (rm_read(desc, aux, regs, 2) & 0xF) | (fake.cr[0] & 1); break;
    case R3_E_SLDT: rm_write(desc, aux, regs, bytes, fake.ldtr); break;
    case R3_E_STR: rm_write(desc, aux, regs, bytes, fake.tr); break;
    case R3_E_SMSW: rm_write(desc, aux, regs, bytes, R3_D_KIND(desc) == R3_KIND_REG && bytes == 4 ? fake.cr[0] : fake.cr[0] & 0xffff); break;
    case R3_E_CLTS: fake.cr[0] &= ~8u; break;
    case R3_E_INVLPG: fake.invlpg = mem_ea(desc, aux, regs); break;
    case R3_E_RDMSR: regs[REG_EAX] = fake.msr_lo[regs[REG_ECX] & 3]; regs[REG_EDX] = fake.msr_hi[regs[REG_ECX] & 3]; break;
    case R3_E_WRMSR: fake.msr_lo[regs[REG_ECX] & 3] = regs[REG_EAX]; fake.msr_hi[regs[REG_ECX] & 3] = regs[REG_EDX]; break;
    case R3_E_RDPMC: regs[REG_EAX] = 0x1234; regs[REG_EDX] = 0; break;
    case R3_E_CPUID:
        __asm__ volatile("cpuid" : "+a"(regs[REG_EAX]), "=b"(regs[REG_EBX]), "+c"(regs[REG_ECX]), "=d"(regs[REG_EDX]));
        break;
    case R3_E_MOV_TO_SREG: *sreg_slot(reg) = (uint16_t)rm_read(desc, aux, regs, 2); break;
    case R3_E_MOV_FROM_SREG: rm_write(desc, aux, regs, bytes, *sreg_slot(reg)); break;
    case R3_E_PUSH_SREG:
        if (bytes == 2) { regs[REG_ESP] -= 2; wr16(regs[REG_ESP], *sreg_slot(reg)); }
        else push32(regs, *sreg_slot(reg));
        break;
    case R3_E_POP_SREG:
        if (bytes == 2) { *sreg_slot(reg) = rd16(regs[REG_ESP]); regs[REG_ESP] += 2; }
        else *sreg_slot(reg) = (uint16_t)pop32(regs);
        break;
    case R3_E_LDS: case R3_E_LES: case R3_E_LFS: case R3_E_LGS: case R3_E_LSS: {
        static const unsigned which[] = {SREG_DS, SREG_ES, SREG_FS, SREG_GS, SREG_SS};
        uint32_t a = mem_ea(desc, aux, regs);
        v = bytes == 4 ? rd32(a) : rd16(a);
        *sreg_slot(which[entry - R3_E_LDS]) = rd16(a + bytes);
        reg_write(regs, reg, bytes, v);
        break;
    }
    case R3_E_LJMP: case R3_E_LCALL:
        if (R3_D_KIND(desc) == R3_KIND_IMM) {
            sel = R3_D_IMM16(desc);
            v = aux;
        } else {
            uint32_t a = mem_ea(desc, aux, regs);
            v = bytes == 4 ? rd32(a) : rd16(a);
            sel = rd16(a + bytes);
        }
        if (entry == R3_E_LCALL) {
            push32(regs, fake.sreg[SREG_CS]);
            push32(regs, sh->eip);
        }
        fake.sreg[SREG_CS] = (uint16_t)sel;
        sh->eip = v;
        break;
    case R3_E_LRET:
        sh->eip = pop32(regs);
        fake.sreg[SREG_CS] = (uint16_t)pop32(regs);
        if (R3_D_KIND(desc) == R3_KIND_IMM)
            regs[REG_ESP] += R3_D_IMM16(desc);
        break;
    case R3_E_IRET:
        sh->eip = pop32(regs);
        fake.sreg[SREG_CS] = (uint16_t)pop32(regs);
        v = pop32(regs);
        sh->vif = !!(v & 0x200);
        sh->eflags = (sh->eflags & ~0x254dd5u) | (v & 0x254dd5u & ~0x200u);
        break;
    case R3_E_INT: fake.vector = aux; break;
    case R3_E_INT3: fake.vector = 3; break;
    case R3_E_INTO: if (sh->eflags & 0x800) fake.vector = 4; break;
    case R3_E_LAR: case R3_E_LSL:
        selector_query(entry, (uint16_t)rm_read(desc, aux, regs, 2), &v, &zf);
        if (zf)
            reg_write(regs, reg, bytes, v);
        set_zf(sh, zf);
        break;
    case R3_E_VERR: case R3_E_VERW:
        selector_query(entry, (uint16_t)rm_read(desc, aux, regs, 2), &v, &zf);
        set_zf(sh, zf);
        break;
    case R3_E_STAC: fake.ac = 1; break;
    case R3_E_CLAC: fake.ac = 0; break;
    case R3_E_XSAVES: case R3_E_XRSTORS: case R3_E_INVPCID:
        fake.misc = mem_ea(desc, aux, regs) ^ (reg << 28);
        break;
    default:
        fake.misc = 0xE000 | entry;
        break;
    }
}

/* Host signals while a native snippet runs: report the fault and move on. */
uint64_t r3_signal_c(int sig, siginfo_t *si, void *ucv, uint64_t guest_fsbase)
{
    (void)si;
    ucontext_t *uc = ucv;
    fault_name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGILL ? "SIGILL" : sig == SIGTRAP ? "SIGTRAP" : "SIGBUS";
    fault_eip = (uint32_t)uc->uc_mcontext.gregs[REG_RIP];
    (void)guest_fsbase;
    siglongjmp(back, 2);
}

extern void r3_signal_entry(int, siginfo_t *, void *);

static void *map_at(uint32_t addr, size_t len, int prot)
{
    void *p = mmap((void *)(uintptr_t)addr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) {
        perror("harness: mmap");
        exit(2);
    }
    return p;
}

static void print_hex(const char *tag, uint32_t from, uint32_t len)
{
    printf(" %s=", tag);
    for (uint32_t i = 0; i < len; i++)
        printf("%02x", *(uint8_t *)(uintptr_t)(from + i));
}

static void run_case(const char *name, uint32_t off, uint32_t flags)
{
    struct r3_shared *sh = r3_shared_page;
    static const uint32_t init[8] = {0x11111111, 0x00000003, 0x000000f4, DATA_BASE,
                                     STACK_START, 0x55555555, DATA_BASE + 0x100, DATA_BASE + 0x200};
    memcpy(sh->regs, init, sizeof init);
    sh->eip = SNIPPET_BASE + off;
    sh->eflags = flags;
    sh->vif = 1;
    sh->pending = 0;
    sh->fsbase = sh->gsbase = 0;
    /* tests/test_semantics.py knows this pattern: a 32-bit push of a segment
     * register may leave the upper half of its slot as it was. */
    for (uint32_t i = 0; i < STACK_SIZE; i++)
        ((uint8_t *)(uintptr_t)STACK_BASE)[i] = (uint8_t)(0xC3 ^ i);
    for (uint32_t i = 0; i < DATA_SIZE; i++)
        ((uint8_t *)(uintptr_t)DATA_BASE)[i] = (uint8_t)(i * 7 + 1);
    /* A descriptor-table image and far pointers the snippets load from. */
    wr16(DATA_BASE + 0x3e, 0x2b);
    wr16(DATA_BASE + 0x40, 0x2b);
    wr16(DATA_BASE + 0x44, 0x2b);
    sh->sel[SREG_CS] = 0x23;
    sh->sel[SREG_ES] = sh->sel[SREG_SS] = sh->sel[SREG_DS] = 0x2b;
    sh->sel[SREG_FS] = sh->sel[SREG_GS] = 0;
    memset(&fake, 0, sizeof fake);
    fake.cr[0] = 0x80050033;
    fake.cr[3] = 0x00123000;
    fake.gdtr_limit = 0xff;
    fake.gdtr_base = 0xc1000000;
    fake.idtr_limit = 0x7ff;
    fake.idtr_base = 0xc1001000;
    fake.ldtr = 0;
    fake.tr = 0x80;
    for (unsigned i = 0; i < 6; i++)
        fake.sreg[i] = (uint16_t)sh->sel[i];
    fault_name = NULL;

    int how = sigsetjmp(back, 1);
    if (how == 0)
        runtime_enter_guest();
    printf("%s/%03x:", name, flags);
    if (how == 2) {
        printf(" fault=%s eip=%08x\n", fault_name, fault_eip);
        return;
    }
    static const char *rn[8] = {"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"};
    uint32_t esp = final.regs[REG_ESP];         /* the gate already unwound the end marker's call */
    for (unsigned i = 0; i < 8; i++)
        printf(" %s=%08x", rn[i], i == REG_ESP ? esp : final.regs[i]);
    printf(" eflags=%08x if=%u", final.eflags & (ARITH | 0x400), final.vif);
    static const char *sn[6] = {"es", "cs", "ss", "ds", "fs", "gs"};
    for (unsigned i = 0; i < 6; i++)
        printf(" %s=%04x", sn[i], rewrite_mode ? fake.sreg[i] : final.sel[i] & 0xffff);
    print_hex("stack", esp, SHOW_STACK);
    print_hex("data", DATA_BASE, 0x300);
    if (rewrite_mode) {
        printf(" fake:cr0=%08x,cr3=%08x,cr4=%08x,dr7=%08x,gdtr=%04x:%08x,idtr=%04x:%08x,ldtr=%04x,tr=%04x,"
               "msr=%08x:%08x,invlpg=%08x,vector=%u,ac=%u,misc=%08x,ports=",
               fake.cr[0], fake.cr[3], fake.cr[4], fake.dr[7], fake.gdtr_limit, fake.gdtr_base,
               fake.idtr_limit, fake.idtr_base, fake.ldtr, fake.tr, fake.msr_hi[1], fake.msr_lo[1],
               fake.invlpg, fake.vector, fake.ac, fake.misc);
        for (unsigned i = 0; i < fake.nports; i++)
            printf("%x/%u/%x;", fake.port_log[i][0], fake.port_log[i][1], fake.port_log[i][2]);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "rewrite") && strcmp(argv[1], "native"))) {
        fprintf(stderr, "usage: harness rewrite|native IMAGE CASES\n");
        return 2;
    }
    FILE *img = fopen(argv[2], "rb"), *cases = fopen(argv[3], "r");
    if (!img || !cases) {
        perror("harness");
        return 2;
    }
    char *code = map_at(SNIPPET_BASE, 1 << 20, PROT_READ | PROT_WRITE | PROT_EXEC);
    size_t n = fread(code, 1, 1 << 20, img);
    (void)n;
    map_at(STACK_BASE, STACK_SIZE, PROT_READ | PROT_WRITE);
    map_at(DATA_BASE, DATA_SIZE, PROT_READ | PROT_WRITE);
    if (runtime_install(fake_gate, NULL)) {
        perror("harness: runtime_install");
        return 2;
    }
    static char altstack[1 << 16];          /* static: only the kernel holds its address */
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    sigaltstack(&ss, NULL);
    struct sigaction sa = {.sa_sigaction = r3_signal_entry, .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER};
    int sigs[] = {SIGSEGV, SIGILL, SIGTRAP, SIGBUS, SIGFPE};
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
    rewrite_mode = !strcmp(argv[1], "rewrite");

    char name[128];
    unsigned off;
    while (fscanf(cases, "%127s %x", name, &off) == 2) {
        run_case(name, off, 0x202);
        run_case(name, off, 0x202 | ARITH);
    }
    return 0;
}

/* Installs the runtime page (monitor/cpu/runtime.S) at the top of the guest's 4 GiB. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime.h"

#define HOST_CS32 0x23          /* host compatibility-mode user code segment */
#define HOST_DS   0x2b          /* host flat user data segment */
#define GATE_STACK_SIZE (1u << 20)

struct r3_blob_header {
    uint32_t sti_off, pushf_off, popf_off, gate_off, gate_size, exit_off;
    uint32_t push_sreg_off, mov_to_sreg_off, pop_sreg_off, fpu_off;
    uint32_t sysenter_off, sysenter_lazy_off, sysenter_lazy_eax_off, pad;
    uint64_t mon_rsp, mon_fsbase, mon_handler, mon_sud, mon_xsave, mon_xsaveopt, mon_fast;
};

extern const char r3_blob[], r3_blob_end[];
uint64_t r3_monitor_fsbase;

static uint32_t blob_gate_end, blob_exit_off;
uint32_t runtime_sysenter_gate, runtime_sysenter_lazy;
static uint32_t sysenter_lazy_eax;
static void *xsave_image;
static size_t xsave_bytes;

static uint64_t read_fsbase(void)
{
    uint64_t v;
    __asm__ volatile("rdfsbase %0" : "=r"(v));
    return v;
}

/* The area the gate saves the guest's vector state in: as large as XSAVE of
 * every supported component can write (CPUID.(EAX=0DH,ECX=0):ECX), filled
 * once with the state this process starts with, so that the first XRSTOR
 * into the guest loads sane MXCSR and x87 control words. */
static void *xsave_area(void)
{
    uint32_t a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0xD), "c"(0));
    size_t size = ((size_t)c + 63) & ~(size_t)63;
    void *area = aligned_alloc(64, size);
    if (!area)
        return NULL;
    xsave_bytes = c;
    memset(area, 0, size);
    __asm__ volatile("xsave64 (%0)" : : "r"(area), "a"(-1), "d"(-1) : "memory");
    return area;
}

int runtime_install(runtime_gate_fn gate, runtime_fast_fn fast)
{
    size_t blob_len = (size_t)(r3_blob_end - r3_blob);
    size_t code_room = R3_RUNTIME_BASE + R3_RUNTIME_SIZE - R3_CODE;
    if (blob_len > code_room) {
        errno = E2BIG;
        return -1;
    }
    void *base = mmap((void *)(uintptr_t)R3_RUNTIME_BASE, R3_RUNTIME_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (base == MAP_FAILED)
        return -1;
    void *stack = mmap(NULL, GATE_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED)
        return -1;
    void *xsave = xsave_area();
    if (!xsave)
        return -1;
    xsave_image = xsave;

    r3_monitor_fsbase = read_fsbase();
    char *code = (char *)(uintptr_t)R3_CODE;
    memcpy(code, r3_blob, blob_len);
    struct r3_blob_header *h = (struct r3_blob_header *)code;
    h->mon_rsp = (uint64_t)(uintptr_t)stack + GATE_STACK_SIZE;
    h->mon_fsbase = r3_monitor_fsbase;
    h->mon_handler = (uint64_t)(uintptr_t)gate;
    h->mon_fast = (uint64_t)(uintptr_t)fast;
    h->mon_sud = (uint64_t)(uintptr_t)&r3_sud_selector;
    h->mon_xsave = (uint64_t)(uintptr_t)xsave;
    uint32_t a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0xD), "c"(1));
    h->mon_xsaveopt = a & 1;

    uint32_t *table = (uint32_t *)(uintptr_t)R3_TABLE;
    for (uint32_t n = 0; n < R3_ENTRY_COUNT; n++)
        table[n] = R3_CODE + h->gate_off + n * h->gate_size;
    table[R3_E_STI] = R3_CODE + h->sti_off;
    table[R3_E_PUSHF] = R3_CODE + h->pushf_off;
    table[R3_E_POPF] = R3_CODE + h->popf_off;
    table[R3_E_PUSH_SREG] = R3_CODE + h->push_sreg_off;
    table[R3_E_MOV_TO_SREG] = R3_CODE + h->mov_to_sreg_off;
    table[R3_E_POP_SREG] = R3_CODE + h->pop_sreg_off;
    table[R3_E_FPU] = R3_CODE + h->fpu_off;
    runtime_sysenter_gate = table[R3_E_SYSENTER];
    runtime_sysenter_lazy = R3_CODE + h->sysenter_lazy_off;
    sysenter_lazy_eax = R3_CODE + h->sysenter_lazy_eax_off;
    table[R3_E_SYSENTER] = R3_CODE + h->sysenter_off;
    blob_gate_end = h->gate_off + R3_ENTRY_COUNT * h->gate_size;
    blob_exit_off = h->exit_off;

    struct r3_shared *sh = r3_shared_page;
    memset(sh, 0, sizeof *sh);
    sh->sel[1] = HOST_CS32;
    sh->sel[0] = sh->sel[2] = sh->sel[3] = HOST_DS;
    sh->eflags = 0x202;
    sh->cpl = 0xFF;                 /* no fast segment paths until the monitor publishes its state */
    sh->desc_gen = 1;               /* the first way back loads every segment register */
    for (unsigned i = 0; i < 6; i++)
        sh->segc[i].sel = SEGC_NONE;
    sh->sysenter_to = runtime_sysenter_gate;

    if (mprotect((void *)(uintptr_t)R3_TABLE, R3_SHARED - R3_TABLE, PROT_READ) ||
        mprotect(code, R3_RUNTIME_BASE + R3_RUNTIME_SIZE - R3_CODE, PROT_READ | PROT_EXEC))
        return -1;
    return 0;
}

_Noreturn void runtime_enter_guest(void)
{
    void (*exit64)(void) = (void (*)(void))(uintptr_t)(R3_CODE + blob_exit_off);
    exit64();
    __builtin_unreachable();
}

int runtime_in_stubs(uint64_t rip)
{
    return rip >= R3_CODE && rip < R3_CODE + blob_gate_end;
}

bool runtime_sysenter_fault(uint64_t *rip, uint64_t *rsp)
{
    if (*rip != runtime_sysenter_lazy && *rip != sysenter_lazy_eax)
        return false;
    if (*rip == sysenter_lazy_eax)
        *rsp += 4;              /* the EFLAGS image pushed before, which changed nothing */
    *rip = runtime_sysenter_gate;
    return true;
}

void *runtime_xsave(size_t *size)
{
    *size = xsave_bytes;
    return xsave_image;
}

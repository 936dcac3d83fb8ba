/* Guest instruction bytes for the monitor's decoders, fetched as the CPU would, and Capstone. */
#include "fetch.h"

#include "lib/fail.h"
#include "monitor/host/run.h"
#include "monitor/mmu/mmu.h"

#define PAGE_SIZE 0x1000u

size_t fetch_code(struct vcpu *v, uint32_t eip, uint8_t *code, size_t max)
{
    eip += v->sreg[SREG_CS].base;       /* a code segment of the guest's LDT may have a base */
    size_t in_page = PAGE_SIZE - (eip & (PAGE_SIZE - 1));
    size_t len = max <= in_page || mmu_readable(v, eip + (uint32_t)in_page) ? max : in_page;
    mmu_read(v, eip, code, (uint32_t)len, false);
    return len;
}

void fetch_capstone(struct vcpu *v, csh *cs, cs_insn **insn)
{
    static csh handle;
    static cs_insn *buffer;

    if (!buffer && (cs_open(CS_ARCH_X86, CS_MODE_32, &handle) != CS_ERR_OK ||
                    cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON) != CS_ERR_OK ||
                    !(buffer = cs_malloc(handle)))) {
        fprintf(stderr, "ring3: cannot open the Capstone disassembler\n");
        monitor_exit(v, EXIT_HOST);
    }
    *cs = handle;
    *insn = buffer;
}

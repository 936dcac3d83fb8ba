/* msr-unknown: rdmsr and wrmsr of an MSR no CPU implements raise #GP(0), as rdmsr_safe relies on.
 * QEMU 7.2 TCG reads 0 and ignores the write instead: this guest's oracle is msr-unknown.expect. */
#include "guest.h"

const char guest_name[] = "msr-unknown";

int guest_main(void)
{
    /* SDM "RDMSR", "WRMSR": a reserved or unimplemented MSR address raises #GP(0). */
    kprintf("msr-unknown: an MSR no CPU implements, then a real one\n");
    PROBE_FULL("rdmsr 0x12345678", "movl $0x12345678, %%ecx", "rdmsr", "");
    PROBE_FULL("wrmsr 0x12345678",
               "movl $0x12345678, %%ecx\n\txorl %%eax, %%eax\n\txorl %%edx, %%edx", "wrmsr", "");
    PROBE_FULL("rdmsr sysenter_cs", "movl $0x174, %%ecx", "rdmsr", "");
    return 0;
}

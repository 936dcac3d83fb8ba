/* Unit test of the sysenter landing pad rules (monitor/host/host_probe.c), fed the result an
 * Intel host's probe gives: this machine may be AMD, where sysenter raises #UD and no pad is
 * found, so the Intel branch is run here with a pad made up the way the host kernel makes it. */
#include <signal.h>
#include <sys/auxv.h>

#include "check.h"
#include "monitor/host/host_probe.h"

#define EFAULT_RET ((uint32_t)-14)

int main(void)
{
    /* AMD: no pad; nothing is ever the trace of a sysenter the host took. */
    CHECK_EQ(host_probe_pad_for(0, 0x7f0000001000ull), 0);
    CHECK(!host_probe_sysenter_returned(0, SIGSYS, 0, 0, 0));
    CHECK(!host_probe_sysenter_returned(0, SIGSEGV, 0, 0, EFAULT_RET));

    /* Intel: the probe found the pad at this process's vDSO + an offset of the host kernel's
     * build (0x5e9 is Linux 6.18's); a stub with its vDSO elsewhere has its pad there. */
    uint64_t vdso = getauxval(AT_SYSINFO_EHDR), pad = vdso + 0x5e9;
    uint64_t stub_vdso = 0x7ffd12345000ull, stub_pad = host_probe_pad_for(pad, stub_vdso);
    CHECK_EQ(stub_pad, stub_vdso + 0x5e9);
    CHECK_EQ(host_probe_pad_for(pad, vdso), pad);

    /* The SIGSYS of the dispatch (in-process) or of the stub's seccomp filter, at the pad. */
    CHECK(host_probe_sysenter_returned(stub_pad, SIGSYS, stub_pad, 0, 20));
    CHECK(!host_probe_sysenter_returned(stub_pad, SIGSYS, pad, 0, 20));
    CHECK(!host_probe_sysenter_returned(stub_pad, SIGSYS, 0x08048000, 0, 20));
    /* [%ebp] unreadable: -EFAULT and a fault arriving at the pad, or at its low 32 bits. */
    CHECK(host_probe_sysenter_returned(stub_pad, SIGSEGV, stub_pad, 0, EFAULT_RET));
    CHECK(host_probe_sysenter_returned(stub_pad, SIGSEGV, (uint32_t)stub_pad, (uint32_t)stub_pad,
                                       EFAULT_RET));
    CHECK(!host_probe_sysenter_returned(stub_pad, SIGSEGV, (uint32_t)stub_pad, 0x1000, EFAULT_RET));
    CHECK(!host_probe_sysenter_returned(stub_pad, SIGSEGV, stub_pad, 0, 20));
    /* An AMD-style #UD is never it. */
    CHECK(!host_probe_sysenter_returned(stub_pad, SIGILL, stub_pad, 0, EFAULT_RET));
    return check_done();
}

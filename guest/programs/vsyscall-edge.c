/* vsyscall-edge: getpid through the vDSO's __kernel_vsyscall (AT_SYSINFO) with the stack
 * pointer a few words above the bottom of a page whose neighbour below is not accessible.
 * The vDSO pushes three words and enters the kernel; nothing below them may be written, as
 * the CPU's SYSENTER writes nothing. Under ring3 the entry is a call of a runtime stub, which
 * may use the stack below its return address and must not fail there (monitor/cpu/runtime.S,
 * sysenter_lazy). One line per stack pointer; run natively, this host is the oracle. */
#include <stdint.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* (nr) through (vsys) with %esp at (sp) for the call. */
static long vsyscall_at(uintptr_t vsys, uintptr_t sp, long nr)
{
    long r;
    __asm__ volatile("movl %%esp, %%esi\n\t"
                     "movl %2, %%esp\n\t"
                     "call *%1\n\t"
                     "movl %%esi, %%esp"
                     : "=a"(r)
                     : "D"(vsys), "b"(sp), "0"(nr)
                     : "esi", "memory", "cc");
    return r;
}

int main(void)
{
    uintptr_t vsys = getauxval(AT_SYSINFO);
    uint8_t *area = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!vsys || area == MAP_FAILED || mprotect(area, 4096, PROT_NONE)) {
        puts("vsyscall-edge: no AT_SYSINFO, or no guard page");
        return 1;
    }
    long pid = getpid();
    /* Natively the call and the vDSO's three pushes need 16 bytes above the guard page; under
     * ring3 the rewritten vDSO's call of the runtime needs 4 more, so 20 is the lowest. */
    for (unsigned above = 20; above <= 64; above += 4) {
        long r = vsyscall_at(vsys, (uintptr_t)area + 4096 + above, SYS_getpid);
        printf("vsyscall-edge: %u bytes above the guard page: getpid %s\n", above, r == pid ? "ok" : "wrong");
    }
    return 0;
}

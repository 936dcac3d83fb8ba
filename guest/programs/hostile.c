/* hostile: a guest process that tries to reach past itself (the guest kernel, ring3's runtime, the monitor, the host).
 *
 *   hostile all MARK [ADDR]    every attempt below, each in a child of its own
 *   hostile stub FIRST PAGES   in 64-bit mode, jump to each of PAGES pages from hex FIRST
 *   hostile pkru               wrpkru denying key 0 (or, with DENY, every key), then
 *                              int $0x80 and a write to memory
 *   hostile forge-exit         exit_group as a forged event (forge_call), the process
 *                              running on until its end: the next processes must not
 *                              pay for its stub
 *
 * MARK is a file name that attempts to create through host system-call
 * numbers; ADDR (hex) an address of the monitor to read in 64-bit mode.
 * Among them: the SYSENTER gate entered by a jump with ESP on an unmapped page.
 * Each attempt prints one line, "NAME: signal N", "NAME: exit N" or
 * "NAME: read HEX"; on Linux on hardware every one ends with a signal (or,
 * for the system calls, does no harm), which is what a guest process under
 * ring3 must also get, or at least be contained to itself.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stub/asm.h"           /* the stub's control area, as ring3 lays it out */
#include "stub/protocol.h"

#define HOST_CS32 0x23
#define HOST_CS64 0x33

static const char *mark = "/tmp/ring3-hostile-mark";

/* Run (fn)(arg) in a child with a time limit and report how it ended. */
static void attempt(const char *name, void (*fn)(uint32_t, uint32_t), uint32_t a, uint32_t b)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5);
        fn(a, b);
        _exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        printf("%s: fork failed\n", name);
        return;
    }
    if (WIFSIGNALED(status))
        printf("%s: signal %d\n", name, WTERMSIG(status));
    else
        printf("%s: exit %d\n", name, WEXITSTATUS(status));
}

static void read_at(uint32_t addr, uint32_t unused)
{
    (void)unused;
    uint32_t v = *(volatile uint32_t *)(uintptr_t)addr;
    printf("read %08x\n", v);
    fflush(stdout);
}

static void write_at(uint32_t addr, uint32_t value)
{
    *(volatile uint32_t *)(uintptr_t)addr = value;
}

/* The inline form ring3-as gives `cli` in the guest kernel (include/ring3/abi.h), run at CPL 3:
 * it must not clear the kernel's virtual IF. */
static void rewritten_cli(uint32_t unused1, uint32_t unused2)
{
    (void)unused1;
    (void)unused2;
    __asm__ volatile("movb $0, %%ss:0xFFFF1000" : : : "memory");
}

/* The SYSENTER gate (entry 0x2F of the table at R3_TABLE, include/ring3/abi.h) entered by a
 * jump, not by the call of a rewritten site, with ESP on a page nothing maps: ring3 reads the
 * site's return address there, and must fault the process, not itself. Natively nothing is
 * mapped at the table either. */
static void gate_without_call(uint32_t esp, uint32_t entry)
{
    __asm__ volatile("movl %0, %%esp\n\tjmp *%%cs:0xFFFF0000(,%1,4)" : : "r"(esp), "r"(entry) : "memory");
}

/* mov to a segment register, then a read through it at offset 0x1000 (the first
 * page a process may map), the old selector put back after. */
static void load_sreg(uint32_t which, uint32_t sel)
{
    uint32_t v = 0;
    switch (which) {
    case 0: __asm__ volatile("push %%ds; mov %1, %%ds; movl %%ds:(%2), %0; pop %%ds" : "=r"(v) : "r"(sel), "r"(0x1000) : "memory"); break;
    case 1: __asm__ volatile("push %%es; mov %1, %%es; movl %%es:(%2), %0; pop %%es" : "=r"(v) : "r"(sel), "r"(0x1000) : "memory"); break;
    case 2: __asm__ volatile("push %%fs; mov %1, %%fs; movl %%fs:(%2), %0; pop %%fs" : "=r"(v) : "r"(sel), "r"(0x1000) : "memory"); break;
    case 3: __asm__ volatile("push %%gs; mov %1, %%gs; movl %%gs:(%2), %0; pop %%gs" : "=r"(v) : "r"(sel), "r"(0x1000) : "memory"); break;
    default: __asm__ volatile("push %%ss; mov %1, %%ss; movl %%ss:(%2), %0; pop %%ss" : "=r"(v) : "r"(sel), "r"(0x1000) : "memory"); break;
    }
    printf("read %08x\n", v);
    fflush(stdout);
}

/* A far jump or call through (sel) to an int3: SIGTRAP if it lands. */
static void far_transfer(uint32_t call, uint32_t sel)
{
    struct { uint32_t off; uint16_t sel; } __attribute__((packed)) target;
    __asm__ volatile("movl $1f, %0" : "=m"(target.off));
    target.sel = (uint16_t)sel;
    if (call)
        __asm__ volatile("lcall *%0; jmp 2f; 1: int3; 2:" : : "m"(target) : "memory");
    else
        __asm__ volatile("ljmp *%0; 1: int3" : : "m"(target) : "memory");
}

/* Into 64-bit mode at (label 1), with ECX holding (label 2) for the way back, RCX_BACK_TO_32: a
 * far return to 0x23 at a label taken in 32-bit code (a 32-bit object cannot hold a 64-bit
 * code's absolute address). */
#define TO_64 "movl $2f, %%ecx\n" "ljmp $0x33, $1f\n" ".code64\n" "1: "
#define RCX_BACK_TO_32 "movl %%ecx, %%ecx\n" "pushq $0x23\n" "pushq %%rcx\n" "lretq\n" ".code32\n" "2:\n"

/* In 64-bit mode: read the quadword at (hi:lo) and come back to 32-bit mode. */
static void read64(uint32_t lo, uint32_t hi)
{
    uint32_t a = lo, d = hi;
    __asm__ volatile(
        TO_64
        "shlq $32, %%rdx\n"
        "movl %%eax, %%eax\n"
        "orq %%rdx, %%rax\n"
        "movq (%%rax), %%rax\n"
        "movq %%rax, %%rdx\n"
        "shrq $32, %%rdx\n"
        RCX_BACK_TO_32
        : "+a"(a), "+d"(d) : : "ecx", "memory");
    printf("read %08x%08x\n", d, a);
    fflush(stdout);
}

/* In 64-bit mode: write (value) at (addr), the address of a page every stub maps read-only
 * (stub/protocol.h, "CPUID"), whose answers each stub gives its own process: a write there
 * would reach the processes after this one. */
static void write64(uint32_t value, uint32_t unused)
{
    (void)unused;
    __asm__ volatile(
        TO_64
        "movabsq %[addr], %%rdx\n"
        "movl %%eax, (%%rdx)\n"
        "movl %%eax, 32(%%rdx)\n"
        RCX_BACK_TO_32
        : : "a"(value), [addr] "i"(STUB_CPUID_ADDR) : "ecx", "edx", "memory");
}

/* In 64-bit mode: the x86-64 system call (nr) (creat is 85) with the mark's name. */
static void syscall64(uint32_t nr, uint32_t unused)
{
    (void)unused;
    uint32_t a = nr;
    __asm__ volatile(
        "movl $2f, %%edx\n"
        "ljmp $0x33, $1f\n"
        ".code64\n"
        "1: movl %%ebx, %%edi\n"
        "movl $0644, %%esi\n"
        "movl %%edx, %%edx\n"
        "syscall\n"
        "pushq $0x23\n"
        "pushq %%rdx\n"
        "lretq\n"
        ".code32\n"
        "2:\n"
        : "+a"(a) : "b"(mark) : "ecx", "edx", "edi", "esi", "memory");
    printf("returned %d\n", (int)a);
    fflush(stdout);
}

/* In 32-bit mode: `syscall` (x86-64's instruction) with host number (nr). */
static void syscall32(uint32_t nr, uint32_t unused)
{
    (void)unused;
    uint32_t a = nr;
    __asm__ volatile("syscall" : "+a"(a) : "D"(mark), "S"(0644) : "ecx", "memory");
    printf("returned %d\n", (int)a);
    fflush(stdout);
}

/* int $0x80 and sysenter with the i386 number (nr) (creat is 8): the
 * guest's own system call, which must create the file in the guest only. */
static void int80(uint32_t nr, uint32_t unused)
{
    (void)unused;
    uint32_t a = nr;
    __asm__ volatile("int $0x80" : "+a"(a) : "b"(mark), "c"(0644) : "memory");
    printf("returned %d\n", (int)a);
    fflush(stdout);
}

/* sysenter as the vDSO's __kernel_vsyscall makes it: the kernel returns
 * through the vDSO, which pops ebp, edx, ecx and returns to the caller. */
static void sysenter(uint32_t nr, uint32_t unused)
{
    (void)unused;
    uint32_t a = nr;
    __asm__ volatile("call 1f; jmp 2f\n"
                     "1: push %%ecx; push %%edx; push %%ebp; movl %%esp, %%ebp; sysenter\n"
                     "2:"
                     : "+a"(a) : "b"(mark), "c"(0644) : "edx", "memory");
    printf("returned %d\n", (int)a);
    fflush(stdout);
}

/* wrpkru with (rights) (0f 01 ef; ECX and EDX 0), then getpid through int $0x80 and a
 * store. An i386 CPU, or a kernel that leaves CR4.PKE clear, raises #UD (SIGILL); ring3's
 * host has CR4.PKE set, so the value reaches the register, and must go no further than
 * this process's own accesses. */
static void wrpkru(uint32_t rights, uint32_t unused)
{
    (void)unused;
    static volatile uint32_t after;
    uint32_t a = rights;
    __asm__ volatile("xorl %%ecx, %%ecx\n\t"
                     "xorl %%edx, %%edx\n\t"
                     ".byte 0x0f, 0x01, 0xef\n\t"
                     "movl $20, %%eax\n\t"
                     "int $0x80"
                     : "+a"(a) : : "ecx", "edx", "memory");
    after = a;
    printf("returned %d\n", (int)after);
    fflush(stdout);
}

/* In 64-bit mode: jump to (hi:lo), with every register holding it. */
static void jump64(uint32_t lo, uint32_t hi)
{
    __asm__ volatile(
        "ljmp $0x33, $1f\n"
        ".code64\n"
        "1: shlq $32, %%rdx\n"
        "movl %%eax, %%eax\n"
        "orq %%rdx, %%rax\n"
        "movq %%rax, %%rbx\n"
        "movq %%rax, %%rcx\n"
        "movq %%rax, %%rsi\n"
        "movq %%rax, %%rdi\n"
        "movq %%rax, %%rbp\n"
        "movq %%rax, %%r8\n"
        "movq %%rax, %%r12\n"
        "jmp *%%rax\n"
        ".code32\n"
        : : "a"(lo), "d"(hi) : "memory");
}

/* Around 64-bit code in an asm statement: %ebx and %ebp kept, %ebp the 32-bit code to return
 * to (label 2), which BACK_TO_32 reaches with a far return to the flat 32-bit selector. */
#define BACK_TO_32 "pushq $0x23\n" "pushq %%rbp\n" "lretq\n" ".code32\n" "2: popl %%ebp\n" "popl %%ebx\n"

/* In 64-bit mode: an anonymous page at PLANT_ADDR through the stub's own system call (its
 * map site, whose address the control area names), written there, then read from 32-bit code.
 * On hardware there is no page there (SIGSEGV), and the stub's filter must refuse it too: a
 * page the guest kernel does not know of would stay in the stub, which a later process with
 * the same page directory gets (the address-space cache), and hand that process our bytes. */
#define STUB_CTL_MAP_SITE "0x2000000048"     /* stub/protocol.h: STUB_CTL_ADDR + offsetof(map_site) */
#define PLANT_ADDR 0x30000000u
static void plant(uint32_t unused1, uint32_t unused2)
{
    (void)unused1;
    (void)unused2;
    __asm__ volatile(
        "pushl %%ebx\n"
        "pushl %%ebp\n"
        "movl $2f, %%ebp\n"
        "ljmp $0x33, $1f\n"
        ".code64\n"
        "1: movabsq $" STUB_CTL_MAP_SITE ", %%rax\n"
        "movq (%%rax), %%r12\n"
        "leaq 3f(%%rip), %%rax\n"
        "pushq %%rax\n"                 /* the map site's `ret` ... */
        "pushq $0\n"                    /* ... after its `pop %%rbx` */
        "movl $0x30000000, %%edi\n"
        "movl $4096, %%esi\n"
        "movl $3, %%edx\n"              /* PROT_READ | PROT_WRITE */
        "movl $0x32, %%r10d\n"          /* MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED */
        "movq $-1, %%r8\n"
        "xorl %%r9d, %%r9d\n"
        "movl $9, %%eax\n"              /* x86-64 mmap */
        "jmp *%%r12\n"
        "3: movl $0x504c414e, 0x30000000\n"
        "movl %%ebp, %%ebp\n"
        BACK_TO_32
        : : : "eax", "ecx", "edx", "esi", "edi", "memory");
    printf("read %08x\n", *(volatile uint32_t *)(uintptr_t)PLANT_ADDR);
    fflush(stdout);
}

/* In 64-bit mode: a system-call event forged in the stub's control area, munmap of a page this
 * process wrote, then, without waiting as the stub's own code does, the page read once the
 * monitor has answered and for a while after (under sysemu the forged hand-off is a stop at the
 * stub's own int3, whose `ret` comes back here). On hardware there is no control area
 * (SIGSEGV). ring3 must not let the guest kernel free the page while this runs on, nor let this
 * keep it: the stub is held before the guest kernel drops the page's translation, and never
 * comes (stub/host.h, stub_hold), or the unmap waits for it at its map site: given up either way. */
#define FORGE_MARK 0x46524745u
static void forge_call(uint32_t nr, uint32_t unused)
{
    (void)unused;
    uint32_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        _exit(3);
    page[0] = FORGE_MARK;
    uint32_t got;
    __asm__ volatile(
        "pushl %%ebx\n"
        "pushl %%ebp\n"
        "movl $2f, %%ebp\n"
        "jmp 5f\n"
        "int $0x80\n"                  /* never run: the forged event's instruction */
        "6:\n"
        "5: ljmp $0x33, $1f\n"
        ".code64\n"
        "1: movabsq %[ctl], %%rax\n"
        "movl %[ev], %c[kind](%%rax)\n"
        "movl $31, %c[sig](%%rax)\n"   /* SIGSYS */
        "movl $1, %c[code](%%rax)\n"   /* SYS_SECCOMP */
        "movl $6b, %%edx\n"
        "movq %%rdx, %c[addr](%%rax)\n"
        "movl %%edx, %c[eip](%%rax)\n"
        "movl %%edi, %c[eax](%%rax)\n" /* the system call: i386 munmap (91) */
        "movl $4096, %c[ecx](%%rax)\n"
        "movl %%ecx, %c[ebx](%%rax)\n"
        "movl %%esp, %c[esp](%%rax)\n"
        "movl $0x202, %c[eflags](%%rax)\n"
        "movl $0x2b, %c[sel0](%%rax)\n"
        "movl $0x23, %c[sel1](%%rax)\n"
        "movl $0x2b, %c[sel2](%%rax)\n"
        "movl $0x2b, %c[sel3](%%rax)\n"
        "movl %%gs, %%edx\n"
        "movl %%edx, %c[sel5](%%rax)\n"
        "movl %[event], %c[state](%%rax)\n"
        "cmpl $0, %c[handoff](%%rax)\n"
        "je 3f\n"
        "movq %c[site](%%rax), %%rdx\n"
        "decq %%rdx\n"                 /* the int3 before the trap site */
        "movl %%esp, %%esp\n"
        "leaq 3f(%%rip), %%rsi\n"
        "pushq %%rsi\n"
        "jmpq *%%rdx\n"
        "3: movl $10000000, %%esi\n"   /* the answer: STUB_RUN */
        "4: cmpl %[run], %c[state](%%rax)\n"
        "je 7f\n"
        "pause\n"
        "decl %%esi\n"
        "jnz 4b\n"
        "7: movl $2000000000, %%esi\n" /* the page read a while after: about a second */
        "8: movl (%%rcx), %%edx\n"
        "decl %%esi\n"
        "jnz 8b\n"
        "movl %%edx, %%eax\n"
        BACK_TO_32
        : "=a"(got)
        : "c"(page), "D"(nr), [ctl] "i"(STUB_CTL_ADDR), [ev] "i"(STUB_EV_SIGNAL), [event] "i"(STUB_EVENT),
          [run] "i"(STUB_RUN), [kind] "i"(CTL_KIND), [sig] "i"(CTL_SIG), [code] "i"(CTL_SI_CODE),
          [addr] "i"(CTL_ADDR), [eip] "i"(CTL_R_EIP), [eflags] "i"(CTL_R_EFLAGS), [eax] "i"(CTL_R_REG(0)),
          [ecx] "i"(CTL_R_REG(1)), [ebx] "i"(CTL_R_REG(3)), [esp] "i"(CTL_R_REG(4)),
          [sel0] "i"(CTL_R_SEL(0)), [sel1] "i"(CTL_R_SEL(1)), [sel2] "i"(CTL_R_SEL(2)),
          [sel3] "i"(CTL_R_SEL(3)), [sel5] "i"(CTL_R_SEL(5)), [state] "i"(CTL_STATE),
          [handoff] "i"(CTL_TRAP_HANDOFF), [site] "i"(CTL_TRAP_SITE)
        : "edx", "esi", "memory");
    printf("read %08x\n", got);
    fflush(stdout);
}

static const struct { const char *name; uint16_t sel; } selectors[] = {
    {"23", 0x23}, {"2b", 0x2b}, {"33", 0x33}, {"63", 0x63}, {"6b", 0x6b}, {"73", 0x73}, {"7b", 0x7b},
};
static const char *const sreg_names[] = {"ds", "es", "fs", "gs", "ss"};

static void all(uint64_t monitor_addr)
{
    char name[64];

    attempt("rewritten cli", rewritten_cli, 0, 0);
    attempt("sysenter gate by a jump", gate_without_call, 0x1800, 0x2F);
    attempt("read c0000000", read_at, 0xC0000000u, 0);
    attempt("write c0000000", write_at, 0xC0000000u, 0x5a5a5a5a);
    for (uint32_t page = 0xFFFF0000u; page; page += 0x1000) {
        snprintf(name, sizeof name, "read %08x", page);
        attempt(name, read_at, page, 0);
        snprintf(name, sizeof name, "write %08x", page);
        attempt(name, write_at, page, 0);
    }
    for (unsigned s = 0; s < sizeof selectors / sizeof selectors[0]; s++) {
        for (unsigned r = 0; r < 5; r++) {
            snprintf(name, sizeof name, "mov %s %s", selectors[s].name, sreg_names[r]);
            attempt(name, load_sreg, r, selectors[s].sel);
        }
        snprintf(name, sizeof name, "ljmp %s", selectors[s].name);
        attempt(name, far_transfer, 0, selectors[s].sel);
        snprintf(name, sizeof name, "lcall %s", selectors[s].name);
        attempt(name, far_transfer, 1, selectors[s].sel);
    }
    if (monitor_addr)
        attempt("read64 monitor", read64, (uint32_t)monitor_addr, (uint32_t)(monitor_addr >> 32));
    attempt("write64 cpuid answers", write64, 0x5a5a5a5a, 0);
    attempt("syscall64 creat", syscall64, 85, 0);
    attempt("syscall32 creat", syscall32, 85, 0);
    attempt("int80 creat", int80, 8, 0);
    attempt("sysenter creat", sysenter, 8, 0);
    attempt("plant", plant, 0, 0);
    attempt("forge munmap", forge_call, 91, 0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && !strcmp(argv[1], "all")) {
        mark = argv[2];
        all(argc > 3 ? strtoull(argv[3], NULL, 16) : 0);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "stub")) {
        uint64_t first = strtoull(argv[2], NULL, 16);
        unsigned long pages = strtoul(argv[3], NULL, 0);
        for (unsigned long i = 0; i < pages; i++) {
            uint64_t at = first + i * 0x1000;
            char name[64];
            snprintf(name, sizeof name, "jump %llx", (unsigned long long)at);
            attempt(name, jump64, (uint32_t)at, (uint32_t)(at >> 32));
        }
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "pkru")) {
        attempt("wrpkru 3", wrpkru, 3, 0);
        attempt("wrpkru fffffffc", wrpkru, 0xFFFFFFFCu, 0);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "forge-exit")) {
        forge_call(252, 0);     /* i386 exit_group */
        return 0;
    }
    fprintf(stderr, "usage: hostile all MARK [ADDR] | hostile stub FIRST PAGES | hostile pkru | "
                    "hostile forge-exit\n");
    return 2;
}

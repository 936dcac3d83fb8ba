/* ldt: segments of the process's own local descriptor table (modify_ldt(2)) as a program uses
 * them: data segments with a base and a limit, read-only and expand-down ones, a not-present
 * one, 32-bit code segments (flat, and with a base) reached by far calls, lar and lsl of each,
 * a fault inside a code segment with a base, and the table after fork, across a signal, after
 * an entry is cleared, when full, while the kernel switches between it and a process with a
 * smaller one, and after exec. One line per check; run natively, this host's
 * CPU and kernel are the oracle. Only %fs is loaded with the table's selectors: glibc keeps its
 * thread pointer in %gs and copies strings through %es. */
#include <asm/ldt.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define SEL(entry) ((uint16_t)(((entry) << 3) | 7))     /* LDT, RPL 3 */

static uint8_t buf[0x3000] __attribute__((aligned(4096)));
static sigjmp_buf back;
static volatile int caught_sig, caught_code;
static volatile uint32_t caught_cs, caught_eip, caught_fs;

static int set_entry(unsigned entry, uint32_t base, uint32_t limit, int contents, int read_exec_only,
                     int pages, int not_present)
{
    struct user_desc d = {
        .entry_number = entry, .base_addr = base, .limit = limit, .seg_32bit = 1,
        .contents = contents, .read_exec_only = read_exec_only, .limit_in_pages = pages,
        .seg_not_present = not_present, .useable = 1,
    };
    return (int)syscall(SYS_modify_ldt, 0x11, &d, sizeof d);
}

static int clear_entry(unsigned entry)
{
    /* LDT_empty in the kernel's asm/desc.h: all zero but these two. */
    struct user_desc d = {.entry_number = entry, .read_exec_only = 1, .seg_not_present = 1};
    return (int)syscall(SYS_modify_ldt, 0x11, &d, sizeof d);
}

static void describe(unsigned entry)
{
    uint32_t sel = SEL(entry), ar = 0, limit = 0, ok_ar = 0, ok_limit = 0;
    __asm__ volatile("lar %2, %0\n\tjnz 1f\n\tmovl $1, %1\n1:" : "=r"(ar), "+rm"(ok_ar) : "r"(sel));
    __asm__ volatile("lsl %2, %0\n\tjnz 1f\n\tmovl $1, %1\n1:" : "=r"(limit), "+rm"(ok_limit) : "r"(sel));
    if (ok_ar && ok_limit)
        printf("entry %u: ar %08x limit %08x\n", entry, ar & ~0xF0000u, limit);
    else
        printf("entry %u: invalid\n", entry);
}

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    caught_sig = sig;
    caught_code = si->si_code;
    caught_cs = (uint32_t)uc->uc_mcontext.gregs[REG_CS] & 0xFFFF;
    caught_eip = (uint32_t)uc->uc_mcontext.gregs[REG_EIP];
    caught_fs = (uint32_t)uc->uc_mcontext.gregs[REG_FS] & 0xFFFF;
    siglongjmp(back, 1);
}

static void on_usr1(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    (void)sig;
    (void)si;
    caught_fs = (uint32_t)uc->uc_mcontext.gregs[REG_FS] & 0xFFFF;
}

static void load_fs(uint16_t sel) { __asm__ volatile("movw %0, %%fs" : : "rm"(sel)); }
static uint16_t read_fs(void) { uint16_t s; __asm__ volatile("movw %%fs, %0" : "=rm"(s)); return s; }
static uint32_t fs_read32(uint32_t off) { uint32_t x; __asm__ volatile("movl %%fs:(%1), %0" : "=r"(x) : "r"(off)); return x; }
static void fs_write32(uint32_t off, uint32_t x) { __asm__ volatile("movl %0, %%fs:(%1)" : : "r"(x), "r"(off) : "memory"); }

/* Run (what) and report the signal it raised, if any. */
#define TRY(label, what)                                                                     \
    do {                                                                                     \
        caught_sig = 0;                                                                      \
        if (sigsetjmp(back, 1) == 0) {                                                       \
            what;                                                                            \
            printf("%s: ok\n", label);                                                       \
        } else {                                                                             \
            printf("%s: signal %d code %d\n", label, caught_sig, caught_code);               \
        }                                                                                    \
        load_fs(0);                                                                          \
    } while (0)

/* mov %cs, %eax; lret: what a far call into a code segment finds there. */
__asm__(".pushsection .text\n"
        ".globl cs_probe\n"
        "cs_probe:\n"
        "  movl %cs, %eax\n"
        "  lret\n"
        ".popsection\n");
extern char cs_probe[];

static uint32_t far_call(uint16_t sel, uint32_t offset)
{
    struct { uint32_t offset; uint16_t sel; } __attribute__((packed)) target = {offset, sel};
    uint32_t eax;
    __asm__ volatile("lcall *%1" : "=a"(eax) : "m"(target) : "memory", "ecx", "edx");
    return eax & 0xFFFF;
}

static void check_table_read(void)
{
    uint8_t table[8 * 8];
    int n = (int)syscall(SYS_modify_ldt, 0, table, sizeof table);
    uint32_t sum = 0;
    for (int i = 0; i < n; i++)
        sum = sum * 31 + table[i];
    printf("read back %d bytes, sum %08x\n", n, sum);
}

static uint32_t data_read(uint16_t sel, uint32_t off)
{
    load_fs(sel);
    return fs_read32(off);
}

/* Loads SEL(entry) (present) into sreg, marks the entry not present with modify_ldt, makes one
 * more system call (getpid) and puts in out what the register holds then; sreg is put back from
 * %ss before any C reads through it. */
#define RELOAD_AFTER_NOT_PRESENT(sreg, entry, desc, out)                                        \
    do {                                                                                        \
        uint32_t nr_ = SYS_modify_ldt, len_ = sizeof *(desc);                                   \
        __asm__ volatile("movw %w3, %%" sreg "\n\t"                                            \
                         "int $0x80\n\t"                                                        \
                         "movl %6, %%eax\n\t"                                                   \
                         "int $0x80\n\t"                                                        \
                         "movl %%" sreg ", %0\n\t"                                              \
                         "movw %%ss, %%dx\n\t"                                                  \
                         "movw %%dx, %%" sreg                                                   \
                         : "=&r"(out), "+a"(nr_), "+d"(len_)                                    \
                         : "r"((uint32_t)SEL(entry)), "b"(0x11), "c"(desc), "i"(SYS_getpid)     \
                         : "memory");                                                           \
    } while (0)

/* Process (pid)'s state letter in /proc/(pid)/stat, polled until it is (want) or, with
 * (not), until it is anything else. */
static void wait_state(pid_t pid, char want, int not)
{
    char path[32], line[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (;;) {
        FILE *f = fopen(path, "r");
        char *paren = f && fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        if (f)
            fclose(f);
        if (!paren || (paren[2] == want) != not)
            return;
        sched_yield();
    }
}

/* A child with the whole table (LDT_ENTRIES) that its own child stops and continues
 * (rounds) times, while this process, with a smaller table, waits for its exit: each stop
 * and each continue wakes the waiter, which finds no exit and sleeps again in the kernel,
 * its user code never run. Returns the child's exit status. */
static int stopped_and_continued(uint32_t b, int rounds)
{
    pid_t child = fork();
    if (child == 0) {
        unsigned installed = 0;
        for (unsigned e = 10; e < LDT_ENTRIES; e++)
            installed += set_entry(e, b, e, 0, 1, 0, 0) == 0;
        pid_t stopper = fork();
        if (stopper == 0) {
            pid_t parent = getppid();
            for (int i = 0; i < rounds; i++) {
                kill(parent, SIGSTOP);
                wait_state(parent, 'T', 0);
                kill(parent, SIGCONT);
                wait_state(parent, 'T', 1);
            }
            _exit(0);
        }
        int status;
        while (waitpid(stopper, &status, 0) < 0 && errno == EINTR)
            ;
        _exit(installed == LDT_ENTRIES - 10 && WIFEXITED(status) ? WEXITSTATUS(status) : 1);
    }
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static uint16_t reload_after_not_present(unsigned entry, uint32_t base, int in_ds)
{
    static struct user_desc d;
    uint32_t out;
    d = (struct user_desc){.entry_number = entry, .base_addr = base, .limit = 0xFFF, .seg_32bit = 1,
                           .seg_not_present = 1, .useable = 1};
    if (set_entry(entry, base, 0xFFF, 0, 0, 0, 0) != 0)
        return 0xFFFF;
    if (in_ds)
        RELOAD_AFTER_NOT_PRESENT("ds", entry, &d, out);
    else
        RELOAD_AFTER_NOT_PRESENT("es", entry, &d, out);
    return (uint16_t)out;
}

int main(int argc, char **argv)
{
    struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && !strcmp(argv[1], "exec")) {
        describe(1);
        describe(LDT_ENTRIES - 8);     /* not higher: ring3's own process has entries there */
        TRY("after exec, load entry 1", load_fs(SEL(1)));
        return 0;
    }
    for (unsigned i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7);

    uint32_t b = (uint32_t)(uintptr_t)buf;
    printf("install data %d\n", set_entry(1, b + 16, 63, 0, 0, 0, 0));
    printf("install read-only %d\n", set_entry(2, b, 0xFFF, 0, 1, 0, 0));
    printf("install expand-down %d\n", set_entry(3, b - 0x2000, 0x1FFF, 1, 0, 0, 0));
    printf("install not-present %d\n", set_entry(4, b, 0xFFF, 0, 0, 0, 1));
    printf("install code %d\n", set_entry(5, 0, 0xFFFFF, 2, 0, 1, 0));
    printf("install conforming present %d\n", set_entry(8, 0, 0xFFFFF, 3, 0, 1, 0));
    for (unsigned e = 0; e < 10; e++)
        describe(e);
    check_table_read();

    TRY("data read", printf("fs:0 %08x\n", data_read(SEL(1), 0)));
    TRY("data read at the limit", printf("fs:60 %08x\n", data_read(SEL(1), 60)));
    TRY("data write", (load_fs(SEL(1)), fs_write32(8, 0x12345678)));
    printf("buf[24] %08x\n", *(uint32_t *)(buf + 24));
    TRY("data past the limit", data_read(SEL(1), 61));
    TRY("read-only read", printf("%08x\n", data_read(SEL(2), 0x100)));
    TRY("read-only write", (load_fs(SEL(2)), fs_write32(0x100, 1)));
    TRY("expand-down inside", printf("%08x\n", data_read(SEL(3), 0x2000)));
    TRY("expand-down below", data_read(SEL(3), 0x1000));
    TRY("not present", load_fs(SEL(4)));
    TRY("code segment as data", load_fs(SEL(5)));
    TRY("empty entry", load_fs(SEL(6)));
    TRY("far call, flat", printf("cs %04x\n", far_call(SEL(5), (uint32_t)(uintptr_t)cs_probe)));

    /* A code segment with a base: its offset 0 is the start of an executable page. */
    uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return 1;
    static const uint8_t probe[] = {0x8c, 0xc8, 0xcb, 0x0f, 0x0b};  /* mov %cs,%eax; lret; ud2 */
    memcpy(code, probe, sizeof probe);
    printf("install based code %d\n", set_entry(7, (uint32_t)(uintptr_t)code, 0, 2, 0, 1, 0));
    describe(7);
    TRY("far call, based", printf("cs %04x\n", far_call(SEL(7), 0)));
    TRY("ud2 in the based segment", far_call(SEL(7), 3));
    printf("fault at %04x:%08x\n", caught_cs, caught_eip);
    printf("clear based code %d\n", clear_entry(7));     /* its base is where mmap put the page */

    /* A signal while %fs holds an LDT selector: the frame has it, and sigreturn restores it. */
    struct sigaction su = {.sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO};
    sigaction(SIGUSR1, &su, NULL);
    load_fs(SEL(1));
    raise(SIGUSR1);
    printf("signal frame fs %04x, after it fs %04x reads %08x\n", caught_fs, read_fs(), fs_read32(0));
    load_fs(0);

    /* A data segment made not present while %es or %ds holds it, then a system call: the
     * kernel reloads the register on its way back (Linux: refresh_ldt_segments on x86-64, the
     * exit path's segment pops on i386), finds the segment not present (#NP) and leaves the
     * register null. Each register is put back from %ss before any C reads through it. */
    printf("segment 9 made not present while in es: es %04x\n", reload_after_not_present(9, b, 0));
    printf("segment 9 made not present while in ds: ds %04x\n", reload_after_not_present(9, b, 1));

    pid_t pid = fork();
    if (pid == 0) {
        describe(1);
        TRY("child data read", printf("%08x\n", data_read(SEL(1), 4)));
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    printf("child exit %d\n", WEXITSTATUS(status));

    printf("clear %d\n", clear_entry(1));
    describe(1);
    TRY("cleared entry", load_fs(SEL(1)));
    printf("reinstall %d\n", set_entry(1, b, 0xFF, 0, 0, 0, 0));
    check_table_read();

    printf("child with the whole table stopped and continued 20 times: exit %d\n",
           stopped_and_continued(b, 20));
    describe(LDT_ENTRIES - 8);
    TRY("after it, load an entry past the table", load_fs(SEL(LDT_ENTRIES - 8)));

    /* The whole table (LDT_ENTRIES, SDM vol. 3, 3.5.1): a child after fork has all of it, up
     * to selector 0xffff, which it loads and then makes a system call; a process that runs
     * on the child's page directory later has none. */
    unsigned installed = 0;
    for (unsigned e = 10; e < LDT_ENTRIES; e++)
        installed += set_entry(e, b, e, 0, 1, 0, 0) == 0;
    printf("installed %u more entries\n", installed);
    pid = fork();
    if (pid == 0) {
        describe(LDT_ENTRIES - 1);
        TRY("child load the last entry", load_fs(SEL(LDT_ENTRIES - 1)));
        _exit(0);
    }
    waitpid(pid, &status, 0);
    printf("child exit %d\n", WEXITSTATUS(status));

    fflush(stdout);
    execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
    return 1;
}

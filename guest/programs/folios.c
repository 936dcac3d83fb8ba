/* folios: fresh anonymous memory, then every way its page-table entries change under a process:
 * copy-on-write after fork, mprotect, munmap and MADV_DONTNEED, each checked word by word, and
 * each fault that must come checked to come. The guest kernel fills a whole 64 KiB folio's
 * entries at one fault and ring3 maps them ahead of use (monitor/mmu/mmu.c, fault_around), so a
 * page mapped ahead and kept after its entry changed shows here as a wrong value or a missing
 * fault. Prints one line per step; tests/test_linux.py compares them with QEMU's. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096u
#define PAGES 256u                              /* 1 MiB: sixteen 64 KiB folios */
#define WORDS (PAGE / sizeof(uint32_t))

static uint32_t *mem;

static uint32_t pattern(unsigned page, unsigned word, uint32_t salt)
{
    return (page * WORDS + word) * 2654435761u ^ salt;
}

static void fill(unsigned first, unsigned end, uint32_t salt)
{
    for (unsigned p = first; p < end; p++)
        for (unsigned w = 0; w < WORDS; w++)
            mem[p * WORDS + w] = pattern(p, w, salt);
}

/* The pages of [first, end) with a word other than (salt)'s pattern, or 0 for every word when
 * (salt) is 0 (fresh memory). Checks every word, so that one page mapped on a stale frame
 * shows. */
static unsigned wrong_pages(unsigned first, unsigned end, uint32_t salt)
{
    unsigned bad = 0;
    for (unsigned p = first; p < end; p++)
        for (unsigned w = 0; w < WORDS; w++)
            if (mem[p * WORDS + w] != (salt ? pattern(p, w, salt) : 0)) {
                bad++;
                break;
            }
    return bad;
}

/* After the fork step: odd pages hold the first fill, even ones the parent's second. */
static unsigned wrong_after_fork(unsigned first, unsigned end)
{
    unsigned bad = 0;
    for (unsigned p = first; p < end; p++)
        bad += wrong_pages(p, p + 1, p & 1 ? 0x1111 : 0x3333);
    return bad;
}

/* Runs (touch) on page (page) in a child: "SIGSEGV", "no fault", or how else it ended. */
static const char *child_touch(unsigned page, int write)
{
    static char other[32];
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        volatile uint32_t *at = &mem[page * WORDS + 5];
        if (write)
            *at = 1;
        else
            (void)*at;
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        exit(1);
    }
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
        return "SIGSEGV";
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return "no fault";
    snprintf(other, sizeof other, "status %#x", status);
    return other;
}

int main(void)
{
    mem = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    printf("fresh: %u of %u pages not zero\n", wrong_pages(0, PAGES, 0), PAGES);
    fill(0, PAGES, 0x1111);
    printf("filled: %u pages wrong\n", wrong_pages(0, PAGES, 0x1111));

    /* Copy-on-write: the child writes every other page and checks all of them; the parent's
     * pages keep their words, then the parent writes the other half and checks again. */
    pid_t pid = fork();
    if (pid == 0) {
        unsigned bad = 0;
        for (unsigned p = 1; p < PAGES; p += 2)
            fill(p, p + 1, 0x2222);
        for (unsigned p = 0; p < PAGES; p++)
            bad += wrong_pages(p, p + 1, p & 1 ? 0x2222 : 0x1111);
        _exit(bad ? 1 : 0);
    }
    int status;
    waitpid(pid, &status, 0);
    printf("fork: the child saw %s\n", WIFEXITED(status) && !WEXITSTATUS(status) ? "its own writes" : "wrong words");
    printf("fork: the parent has %u pages changed\n", wrong_pages(0, PAGES, 0x1111));
    for (unsigned p = 0; p < PAGES; p += 2)
        fill(p, p + 1, 0x3333);
    printf("after the child: %u pages wrong\n", wrong_after_fork(0, PAGES));

    /* mprotect: the last quarter read-only, read, then written in a child; then writable again. */
    unsigned ro = PAGES * 3 / 4;
    if (mprotect(&mem[ro * WORDS], (PAGES - ro) * PAGE, PROT_READ) != 0)
        perror("mprotect");
    printf("read-only: %u pages wrong; a read: %s; a write: %s\n", wrong_after_fork(ro, PAGES),
           child_touch(PAGES - 3, 0), child_touch(PAGES - 3, 1));
    mprotect(&mem[ro * WORDS], (PAGES - ro) * PAGE, PROT_READ | PROT_WRITE);
    fill(ro, PAGES, 0x4444);
    printf("writable again: %u pages wrong\n", wrong_pages(ro, PAGES, 0x4444));

    /* MADV_DONTNEED: the pages read as zero afterwards, the rest keep their words. */
    unsigned dn = PAGES / 2, dn_end = dn + 32;
    madvise(&mem[dn * WORDS], (dn_end - dn) * PAGE, MADV_DONTNEED);
    printf("dontneed: %u of %u pages not zero\n", wrong_pages(dn, dn_end, 0), dn_end - dn);
    fill(dn, dn_end, 0x5555);
    printf("refilled: %u pages wrong\n", wrong_pages(dn, dn_end, 0x5555));

    /* munmap: the first quarter gone, every page of it faults; the rest stays. */
    unsigned gone = PAGES / 4;
    munmap(mem, gone * PAGE);
    printf("unmapped: a read of page 0: %s, of page %u: %s\n", child_touch(0, 0), gone - 1,
           child_touch(gone - 1, 0));
    printf("the rest: %u pages wrong\n", wrong_after_fork(gone, dn) + wrong_pages(dn, dn_end, 0x5555) +
           wrong_after_fork(dn_end, ro) +
           wrong_pages(ro, PAGES, 0x4444));
    return 0;
}

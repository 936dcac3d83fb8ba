/* Runtime start-up and shutdown: lib_start, guest_exit, checks, the multiboot command line. */
#include "guest.h"

#define MB_BOOT_MAGIC  0x2BADB002u
#define MB_INFO_CMDLINE 0x4u

/* The start of the multiboot information structure (Multiboot 0.6.96, 3.3). */
struct mb_info {
    uint32_t flags, mem_lower, mem_upper, boot_device, cmdline;
};

int multiboot_ok;
int check_failures;
static const char *cmdline;

void lib_start(uint32_t magic, const struct mb_info *info);

void lib_start(uint32_t magic, const struct mb_info *info)
{
    uart_init();
    gdt_load();
    idt_load();
    if (magic == MB_BOOT_MAGIC && (info->flags & MB_INFO_CMDLINE)) {
        multiboot_ok = 1;
        cmdline = (const char *)info->cmdline;
    }
    int failed = guest_main() + check_failures;
    if (failed) {
        kprintf("%s: FAIL (%d)\n", guest_name, failed);
        guest_exit(EXIT_FAIL);
    }
    kprintf("%s: pass\n", guest_name);
    guest_exit(EXIT_PASS);
}

void guest_exit(enum guest_status st)
{
    outb(DEBUG_EXIT_PORT, (uint8_t)st);
    /* Only reached without the exit device: say so, then stop for good. */
    kputs("guest_exit: no isa-debug-exit device at 0xf4\n");
    for (;;) {
        cli();
        hlt();
    }
}

void panic(const char *fmt, ...)
{
    va_list ap;

    kputs("PANIC: ");
    va_start(ap, fmt);
    kvprintf(fmt, ap);
    va_end(ap);
    kputs("\n");
    guest_exit(EXIT_PANIC);
}

void check(int cond, const char *what)
{
    if (!cond) {
        kprintf("FAIL: %s\n", what);
        check_failures++;
    }
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

/* Parses the digits at s (decimal, or hex after 0x); the end of the token stops it. */
static uint32_t parse_uint(const char *s)
{
    uint32_t v = 0, base = 10;

    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    for (; *s && !is_space(*s); s++) {
        uint32_t d;
        if (*s >= '0' && *s <= '9')
            d = (uint32_t)(*s - '0');
        else if (base == 16 && *s >= 'a' && *s <= 'f')
            d = (uint32_t)(*s - 'a' + 10);
        else if (base == 16 && *s >= 'A' && *s <= 'F')
            d = (uint32_t)(*s - 'A' + 10);
        else
            break;
        v = v * base + d;
    }
    return v;
}

/* Looks at every whitespace-separated token, since loaders put the kernel's
 * path first (QEMU and GRUB) or not at all. */
uint32_t cmdline_uint(const char *key, uint32_t dflt)
{
    const char *p = cmdline;

    while (p && *p) {
        while (is_space(*p))
            p++;
        const char *k = key;
        while (*k && *p == *k) {
            p++;
            k++;
        }
        if (!*k && *p == '=')
            return parse_uint(p + 1);
        while (*p && !is_space(*p))
            p++;
    }
    return dflt;
}

void *memset(void *d, int c, size_t n)
{
    uint8_t *p = d;

    while (n--)
        *p++ = (uint8_t)c;
    return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
    uint8_t *p = d;
    const uint8_t *q = s;

    while (n--)
        *p++ = *q++;
    return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const uint8_t *p = a, *q = b;

    for (; n; n--, p++, q++)
        if (*p != *q)
            return *p - *q;
    return 0;
}

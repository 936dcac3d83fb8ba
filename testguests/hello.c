/* hello: the UART (polled THRE, scratch register, rep outsb), multiboot hand-over, the exit port. */
#include "guest.h"

const char guest_name[] = "hello";

int guest_main(void)
{
    static const char banner[] = "hello: via rep outsb\n";

    kputs("hello, world\n");

    /* The scratch register (offset 7) holds whatever was written to it. */
    outb(COM1 + 7, 0x5A);
    uint8_t a = inb(COM1 + 7);
    outb(COM1 + 7, 0xA5);
    uint8_t b = inb(COM1 + 7);
    kprintf("hello: scratch 0x%02x 0x%02x\n", a, b);

    /* With LCR back at 8N1 the line control register reads back as written. */
    kprintf("hello: lcr 0x%02x\n", inb(COM1 + 3));

    /* String output: the THRE poll is skipped; a 16550 FIFO holds 16 bytes. */
    outsb(COM1, banner, sizeof(banner) - 1);
    for (int i = 0; i < 100000 && !(inb(COM1 + 5) & 0x40); i++)
        ;   /* wait for TEMT: the FIFO and shift register drained */

    kprintf("hello: multiboot %s, greeting=%u\n", multiboot_ok ? "yes" : "no",
            cmdline_uint("greeting", 7));
    kprintf("hello: printf %d %u 0x%x [%5d] [%05u] [%3s] %c\n", -42, 42u, 0xBEEFu, 17, 9u, "ab",
            '!');
    return 0;
}

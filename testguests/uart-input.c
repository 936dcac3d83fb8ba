/* uart-input: reads COM1 polled, then through IRQ4, and echoes each line uppercased until '~'. */
#include "guest.h"

const char guest_name[] = "uart-input";

#define UART_RBR 0
#define UART_IER 1
#define UART_IIR 2
#define UART_MCR 4
#define UART_LSR 5
#define LSR_DR   0x01
#define IER_RDA  0x01
#define MCR_OUT2 0x08   /* gates the UART's interrupt line onto the bus on a PC */
#define IRQ_COM1 4
#define TERMINATOR '~'

static volatile uint8_t rx_buf[256];
static volatile uint8_t rx_head, rx_tail;
static uint32_t lines, bytes;

static char upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

static void on_com1(struct trapframe *tf)
{
    (void)tf;
    while (inb(COM1 + UART_LSR) & LSR_DR)
        rx_buf[rx_head++] = inb(COM1 + UART_RBR);
    pic_eoi(IRQ_COM1);
}

/* Next byte from the IRQ-fed ring, halting until one arrives. */
static char irq_getc(void)
{
    cli();
    while (rx_tail == rx_head) {
        sti_hlt();
        cli();
    }
    return (char)rx_buf[rx_tail++];
}

static char polled_getc(void)
{
    while (!(inb(COM1 + UART_LSR) & LSR_DR))
        ;
    return (char)inb(COM1 + UART_RBR);
}

/* Reads one line with getc and echoes it uppercased after a prefix; returns 0 at the terminator. */
static int echo_line(const char *how, char (*getc)(void))
{
    char line[128];
    unsigned n = 0;

    for (;;) {
        char c = getc();
        if (c == TERMINATOR)
            return 0;
        bytes++;
        if (c == '\n')
            break;
        if (n < sizeof(line) - 1)
            line[n++] = upper(c);
    }
    line[n] = 0;
    lines++;
    kprintf("uart-input: %s: %s\n", how, line);
    return 1;
}

int guest_main(void)
{
    /* The harness sends its input only after this line: bytes that arrived
     * before uart_init would have been dropped by its FIFO reset. */
    kprintf("uart-input: ready\n");
    echo_line("polled", polled_getc);

    pic_init();
    trap_set_handler(IRQ_BASE + IRQ_COM1, on_com1);
    outb(COM1 + UART_MCR, inb(COM1 + UART_MCR) | MCR_OUT2);
    outb(COM1 + UART_IER, IER_RDA);
    pic_unmask(IRQ_COM1);
    while (echo_line("irq", irq_getc))
        ;
    outb(COM1 + UART_IER, 0);
    pic_mask(IRQ_COM1);
    cli();

    kprintf("uart-input: %u lines, %u bytes, iir 0x%02x\n", lines, bytes,
            inb(COM1 + UART_IIR) & 0x0F);
    return 0;
}

/* Serial console: a polled 16550 at COM1 and a small printf. */
#include "guest.h"

#define UART_THR 0   /* transmit holding register (DLAB=0) */
#define UART_IER 1
#define UART_FCR 2
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_DLL 0   /* divisor latch (DLAB=1) */
#define UART_DLM 1
#define LSR_THRE 0x20

void uart_init(void)
{
    outb(COM1 + UART_IER, 0x00);
    outb(COM1 + UART_LCR, 0x80);          /* DLAB: the next two ports are the divisor */
    outb(COM1 + UART_DLL, 0x01);          /* 115200 baud */
    outb(COM1 + UART_DLM, 0x00);
    outb(COM1 + UART_LCR, 0x03);          /* 8 data bits, no parity, 1 stop bit */
    outb(COM1 + UART_FCR, 0x07);          /* FIFOs on and cleared */
    outb(COM1 + UART_MCR, 0x03);          /* DTR, RTS; OUT2 (the IRQ gate) stays off */
}

void uart_putc(char c)
{
    while (!(inb(COM1 + UART_LSR) & LSR_THRE))
        ;
    outb(COM1 + UART_THR, (uint8_t)c);
}

void kputs(const char *s)
{
    while (*s)
        uart_putc(*s++);
}

static void put_uint(uint32_t v, unsigned base, int width, char pad)
{
    char buf[12];
    int n = 0;

    do {
        buf[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (width-- > n)
        uart_putc(pad);
    while (n)
        uart_putc(buf[--n]);
}

void kvprintf(const char *fmt, va_list ap)
{
    for (; *fmt; fmt++) {
        if (*fmt != '%') {
            uart_putc(*fmt);
            continue;
        }
        char pad = ' ';
        int width = 0;
        if (*++fmt == '0')
            pad = '0';
        while (*fmt >= '0' && *fmt <= '9')
            width = width * 10 + (*fmt++ - '0');
        switch (*fmt) {
        case 'c':
            uart_putc((char)va_arg(ap, int));
            break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            int len = 0;
            while (s[len])
                len++;
            while (width-- > len)
                uart_putc(' ');
            kputs(s);
            break;
        }
        case 'd': {
            int v = va_arg(ap, int);
            if (v < 0) {
                uart_putc('-');
                put_uint(-(uint32_t)v, 10, width - 1, pad);
            } else {
                put_uint((uint32_t)v, 10, width, pad);
            }
            break;
        }
        case 'u':
            put_uint(va_arg(ap, uint32_t), 10, width, pad);
            break;
        case 'x':
            put_uint(va_arg(ap, uint32_t), 16, width, pad);
            break;
        case '%':
            uart_putc('%');
            break;
        default:
            uart_putc('?');
            return;
        }
    }
}

void kprintf(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    kvprintf(fmt, ap);
    va_end(ap);
}

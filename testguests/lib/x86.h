/* The test guests' privileged and sensitive instructions, as inline asm that ring3-as sees. */
#ifndef TG_X86_H
#define TG_X86_H

#include <stdint.h>

/* A GDTR/IDTR image as lgdt/lidt read it and sgdt/sidt write it (SDM 3.2.3). */
struct dtr {
    uint16_t limit;
    uint32_t base;
} __attribute__((packed));

/* ---- port I/O ---- */

static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    __asm__ __volatile__("inb %w1, %b0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline uint16_t inw(uint16_t port)
{
    uint16_t v;
    __asm__ __volatile__("inw %w1, %w0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline uint32_t inl(uint16_t port)
{
    uint32_t v;
    __asm__ __volatile__("inl %w1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline void outb(uint16_t port, uint8_t v)
{
    __asm__ __volatile__("outb %b0, %w1" : : "a"(v), "Nd"(port));
}

static inline void outw(uint16_t port, uint16_t v)
{
    __asm__ __volatile__("outw %w0, %w1" : : "a"(v), "Nd"(port));
}

static inline void outl(uint16_t port, uint32_t v)
{
    __asm__ __volatile__("outl %0, %w1" : : "a"(v), "Nd"(port));
}

/* rep outsb: n bytes from buf to one port. */
static inline void outsb(uint16_t port, const void *buf, uint32_t n)
{
    __asm__ __volatile__("cld\n\trep outsb" : "+S"(buf), "+c"(n) : "d"(port) : "memory");
}

/* rep insb: n bytes from one port to buf. */
static inline void insb(uint16_t port, void *buf, uint32_t n)
{
    __asm__ __volatile__("cld\n\trep insb" : "+D"(buf), "+c"(n) : "d"(port) : "memory");
}

/* ---- interrupt flag and halting ---- */

static inline void cli(void) { __asm__ __volatile__("cli" : : : "memory"); }
static inline void sti(void) { __asm__ __volatile__("sti" : : : "memory"); }
static inline void hlt(void) { __asm__ __volatile__("hlt" : : : "memory"); }

/* The pair that cannot lose a wake-up: an interrupt is recognised only after hlt (SDM 6.8.3). */
static inline void sti_hlt(void) { __asm__ __volatile__("sti\n\thlt" : : : "memory"); }

static inline uint32_t read_eflags(void)
{
    uint32_t v;
    __asm__ __volatile__("pushfl\n\tpopl %0" : "=r"(v));
    return v;
}

static inline void write_eflags(uint32_t v)
{
    __asm__ __volatile__("pushl %0\n\tpopfl" : : "r"(v) : "memory", "cc");
}

/* ---- descriptor tables ---- */

static inline void lgdt(const struct dtr *d) { __asm__ __volatile__("lgdt %0" : : "m"(*d)); }
static inline void lidt(const struct dtr *d) { __asm__ __volatile__("lidt %0" : : "m"(*d)); }
static inline void sgdt(struct dtr *d) { __asm__ __volatile__("sgdt %0" : "=m"(*d)); }
static inline void sidt(struct dtr *d) { __asm__ __volatile__("sidt %0" : "=m"(*d)); }
static inline void ltr(uint16_t sel) { __asm__ __volatile__("ltr %w0" : : "r"(sel) : "memory"); }
static inline void lldt(uint16_t sel) { __asm__ __volatile__("lldt %w0" : : "r"(sel) : "memory"); }

static inline uint16_t str(void)
{
    uint16_t v;
    __asm__ __volatile__("str %w0" : "=r"(v));
    return v;
}

static inline uint16_t sldt(void)
{
    uint16_t v;
    __asm__ __volatile__("sldt %w0" : "=r"(v));
    return v;
}

/* ---- segment registers ---- */

#define TG_SEG_ACCESSORS(seg)                                                         \
    static inline uint16_t read_##seg(void)                                           \
    {                                                                                 \
        uint16_t v;                                                                   \
        __asm__ __volatile__("movw %%" #seg ", %w0" : "=r"(v));                       \
        return v;                                                                     \
    }                                                                                 \
    static inline void load_##seg(uint16_t v)                                         \
    {                                                                                 \
        __asm__ __volatile__("movw %w0, %%" #seg : : "r"(v) : "memory");              \
    }
TG_SEG_ACCESSORS(ds)
TG_SEG_ACCESSORS(es)
TG_SEG_ACCESSORS(fs)
TG_SEG_ACCESSORS(gs)
TG_SEG_ACCESSORS(ss)
#undef TG_SEG_ACCESSORS

static inline uint16_t read_cs(void)
{
    uint16_t v;
    __asm__ __volatile__("movw %%cs, %w0" : "=r"(v));
    return v;
}

/* Access rights of sel masked as SDM "LAR" defines (00FxFF00H, x undefined); ok := ZF. */
static inline uint32_t lar(uint16_t sel, int *ok)
{
    uint32_t v = 0;
    uint8_t z;
    __asm__ __volatile__("larl %w2, %0\n\tsetz %1" : "+r"(v), "=q"(z) : "r"(sel) : "cc");
    *ok = z;
    return v & 0x00F0FF00u;
}

/* Byte-granular segment limit of sel; ok := ZF. */
static inline uint32_t lsl(uint16_t sel, int *ok)
{
    uint32_t v = 0;
    uint8_t z;
    __asm__ __volatile__("lsll %w2, %0\n\tsetz %1" : "+r"(v), "=q"(z) : "r"(sel) : "cc");
    *ok = z;
    return v;
}

static inline int verr(uint16_t sel)
{
    uint8_t z;
    __asm__ __volatile__("verr %w1\n\tsetz %0" : "=q"(z) : "r"(sel) : "cc");
    return z;
}

static inline int verw(uint16_t sel)
{
    uint8_t z;
    __asm__ __volatile__("verw %w1\n\tsetz %0" : "=q"(z) : "r"(sel) : "cc");
    return z;
}

/* ---- control registers ---- */

#define TG_CR_ACCESSORS(n)                                                            \
    static inline uint32_t rcr##n(void)                                               \
    {                                                                                 \
        uint32_t v;                                                                   \
        __asm__ __volatile__("movl %%cr" #n ", %0" : "=r"(v));                        \
        return v;                                                                     \
    }                                                                                 \
    static inline void lcr##n(uint32_t v)                                             \
    {                                                                                 \
        __asm__ __volatile__("movl %0, %%cr" #n : : "r"(v) : "memory");               \
    }
TG_CR_ACCESSORS(0)
TG_CR_ACCESSORS(2)
TG_CR_ACCESSORS(3)
TG_CR_ACCESSORS(4)
#undef TG_CR_ACCESSORS

static inline uint16_t smsw(void)
{
    uint16_t v;
    __asm__ __volatile__("smsw %w0" : "=r"(v));
    return v;
}

static inline void lmsw(uint16_t v) { __asm__ __volatile__("lmsw %w0" : : "r"(v) : "memory"); }
static inline void clts(void) { __asm__ __volatile__("clts" : : : "memory"); }

static inline void invlpg(uint32_t va)
{
    __asm__ __volatile__("invlpg (%0)" : : "r"(va) : "memory");
}

/* ---- identification, MSRs, time stamp ---- */

static inline void cpuid(uint32_t leaf, uint32_t subleaf, uint32_t r[4])
{
    __asm__ __volatile__("cpuid"
                         : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
                         : "a"(leaf), "c"(subleaf));
}

static inline uint64_t rdmsr(uint32_t msr)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
    return ((uint64_t)hi << 32) | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
    __asm__ __volatile__("wrmsr"
                         : : "c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)) : "memory");
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

#endif

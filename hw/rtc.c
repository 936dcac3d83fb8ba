/* MC146818A RTC and PC CMOS RAM, modelled from the Motorola MC146818A datasheet and the IBM PC/AT CMOS map. */
#include <stdlib.h>
#include <time.h>

#include "rtc.h"

/* Clock and control registers (MC146818A "Address Map"). */
enum { RTC_SEC = 0x00, RTC_SEC_ALARM = 0x01, RTC_MIN = 0x02, RTC_MIN_ALARM = 0x03,
       RTC_HOUR = 0x04, RTC_HOUR_ALARM = 0x05, RTC_WDAY = 0x06, RTC_MDAY = 0x07,
       RTC_MONTH = 0x08, RTC_YEAR = 0x09, RTC_REG_A = 0x0A, RTC_REG_B = 0x0B,
       RTC_REG_C = 0x0C, RTC_REG_D = 0x0D, RTC_CENTURY = 0x32 };

#define A_UIP   0x80
#define A_RS    0x0F
#define B_SET   0x80
#define B_PIE   0x40
#define B_AIE   0x20
#define B_UIE   0x10
#define B_DM    0x04    /* 1 = binary, 0 = BCD */
#define B_24H   0x02
#define C_IRQF  0x80
#define C_PF    0x40
#define C_AF    0x20
#define C_UF    0x10
#define D_VRT   0x80

/* UIP rises tBUC = 244 us before an update cycle of tUC = 1984 us (32.768
 * kHz time base); the new time is visible when the cycle ends, which is our
 * second boundary. */
#define RTC_UIP_NS ((244 + 1984) * 1000ull)

#define RTC_HZ 32768ull

struct rtc {
    uint8_t cmos[128];
    uint8_t index;
    bool nmi_disabled;
    uint64_t mono0;         /* clock reading at init */
    int64_t wall0_s;        /* wall-clock second at init */
    uint64_t wall0_frac;    /* and its fraction, ns */
    int64_t offset_s;       /* guest time minus host time (guest set the clock) */
    uint64_t events_e;      /* flags are up to date to this phase time */
    const struct hw_clock *clock;
    struct irq_line *irq;
};

/* Phase time: ns since the start of the wall-clock second in which we began.
 * Second boundaries of the guest's clock fall on multiples of 10^9 (setting
 * the clock changes whole seconds only; the divider chain keeps running). */
static uint64_t rtc_phase(const struct rtc *rtc, uint64_t now)
{
    return (now > rtc->mono0 ? now - rtc->mono0 : 0) + rtc->wall0_frac;
}

static int64_t rtc_secs_at(const struct rtc *rtc, uint64_t e)
{
    return rtc->wall0_s + rtc->offset_s + (int64_t)(e / NS_PER_SEC);
}

static uint8_t rtc_encode(const struct rtc *rtc, int v)
{
    if (rtc->cmos[RTC_REG_B] & B_DM)
        return (uint8_t)v;
    return (uint8_t)((v / 10 % 10) << 4 | v % 10);
}

static int rtc_decode(const struct rtc *rtc, uint8_t v)
{
    if (rtc->cmos[RTC_REG_B] & B_DM)
        return v;
    return (v >> 4) * 10 + (v & 0xF);
}

/* Hours: 0-23, or in 12-hour mode 1-12 with bit 7 set for PM. */
static uint8_t rtc_encode_hour(const struct rtc *rtc, int h)
{
    if (rtc->cmos[RTC_REG_B] & B_24H)
        return rtc_encode(rtc, h);
    int h12 = h % 12 ? h % 12 : 12;
    return (uint8_t)(rtc_encode(rtc, h12) | (h >= 12 ? 0x80 : 0));
}

static int rtc_decode_hour(const struct rtc *rtc, uint8_t v)
{
    if (rtc->cmos[RTC_REG_B] & B_24H)
        return rtc_decode(rtc, v);
    return rtc_decode(rtc, v & 0x7F) % 12 + (v & 0x80 ? 12 : 0);
}

static bool rtc_is_time_reg(uint8_t i)
{
    return i == RTC_SEC || i == RTC_MIN || i == RTC_HOUR || i == RTC_WDAY ||
           i == RTC_MDAY || i == RTC_MONTH || i == RTC_YEAR || i == RTC_CENTURY;
}

/* The encoded value of time register (i) at Unix second (secs). */
static uint8_t rtc_time_reg(const struct rtc *rtc, uint8_t i, int64_t secs)
{
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    int year = tm.tm_year + 1900;
    switch (i) {
    case RTC_SEC:     return rtc_encode(rtc, tm.tm_sec);
    case RTC_MIN:     return rtc_encode(rtc, tm.tm_min);
    case RTC_HOUR:    return rtc_encode_hour(rtc, tm.tm_hour);
    case RTC_WDAY:    return rtc_encode(rtc, tm.tm_wday + 1);  /* Sunday = 1 */
    case RTC_MDAY:    return rtc_encode(rtc, tm.tm_mday);
    case RTC_MONTH:   return rtc_encode(rtc, tm.tm_mon + 1);
    case RTC_YEAR:    return rtc_encode(rtc, year % 100);
    default:          return rtc_encode(rtc, year / 100 % 100);  /* century */
    }
}

/* Freeze the running time into the registers (SET = 1). */
static void rtc_snapshot(struct rtc *rtc, uint64_t now)
{
    int64_t secs = rtc_secs_at(rtc, rtc_phase(rtc, now));
    for (uint8_t i = 0; i < 128; i++)
        if (rtc_is_time_reg(i))
            rtc->cmos[i] = rtc_time_reg(rtc, i, secs);
}

/* Take the time the guest wrote into the registers as the new time of day,
 * keeping the phase within the second. */
static void rtc_rebase(struct rtc *rtc, uint64_t now)
{
    struct tm tm = {
        .tm_sec = rtc_decode(rtc, rtc->cmos[RTC_SEC]),
        .tm_min = rtc_decode(rtc, rtc->cmos[RTC_MIN]),
        .tm_hour = rtc_decode_hour(rtc, rtc->cmos[RTC_HOUR]),
        .tm_mday = rtc_decode(rtc, rtc->cmos[RTC_MDAY]),
        .tm_mon = rtc_decode(rtc, rtc->cmos[RTC_MONTH]) - 1,
        .tm_year = rtc_decode(rtc, rtc->cmos[RTC_CENTURY]) * 100 +
                   rtc_decode(rtc, rtc->cmos[RTC_YEAR]) - 1900,
    };
    int64_t secs = (int64_t)timegm(&tm);
    rtc->offset_s += secs - rtc_secs_at(rtc, rtc_phase(rtc, now));
}

/* Alarm: "don't care" when the two high bits of an alarm byte are set. */
static bool rtc_alarm_matches(const struct rtc *rtc, int64_t secs)
{
    static const uint8_t pair[3][2] = {
        { RTC_SEC_ALARM, RTC_SEC }, { RTC_MIN_ALARM, RTC_MIN }, { RTC_HOUR_ALARM, RTC_HOUR },
    };
    for (int i = 0; i < 3; i++) {
        uint8_t alarm = rtc->cmos[pair[i][0]];
        if ((alarm & 0xC0) != 0xC0 && alarm != rtc_time_reg(rtc, pair[i][1], secs))
            return false;
    }
    return true;
}

/* Periodic interrupt rate from RS3-RS0 in clocks of the 32.768 kHz base:
 * 1 and 2 give 256 and 128 Hz, 3-15 give 8192 Hz down to 2 Hz; 0 is off. */
static uint64_t rtc_period_clocks(const struct rtc *rtc)
{
    unsigned rs = rtc->cmos[RTC_REG_A] & A_RS;
    if (rs == 0)
        return 0;
    return rs <= 2 ? 1ull << (rs + 6) : 1ull << (rs - 1);
}

static uint64_t rtc_clocks(uint64_t e)
{
    return e / NS_PER_SEC * RTC_HZ + e % NS_PER_SEC * RTC_HZ / NS_PER_SEC;
}

static void rtc_update_irq(struct rtc *rtc)
{
    uint8_t b = rtc->cmos[RTC_REG_B], c = rtc->cmos[RTC_REG_C] & ~C_IRQF;
    /* IRQF = PF.PIE + AF.AIE + UF.UIE */
    if ((c & C_PF && b & B_PIE) || (c & C_AF && b & B_AIE) || (c & C_UF && b & B_UIE))
        c |= C_IRQF;
    rtc->cmos[RTC_REG_C] = c;
    irq_set(rtc->irq, c & C_IRQF);
}

void rtc_update(struct rtc *rtc, uint64_t now)
{
    uint64_t e0 = rtc->events_e, e = rtc_phase(rtc, now);
    if (e <= e0)
        return;
    uint64_t s0 = e0 / NS_PER_SEC, s1 = e / NS_PER_SEC;
    /* SET inhibits the update cycle, and with it UF and AF. */
    if (s1 > s0 && !(rtc->cmos[RTC_REG_B] & B_SET)) {
        rtc->cmos[RTC_REG_C] |= C_UF;
        /* A day covers every alarm pattern: look at no more updates. */
        uint64_t first = s1 - s0 > 86400 ? s1 - 86399 : s0 + 1;
        for (uint64_t s = first; s <= s1; s++) {
            if (rtc_alarm_matches(rtc, rtc_secs_at(rtc, s * NS_PER_SEC))) {
                rtc->cmos[RTC_REG_C] |= C_AF;
                break;
            }
        }
    }
    uint64_t p = rtc_period_clocks(rtc);
    if (p && rtc_clocks(e) / p != rtc_clocks(e0) / p)
        rtc->cmos[RTC_REG_C] |= C_PF;
    rtc->events_e = e;
    rtc_update_irq(rtc);
}

uint64_t rtc_next_deadline(struct rtc *rtc, uint64_t now)
{
    uint8_t b = rtc->cmos[RTC_REG_B];
    if (rtc->cmos[RTC_REG_C] & C_IRQF)
        return RTC_NO_DEADLINE;
    uint64_t e = rtc->events_e, next = UINT64_MAX;
    if (b & (B_UIE | B_AIE) && !(b & B_SET))
        next = (e / NS_PER_SEC + 1) * NS_PER_SEC;
    uint64_t p = rtc_period_clocks(rtc);
    if (p && b & B_PIE) {
        uint64_t c = (rtc_clocks(e) / p + 1) * p;
        uint64_t t = c / RTC_HZ * NS_PER_SEC + (c % RTC_HZ * NS_PER_SEC + RTC_HZ - 1) / RTC_HZ;
        if (t < next)
            next = t;
    }
    if (next == UINT64_MAX)
        return RTC_NO_DEADLINE;
    uint64_t t = rtc->mono0 + (next - rtc->wall0_frac);
    return t < now ? now : t;
}

static uint8_t rtc_read(struct rtc *rtc, uint8_t i, uint64_t now)
{
    uint8_t b = rtc->cmos[RTC_REG_B];
    if (rtc_is_time_reg(i) && !(b & B_SET))
        return rtc_time_reg(rtc, i, rtc_secs_at(rtc, rtc_phase(rtc, now)));
    switch (i) {
    case RTC_REG_A: {
        /* Writing SET = 1 aborts the update cycle and clears UIP. */
        bool uip = !(b & B_SET) &&
                   rtc_phase(rtc, now) % NS_PER_SEC >= NS_PER_SEC - RTC_UIP_NS;
        return (uint8_t)(rtc->cmos[RTC_REG_A] | (uip ? A_UIP : 0));
    }
    case RTC_REG_C: {
        /* Reading C clears all flags and with them IRQF. */
        uint8_t c = rtc->cmos[RTC_REG_C];
        rtc->cmos[RTC_REG_C] = 0;
        rtc_update_irq(rtc);
        return c;
    }
    case RTC_REG_D:
        return D_VRT;   /* valid RAM and time: the battery is good */
    default:
        return rtc->cmos[i];
    }
}

static void rtc_write(struct rtc *rtc, uint8_t i, uint8_t val, uint64_t now)
{
    uint8_t b = rtc->cmos[RTC_REG_B];
    if (rtc_is_time_reg(i)) {
        if (b & B_SET) {
            rtc->cmos[i] = val;
        } else {
            /* A field written while the clock runs: the others keep their
             * current values. */
            rtc_snapshot(rtc, now);
            rtc->cmos[i] = val;
            rtc_rebase(rtc, now);
        }
        return;
    }
    switch (i) {
    case RTC_REG_A:
        /* UIP is read-only. DV2-0 are kept but the time base always runs. */
        rtc->cmos[i] = val & 0x7F;
        break;
    case RTC_REG_B:
        if (val & B_SET)
            val &= ~B_UIE;  /* register B: SET going high clears UIE */
        if (!(b & B_SET) && (val & B_SET))
            rtc_snapshot(rtc, now);
        rtc->cmos[i] = val;
        if ((b & B_SET) && !(val & B_SET))
            rtc_rebase(rtc, now);
        rtc_update_irq(rtc);
        break;
    case RTC_REG_C:
    case RTC_REG_D:
        break;  /* read-only */
    default:
        rtc->cmos[i] = val;
        break;
    }
}

static void rtc_io(uint16_t off, uint32_t *data, unsigned len, bool is_write,
                   void *opaque)
{
    (void)len;
    struct rtc *rtc = opaque;
    if (off == 0) {
        if (is_write) {
            /* Port 0x70: bit 7 masks NMI on the PC; bits 6-0 select the byte. */
            rtc->nmi_disabled = *data & 0x80;
            rtc->index = *data & 0x7F;
        } else {
            *data = 0xFF;   /* the index register is write-only */
        }
        return;
    }
    uint64_t now = hw_clock_now(rtc->clock);
    rtc_update(rtc, now);
    if (is_write)
        rtc_write(rtc, rtc->index, (uint8_t)*data, now);
    else
        *data = rtc_read(rtc, rtc->index, now);
}

bool rtc_nmi_disabled(const struct rtc *rtc)
{
    return rtc->nmi_disabled;
}

static void rtc_put16(struct rtc *rtc, uint8_t lo, uint64_t v)
{
    if (v > 0xFFFF)
        v = 0xFFFF;
    rtc->cmos[lo] = (uint8_t)v;
    rtc->cmos[lo + 1] = (uint8_t)(v >> 8);
}

void rtc_set_memory(struct rtc *rtc, uint64_t mem_bytes)
{
    const uint64_t mib = 1024 * 1024;
    uint64_t ext_kib = mem_bytes > mib ? (mem_bytes - mib) / 1024 : 0;
    uint64_t high_64k = mem_bytes > 16 * mib ? (mem_bytes - 16 * mib) / 65536 : 0;
    rtc_put16(rtc, 0x15, 640);          /* base memory, KiB */
    rtc_put16(rtc, 0x17, ext_kib);      /* memory above 1 MiB, KiB */
    rtc_put16(rtc, 0x30, ext_kib);      /* the same, as found by POST */
    rtc_put16(rtc, 0x34, high_64k);     /* memory above 16 MiB, 64 KiB units */
    /* PC/AT checksum: the 16-bit sum of bytes 0x10-0x2D, high byte first. */
    unsigned sum = 0;
    for (int i = 0x10; i <= 0x2D; i++)
        sum += rtc->cmos[i];
    rtc->cmos[0x2E] = (uint8_t)(sum >> 8);
    rtc->cmos[0x2F] = (uint8_t)sum;
}

struct rtc *rtc_init(struct io_bus *bus, struct irq_line *irq,
                     const struct hw_clock *clock, int64_t wall_ns)
{
    struct rtc *rtc = calloc(1, sizeof(*rtc));
    if (rtc == NULL)
        return NULL;
    rtc->clock = clock;
    rtc->irq = irq;
    rtc->mono0 = hw_clock_now(clock);
    if (wall_ns < 0)
        wall_ns = 0;
    rtc->wall0_s = wall_ns / (int64_t)NS_PER_SEC;
    rtc->wall0_frac = (uint64_t)(wall_ns % (int64_t)NS_PER_SEC);
    rtc->events_e = rtc->wall0_frac;
    rtc->cmos[RTC_REG_A] = 0x26;    /* 32.768 kHz time base, 1024 Hz rate */
    rtc->cmos[RTC_REG_B] = B_24H;   /* BCD, 24-hour, no interrupts */
    rtc->cmos[0x14] = 0x02;         /* equipment: math coprocessor present */
    rtc_set_memory(rtc, 0);
    if (io_register(bus, RTC_BASE, 2, rtc_io, rtc, "rtc")) {
        free(rtc);
        return NULL;
    }
    return rtc;
}

void rtc_free(struct rtc *rtc)
{
    free(rtc);
}

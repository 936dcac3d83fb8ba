/* cpuid-msr: stable cpuid properties, SYSENTER MSR round trips, rdtsc monotonic. */
#include "guest.h"

const char guest_name[] = "cpuid-msr";

#define MSR_SYSENTER_CS  0x174
#define MSR_SYSENTER_ESP 0x175
#define MSR_SYSENTER_EIP 0x176

/* CPUID.1:EDX bits present both on QEMU's default CPU (qemu32) and on any
 * x86-64 host, so the filtered view ring3 gives must show them too. */
static const struct {
    int bit;
    const char *name;
} features[] = {
    { 0, "fpu" }, { 3, "pse" }, { 4, "tsc" }, { 5, "msr" }, { 8, "cx8" },
    { 11, "sep" }, { 13, "pge" }, { 15, "cmov" }, { 23, "mmx" }, { 24, "fxsr" },
};

static void test_cpuid(void)
{
    uint32_t r[4];

    cpuid(0, 0, r);
    int printable = 1;
    const uint32_t vendor[3] = { r[1], r[3], r[2] };
    for (int i = 0; i < 12; i++) {
        char c = ((const char *)vendor)[i];
        printable &= c >= 0x20 && c < 0x7F;
    }
    kprintf("cpuid: max basic leaf >= 1: %s, vendor printable: %s\n", r[0] >= 1 ? "yes" : "no",
            printable ? "yes" : "no");

    cpuid(1, 0, r);
    kprintf("cpuid: leaf 1 edx:");
    for (unsigned i = 0; i < sizeof(features) / sizeof(features[0]); i++)
        kprintf(" %s=%u", features[i].name, (r[3] >> features[i].bit) & 1);
    kprintf("\n");
    kprintf("cpuid: family >= 6: %s\n", ((r[0] >> 8) & 0xF) >= 6 ? "yes" : "no");
}

static void roundtrip(uint32_t msr, uint64_t v)
{
    wrmsr(msr, v);
    uint64_t back = rdmsr(msr);
    kprintf("msr 0x%x: wrote 0x%08x, read 0x%08x:%08x\n", msr, (uint32_t)v, (uint32_t)(back >> 32),
            (uint32_t)back);
}

static void test_msrs(void)
{
    uint64_t saved_cs = rdmsr(MSR_SYSENTER_CS);

    roundtrip(MSR_SYSENTER_CS, SEL_KCODE);
    roundtrip(MSR_SYSENTER_ESP, 0x12345670);
    roundtrip(MSR_SYSENTER_EIP, 0x9ABCDEF0);
    wrmsr(MSR_SYSENTER_CS, saved_cs);
}

static void test_tsc(void)
{
    uint64_t t0 = rdtsc(), prev = t0;
    int monotonic = 1;

    for (int i = 0; i < 1000; i++) {
        uint64_t t = rdtsc();
        monotonic &= t >= prev;
        prev = t;
    }
    kprintf("rdtsc: %s\n", monotonic && prev > t0 ? "monotonic, advancing" : "WRONG");
    check(monotonic && prev > t0, "rdtsc monotonic");
}

int guest_main(void)
{
    test_cpuid();
    test_msrs();
    test_tsc();
    return 0;
}

/* Unit test of PCI configuration mechanism #1: no device answers all ones, address register rules, a registered function. */
#include "check.h"
#include "hw/pci.h"

static struct io_bus *bus;

struct fakefn {
    uint8_t cfg[256];
    unsigned last_reg, last_len;
    uint32_t last_value;
    int writes;
};

static uint32_t fake_read(void *opaque, unsigned reg, unsigned len)
{
    struct fakefn *f = opaque;
    uint32_t v = 0;
    for (unsigned i = 0; i < len; i++)
        v |= (uint32_t)f->cfg[(reg + i) & 0xFF] << (8 * i);
    f->last_reg = reg;
    f->last_len = len;
    return v;
}

static void fake_write(void *opaque, unsigned reg, unsigned len, uint32_t value)
{
    struct fakefn *f = opaque;
    f->last_reg = reg;
    f->last_len = len;
    f->last_value = value;
    f->writes++;
}

static uint32_t cfg_addr(unsigned bus_nr, unsigned dev, unsigned fn, unsigned reg)
{
    return 0x80000000u | bus_nr << 16 | dev << 11 | fn << 8 | (reg & 0xFC);
}

int main(void)
{
    bus = io_bus_new();
    struct pci_bus *pci = pci_init(bus);
    CHECK(pci != NULL);

    /* Linux's pci_check_type1(): a byte to 0xCFB leaves CONFIG_ADDRESS
     * alone; a dword write reads back. */
    io_out(bus, 0xCF8, 4, 0x12345678);
    io_out(bus, 0xCFB, 1, 0x01);
    CHECK_EQ(io_in(bus, 0xCF8, 4), 0x00345678);  /* reserved bits read 0 */
    io_out(bus, 0xCF8, 4, 0x80000000);
    CHECK_EQ(io_in(bus, 0xCF8, 4), 0x80000000);
    io_out(bus, 0xCF8, 4, 0xFFFFFFFF);
    CHECK_EQ(io_in(bus, 0xCF8, 4), 0x80FFFFFC);
    CHECK_EQ(io_in(bus, 0xCF8, 2), 0xFFFF);      /* not a dword: no register */

    /* No device anywhere: every function reads all ones, at any width. */
    for (unsigned dev = 0; dev < 32; dev++) {
        for (unsigned fn = 0; fn < 8; fn++) {
            io_out(bus, 0xCF8, 4, cfg_addr(0, dev, fn, 0));
            CHECK_EQ(io_in(bus, 0xCFC, 4), 0xFFFFFFFF);
        }
    }
    io_out(bus, 0xCF8, 4, cfg_addr(0, 0, 0, 0x08));
    CHECK_EQ(io_in(bus, 0xCFE, 2), 0xFFFF);
    CHECK_EQ(io_in(bus, 0xCFD, 1), 0xFF);
    io_out(bus, 0xCFC, 4, 0);       /* a write to nothing is dropped */
    CHECK_EQ(io_in(bus, 0xCFC, 4), 0xFFFFFFFF);

    /* A function registered at 00:03.0. */
    struct fakefn f = { 0 };
    f.cfg[0] = 0xF4; f.cfg[1] = 0x1A;   /* vendor 0x1AF4 */
    f.cfg[2] = 0x00; f.cfg[3] = 0x10;   /* device 0x1000 */
    f.cfg[0x0A] = 0x00; f.cfg[0x0B] = 0x02;
    struct pci_function fn = { fake_read, fake_write, &f };
    CHECK_EQ(pci_register_function(pci, 3, 0, &fn), 0);
    CHECK_EQ(pci_register_function(pci, 3, 0, &fn), -1);
    CHECK_EQ(pci_register_function(pci, 32, 0, &fn), -1);
    CHECK_EQ(pci_register_function(pci, 0, 8, &fn), -1);
    io_out(bus, 0xCF8, 4, cfg_addr(0, 3, 0, 0));
    CHECK_EQ(io_in(bus, 0xCFC, 4), 0x10001AF4);
    CHECK_EQ(io_in(bus, 0xCFE, 2), 0x1000);
    CHECK_EQ(f.last_reg, 2);
    CHECK_EQ(f.last_len, 2);
    io_out(bus, 0xCF8, 4, cfg_addr(0, 3, 0, 0x08));
    CHECK_EQ(io_in(bus, 0xCFF, 1), 0x02);
    CHECK_EQ(f.last_reg, 0x0B);
    io_out(bus, 0xCF8, 4, cfg_addr(0, 3, 0, 0x10));
    io_out(bus, 0xCFC, 4, 0xFFFFFFFF);
    CHECK_EQ(f.writes, 1);
    CHECK_EQ(f.last_reg, 0x10);
    CHECK_EQ(f.last_len, 4);
    CHECK_EQ(f.last_value, 0xFFFFFFFF);
    /* Other functions, other buses and a disabled address see nothing. */
    io_out(bus, 0xCF8, 4, cfg_addr(0, 3, 1, 0));
    CHECK_EQ(io_in(bus, 0xCFC, 4), 0xFFFFFFFF);
    io_out(bus, 0xCF8, 4, cfg_addr(1, 3, 0, 0));
    CHECK_EQ(io_in(bus, 0xCFC, 4), 0xFFFFFFFF);
    io_out(bus, 0xCF8, 4, cfg_addr(0, 3, 0, 0) & ~0x80000000u);
    CHECK_EQ(io_in(bus, 0xCFC, 4), 0xFFFFFFFF);
    io_out(bus, 0xCFC, 4, 0);
    CHECK_EQ(f.writes, 1);

    pci_free(pci);
    io_bus_free(bus);
    return check_done();
}

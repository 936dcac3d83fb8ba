/* gdb's target description of the guest (tdesc.h): the features org.gnu.gdb.i386.core and
 * org.gnu.gdb.i386.sse with gdb's register names, types and order, as gdb's own 32bit-core.xml
 * and 32bit-sse.xml describe an i386 with SSE. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tdesc.h"

#include "rsp.h"

#define REG32(name, type) "<reg name=\"" name "\" bitsize=\"32\" type=\"" type "\"/>"
#define FLOAT32(name) "<reg name=\"" name "\" bitsize=\"32\" type=\"int\" group=\"float\"/>"
#define ST(n) "<reg name=\"st" #n "\" bitsize=\"80\" type=\"i387_ext\"/>"
#define XMM(n) "<reg name=\"xmm" #n "\" bitsize=\"128\" type=\"vec128\"/>"
#define FIELD(name, bit) "<field name=\"" name "\" start=\"" #bit "\" end=\"" #bit "\"/>"

const char tdesc_xml[] =
    "<?xml version=\"1.0\"?>"
    "<!DOCTYPE target SYSTEM \"gdb-target.dtd\">"
    "<target version=\"1.0\"><architecture>i386</architecture>"
    "<feature name=\"org.gnu.gdb.i386.core\">"
    /* EFLAGS (SDM vol. 1, 3.4.3) */
    "<flags id=\"i386_eflags\" size=\"4\">"
    FIELD("CF", 0) FIELD("", 1) FIELD("PF", 2) FIELD("AF", 4) FIELD("ZF", 6) FIELD("SF", 7)
    FIELD("TF", 8) FIELD("IF", 9) FIELD("DF", 10) FIELD("OF", 11) FIELD("NT", 14) FIELD("RF", 16)
    FIELD("VM", 17) FIELD("AC", 18) FIELD("VIF", 19) FIELD("VIP", 20) FIELD("ID", 21)
    "</flags>"
    "<reg name=\"eax\" bitsize=\"32\" type=\"int32\" regnum=\"0\"/>"
    REG32("ecx", "int32") REG32("edx", "int32") REG32("ebx", "int32") REG32("esp", "data_ptr")
    REG32("ebp", "data_ptr") REG32("esi", "int32") REG32("edi", "int32") REG32("eip", "code_ptr")
    REG32("eflags", "i386_eflags") REG32("cs", "int32") REG32("ss", "int32") REG32("ds", "int32")
    REG32("es", "int32") REG32("fs", "int32") REG32("gs", "int32")
    ST(0) ST(1) ST(2) ST(3) ST(4) ST(5) ST(6) ST(7)
    FLOAT32("fctrl") FLOAT32("fstat") FLOAT32("ftag") FLOAT32("fiseg") FLOAT32("fioff")
    FLOAT32("foseg") FLOAT32("fooff") FLOAT32("fop")
    "</feature>"
    "<feature name=\"org.gnu.gdb.i386.sse\">"
    "<vector id=\"v4f\" type=\"ieee_single\" count=\"4\"/>"
    "<vector id=\"v2d\" type=\"ieee_double\" count=\"2\"/>"
    "<vector id=\"v16i8\" type=\"int8\" count=\"16\"/>"
    "<vector id=\"v8i16\" type=\"int16\" count=\"8\"/>"
    "<vector id=\"v4i32\" type=\"int32\" count=\"4\"/>"
    "<vector id=\"v2i64\" type=\"int64\" count=\"2\"/>"
    "<union id=\"vec128\">"
    "<field name=\"v4_float\" type=\"v4f\"/><field name=\"v2_double\" type=\"v2d\"/>"
    "<field name=\"v16_int8\" type=\"v16i8\"/><field name=\"v8_int16\" type=\"v8i16\"/>"
    "<field name=\"v4_int32\" type=\"v4i32\"/><field name=\"v2_int64\" type=\"v2i64\"/>"
    "<field name=\"uint128\" type=\"uint128\"/>"
    "</union>"
    /* MXCSR (SDM vol. 1, 10.2.3) */
    "<flags id=\"i386_mxcsr\" size=\"4\">"
    FIELD("IE", 0) FIELD("DE", 1) FIELD("ZE", 2) FIELD("OE", 3) FIELD("UE", 4) FIELD("PE", 5)
    FIELD("DAZ", 6) FIELD("IM", 7) FIELD("DM", 8) FIELD("ZM", 9) FIELD("OM", 10) FIELD("UM", 11)
    FIELD("PM", 12) FIELD("FZ", 15)
    "</flags>"
    "<reg name=\"xmm0\" bitsize=\"128\" type=\"vec128\" regnum=\"32\"/>"
    XMM(1) XMM(2) XMM(3) XMM(4) XMM(5) XMM(6) XMM(7)
    "<reg name=\"mxcsr\" bitsize=\"32\" type=\"i386_mxcsr\" group=\"vector\"/>"
    "</feature></target>";

void tdesc_read(const char *args, char *out, size_t cap)
{
    uint64_t offset, length;
    const char *colon = strchr(args, ':'), *p;
    size_t total = sizeof tdesc_xml - 1;
    if (!colon || strncmp(args, "target.xml:", 11) || !(p = rsp_number(colon + 1, &offset)) ||
        *p != ',' || !(p = rsp_number(p + 1, &length)) || *p) {
        snprintf(out, cap, "E00");
        return;
    }
    if (offset > total)
        offset = total;
    if (length > total - offset)
        length = total - offset;
    if (length > cap - 2)
        length = cap - 2;
    out[0] = offset + length < total ? 'm' : 'l';
    memcpy(out + 1, tdesc_xml + offset, length);
    out[1 + length] = 0;
}

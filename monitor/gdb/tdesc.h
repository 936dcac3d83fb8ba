/* gdb's target description of the guest (tdesc.c): i386 with x87 and SSE, the registers 'g'
 * carries in this order (GDB manual, "Target Descriptions", "i386 Features"). gdb reads it with
 * qXfer:features:read:target.xml; without it, it would take only the 16 general and segment
 * registers. */
#ifndef RING3_GDB_TDESC_H
#define RING3_GDB_TDESC_H

#include <stddef.h>

/* The description, a NUL-terminated XML document. */
extern const char tdesc_xml[];

/* The answer to qXfer:features:read:ANNEX:OFFSET,LENGTH (args: what follows "read:") into
 * (out), (cap) bytes: 'm' or 'l' and the piece, E00 for an unknown annex or bad numbers. */
void tdesc_read(const char *args, char *out, size_t cap);

#endif

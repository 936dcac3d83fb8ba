/* What the fuzz targets share: a small guest memory fenced by inaccessible pages, and a reader of
 * the fuzzer's bytes. */
#ifndef RING3_FUZZ_GUEST_H
#define RING3_FUZZ_GUEST_H

#include <stddef.h>
#include <stdint.h>

#include "memory/guestmem.h"

/* (gm) with (size) bytes of zeroed RAM (a multiple of the page size) and a PROT_NONE page on each
 * side: a device that reaches outside guest RAM faults at once, with or without a sanitizer.
 * Made once per process; later calls zero the same memory (dropping the pages touched). */
void fuzz_guestmem(struct guestmem *gm, uint64_t size);

/* A RAM of (size) bytes as an IKC member has it: a sealed memfd (its size fixed), mapped shared
 * at (*map); returns the descriptor. */
int fuzz_sealed_ram(uint64_t size, uint8_t **map);

/* The fuzzer's input, read from the front; past its end every read gives zeros. */
struct fuzz_input {
    const uint8_t *p;
    size_t left;
};

uint8_t fuzz_u8(struct fuzz_input *in);
uint16_t fuzz_u16(struct fuzz_input *in);
uint32_t fuzz_u32(struct fuzz_input *in);
/* Up to (n) bytes into (dst); returns how many there were. */
size_t fuzz_bytes(struct fuzz_input *in, void *dst, size_t n);

/* What the code under test prints on stdio's stderr from fuzz_stderr_catch() to
 * fuzz_stderr_release(), kept in memory (the sanitizers and libFuzzer write their reports to file
 * descriptor 2, which stays as it is). The text is NUL-terminated, its length in (*len); it lasts
 * until the next catch. */
void fuzz_stderr_catch(void);
const char *fuzz_stderr_release(size_t *len);

#endif

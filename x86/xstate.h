/* What ring3 needs of the XSAVE image's layout (Intel SDM vol. 1, 13.4). */
#ifndef RING3_X86_XSTATE_H
#define RING3_X86_XSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XSTATE_PKRU     (1ull << 9)     /* XCR0 bit 9: the protection-key rights register */
#define XSTATE_BV_OFF   512             /* the header's first field: which components the image holds */
#define XSTATE_MAGIC1   0x46505853u     /* Linux's FP_XSTATE_MAGIC1 at byte 464 of a signal frame's image */
#define XSTATE_MAGIC_OFF 464
/* The legacy area's bytes 464-511 are software's (a signal frame's fpstate magic): XSAVE
 * leaves them and XRSTOR ignores them (SDM vol. 1, 10.5.1). */
#define XSTATE_SW_OFF   464
#define XSTATE_SW_END   512

/* PKRU is the host's, never a guest's. Guest code runs on the host's CPU, where the
 * host kernel set CR4.PKE, so WRPKRU works at CPL 3 although the guest's CPUID has
 * no PKU. A value a guest process wrote, carried with its vector state into the
 * monitor, would deny the monitor its own memory (key 0), and kill it. With the
 * component's XSTATE_BV bit clear, an XRSTOR of (image) puts PKRU in its initial
 * state, 0 (every key allowed), whatever the image's PKRU bytes say (13.8.1). */
static inline void xstate_forget_pkru(uint8_t *image)
{
    uint64_t bv;
    memcpy(&bv, image + XSTATE_BV_OFF, sizeof bv);
    bv &= ~XSTATE_PKRU;
    memcpy(image + XSTATE_BV_OFF, &bv, sizeof bv);
}

/* Make (image), standard format, hostile input, one that XRSTOR loads without a fault, which
 * in the monitor would end it (SDM vol. 1, 13.8.1: #GP for an XSTATE_BV bit that XCR0 lacks,
 * for a header byte 8-63 not zero, for an MXCSR bit outside MXCSR_MASK, 11.6.6): XSTATE_BV
 * within (xcr0) and without PKRU (above), the rest of the header zero, MXCSR within
 * (mxcsr_mask). What a process wrote into its own state stays its own. */
void xstate_make_loadable(uint8_t *image, uint64_t xcr0, uint32_t mxcsr_mask);

/* The host's XCR0 and MXCSR_MASK (0xFFBF where FXSAVE reports none, 11.6.6). */
uint64_t xstate_xcr0(void);
uint32_t xstate_mxcsr_mask(void);

/* Learn the components' places in the image from CPUID; once, before xstate_copy. */
void xstate_layout_init(void);

/* Copy the XSAVE image (src), standard format, (full) bytes at most, to (dst): the x87 and
 * SSE area and the header always, but for the software bytes, which stay (dst)'s, so that a
 * signal frame keeps its magic; then only the components whose XSTATE_BV bit is set.
 * The others keep whatever (dst) held, which is fine for XRSTOR and for the kernel's
 * NT_X86_XSTATE: a component whose bit is clear is put in its initial configuration and
 * its bytes are not read (SDM vol. 1, 13.8.1). A 32-bit guest's image holds x87, SSE and
 * PKRU, about 600 bytes of the 2.7 KiB an AVX-512 host's image takes. */
void xstate_copy(uint8_t *dst, const uint8_t *src, size_t full);

/* Whether XRSTOR of image (a) and of image (b) would give the same registers: the same
 * XSTATE_BV, the same x87 and SSE area, and the same bytes in every component it holds
 * (x87 and SSE compared even when their bits are clear: a difference there only costs
 * a restore). */
bool xstate_same(const uint8_t *a, const uint8_t *b, size_t full);

#endif

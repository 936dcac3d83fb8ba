/* Fuzz target: insert mode's decoder (monitor/cpu/insert_decode.c) on the bytes at a trap.
 *
 * The input's first byte says whether the trap was #UD (bit 0) or #GP; the rest are the bytes at
 * the trapping address, at most as many as insert_emulate() fetches. Beyond "no crash": a site
 * lies within the bytes given and its instruction is at most 15 bytes (SDM vol. 2, 2.3.11); a
 * marked site starts with the marker and came from a #UD; Capstone's own decode of the site's
 * bytes agrees on its length and names the entry's instruction; the DESC word's fields are in
 * their ranges (include/ring3/abi.h); the bytes of a site alone decode to the same site, and
 * every shorter prefix of them is INSERT_SHORT, since insert_emulate() fetches more on
 * INSERT_SHORT only (an instruction across a page end); and decoding is deterministic. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/cpu/insert.h"
#include "ring3/abi.h"
#include "x86/sensitive.h"

/* As monitor/cpu/insert.c: the marker, an instruction of at most 15 bytes, the hlt of sti; hlt. */
#define FETCH_MAX (R3_INSERT_MARKER_LEN + 15u + 1u)

static csh cs, cs_plain;
static cs_insn *insn;

/* The entry names of abi.h, lower case, are Capstone's mnemonics but for these. */
static const char *mnemonic_of(unsigned entry)
{
    static const char *const names[] = {
#define R3_NAME(num, name, words, path, contract) [num] = #name,
        R3_ENTRIES(R3_NAME)
#undef R3_NAME
    };
    switch (entry) {
    case R3_E_PUSHF: return "pushfd";
    case R3_E_POPF: return "popfd";
    case R3_E_IRET: return "iretd";
    case R3_E_MOV_TO_CR: case R3_E_MOV_FROM_CR: case R3_E_MOV_TO_DR: case R3_E_MOV_FROM_DR:
    case R3_E_MOV_TO_SREG: case R3_E_MOV_FROM_SREG:
        return "mov";
    case R3_E_PUSH_SREG: return "push";
    case R3_E_POP_SREG: return "pop";
    case R3_E_LRET: return "retf";
    case R3_E_WBNOINVD: return "wbinvd";     /* Capstone 4 does not know f3 0f 09 */
    case R3_E_STI_HLT: return "sti";
    }
    return entry < R3_ENTRY_COUNT ? names[entry] : NULL;
}

/* Whether Capstone's (mnemonic), without prefixes such as "rep ", names (want); ins and outs
 * carry a size letter. */
static bool names_entry(const char *mnemonic, unsigned entry)
{
    const char *want = mnemonic_of(entry), *sp = strrchr(mnemonic, ' ');
    const char *m = sp ? sp + 1 : mnemonic;
    size_t n = strlen(m);
    if (!want)
        return false;
    if ((entry == R3_E_INS || entry == R3_E_OUTS) && n > 0 && strchr("bwd", m[n - 1]))
        n--;
    for (size_t i = 0; i < n; i++)
        if (!want[i] || tolower((unsigned char)want[i]) != m[i])
            return false;
    return want[n] == '\0';
}

/* insert_decode() on a copy of exactly (len) bytes, so that the sanitizer sees a read past them. */
static enum insert_decoded decode_exact(const uint8_t *code, size_t len, bool ud, struct insert_site *site)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        abort();
    memcpy(copy, code, len);
    memset(site, 0xA5, sizeof *site);
    enum insert_decoded r = insert_decode(cs, insn, copy, len, ud, site);
    free(copy);
    return r;
}

static bool same_site(const struct insert_site *a, const struct insert_site *b)
{
    return a->entry == b->entry && a->desc == b->desc && a->aux == b->aux && a->len == b->len &&
           a->marked == b->marked;
}

static void check_desc(uint32_t desc)
{
    if (R3_D_SIZE(desc) > R3_SIZE_32)
        abort();
    switch (R3_D_KIND(desc)) {
    case R3_KIND_REG:
        if (R3_D_BASE(desc) >= R3_NOREG)
            abort();
        break;
    case R3_KIND_MEM:
        if (R3_D_BASE(desc) > R3_NOREG || R3_D_INDEX(desc) > R3_NOREG || R3_D_SEG(desc) > 6)
            abort();
        break;
    }
}

/* Capstone's plain decode of the instruction (two for sti; hlt) that the site covers. */
static void check_against_capstone(const uint8_t *code, const struct insert_site *site, size_t skip)
{
    const uint8_t *p = code + skip;
    size_t n = site->len - skip;
    struct sens_info info;
    size_t extra = sens_decode_extra(p, n, &info);
    if (extra) {
        /* Newer than Capstone 4 (wrmsrns): sensitive.c's own table is the decode. */
        if (extra != n || info.entry != (int)site->entry)
            abort();
        return;
    }
    cs_insn *got;
    size_t want = site->entry == R3_E_STI_HLT ? 2 : 1;
    if (cs_disasm(cs_plain, p, n, 0, want, &got) != want)
        abort();
    size_t total = got[0].size + (want == 2 ? got[1].size : 0);
    if (total != n || got[0].size > 15 || !names_entry(got[0].mnemonic, site->entry) ||
        (want == 2 && strcmp(got[1].mnemonic, "hlt") != 0))
        abort();
    cs_free(got, want);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    /* As fetch_capstone() opens it: 32-bit, details on, Intel syntax. */
    if (cs_open(CS_ARCH_X86, CS_MODE_32, &cs) != CS_ERR_OK || cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON) ||
        cs_open(CS_ARCH_X86, CS_MODE_32, &cs_plain) != CS_ERR_OK)
        abort();
    insn = cs_malloc(cs);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool ud = data[0] & 1;
    const uint8_t *code = data + 1;
    size_t len = size - 1 < FETCH_MAX ? size - 1 : FETCH_MAX;

    struct insert_site site, again;
    enum insert_decoded r = decode_exact(code, len, ud, &site);
    if (decode_exact(code, len, ud, &again) != r || (r == INSERT_SITE && !same_site(&site, &again)))
        abort();
    if (r == INSERT_SHORT && len >= FETCH_MAX)
        abort();        /* the caller cannot fetch more */
    if (r != INSERT_SITE)
        return 0;

    size_t skip = site.marked ? R3_INSERT_MARKER_LEN : 0;
    if (site.entry >= R3_ENTRY_COUNT || site.len <= skip || site.len > len)
        abort();
    if (site.marked && (!ud || !sens_is_insert_marker(code, len)))
        abort();
    if (site.len - skip > 15 + (site.entry == R3_E_STI_HLT ? 15u : 0u))
        abort();
    check_desc(site.desc);
    check_against_capstone(code, &site, skip);

    /* The site's bytes alone are the same site; fewer are INSERT_SHORT (or, for sti; hlt,
     * the sti alone). */
    if (decode_exact(code, site.len, ud, &again) != INSERT_SITE || !same_site(&site, &again))
        abort();
    for (size_t k = 0; k < site.len; k++) {
        r = decode_exact(code, k, ud, &again);
        if (r == INSERT_SHORT)
            continue;
        if (!(site.entry == R3_E_STI_HLT && r == INSERT_SITE && again.entry == R3_E_STI && again.len <= k))
            abort();
    }
    return 0;
}

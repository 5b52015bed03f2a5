/* nfc — Unicode Normalization Form C (UAX #15) of UTF-8 text, the NFC
 * normalizer of Hugging Face tokenizer.json files (Qwen2's): canonical
 * decomposition, canonical ordering by combining class, canonical
 * composition; Hangul syllables algorithmically. The tables (nfc_table.c)
 * are generated from Unicode 14.0 by tools/gen_nfc.py. Bytes that are not
 * valid UTF-8 pass through unchanged and nothing composes across them.
 */
#ifndef QG_NFC_H
#define QG_NFC_H

#include <stddef.h>
#include <stdint.h>

struct nfc_decomp {
    uint32_t cp, a, b; /* cp's canonical decomposition: a, then b (0: a alone) */
    uint8_t comp;      /* 1: a + b compose back to cp (a primary composite) */
};
struct nfc_comp {
    uint32_t a, b, cp; /* sorted by a, then b */
};
struct nfc_ccc {
    uint32_t lo, hi; /* a range of code points of canonical combining class ccc */
    uint8_t ccc;
};
extern const struct nfc_decomp nfc_decomps[]; /* sorted by cp */
extern const int nfc_n_decomps;
extern const struct nfc_comp nfc_comps[];
extern const int nfc_n_comps;
extern const struct nfc_ccc nfc_cccs[]; /* sorted, disjoint */
extern const int nfc_n_cccs;

/* NFC of text[0..n) into a malloc'd, NUL-terminated *out of *out_n bytes.
 * QG_OK or QG_ERR_NOMEM. */
int nfc_normalize(const char *text, size_t n, char **out, size_t *out_n);

#endif

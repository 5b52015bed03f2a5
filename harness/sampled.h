/* sampled — text sampled from a model: what `qgate demo` and a suite-less
 * `qgate gate` measure on.
 *
 * A model's own samples are text it is fluent in, whatever its language or
 * domain, so the perplexity of a quantized copy on them shows the loss
 * without any download. Sampling is seeded (temperature 1, paragraphs from
 * BOS), so the same model and seed give the same bytes; the text is
 * stored with the run (store_text_put) so that it stays pinned. Invalid
 * UTF-8 bytes are dropped.
 */
#ifndef QG_SAMPLED_H
#define QG_SAMPLED_H

#include "core/util.h"

#include <stddef.h>
#include <stdint.h>

struct sampled_params {
    uint64_t seed;
    int threads;
    int n_ctx;           /* context to open the model with */
    int paragraph_tokens; /* tokens per paragraph (a paragraph ends early at EOS) */
    int64_t max_tokens;  /* stop after this many tokens... */
    size_t max_bytes;    /* ...or this many bytes (0: no byte limit) */
    int max_paragraphs;
};

/* Samples paragraphs (each followed by "\n") from the model at spec into
 * out (appended). QG_OK or a backend status with err. */
int sampled_text(const char *spec, const struct sampled_params *p, struct sbuf *out, char *err,
                 size_t errlen);

#endif

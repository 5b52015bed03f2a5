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
    int n_ctx;            /* context to open the model with */
    int paragraph_tokens; /* tokens per paragraph (a paragraph ends early at EOS) */
    int64_t max_tokens;   /* stop after this many tokens... */
    size_t max_bytes;     /* ...or this many bytes (0: no byte limit) */
    int max_paragraphs;
};

/* Samples paragraphs (each followed by "\n") from the model at spec into
 * out (appended). QG_OK or a backend status with err. */
int sampled_text(const char *spec, const struct sampled_params *p, struct sbuf *out, char *err,
                 size_t errlen);

struct store;

/* The measurement of a suite-less `qgate gate`: text sampled from the
 * baseline (found in the store by its origin — the model's sha256, seed
 * and size — or sampled now and stored there), plus the user's own texts,
 * each a perplexity task over non-overlapping windows of ctx tokens.
 * tokens: how many tokens to sample (sampled_tokens_for gives the default). */
struct sampled_suite_params {
    const char *baseline; /* model spec (a local GGUF file) */
    uint64_t seed;
    int64_t tokens;
    int ctx, threads, quiet;
    const char *const *texts; /* user corpora (paths), n_texts of them */
    int n_texts;
    const char *baseline_sha; /* non-NULL: the baseline's sha256, its file not read (absent:
                               * the text must already be stored) */
    struct store *also;       /* non-NULL: a second store to find the text in (copied over) */
};

/* Writes suite.json (and sampled.txt) into a new temporary folder: its
 * path in dir (free with sampled_suite_remove), the suite's in suite.
 * QG_OK or a status with err. */
int sampled_suite_make(struct store *s, const struct sampled_suite_params *p, char *dir,
                       size_t dirlen, char *suite, size_t suitelen, char *err, size_t errlen);
/* Removes what sampled_suite_make wrote (dir may be ""). */
void sampled_suite_remove(const char *dir);

/* Tokens to sample so that the loss is measured to within the margin:
 * n = ((z(1-alpha) + z(1-beta)) * sigma / margin)^2 tokens for a per-token
 * standard deviation sigma of the log-probability change (SAMPLED_SIGMA,
 * a 4-bit model's on the shared models), times SAMPLED_DEPENDENCE for
 * tokens of one window moving together; at least SAMPLED_MIN_TOKENS. */
#define SAMPLED_SIGMA 0.25
#define SAMPLED_DEPENDENCE 2.0
#define SAMPLED_MIN_TOKENS 4096
int64_t sampled_tokens_for(double margin, double alpha, double beta);

#endif

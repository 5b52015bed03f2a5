/* generate — text generation over any local engine (cpu, cuda): the
 * sampling (greedy, temperature, top-p, seeded), logit_bias, stop strings,
 * and the generated text as a continuation of the prompt. */
#ifndef QG_GENERATE_H
#define QG_GENERATE_H

#include "backends/backend.h"
#include "backends/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

/* An engine: eval evaluates n tokens appended to its context (fresh: from
 * an empty one) and writes the logits of the last into logits[n_vocab];
 * QG_OK or a status with the message in err. */
struct gen_engine {
    void *ud;
    int (*eval)(void *ud, const int32_t *tokens, int n, int fresh, float *logits);
    const struct tokenizer *tok;
    int n_vocab, n_ctx;
    float *logits; /* [n_vocab] at least */
    char *err;
    size_t errlen;
};

/* Continues prompt (np tokens) for up to p->max_tokens tokens (128 when 0;
 * at most what the context holds), stopping at EOS or a stop string (cut
 * from the text). *text (malloc'd) and optionally the generated ids. */
int generate_loop(const struct gen_engine *e, const int32_t *prompt, int64_t np,
                  const struct backend_gen_params *p, char **text, int32_t **ids_out,
                  int64_t *n_out);

#endif

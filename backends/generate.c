/* generate — generation over any local engine (see generate.h). */
#include "backends/generate.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cand {
    int32_t id;
    float p;
};

static int cmp_cand(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    return x->p > y->p ? -1 : x->p < y->p ? 1 : x->id - y->id;
}

/* Picks the next token: argmax when temperature is 0, else softmax(l/T)
 * restricted to the top-p nucleus, drawn with the seeded generator. */
static int32_t sample(const float *l, int V, const struct backend_gen_params *p, uint64_t *rng,
                      struct cand *buf)
{
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[best]) best = i;
    if (p->temperature <= 0) return best;
    double sum = 0;
    for (int i = 0; i < V; i++) {
        buf[i].id = i;
        buf[i].p = expf((l[i] - l[best]) / p->temperature);
        sum += buf[i].p;
    }
    qsort(buf, (size_t)V, sizeof *buf, cmp_cand);
    int keep = V;
    if (p->top_p > 0 && p->top_p < 1) {
        double acc = 0;
        for (int i = 0; i < V; i++) {
            acc += buf[i].p / sum;
            if (acc >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double total = 0;
    for (int i = 0; i < keep; i++)
        total += buf[i].p;
    double u = (double)(rng_next(rng) >> 11) * 0x1.0p-53 * total;
    for (int i = 0; i < keep; i++) {
        u -= buf[i].p;
        if (u <= 0) return buf[i].id;
    }
    return buf[keep - 1].id;
}

/* Text of the generated ids as a continuation of the prompt. */
static char *gen_text(const struct tokenizer *tok, const int32_t *prompt, int64_t np,
                      const int32_t *gen, int64_t ng, int prompt_has_text)
{
    if (!prompt_has_text) return tok_decode(tok, gen, ng, 0);
    int32_t *all = malloc((size_t)(np + ng) * sizeof *all);
    if (!all) return NULL;
    memcpy(all, prompt, (size_t)np * sizeof *all);
    memcpy(all + np, gen, (size_t)ng * sizeof *all);
    char *full = tok_decode(tok, all, np + ng, 0), *pre = tok_decode(tok, prompt, np, 0);
    free(all);
    if (!full || !pre) {
        free(full);
        free(pre);
        return NULL;
    }
    size_t lp = strlen(pre);
    if (strncmp(full, pre, lp) == 0) memmove(full, full + lp, strlen(full) - lp + 1);
    free(pre);
    return full;
}

int generate_loop(const struct gen_engine *e, const int32_t *prompt, int64_t np,
                  const struct backend_gen_params *p, char **text, int32_t **ids_out,
                  int64_t *n_out)
{
    *text = NULL;
    int V = e->n_vocab;
    float *logits = e->logits;
    if (np <= 0 || np >= e->n_ctx)
        return qg_errf(e->err, e->errlen, QG_ERR_USAGE,
                       "generate: prompt of %lld tokens does not fit the context %d", (long long)np,
                       e->n_ctx);
    int max = p->max_tokens > 0 ? p->max_tokens : 128;
    if (max > e->n_ctx - np) max = (int)(e->n_ctx - np);
    int32_t *gen = malloc((size_t)max * sizeof *gen);
    struct cand *buf = malloc((size_t)V * sizeof *buf);
    if (!gen || !buf) {
        free(gen);
        free(buf);
        return QG_ERR_NOMEM;
    }
    int prompt_has_text = 0;
    for (int64_t i = 0; i < np; i++)
        prompt_has_text |= prompt[i] != tok_bos(e->tok);
    uint64_t rng = p->seed;
    int rc = e->eval(e->ud, prompt, (int)np, 1, logits);
    int ng = 0;
    char *out = NULL;
    while (!rc && ng < max) {
        for (int i = 0; i < p->n_bias; i++)
            if (p->bias_ids[i] >= 0 && p->bias_ids[i] < V) logits[p->bias_ids[i]] += p->bias[i];
        int32_t t = sample(logits, V, p, &rng, buf);
        if (t == tok_eos(e->tok)) break;
        gen[ng++] = t;
        free(out);
        out = gen_text(e->tok, prompt, np, gen, ng, prompt_has_text);
        if (!out) {
            rc = QG_ERR_NOMEM;
            break;
        }
        int stop = 0;
        for (int s = 0; s < p->n_stop && !stop; s++) {
            char *hit = p->stop[s][0] ? strstr(out, p->stop[s]) : NULL;
            if (hit) *hit = '\0', stop = 1;
        }
        if (stop || ng == max) break;
        rc = e->eval(e->ud, &t, 1, 0, logits);
    }
    free(buf);
    if (rc) {
        free(out);
        free(gen);
        return rc;
    }
    if (!out) out = qg_strdup("");
    *text = out;
    if (ids_out)
        *ids_out = gen;
    else
        free(gen);
    if (n_out) *n_out = ng;
    return out ? QG_OK : QG_ERR_NOMEM;
}

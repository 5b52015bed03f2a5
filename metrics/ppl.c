/* ppl — token/word/byte perplexity with i.i.d. and cluster standard errors. */
#include "metrics/ppl.h"

#include <math.h>
#include <string.h>

void ppl_stats_init(struct ppl_stats *s)
{
    memset(s, 0, sizeof *s);
}

void ppl_stats_add(struct ppl_stats *s, const struct ppl_window_stat *w)
{
    if (w->tokens <= 0) return;
    s->windows++;
    s->tokens += w->tokens;
    s->bytes += w->bytes;
    s->words += w->words;
    s->nll += w->nll;
    s->nll2 += w->nll2;
    double n = (double)w->tokens;
    s->cl_s += w->nll * w->nll;
    s->cl_sn += w->nll * n;
    s->cl_nn += n * n;
}

void ppl_stats_result(const struct ppl_stats *s, struct ppl_result *r)
{
    memset(r, 0, sizeof *r);
    r->windows = s->windows;
    r->tokens = s->tokens;
    r->bytes = s->bytes;
    r->words = s->words;
    if (s->tokens == 0) {
        r->nll_mean = r->ppl = r->ppl_se_iid = r->ppl_se_cluster = NAN;
        r->nll_se_iid = r->nll_se_cluster = r->word_ppl = r->byte_ppl = r->bits_per_byte = NAN;
        return;
    }
    double N = (double)s->tokens, m = s->nll / N;
    r->nll_mean = m;
    r->ppl = exp(m);
    /* llama.cpp: sqrt((E[x^2] - E[x]^2) / (N - 1)) */
    r->nll_se_iid = N > 1 ? sqrt(fmax(s->nll2 / N - m * m, 0) / (N - 1)) : NAN;
    double W = (double)s->windows;
    double ss = s->cl_s - 2 * m * s->cl_sn + m * m * s->cl_nn; /* sum (S_w - m n_w)^2 */
    r->nll_se_cluster = W > 1 ? sqrt(W / (W - 1) * fmax(ss, 0)) / N : NAN;
    r->ppl_se_iid = r->ppl * r->nll_se_iid;
    r->ppl_se_cluster = r->ppl * r->nll_se_cluster;
    r->word_ppl = s->words > 0 ? exp(s->nll / (double)s->words) : NAN;
    r->byte_ppl = s->bytes > 0 ? exp(s->nll / (double)s->bytes) : NAN;
    r->bits_per_byte = s->bytes > 0 ? s->nll / (double)s->bytes / log(2.0) : NAN;
}

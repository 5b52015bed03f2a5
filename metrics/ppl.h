/* ppl — perplexity statistics from per-window NLL sums.
 *
 * Tokens inside one window share their context, so besides llama.cpp's
 * per-token standard error (which treats every token as independent) the
 * accumulator gives the cluster-robust standard error with the window as
 * the independent unit: for the ratio estimator m = sum(S_w) / sum(n_w),
 * se = sqrt(W/(W-1) * sum((S_w - m n_w)^2)) / sum(n_w).
 * Sums are double. PPL standard errors use the delta method (PPL * se).
 */
#ifndef QG_METRICS_PPL_H
#define QG_METRICS_PPL_H

#include <stdint.h>

struct ppl_window_stat {
    double nll;     /* sum of -log p over the window's scored tokens (nats) */
    double nll2;    /* sum of squares of per-token NLL */
    int64_t tokens; /* scored tokens */
    int64_t bytes;  /* bytes those tokens stand for */
    int64_t words;  /* words they start */
};

struct ppl_stats {
    int64_t windows, tokens, bytes, words;
    double nll, nll2;
    double cl_s, cl_sn, cl_nn; /* sums of S_w^2, S_w n_w, n_w^2 for the cluster SE */
};

struct ppl_result {
    int64_t windows, tokens, bytes, words;
    double nll_mean; /* per token */
    double ppl, ppl_se_iid, ppl_se_cluster;
    double nll_se_iid, nll_se_cluster;
    double word_ppl, byte_ppl, bits_per_byte; /* NAN when no words/bytes */
    double seconds; /* lockstep: the time this model spent scoring (0: not measured) */
};

void ppl_stats_init(struct ppl_stats *s);
void ppl_stats_add(struct ppl_stats *s, const struct ppl_window_stat *w);
/* Finalises; the result of an empty accumulator has tokens = 0 and NANs. */
void ppl_stats_result(const struct ppl_stats *s, struct ppl_result *r);

#endif

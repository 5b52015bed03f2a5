/* kld — how far a candidate's next-token distribution is from the
 * baseline's: KL divergence, top-1 agreement and Δp per scored token, and
 * the summaries reports show (mean, percentiles, max).
 *
 * Rows are log-softmax values (natural log) over a vocabulary of n_vocab
 * tokens. All sums are in double. The conventions are llama-perplexity's
 * --kl-divergence: KL(base || cand) = sum_v p_b(v) (log p_b(v) - log p_c(v)),
 * Δp = p_c(x) - p_b(x) of the actual next token x.
 */
#ifndef QG_METRICS_KLD_H
#define QG_METRICS_KLD_H

#include <stdint.h>

/* KL(base || cand) over two full log-softmax rows, in nats. */
double kld_full(const float *base, const float *cand, int n_vocab);

/* A lower bound of KL(base || cand) when the candidate gives only its top k
 * tokens (ids, log-probs): the k tokens plus one bucket T for the rest of
 * the vocabulary, P_b(T) log(P_b(T) / P_c(T)). Merging outcomes never
 * raises a KL divergence, so the result is <= the full KLD. Ids outside
 * [0, n_vocab) are ignored. */
double kld_top_k(const float *base, int n_vocab, const int32_t *ids, const float *lp, int k);

/* Δp = exp(lp_cand) - exp(lp_base) for the actual token. */
double kld_delta_p(double lp_base, double lp_cand);

/* The q-quantile (0 <= q <= 1) of n ascending values, by linear
 * interpolation between order statistics (numpy's default); NAN when n is 0. */
double kld_percentile(const double *sorted, int64_t n, double q);

struct kld_summary {
    int64_t n;
    double mean, median, p90, p99, p999, max; /* NAN when n is 0 */
};

/* Sorts v (n values, in place) and summarises it. */
void kld_summarize(double *v, int64_t n, struct kld_summary *out);

#endif

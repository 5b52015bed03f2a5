/* kld_ref — a baseline's next-token distributions kept compactly, so that
 * a candidate can be judged against them later without the baseline.
 *
 * For every scored position the reference keeps the baseline's K most
 * likely tokens with their log-probs (most likely first), the log of the
 * probability of every other token together (log P_b(T), T the rest of the
 * vocabulary), and the log-prob of the actual next token. Against a
 * candidate's full log-softmax row it gives
 *   KL >= sum_{v in S} p_b(v) (log p_b(v) - log p_c(v)) + P_b(T) log(P_b(T) / P_c(T)),
 * S the K kept tokens: merging the outcomes of T into one never raises a KL
 * divergence, so this is a lower bound of the full KLD, tight when the
 * baseline's mass is in its top K. Top-1 agreement and Δp are exact.
 *
 * Layout (little-endian, 4-byte fields): a window's blob is a header
 * {magic 'QGR1', K, positions} and then per position {lp_actual f32,
 * log_rest f32, ids i32[K], lps f32[K]}.
 */
#ifndef QG_METRICS_KLD_REF_H
#define QG_METRICS_KLD_REF_H

#include <stddef.h>
#include <stdint.h>

#define KLD_REF_TOP_K 64
#define KLD_REF_MAGIC 0x31524751u /* "QGR1" */

/* Bytes of a blob of n positions with k tokens each. */
size_t kld_ref_size(int n, int k);

/* Encodes n positions: rows[i] (a log-softmax row of n_vocab values) and
 * the actual next token actual[i]. k is capped at n_vocab. out must hold
 * kld_ref_size(n, k) bytes. */
void kld_ref_encode(const float *rows, int n_vocab, const int32_t *actual, int n, int k,
                    unsigned char *out);

/* Checks a blob's header against n positions: 0 and *k, or -1 when the
 * blob is not a reference of n positions (wrong magic, size or K). */
int kld_ref_check(const unsigned char *blob, size_t len, int n, int *k);

/* Checks a blob's values (kld_ref_check checked its shape) for a
 * vocabulary of n_vocab tokens: every log-prob finite (the rest's may be
 * -inf) and at most 0, ids inside the vocabulary, the top K sorted, the
 * probabilities summing to 1 (within 1 %). 0, or -1 with why naming the
 * position and the value: a stored reference read back is never trusted
 * blindly (a NaN there would silently disable the KLD gate). */
int kld_ref_validate(const unsigned char *blob, int k, int n, int n_vocab, char *why,
                     size_t whylen);

/* Position i of a checked blob: the baseline's log-prob of the actual
 * token, and against the candidate's row (n_vocab values) the KLD lower
 * bound, whether the top-1 tokens agree (cand_top: the candidate's argmax)
 * and Δp = p_c(x) - p_b(x) for the actual token x. */
double kld_ref_lp_actual(const unsigned char *blob, int k, int i);
double kld_ref_against(const unsigned char *blob, int k, int i, const float *cand_row, int n_vocab,
                       int32_t cand_top, int32_t actual, int *top1_agree, double *dp);

#endif

/* verdict — paired, noise-aware comparison of a candidate with a baseline,
 * per task, from the store alone.
 *
 * Loss > 0 means the candidate is worse. The independent unit is the window
 * for perplexity (loss = ln PPL ratio, nats per token, as the ratio estimator
 * sum(NLL_cand - NLL_base) / sum(tokens)) and the item — or its cluster
 * (passage, subject) — for accuracy and exact match (loss = accuracy drop).
 * Interval: paired cluster bootstrap, percentile, two-sided 1 - 2 alpha
 * (90 % for alpha 0.05), seeded; for binary metrics on single items,
 * Newcombe's paired score interval instead (sound with zero cells). Noise floor: the largest loss of a later baseline repeat
 * against its repeat 0 (0 and flagged when they are identical). Margin
 * delta = max(policy margin, noise). MDE = (z_{1-alpha} + z_{1-beta}) SE.
 *   PASS: upper bound <= delta.  FAIL: lower bound > delta.
 *   INCONCLUSIVE otherwise, with the reason (underpowered: MDE > delta and
 *   the items that would be needed; or the interval straddles delta).
 * Suite: FAIL if any task fails, PASS if all pass, else INCONCLUSIVE; p-values
 * (exact McNemar for binary metrics, one-sided normal for perplexity) are
 * Holm-adjusted across tasks to flag detectable drops.
 */
#ifndef QG_VERDICT_H
#define QG_VERDICT_H

#include "harness/store.h"
#include "harness/suite.h"

#include <stdint.h>

enum verdict_value { VERDICT_PASS = 0, VERDICT_FAIL = 1, VERDICT_INCONCLUSIVE = 2 }; /* persisted */

const char *verdict_name(int v);

struct verdict_task {
    int64_t task_id;
    char name[128], metric[48];
    int kind;
    double base_value, cand_value; /* PPL or accuracy */
    double delta, lo, hi, se;      /* the loss and its interval */
    double margin, noise, mde, p_value, p_holm;
    int64_t n_units, n_items, flips_b, flips_c, items_needed;
    double flip_lo, flip_hi;       /* Wilson 95 % of (b + c) / n */
    int deterministic;             /* baseline repeats identical (-1: no repeats) */
    int noise_repeats;             /* baseline repeats (incl. perturbed) behind the noise */
    int verdict;
    char reason[256];
    int has_kld;                   /* perplexity with lockstep figures */
    double kld_mean, kld_p99, kld_max, top1, dp_mean;
    int kld_top_k; /* > 0: the KLD came from the candidate's top-K log-probs, a lower bound */
};

struct verdict_params {
    struct suite_policy policy;
    uint64_t seed;
};

/* Compares candidate with baseline (model names) on every task of run_id.
 * *tasks (malloc'd, *n entries) and *suite are set. QG_OK; QG_ERR_NOTFOUND
 * for a missing model or trial; QG_ERR_DATA when the two trials of a task
 * do not pair (different items or token counts). */
int verdict_compute(struct store *s, int64_t run_id, const char *baseline, const char *candidate,
                    const struct verdict_params *p, struct verdict_task **tasks, int *n, int *suite, char *err,
                    size_t errlen);

#endif

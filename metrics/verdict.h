/* verdict — paired, noise-aware comparison of a candidate with a baseline,
 * per task, as a pure function of paired rows and a policy (no I/O; harness/
 * compare.c reads the rows from the store and saves the result).
 *
 * Loss > 0 means the candidate is worse. The independent unit is the window
 * for perplexity (loss = ln PPL ratio, nats per token, as the ratio estimator
 * sum(NLL_cand - NLL_base) / sum(tokens)) and the item — or its cluster
 * (passage, subject) — for accuracy and exact match (loss = accuracy drop).
 * Interval: paired cluster bootstrap, percentile, two-sided 1 - 2 alpha
 * (90 % for alpha 0.05), seeded; for binary metrics on single items,
 * Newcombe's paired score interval instead (sound with zero cells). Noise floor: the largest loss
 * of a later baseline repeat against its repeat 0 (0 and flagged when they are identical). Margin
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

#include "metrics/rows.h"

#include <stddef.h>
#include <stdint.h>

enum verdict_value { VERDICT_PASS = 0, VERDICT_FAIL = 1, VERDICT_INCONCLUSIVE = 2 }; /* persisted */

/* "PASS", "FAIL", "INCONCLUSIVE". */
const char *verdict_name(int v);

/* What a task's loss is: values equal the task kinds (tasks/kind.h) they
 * judge, so a kind converts directly. */
enum verdict_metric {
    VERDICT_METRIC_PPL = 0,         /* ln PPL ratio over windows */
    VERDICT_METRIC_ACC = 1,         /* accuracy drop over items */
    VERDICT_METRIC_EXACT_MATCH = 2, /* exact-match drop over items */
};

struct verdict_policy {
    double margin_ppl;  /* ln PPL ratio (default ln 1.01) */
    double margin_acc;  /* absolute accuracy points as a fraction (default 0.01) */
    double alpha, beta; /* one-sided test size and 1 - power */
    int bootstrap;      /* bootstrap draws */
};

/* margin ln 1.01, 1 point, alpha 0.05, beta 0.2, 10000 bootstrap draws. */
struct verdict_policy verdict_default_policy(void);

struct verdict_params {
    struct verdict_policy policy;
    uint64_t seed; /* bootstrap seed */
};

/* One task's paired input. Rows are in item order and borrowed for the
 * call; repeats[r] (n_repeat[r] rows) are the baseline's later repeats
 * (1, 2, ...), which measure its run-to-run noise. */
struct verdict_input {
    const char *name; /* the task's name, for messages */
    int64_t task_id;  /* copied to the result */
    int kind;         /* the caller's task kind, copied to the result */
    int metric;       /* enum verdict_metric */
    const struct item_row *base, *cand;
    int64_t n_base, n_cand;
    const struct item_row *const *repeats;
    const int64_t *n_repeat;
    int n_repeats;
};

struct verdict_task {
    int64_t task_id;
    char name[128], metric[48];
    int kind;
    double base_value, cand_value; /* PPL or accuracy */
    double delta, lo, hi, se;      /* the loss and its interval */
    double margin, noise, mde, p_value, p_holm;
    int64_t n_units, n_items, flips_b, flips_c, items_needed;
    double flip_lo, flip_hi; /* Wilson 95 % of (b + c) / n */
    int deterministic;       /* baseline repeats identical (-1: no repeats) */
    int noise_repeats;       /* baseline repeats (incl. perturbed) behind the noise */
    int verdict;
    char reason[256];
    /* lockstep figures, filled by the caller from the candidate's trial (not
     * part of the decision) */
    int has_kld;
    double kld_mean, kld_p99, kld_max, top1, dp_mean;
    int kld_top_k; /* > 0: the KLD came from the candidate's top-K log-probs, a lower bound */
};

/* Judges one task: pairs base and cand row by row, measures the noise from
 * the repeats, computes the interval, MDE, p-value and the verdict with its
 * reason into *out (p_holm is set by verdict_suite). QG_OK; QG_ERR_DATA
 * with err naming the task when the rows do not pair (different counts or
 * items, unscored windows, items without correctness); QG_ERR_NOMEM. A
 * repeat that does not pair is left out of the noise. */
int verdict_task_compute(const struct verdict_input *in, const struct verdict_params *p,
                         struct verdict_task *out, char *err, size_t errlen);

/* Holm-adjusts the n tasks' p-values (p_holm) and returns the suite's
 * verdict: FAIL if any task fails, PASS if all pass, else
 * INCONCLUSIVE. */
int verdict_suite(struct verdict_task *tasks, int n);

#endif

/* verdict — paired, noise-aware comparison of a candidate with a baseline,
 * per task, as a pure function of paired rows and a policy (no I/O; harness/
 * compare.c reads the rows from the store and saves the result).
 *
 * Loss > 0 means the candidate is worse. The independent unit is the window
 * for perplexity (loss = ln PPL ratio, nats per token, as the ratio estimator
 * sum(NLL_cand - NLL_base) / sum(tokens)) and the item for accuracy and exact
 * match (loss = accuracy drop). Interval, two-sided 1 - 2 alpha (90 % for
 * alpha 0.05): perplexity, the wider of the t_{W-1} interval on the ratio's
 * linearized SE and the studentized (bootstrap-t) one, which holds with
 * few windows and skewed losses; fewer than 3 windows (or a bootstrap-t
 * that cannot be estimated) cannot bound it: INCONCLUSIVE, with the
 * windows needed. Binary metrics, Tango's paired score interval (honest
 * with zero or few discordant pairs); items in G clusters (passage,
 * subject): widened by sqrt(design effect) * t_{G-1} / z, the design
 * effect from the cluster-robust variance, at least a prior one (policy
 * cluster_corr) while the flips are few, and at least the bound of
 * bunched rare events and the clusters' t / bootstrap-t interval (docs/
 * verdict.md, "Clusters"). Run-to-run noise: the variance
 * V of the aggregate metric's change between two runs of the baseline,
 * from its repeats (per unit squared changes summed, over the total size
 * squared); each side of the interval widens to sqrt(h^2 + q^2 V), q the
 * interval's quantile; noise = sqrt(V), "reruns move the metric by +-
 * noise". The margin is the policy's. MDE = (q_{1-alpha} + q_{1-beta}) SE.
 *   loss PASS: upper bound <= delta.  FAIL: lower bound > delta.
 *   INCONCLUSIVE otherwise, with the reason (underpowered: MDE > delta and
 *   the items that would be needed; or the interval straddles delta).
 * Gates (policy): mean KLD below margin_kld, same-top-1 share above
 * min_top1 (perplexity, from the candidate's windows, with the loss's
 * interval), flip rate below max_flip_rate (binary: net of the baseline's
 * own churn when it has repeats; Wilson on Kish's effective counts, t_{G-1}
 * for clusters). A task FAILs if its loss or any gate fails, PASSes if all
 * pass. Suite: over critical tasks, FAIL if any fails, PASS if all pass;
 * p-values (binary: exact McNemar, at least the cluster- and rerun-aware
 * t test; perplexity: one-sided t_{W-1}) are Holm-adjusted across tasks.
 */
#ifndef QG_VERDICT_H
#define QG_VERDICT_H

#include "metrics/rows.h"

#include <stddef.h>
#include <stdint.h>

enum verdict_value { VERDICT_PASS = 0, VERDICT_FAIL = 1, VERDICT_INCONCLUSIVE = 2 }; /* persisted */

/* "PASS", "FAIL", "INCONCLUSIVE": the one mapping of verdict values to
 * names (the store's verdict_names table holds the same; a test compares). */
const char *verdict_name(int v);

/* The value of "PASS", "FAIL" or "INCONCLUSIVE"; -1 for any other string. */
int verdict_from_name(const char *name);

/* Several verdicts as one: FAIL if any fails, PASS if all (at least one)
 * pass, else INCONCLUSIVE. A suite's critical tasks (verdict_suite), and a
 * gate's candidates, are combined so. */
int verdict_combine(const int *v, int n);

/* What a task's loss is: values equal the task kinds (tasks/kind.h) they
 * judge, so a kind converts directly. */
enum verdict_metric {
    VERDICT_METRIC_PPL = 0,         /* ln PPL ratio over windows */
    VERDICT_METRIC_ACC = 1,         /* accuracy drop over items */
    VERDICT_METRIC_EXACT_MATCH = 2, /* exact-match drop over items */
};

/* Which per-item correctness a multiple-choice task is judged on. */
enum verdict_mc_metric {
    VERDICT_MC_ACC = 0,       /* argmax of the summed log-likelihood (lm-eval acc) */
    VERDICT_MC_ACC_NORM = 1,  /* of the byte-length-normalised one (lm-eval acc_norm) */
    VERDICT_MC_PER_TOKEN = 2, /* of the per-token mean (llama.cpp's rule) */
};

/* "acc", "acc_norm", "per_token"; the value for a name, or -1. */
const char *verdict_mc_metric_name(int m);
int verdict_mc_metric_from_name(const char *name);

struct verdict_policy {
    double margin_ppl;    /* ln PPL ratio (default ln 1.01) */
    double margin_acc;    /* absolute accuracy points as a fraction (default 0.01) */
    double alpha, beta;   /* one-sided test size and 1 - power */
    int bootstrap;        /* bootstrap draws */
    double margin_kld;    /* perplexity: mean KLD (nats/token) must stay below; 0: no gate */
    double min_top1;      /* perplexity: same-top-1 share must stay above; 0: no gate */
    double max_flip_rate; /* binary: share of items that change must stay below; 0: no gate */
    int mc_metric;        /* enum verdict_mc_metric */
    double cluster_corr;  /* binary items in clusters: the largest within-cluster correlation
                           * of flips assumed until the flips themselves can show it (0: none) */
};

/* margin ln 1.01, 1 point, alpha 0.05, beta 0.2, 10000 bootstrap draws,
 * margin_kld 0.02, min_top1 0.9, max_flip_rate 0.02, acc, cluster_corr 0.8
 * (docs/verdict.md says where these come from). */
struct verdict_policy verdict_default_policy(void);

struct verdict_params {
    struct verdict_policy policy;
    uint64_t seed; /* bootstrap seed */
};

/* One task's paired input. Rows are in item order and borrowed for the
 * call; repeats[r] (n_repeat[r] rows) are the baseline's later repeats
 * (1, 2, ...), which measure its run-to-run noise. For the KLD and top-1
 * gates the candidate's rows carry kld_sum and top1_agree per window. */
struct verdict_input {
    const char *name; /* the task's name, for messages */
    int64_t task_id;  /* copied to the result */
    int kind;         /* the caller's task kind, copied to the result */
    int metric;       /* enum verdict_metric */
    int critical;     /* copied to the result: 0 leaves it out of the suite verdict */
    int kld_top_k;    /* > 0: the candidate's KLD is a top-K lower bound (it can FAIL, not PASS) */
    int kld_ref;      /* 1: that bound is against a stored baseline's top-K reference: within
                       * the limit, the KLD gate is stated and left out, not INCONCLUSIVE */
    const struct item_row *base, *cand;
    int64_t n_base, n_cand;
    const struct item_row *const *repeats;
    const int64_t *n_repeat;
    int n_repeats;
};

/* A gate beyond the loss: a bound of one figure against a limit. */
enum verdict_gate_kind { VERDICT_GATE_MAX = 0, VERDICT_GATE_MIN = 1 };
enum { VERDICT_MAX_GATES = 4 };
struct verdict_gate {
    char name[16]; /* "kld", "top1", "flip_rate" */
    int kind;      /* MAX: PASS when hi <= limit, FAIL when lo > limit; MIN: the mirror */
    double value;  /* the estimate */
    double lo, hi; /* its interval at level 1 - 2 alpha */
    double limit;  /* the policy's */
    int verdict;   /* enum verdict_value */
};

struct verdict_task {
    int64_t task_id;
    char name[128], metric[48];
    int kind;
    double base_value, cand_value; /* PPL or accuracy */
    double delta, lo, hi, se;      /* the loss and its interval */
    double margin;                 /* the policy's */
    double noise;                  /* rerun SD: how far a rerun moves the metric (loss scale) */
    double churn;                  /* binary: share of items a rerun of the baseline changes */
    double mde, p_value, p_holm;
    int64_t n_units, n_items, flips_b, flips_c, items_needed;
    double flip_lo, flip_hi; /* Wilson 95 % of (b + c) / n (clustered: effective counts) */
    double design_effect;    /* binary tasks in clusters: the interval's widening^2 (1: none) */
    int deterministic;       /* baseline repeats identical (-1: no repeats) */
    int noise_repeats;       /* baseline repeats (incl. perturbed) behind the noise */
    int loss_verdict;        /* the loss alone */
    int verdict;             /* the loss and every gate together */
    int critical;            /* 1: counts in the suite verdict; 0: informational */
    char reason[256];
    double kld_stated; /* >= 0: a stored-reference KLD bound within the limit, not gated */
    struct verdict_gate gates[VERDICT_MAX_GATES];
    int n_gates;
    /* lockstep figures, filled by the caller from the candidate's trial
     * (shown, not decided on: the gates use the rows) */
    int has_kld;
    double kld_mean, kld_p99, kld_max, top1, dp_mean;
    int kld_top_k; /* > 0: the KLD came from the candidate's top-K log-probs, a lower bound */
    int kld_ref;   /* 1: that bound is against a stored baseline's reference (verdict_input) */
};

/* Judges one task: pairs base and cand row by row; measures the rerun
 * variance and churn from the repeats; computes the loss interval
 * (perplexity: t / bootstrap-t over windows; binary: Tango's score
 * interval, cluster-widened), both widened by the rerun variance, MDE and
 * p-value; evaluates the gates the policy sets (KLD and top-1 from the
 * candidate's windows, flip rate net of churn); and sets the verdict with
 * its reason (p_holm is set by verdict_suite). The task FAILs when the
 * loss or any gate fails and PASSes when all pass; too few windows to
 * bound a figure leave it INCONCLUSIVE (lo / hi NaN). QG_OK; QG_ERR_DATA
 * with err naming the task when the rows do not pair (different counts or
 * items, unscored windows, items without correctness); QG_ERR_NOMEM. A
 * repeat that does not pair is left out of the noise. */
int verdict_task_compute(const struct verdict_input *in, const struct verdict_params *p,
                         struct verdict_task *out, char *err, size_t errlen);

/* Holm-adjusts the n tasks' p-values (p_holm) and returns the suite's
 * verdict over its critical tasks: FAIL if any fails, PASS if all pass
 * and there is at least one, else INCONCLUSIVE. */
int verdict_suite(struct verdict_task *tasks, int n);

#endif

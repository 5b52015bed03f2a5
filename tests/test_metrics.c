/* test_metrics — KLD, top-1, Δp, percentiles and trial totals (metrics/kld,
 * metrics/rows), and the pure verdict (metrics/verdict) on rows in memory. */
#include "core/rng.h"
#include "core/status.h"
#include "core/util.h"
#include "metrics/kld.h"
#include "metrics/kld_ref.h"
#include "metrics/rows.h"
#include "metrics/stats.h"
#include "metrics/verdict.h"
#include "tests/test.h"

#include <stdlib.h>

/* a random log-softmax row of n entries */
static void log_softmax_row(uint64_t *rng, float *row, int n)
{
    double z = 0;
    for (int v = 0; v < n; v++)
        z += exp(row[v] = (float)(4 * rng_unit(rng) - 2));
    for (int v = 0; v < n; v++)
        row[v] = (float)((double)row[v] - log(z));
}

TEST(metrics_kld_full_and_top_k, unit)
{
    /* two outcomes: KL((.5,.5) || (.9,.1)) = .5 ln(.5/.9) + .5 ln(.5/.1) */
    float b[2] = {(float)log(0.5), (float)log(0.5)}, c[2] = {(float)log(0.9), (float)log(0.1)};
    ASSERT_NEAR(kld_full(b, c, 2), 0.5 * log(0.5 / 0.9) + 0.5 * log(0.5 / 0.1), 1e-6);
    ASSERT_NEAR(kld_full(b, b, 2), 0, 0);
    ASSERT_NEAR(kld_delta_p(log(0.5), log(0.9)), 0.4, 1e-12);
    uint64_t rng = 11;
    enum { V = 64 };
    float base[V], cand[V], lp[V];
    int32_t ids[V];
    for (int rep = 0; rep < 50; rep++) {
        log_softmax_row(&rng, base, V);
        log_softmax_row(&rng, cand, V);
        double full = kld_full(base, cand, V);
        ASSERT(full >= 0);
        /* the candidate's top K, most likely first */
        for (int v = 0; v < V; v++)
            ids[v] = v;
        for (int i = 0; i < V; i++)
            for (int j = i + 1; j < V; j++)
                if (cand[ids[j]] > cand[ids[i]]) {
                    int32_t t = ids[i];
                    ids[i] = ids[j];
                    ids[j] = t;
                }
        for (int v = 0; v < V; v++)
            lp[v] = cand[ids[v]];
        for (int k = 1; k <= V; k *= 2) {
            double lb = kld_top_k(base, V, ids, lp, k);
            /* a lower bound, up to the rows' float rounding (they sum to 1 within ~1e-7) */
            if (!(lb <= full + 1e-6)) T_FAIL_("top-%d KLD %.9g above the full %.9g", k, lb, full);
            ASSERT(lb >= -1e-12);
            if (k == V) ASSERT_NEAR(lb, full, 1e-6); /* all tokens: exact */
        }
    }
    /* ids outside the vocabulary are ignored, not read */
    int32_t bad[2] = {-1, 1000};
    float blp[2] = {-1, -1};
    ASSERT(isfinite(kld_top_k(base, V, bad, blp, 2)));
    return 0;
}

TEST(metrics_percentiles_and_summary, unit)
{
    double v[4] = {4, 1, 3, 2};
    struct kld_summary s;
    kld_summarize(v, 4, &s);
    ASSERT_NEAR(v[0], 1, 0); /* sorted in place */
    ASSERT_NEAR(s.mean, 2.5, 1e-15);
    ASSERT_NEAR(s.median, 2.5, 1e-15); /* numpy: percentile([1,2,3,4], 50) */
    ASSERT_NEAR(s.p90, 3.7, 1e-12);    /* numpy: 3.7 */
    ASSERT_NEAR(s.p99, 3.97, 1e-12);
    ASSERT_NEAR(s.max, 4, 0);
    ASSERT_NEAR(kld_percentile(v, 4, 0), 1, 0);
    ASSERT_NEAR(kld_percentile(v, 4, 1), 4, 0);
    ASSERT(isnan(kld_percentile(v, 0, 0.5)));
    kld_summarize(v, 0, &s);
    ASSERT(isnan(s.mean) && isnan(s.max) && s.n == 0);
    return 0;
}

static struct item_row window(int64_t i, double nll, int64_t tokens)
{
    struct item_row r = item_row_empty(i);
    r.cluster = i, r.nll = nll, r.n_tokens = tokens;
    return r;
}

static struct item_row item(int64_t i, int correct)
{
    struct item_row r = item_row_empty(i);
    r.correct = correct;
    return r;
}

TEST(metrics_trial_totals, unit)
{
    struct item_row w[2] = {window(0, 10, 8), window(1, 30, 12)};
    w[0].kld_sum = 0.8, w[1].kld_sum = 1.2, w[0].top1_agree = 8, w[1].top1_agree = 10,
    w[0].dp_sum = -0.2, w[1].dp_sum = 0.2;
    struct ppl_totals t;
    ASSERT_EQ(rows_ppl_totals(w, 2, &t), 0);
    ASSERT_NEAR(t.ppl, exp(40.0 / 20), 1e-12);
    ASSERT_NEAR(t.kld_mean, 0.1, 1e-15);
    ASSERT_NEAR(t.top1_agree, 0.9, 1e-15);
    ASSERT_NEAR(t.dp_mean, 0, 1e-15);
    ASSERT_EQ(t.tokens, 20);
    struct item_row it[3] = {item(0, 1), item(1, 0), item(2, 1)};
    ASSERT_EQ(rows_ppl_totals(it, 3, &t), -1); /* no NLL: not perplexity */
    ASSERT_NEAR(rows_accuracy(it, 3), 2.0 / 3, 1e-15);
    it[1].correct = -1;
    ASSERT_NEAR(rows_accuracy(it, 3), 1, 0);
    ASSERT_EQ(rows_tokens(it, 3), -1);
    ASSERT_EQ(rows_tokens(w, 2), 20);
    return 0;
}

static struct verdict_params params(void)
{
    struct verdict_params p = {.policy = verdict_default_policy(), .seed = 20261130};
    p.policy.bootstrap = 2000;
    return p;
}

TEST(verdict_pure_pairing_errors, unit)
{
    struct item_row b[3] = {window(0, 10, 8), window(1, 10, 8), window(2, 10, 8)}, c[3];
    memcpy(c, b, sizeof b);
    struct verdict_params p = params();
    struct verdict_input in = {
        .name = "t", .metric = VERDICT_METRIC_PPL, .base = b, .cand = c, .n_base = 3, .n_cand = 2};
    struct verdict_task v;
    char err[QG_ERRMSG_MAX];
    ASSERT_EQ(verdict_task_compute(&in, &p, &v, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "3 and 2 rows");
    in.n_cand = 3;
    c[1].n_tokens = 7;
    ASSERT_EQ(verdict_task_compute(&in, &p, &v, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "window 1 scored 8 vs 7 tokens");
    c[1].n_tokens = 8;
    c[2].idx = 5;
    ASSERT_EQ(verdict_task_compute(&in, &p, &v, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "row 2 of the baseline is item 2, of the candidate 5");
    struct item_row ib[2] = {item(0, 1), item(1, -1)}, ic[2] = {item(0, 1), item(1, 1)};
    struct verdict_input bin = {.critical = 1,
                                .name = "mc",
                                .metric = VERDICT_METRIC_ACC,
                                .base = ib,
                                .cand = ic,
                                .n_base = 2,
                                .n_cand = 2};
    ASSERT_EQ(verdict_task_compute(&bin, &p, &v, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "item 1 has no correctness");
    return 0;
}

TEST(verdict_pure_decisions_and_noise, unit)
{
    enum { W = 200, T = 64 };
    struct item_row *b = malloc(W * sizeof *b), *c = malloc(W * sizeof *c),
                    *r1 = malloc(W * sizeof *r1);
    uint64_t rng = 5;
    for (int w = 0; w < W; w++) {
        b[w] = window(w, 2.0 * T + rng_unit(&rng), T);
        c[w] = window(w, b[w].nll + 0.2 * T + 0.5 * (rng_unit(&rng) - 0.5),
                      T); /* ln PPL ratio about 0.2 */
        r1[w] = b[w];
    }
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "ppl",
                               .task_id = 7,
                               .kind = 0,
                               .metric = VERDICT_METRIC_PPL,
                               .base = b,
                               .cand = c,
                               .n_base = W,
                               .n_cand = W};
    struct verdict_task v[2];
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &v[0], err, sizeof err));
    ASSERT_EQ(v[0].verdict, VERDICT_FAIL);
    ASSERT_EQ(v[0].task_id, 7);
    ASSERT_STR_EQ(v[0].metric, "ln_ppl_ratio");
    ASSERT_NEAR(v[0].delta, 0.2, 0.01);
    ASSERT(v[0].lo < v[0].delta && v[0].delta < v[0].hi);
    ASSERT_EQ(v[0].deterministic, -1); /* no repeats */
    /* the candidate is the baseline: PASS; an identical repeat: deterministic, noise 0 */
    const struct item_row *reps[1] = {r1};
    int64_t nrep[1] = {W};
    in.cand = b, in.repeats = reps, in.n_repeat = nrep, in.n_repeats = 1;
    ASSERT_OK(verdict_task_compute(&in, &p, &v[1], err, sizeof err));
    ASSERT_EQ(v[1].verdict, VERDICT_PASS);
    ASSERT_EQ(v[1].deterministic, 1);
    ASSERT_NEAR(v[1].noise, 0, 0);
    ASSERT_EQ(v[1].noise_repeats, 1);
    /* a repeat that differs by 0.05 nats a token in every window moves the
     * aggregate ln PPL by V^(1/2) = 0.05 / sqrt(W) (per-window changes
     * independent); the margin stays the policy's and the interval widens:
     * the candidate is the baseline, so the interval is the noise alone */
    for (int w = 0; w < W; w++)
        r1[w].nll = b[w].nll + 0.05 * T;
    struct verdict_task n1;
    ASSERT_OK(verdict_task_compute(&in, &p, &n1, err, sizeof err));
    ASSERT_EQ(n1.deterministic, 0);
    ASSERT_NEAR(n1.noise, 0.05 / sqrt(W), 1e-12);
    ASSERT_NEAR(n1.margin, p.policy.margin_ppl, 0);
    ASSERT_NEAR(n1.hi, stats_t_ppf(0.95, W - 1) * 0.05 / sqrt(W), 1e-12);
    ASSERT_NEAR(n1.lo, -n1.hi, 1e-12);
    /* suite: any FAIL fails; Holm-adjusted p >= raw p */
    ASSERT_EQ(verdict_suite(v, 2), VERDICT_FAIL);
    for (int i = 0; i < 2; i++)
        ASSERT(v[i].p_holm >= v[i].p_value);
    ASSERT_EQ(verdict_suite(&v[1], 1), VERDICT_PASS);
    free(b), free(c), free(r1);
    return 0;
}

TEST(verdict_pure_binary_flips, unit)
{
    enum { N = 400 };
    struct item_row b[N], c[N];
    for (int i = 0; i < N; i++) {
        b[i] = item(i, i % 2);
        c[i] = item(i, i % 2);
    }
    for (int i = 0; i < 80; i += 2)
        c[i + 1].correct = 0; /* 40 items the baseline got right, the candidate not */
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "mc",
                               .kind = 1,
                               .metric = VERDICT_METRIC_ACC,
                               .base = b,
                               .cand = c,
                               .n_base = N,
                               .n_cand = N};
    struct verdict_task v;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_EQ(v.flips_b, 40);
    ASSERT_EQ(v.flips_c, 0);
    ASSERT_NEAR(v.base_value, 0.5, 0);
    ASSERT_NEAR(v.cand_value, 0.4, 1e-15);
    ASSERT_NEAR(v.delta, 0.1, 1e-12);
    ASSERT_EQ(v.verdict, VERDICT_FAIL);
    ASSERT(v.p_value < 1e-9); /* exact McNemar: 2 * 0.5^40 */
    in.metric = VERDICT_METRIC_EXACT_MATCH;
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_STR_EQ(v.metric, "exact_match");
    return 0;
}

TEST(verdict_tiny_suite_inconclusive_not_pass, unit)
{
    /* 10 items, no flips: Tango's interval keeps its width, so a tiny suite
     * cannot PASS; it says how many items it would need */
    struct item_row b[10], c[10];
    for (int i = 0; i < 10; i++)
        b[i] = c[i] = item(i, i % 3 != 0);
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "piqa",
                               .kind = 1,
                               .metric = VERDICT_METRIC_ACC,
                               .base = b,
                               .cand = c,
                               .n_base = 10,
                               .n_cand = 10};
    struct verdict_task v;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_EQ(v.verdict, VERDICT_INCONCLUSIVE);
    ASSERT(v.hi > 0.2);
    ASSERT(v.items_needed > 100);
    ASSERT_CONTAINS(v.reason, "items needed");
    return 0;
}

TEST(verdict_noise_is_rerun_variance_both_directions, unit)
{
    /* a baseline repeat where 3 answers flip each way: the accuracy does not
     * move on net, but each item's change counts: V = sum d_i^2 / n^2 =
     * 6 / n^2, noise sqrt(6) / n; churn 6 / n; the margin stays 1 point */
    enum { N = 400 };
    struct item_row b[N], c[N], r1[N];
    for (int i = 0; i < N; i++)
        b[i] = c[i] = r1[i] = item(i, i % 2);
    for (int i = 0; i < 6; i++)
        r1[i].correct = !r1[i].correct;
    const struct item_row *reps[1] = {r1};
    int64_t nrep[1] = {N};
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "mc",
                               .kind = 1,
                               .metric = VERDICT_METRIC_ACC,
                               .base = b,
                               .cand = c,
                               .n_base = N,
                               .n_cand = N,
                               .repeats = reps,
                               .n_repeat = nrep,
                               .n_repeats = 1};
    struct verdict_task v, v0;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_NEAR(v.noise, sqrt(6.0) / N, 1e-15);
    ASSERT_NEAR(v.churn, 6.0 / N, 1e-15);
    ASSERT_EQ(v.deterministic, 0);
    ASSERT_NEAR(v.margin, 0.01, 0);
    in.n_repeats = 0; /* without the repeat: Tango's interval alone, narrower */
    ASSERT_OK(verdict_task_compute(&in, &p, &v0, err, sizeof err));
    double z = stats_norm_ppf(0.95), h0 = v0.hi - v0.delta;
    ASSERT_NEAR(v.hi - v.delta, sqrt(h0 * h0 + z * z * 6.0 / N / N), 1e-12);
    /* perplexity: per-window changes of +/- 0.1 nats over 50 tokens, net 0:
     * V = N 0.01 / (50 N)^2 */
    struct item_row wb[N], wc[N], wr[N];
    for (int w = 0; w < N; w++) {
        wb[w] = wc[w] = wr[w] = window(w, 100, 50);
        wr[w].nll += (w % 2 ? 0.1 : -0.1);
    }
    const struct item_row *wreps[1] = {wr};
    in.metric = VERDICT_METRIC_PPL, in.base = wb, in.cand = wc, in.repeats = wreps;
    in.n_repeats = 1;
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_NEAR(v.noise, 0.1 / (50 * sqrt(N)), 1e-15);
    return 0;
}

TEST(verdict_clustered_never_narrower, unit)
{
    /* 400 items in 40 clusters; all 12 flips in two clusters */
    enum { N = 400 };
    struct item_row b[N], c[N];
    for (int i = 0; i < N; i++) {
        b[i] = c[i] = item(i, 1);
        b[i].cluster = c[i].cluster = i / 10;
    }
    for (int i = 0; i < 6; i++)
        c[i].correct = 0, c[10 + i].correct = 0;
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "hs",
                               .kind = 1,
                               .metric = VERDICT_METRIC_ACC,
                               .base = b,
                               .cand = c,
                               .n_base = N,
                               .n_cand = N};
    struct verdict_task clustered, flat;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &clustered, err, sizeof err));
    for (int i = 0; i < N; i++)
        b[i].cluster = c[i].cluster = -1;
    ASSERT_OK(verdict_task_compute(&in, &p, &flat, err, sizeof err));
    ASSERT(clustered.design_effect > 1.5);
    ASSERT_NEAR(flat.design_effect, 1, 0);
    ASSERT(clustered.hi > flat.hi && clustered.lo < flat.lo);
    ASSERT_NEAR(clustered.delta, flat.delta, 0);
    return 0;
}

TEST(verdict_gates_kld_top1_flips_critical, unit)
{
    enum { W = 100, T = 64 };
    struct item_row b[W], c[W];
    uint64_t rng = 9;
    for (int w = 0; w < W; w++) {
        b[w] = c[w] = window(w, 2.0 * T, T);
        c[w].nll = b[w].nll + 0.001 * T * (rng_unit(&rng) - 0.5); /* PPL the same */
        c[w].kld_sum = 0.05 * T * (0.5 + rng_unit(&rng));         /* mean KLD 0.05 */
        c[w].top1_agree = 0.8 * T;                                /* 80 % */
    }
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "ppl",
                               .metric = VERDICT_METRIC_PPL,
                               .base = b,
                               .cand = c,
                               .n_base = W,
                               .n_cand = W};
    struct verdict_task v[2];
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &v[0], err, sizeof err));
    ASSERT_EQ(v[0].loss_verdict, VERDICT_PASS);
    ASSERT_EQ(v[0].n_gates, 2);
    ASSERT_STR_EQ(v[0].gates[0].name, "kld");
    ASSERT_EQ(v[0].gates[0].verdict, VERDICT_FAIL);
    ASSERT_STR_EQ(v[0].gates[1].name, "top1");
    ASSERT_EQ(v[0].gates[1].verdict, VERDICT_FAIL);
    ASSERT_EQ(v[0].verdict, VERDICT_FAIL); /* PPL alone would PASS */
    ASSERT_CONTAINS(v[0].reason, "kld lower bound");
    /* small KLD, high agreement: PASS; as a top-K lower bound it cannot */
    for (int w = 0; w < W; w++)
        c[w].kld_sum = 0.001 * T, c[w].top1_agree = 0.99 * T;
    ASSERT_OK(verdict_task_compute(&in, &p, &v[0], err, sizeof err));
    ASSERT_EQ(v[0].verdict, VERDICT_PASS);
    in.kld_top_k = 20;
    ASSERT_OK(verdict_task_compute(&in, &p, &v[0], err, sizeof err));
    ASSERT_EQ(v[0].gates[0].verdict, VERDICT_INCONCLUSIVE);
    ASSERT_EQ(v[0].verdict, VERDICT_INCONCLUSIVE);
    /* informational tasks stay out of the suite verdict */
    in.kld_top_k = 0;
    for (int w = 0; w < W; w++)
        c[w].kld_sum = 0.05 * T;
    ASSERT_OK(verdict_task_compute(&in, &p, &v[0], err, sizeof err)); /* FAIL */
    in.critical = 0;
    ASSERT_OK(verdict_task_compute(&in, &p, &v[1], err, sizeof err)); /* FAIL, informational */
    ASSERT_EQ(verdict_suite(&v[1], 1), VERDICT_INCONCLUSIVE);         /* nothing counted */
    ASSERT_EQ(verdict_suite(v, 2), VERDICT_FAIL);
    /* flip rate: 20 % of items change, net 0 */
    enum { N = 400 };
    struct item_row ib[N], ic[N];
    for (int i = 0; i < N; i++)
        ib[i] = ic[i] = item(i, i % 2), ic[i].correct = i % 10 < 2 ? !ib[i].correct : ib[i].correct;
    p.policy.max_flip_rate = 0.05;
    struct verdict_input bin = {.critical = 1,
                                .name = "mc",
                                .kind = 1,
                                .metric = VERDICT_METRIC_ACC,
                                .base = ib,
                                .cand = ic,
                                .n_base = N,
                                .n_cand = N};
    ASSERT_OK(verdict_task_compute(&bin, &p, &v[0], err, sizeof err));
    ASSERT_EQ(v[0].n_gates, 1);
    ASSERT_STR_EQ(v[0].gates[0].name, "flip_rate");
    ASSERT_NEAR(v[0].gates[0].value, 0.2, 1e-15);
    ASSERT_EQ(v[0].verdict, VERDICT_FAIL);
    return 0;
}

/* A baseline of n items with acc_b right, its repeat changing `churn`
 * of them (half each way), and a candidate right on acc_c (flipping
 * baseline-right items to wrong from the top). */
static void churn_case(struct item_row *b, struct item_row *r, struct item_row *c, int n,
                       double acc_b, double churn, double acc_c)
{
    int right = (int)(acc_b * n), drop = right - (int)(acc_c * n), changed = (int)(churn * n);
    for (int i = 0; i < n; i++) {
        b[i] = r[i] = c[i] = item(i, i < right);
        if (i >= right - drop && i < right) c[i].correct = 0;
    }
    for (int k = 0; k < changed; k++) { /* alternately a right and a wrong item changes */
        int i = k % 2 ? k / 2 : n - 1 - k / 2;
        r[i].correct = !r[i].correct;
    }
}

TEST(verdict_churn_is_no_margin_stored_example_fails, unit)
{
    /* the stored run of issue 29: accuracy 29 % -> 21 % while 15 % of the
     * baseline's items change between its reruns; the churn used to become
     * a 15-point margin and PASS it. A real 8-point drop FAILs. */
    enum { N = 1000 };
    static struct item_row b[N], r[N], c[N];
    churn_case(b, r, c, N, 0.29, 0.15, 0.21);
    const struct item_row *reps[1] = {r};
    int64_t nrep[1] = {N};
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "mmlu",
                               .kind = 1,
                               .metric = VERDICT_METRIC_ACC,
                               .base = b,
                               .cand = c,
                               .n_base = N,
                               .n_cand = N,
                               .repeats = reps,
                               .n_repeat = nrep,
                               .n_repeats = 1};
    struct verdict_task v;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_NEAR(v.delta, 0.08, 1e-12);
    ASSERT_NEAR(v.margin, 0.01, 0);
    ASSERT_NEAR(v.churn, 0.15, 1e-12);
    ASSERT_NEAR(v.noise, sqrt(150.0) / N, 1e-12); /* 150 items changed, one each */
    ASSERT_EQ(v.loss_verdict, VERDICT_FAIL);
    ASSERT_EQ(v.verdict, VERDICT_FAIL);
    return 0;
}

TEST(verdict_aa_under_churn_passes_with_flip_gate, unit)
{
    /* A/A: the candidate is another run of the baseline: 5 % of its items
     * changed, as between the baseline's own reruns. n = 10000: the loss
     * and the flip gate (net of churn) PASS; without the repeat the flip
     * gate sees 5 % > 2 % and FAILs, as it should for a real model change */
    enum { N = 10000 };
    static struct item_row b[N], r[N], c[N];
    churn_case(b, r, c, N, 0.5, 0.05, 0.5);
    for (int i = 0; i < N; i++) /* the candidate's own 5 %, other items */
        c[i].correct = (i % 20 == 10) ? !b[i].correct : b[i].correct;
    const struct item_row *reps[1] = {r};
    int64_t nrep[1] = {N};
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "arc",
                               .kind = 1,
                               .metric = VERDICT_METRIC_ACC,
                               .base = b,
                               .cand = c,
                               .n_base = N,
                               .n_cand = N,
                               .repeats = reps,
                               .n_repeat = nrep,
                               .n_repeats = 1};
    struct verdict_task v;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_EQ(v.n_gates, 1);
    ASSERT_STR_EQ(v.gates[0].name, "flip_rate");
    ASSERT_NEAR(v.gates[0].value, 0, 1e-12); /* 5 % flips net of 5 % churn */
    ASSERT_EQ(v.gates[0].verdict, VERDICT_PASS);
    ASSERT_EQ(v.verdict, VERDICT_PASS);
    in.n_repeats = 0;
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_EQ(v.gates[0].verdict, VERDICT_FAIL);
    return 0;
}

TEST(verdict_few_windows_inconclusive, unit)
{
    /* 1, 2 and 5 windows cannot bound a mean: INCONCLUSIVE with NaN bounds
     * and the windows needed, whatever the candidate did; 40 can */
    struct item_row b[40], c[40];
    for (int w = 0; w < 40; w++) {
        b[w] = window(w, 128, 64);
        c[w] = window(w, 128 + 64 * 0.3 + (w % 3), 64); /* a 35 % worse PPL */
    }
    struct verdict_params p = params();
    struct verdict_input in = {
        .critical = 1, .name = "wiki", .metric = VERDICT_METRIC_PPL, .base = b, .cand = c};
    struct verdict_task v;
    char err[QG_ERRMSG_MAX];
    static const int ws[] = {1, 2, 5};
    for (int i = 0; i < 3; i++) {
        in.n_base = in.n_cand = ws[i];
        ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
        ASSERT_EQ(v.verdict, VERDICT_INCONCLUSIVE);
        ASSERT(isnan(v.lo) && isnan(v.hi));
        ASSERT(v.items_needed >= STATS_RATIO_MIN_UNITS);
        ASSERT_CONTAINS(v.reason, "cannot bound the loss");
        ASSERT_CONTAINS(v.reason, "windows needed");
        ASSERT_NEAR(v.p_value, 1, 0);
    }
    in.n_base = in.n_cand = 40;
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_EQ(v.verdict, VERDICT_FAIL);
    return 0;
}

TEST(verdict_clustered_flips_p_value_counts_clusters, unit)
{
    /* 300 items in 100 clusters of 3; every item of 3 clusters flips to a
     * loss: McNemar alone says p = 2^-8 = 0.0039, but 3 clusters are 3
     * observations: the p-value and the interval must not call it sure */
    enum { N = 300 };
    struct item_row b[N], c[N];
    for (int i = 0; i < N; i++) {
        b[i] = c[i] = item(i, 1);
        b[i].cluster = c[i].cluster = i / 3;
        if (i < 9) c[i].correct = 0;
    }
    struct verdict_params p = params();
    struct verdict_input in = {.critical = 1,
                               .name = "hs",
                               .kind = 1,
                               .metric = VERDICT_METRIC_ACC,
                               .base = b,
                               .cand = c,
                               .n_base = N,
                               .n_cand = N};
    struct verdict_task v;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(verdict_task_compute(&in, &p, &v, err, sizeof err));
    ASSERT_EQ(v.n_units, 100);
    ASSERT(v.p_value > 0.05);
    /* the two-sided p and the 90 % interval agree: 0 inside iff p >= 0.1 */
    fprintf(stderr, "p %.4g interval [%.4g, %.4g]\n", v.p_value, v.lo, v.hi);
    ASSERT_EQ(v.lo <= 0, v.p_value >= 0.1);
    ASSERT(v.design_effect > 2);
    ASSERT(v.verdict != VERDICT_PASS);
    return 0;
}

TEST(kld_ref_validate_refuses_corrupt_references, unit)
{
    /* a valid reference of 3 positions over 8 tokens, top 4: accepted;
     * each corruption a hostile or broken store could hold is refused with
     * the position named, never scored (a NaN would disable the KLD gate) */
    enum { V = 8, N = 3, K = 4 };
    float rows[N * V];
    int32_t actual[N] = {1, 5, 7};
    for (int i = 0; i < N; i++) {
        double z = 0;
        for (int v = 0; v < V; v++)
            z += exp(-0.3 * ((v + i) % V));
        for (int v = 0; v < V; v++)
            rows[i * V + v] = (float)(-0.3 * ((v + i) % V) - log(z));
    }
    size_t len = kld_ref_size(N, K);
    unsigned char *blob = malloc(len), *bad = malloc(len);
    ASSERT(blob && bad);
    kld_ref_encode(rows, V, actual, N, K, blob);
    int k;
    char why[256];
    ASSERT_OK(kld_ref_check(blob, len, N, &k));
    ASSERT_EQ(k, K);
    ASSERT_EQ(kld_ref_validate(blob, K, N, V, why, sizeof why), 0);
    /* byte offsets in position 1: lp_actual, log_rest, ids[K], lps[K] */
    size_t p1 = 12 + (8 + 8 * K);
    static const struct {
        size_t off;
        uint32_t bits;
        const char *says;
    } cases[] = {
        {0, 0x7fc00000u, "the actual token's log-prob is nan"},
        {8 + 4 * K, 0x7fc00000u, "top-1 log-prob nan"},
        {8 + 4 * K, 0x40a00000u, "top-1 log-prob 5"},                     /* +5.0f */
        {8, 9u, "token id 9 is outside the vocabulary (8)"},              /* id 9 of 8 */
        {8 + 4 * K + 4, 0x00000000u, "top-2 log-prob 0 is not a sorted"}, /* p = 1 twice */
        {4, 0x00000000u, "its probabilities sum to"},                     /* the rest p = 1 too */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        memcpy(bad, blob, len);
        unsigned char *q = bad + p1 + cases[c].off;
        uint32_t b = cases[c].bits;
        q[0] = (unsigned char)b, q[1] = (unsigned char)(b >> 8), q[2] = (unsigned char)(b >> 16),
        q[3] = (unsigned char)(b >> 24);
        ASSERT_EQ(kld_ref_validate(bad, K, N, V, why, sizeof why), -1);
        ASSERT_CONTAINS(why, "position 1: ");
        ASSERT_CONTAINS(why, cases[c].says);
    }
    free(blob), free(bad);
    return 0;
}

/* verdict — paired statistics and the PASS / FAIL / INCONCLUSIVE decision,
 * from rows in memory. */
#include "metrics/verdict.h"
#include "core/status.h"
#include "core/util.h"
#include "metrics/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *verdict_name(int v)
{
    return v == VERDICT_PASS ? "PASS" : v == VERDICT_FAIL ? "FAIL" : "INCONCLUSIVE";
}

struct verdict_policy verdict_default_policy(void)
{
    struct verdict_policy p = {.margin_ppl = log(1.01),
                               .margin_acc = 0.01,
                               .alpha = 0.05,
                               .beta = 0.2,
                               .bootstrap = 10000};
    return p;
}

/* Units of a paired comparison: per-unit loss and size. */
struct units {
    double *loss, *size;
    int64_t n;
};

static void units_free(struct units *u)
{
    free(u->loss);
    free(u->size);
    memset(u, 0, sizeof *u);
}

/* What pairing two trials yields besides the units. */
struct paired {
    double vb, vc;  /* the two metric values (PPL or accuracy) */
    int64_t fb, fc; /* flips: base right / cand wrong, and the reverse */
    int64_t n_items;
};

/* Cluster id -> unit index, open addressing over a power-of-two table. */
struct cluster_map {
    int64_t *key, *unit, cap;
};

static int cluster_map_init(struct cluster_map *m, int64_t n)
{
    m->cap = 16;
    while (m->cap < 2 * n)
        m->cap *= 2;
    m->key = malloc((size_t)m->cap * sizeof *m->key);
    m->unit = malloc((size_t)m->cap * sizeof *m->unit);
    if (!m->key || !m->unit) return QG_ERR_NOMEM;
    for (int64_t i = 0; i < m->cap; i++)
        m->key[i] = INT64_MIN;
    return QG_OK;
}

static void cluster_map_release(struct cluster_map *m)
{
    free(m->key);
    free(m->unit);
}

/* The unit of cluster c, a new one (*n_units incremented) when first seen. */
static int64_t cluster_unit(struct cluster_map *m, int64_t c, int64_t *n_units)
{
    uint64_t mask = (uint64_t)(m->cap - 1), h = ((uint64_t)c * 0x9E3779B97F4A7C15ull) & mask;
    while (m->key[h] != INT64_MIN && m->key[h] != c)
        h = (h + 1) & mask;
    if (m->key[h] == INT64_MIN) {
        m->key[h] = c;
        m->unit[h] = (*n_units)++;
    }
    return m->unit[h];
}

/* Adds row i of a pair to its unit; QG_ERR_DATA when it cannot be scored. */
static int pair_one(const struct item_row *b, const struct item_row *c, int ppl, const char *task,
                    struct units *u, struct cluster_map *map, double *sums, struct paired *pr,
                    char *err, size_t errlen)
{
    int64_t k;
    double loss, size;
    if (ppl) {
        if (b->n_tokens != c->n_tokens || isnan(b->nll) || isnan(c->nll))
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "task '%s': window %lld scored %lld vs %lld tokens", task,
                           (long long)b->idx, (long long)b->n_tokens, (long long)c->n_tokens);
        k = u->n++;
        loss = c->nll - b->nll;
        size = (double)b->n_tokens;
        sums[0] += b->nll;
        sums[1] += c->nll;
        sums[2] += size;
    } else {
        if (b->correct < 0 || c->correct < 0)
            return qg_errf(err, errlen, QG_ERR_DATA, "task '%s': item %lld has no correctness",
                           task, (long long)b->idx);
        loss = (double)(b->correct - c->correct);
        size = 1;
        sums[0] += b->correct;
        sums[1] += c->correct;
        pr->fb += b->correct && !c->correct;
        pr->fc += !b->correct && c->correct;
        k = b->cluster < 0 ? u->n++ : cluster_unit(map, b->cluster, &u->n);
    }
    u->loss[k] += loss;
    u->size[k] += size;
    return QG_OK;
}

/* Pairs two trials' rows; perplexity: windows; binary: clusters of items
 * (an item without a cluster is its own unit). */
static int pair_rows(const struct item_row *b, int64_t nb, const struct item_row *c, int64_t nc,
                     int ppl, const char *task, struct units *u, struct paired *pr, char *err,
                     size_t errlen)
{
    memset(u, 0, sizeof *u);
    memset(pr, 0, sizeof *pr);
    if (nb != nc || nb == 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "task '%s': the trials have %lld and %lld rows; they do not pair", task,
                       (long long)nb, (long long)nc);
    u->loss = calloc((size_t)nb, sizeof *u->loss);
    u->size = calloc((size_t)nb, sizeof *u->size);
    struct cluster_map map = {0};
    int rc = !u->loss || !u->size ? QG_ERR_NOMEM : cluster_map_init(&map, nb);
    double sums[3] = {0, 0, 0}; /* base, cand, tokens */
    for (int64_t i = 0; i < nb && !rc; i++) {
        if (b[i].idx != c[i].idx)
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "task '%s': row %lld of the baseline is item %lld, of the candidate %lld",
                         task, (long long)i, (long long)b[i].idx, (long long)c[i].idx);
        else
            rc = pair_one(&b[i], &c[i], ppl, task, u, &map, sums, pr, err, errlen);
    }
    cluster_map_release(&map);
    if (rc) {
        units_free(u);
        return rc;
    }
    pr->n_items = nb;
    pr->vb = ppl ? exp(sums[0] / sums[2]) : sums[0] / (double)nb;
    pr->vc = ppl ? exp(sums[1] / sums[2]) : sums[1] / (double)nb;
    return QG_OK;
}

static int rows_identical(const struct item_row *a, const struct item_row *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(a[i].nll == b[i].nll || (isnan(a[i].nll) && isnan(b[i].nll)))) return 0;
    for (int64_t i = 0; i < n; i++)
        if (a[i].correct != b[i].correct || strcmp(a[i].output_hash, b[i].output_hash)) return 0;
    return 1;
}

/* The noise floor: the largest loss of a baseline repeat against repeat 0,
 * and whether every repeat is identical to it. */
static void measure_noise(const struct verdict_input *in, int ppl, struct verdict_task *v)
{
    char ignored[QG_ERRMSG_MAX];
    v->noise = 0;
    v->deterministic = -1;
    for (int r = 0; r < in->n_repeats; r++) {
        struct units nu;
        struct paired pr;
        if (pair_rows(in->base, in->n_base, in->repeats[r], in->n_repeat[r], ppl, in->name, &nu,
                      &pr, ignored, sizeof ignored) != QG_OK)
            continue;
        double sl = 0, ss = 0;
        for (int64_t i = 0; i < nu.n; i++)
            sl += nu.loss[i], ss += nu.size[i];
        v->noise = fmax(v->noise, fabs(sl / ss));
        v->deterministic =
            (v->deterministic != 0) && rows_identical(in->base, in->repeats[r], in->n_base);
        v->noise_repeats = r + 1;
        units_free(&nu);
    }
}

/* PASS / FAIL / INCONCLUSIVE from the interval, the margin and the MDE. */
static void decide(struct verdict_task *v, int ppl)
{
    v->items_needed = -1;
    if (v->hi <= v->margin) {
        v->verdict = VERDICT_PASS;
        snprintf(v->reason, sizeof v->reason, "upper bound %.4g <= margin %.4g", v->hi, v->margin);
    } else if (v->lo > v->margin) {
        v->verdict = VERDICT_FAIL;
        snprintf(v->reason, sizeof v->reason, "lower bound %.4g > margin %.4g: a real drop", v->lo,
                 v->margin);
    } else if (v->mde > v->margin) {
        v->verdict = VERDICT_INCONCLUSIVE;
        double f = v->mde / v->margin;
        v->items_needed = (int64_t)ceil((double)v->n_items * f * f);
        snprintf(v->reason, sizeof v->reason,
                 "underpowered: MDE %.4g > margin %.4g; about %lld %s needed", v->mde, v->margin,
                 (long long)v->items_needed, ppl ? "windows" : "items");
    } else {
        v->verdict = VERDICT_INCONCLUSIVE;
        snprintf(v->reason, sizeof v->reason, "interval [%.4g, %.4g] contains the margin %.4g",
                 v->lo, v->hi, v->margin);
    }
}

/* The interval, SE, MDE and p-value of the paired loss. */
static int estimate(const struct units *u, int ppl, const struct verdict_params *p,
                    struct verdict_task *v)
{
    struct boot_result br;
    double alpha = p->policy.alpha, level = 1 - 2 * alpha;
    if (stats_bootstrap_ratio(u->loss, u->size, u->n, p->policy.bootstrap, p->seed, level, &br))
        return QG_ERR_NOMEM;
    v->n_units = u->n;
    v->delta = br.estimate;
    v->lo = br.lo;
    v->hi = br.hi;
    v->se = br.se;
    double za = stats_norm_ppf(1 - alpha), zb = stats_norm_ppf(1 - p->policy.beta);
    if (!ppl && v->n_units == v->n_items) {
        /* items are the units: Newcombe's paired score interval, sound with
         * few or no discordant pairs (a bootstrap collapses to a point) */
        int64_t base_ok =
            (int64_t)llround(v->base_value * (double)v->n_items); /* base correct = a + b */
        int64_t a = base_ok - v->flips_b, d = v->n_items - a - v->flips_b - v->flips_c;
        stats_newcombe_paired(a, v->flips_b, v->flips_c, d, za, &v->lo, &v->hi);
        v->se = fmax(v->se, (v->hi - v->lo) / (2 * za));
    }
    v->mde = (za + zb) * v->se;
    if (ppl) {
        v->p_value = v->se > 0 ? 1 - stats_norm_cdf(v->delta / v->se) : (v->delta > 0 ? 0 : 1);
    } else {
        v->p_value = stats_mcnemar(v->flips_b, v->flips_c);
        stats_wilson(v->flips_b + v->flips_c, v->n_items, stats_norm_ppf(0.975), &v->flip_lo,
                     &v->flip_hi);
    }
    return QG_OK;
}

int verdict_task_compute(const struct verdict_input *in, const struct verdict_params *p,
                         struct verdict_task *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->task_id = in->task_id;
    v->kind = in->kind;
    snprintf(v->name, sizeof v->name, "%s", in->name);
    int ppl = in->metric == VERDICT_METRIC_PPL;
    snprintf(v->metric, sizeof v->metric, "%s",
             ppl                                        ? "ln_ppl_ratio"
             : in->metric == VERDICT_METRIC_EXACT_MATCH ? "exact_match"
                                                        : "acc");
    struct units u;
    struct paired pr;
    int rc =
        pair_rows(in->base, in->n_base, in->cand, in->n_cand, ppl, in->name, &u, &pr, err, errlen);
    if (rc) return rc;
    v->base_value = pr.vb;
    v->cand_value = pr.vc;
    v->flips_b = pr.fb;
    v->flips_c = pr.fc;
    v->n_items = pr.n_items;
    measure_noise(in, ppl, v);
    v->margin = fmax(ppl ? p->policy.margin_ppl : p->policy.margin_acc, v->noise);
    rc = estimate(&u, ppl, p, v);
    units_free(&u);
    if (rc)
        return qg_errf(err, errlen, rc, "task '%s': bootstrap failed (out of memory)", in->name);
    decide(v, ppl);
    return QG_OK;
}

int verdict_suite(struct verdict_task *v, int n)
{
    double *p = malloc((size_t)(n ? n : 1) * sizeof *p),
           *pv = calloc((size_t)(n ? n : 1), sizeof *pv);
    if (!p || !pv) {
        free(pv);
        pv = NULL;
    }
    for (int i = 0; pv && i < n; i++)
        p[i] = v[i].p_value;
    if (pv) stats_holm(p, n, pv);
    free(p);
    int any_fail = 0, all_pass = 1;
    for (int i = 0; i < n; i++) {
        v[i].p_holm = pv ? pv[i] : NAN;
        any_fail |= v[i].verdict == VERDICT_FAIL;
        all_pass &= v[i].verdict == VERDICT_PASS;
    }
    free(pv);
    return any_fail ? VERDICT_FAIL : all_pass ? VERDICT_PASS : VERDICT_INCONCLUSIVE;
}

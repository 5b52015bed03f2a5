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

int verdict_from_name(const char *name)
{
    static const int all[] = {VERDICT_PASS, VERDICT_FAIL, VERDICT_INCONCLUSIVE};
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, verdict_name(all[i]))) return all[i];
    return -1;
}

int verdict_combine(const int *v, int n)
{
    int any_fail = 0, all_pass = n > 0;
    for (int i = 0; i < n; i++) {
        any_fail |= v[i] == VERDICT_FAIL;
        all_pass &= v[i] == VERDICT_PASS;
    }
    return any_fail ? VERDICT_FAIL : all_pass ? VERDICT_PASS : VERDICT_INCONCLUSIVE;
}

struct verdict_policy verdict_default_policy(void)
{
    struct verdict_policy p = {.margin_ppl = log(1.01),
                               .margin_acc = 0.01,
                               .alpha = 0.05,
                               .beta = 0.2,
                               .bootstrap = 10000,
                               .margin_kld = 0.02,
                               .min_top1 = 0.9,
                               .max_flip_rate = 0.02,
                               .mc_metric = VERDICT_MC_ACC};
    return p;
}

static const char *const mc_metric_names[] = {"acc", "acc_norm", "per_token"};

const char *verdict_mc_metric_name(int m)
{
    return m >= 0 && m < 3 ? mc_metric_names[m] : "unknown";
}

int verdict_mc_metric_from_name(const char *name)
{
    for (int m = 0; m < 3; m++)
        if (!strcmp(name, mc_metric_names[m])) return m;
    return -1;
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

/* How far repeat r moves the baseline: binary, the share of items whose
 * correctness changed (both directions count); perplexity, the RMS over
 * windows of the per-token ln PPL ratio. -1 when the rows do not pair. */
static double repeat_spread(const struct item_row *a, int64_t na, const struct item_row *b,
                            int64_t nb, int ppl)
{
    if (na != nb || na == 0) return -1;
    double acc = 0;
    for (int64_t i = 0; i < na; i++) {
        if (a[i].idx != b[i].idx) return -1;
        if (ppl) {
            if (isnan(a[i].nll) || isnan(b[i].nll) || a[i].n_tokens != b[i].n_tokens ||
                a[i].n_tokens <= 0)
                return -1;
            double r = (b[i].nll - a[i].nll) / (double)a[i].n_tokens;
            acc += r * r;
        } else {
            if (a[i].correct < 0 || b[i].correct < 0) return -1;
            acc += a[i].correct != b[i].correct;
        }
    }
    return ppl ? sqrt(acc / (double)na) : acc / (double)na;
}

/* The noise floor: the largest spread of a baseline repeat against repeat
 * 0, and whether every repeat is identical to it. */
static void measure_noise(const struct verdict_input *in, int ppl, struct verdict_task *v)
{
    v->noise = 0;
    v->deterministic = -1;
    for (int r = 0; r < in->n_repeats; r++) {
        double sp = repeat_spread(in->base, in->n_base, in->repeats[r], in->n_repeat[r], ppl);
        if (sp < 0) continue;
        v->noise = fmax(v->noise, sp);
        v->deterministic =
            (v->deterministic != 0) && rows_identical(in->base, in->repeats[r], in->n_base);
        v->noise_repeats = r + 1;
    }
}

/* The loss's PASS / FAIL / INCONCLUSIVE from the interval, the margin and
 * the MDE, with the reason. */
static void decide_loss(struct verdict_task *v, int ppl)
{
    v->items_needed = -1;
    if (v->hi <= v->margin) {
        v->loss_verdict = VERDICT_PASS;
        snprintf(v->reason, sizeof v->reason, "upper bound %.4g <= margin %.4g", v->hi, v->margin);
    } else if (v->lo > v->margin) {
        v->loss_verdict = VERDICT_FAIL;
        snprintf(v->reason, sizeof v->reason, "lower bound %.4g > margin %.4g: a real drop", v->lo,
                 v->margin);
    } else if (v->mde > v->margin) {
        v->loss_verdict = VERDICT_INCONCLUSIVE;
        double f = v->mde / v->margin;
        v->items_needed = (int64_t)ceil((double)v->n_items * f * f);
        snprintf(v->reason, sizeof v->reason,
                 "underpowered: MDE %.4g > margin %.4g; about %lld %s needed", v->mde, v->margin,
                 (long long)v->items_needed, ppl ? "windows" : "items");
    } else {
        v->loss_verdict = VERDICT_INCONCLUSIVE;
        snprintf(v->reason, sizeof v->reason, "interval [%.4g, %.4g] contains the margin %.4g",
                 v->lo, v->hi, v->margin);
    }
}

/* The interval, SE, MDE and p-value of the paired loss. */
/* The design effect of clustered binary items: the cluster-robust
 * variance of the mean loss over the iid one (at least 1; 1 without
 * clusters, with fewer than 2, or without discordant items). Units are the
 * clusters (summed loss, item count); d_i^2 = 1 exactly for the b + c
 * discordant items. */
static double design_effect(const struct units *u, const struct verdict_task *v)
{
    double n = (double)v->n_items, G = (double)u->n;
    if (u->n == v->n_items || u->n < 2 || n < 2) return 1;
    double dbar = (double)(v->flips_b - v->flips_c) / n;
    double v_iid = ((double)(v->flips_b + v->flips_c) - n * dbar * dbar) / (n * (n - 1));
    if (!(v_iid > 0)) return 1;
    double ss = 0;
    for (int64_t g = 0; g < u->n; g++) {
        double e = u->loss[g] - u->size[g] * dbar;
        ss += e * e;
    }
    double v_cl = G / (G - 1) * ss / (n * n);
    return fmax(1, v_cl / v_iid);
}

/* Binary loss: Tango's paired score interval, widened by sqrt(design
 * effect) around the estimate for clustered items. */
static void estimate_binary(const struct units *u, double za, struct verdict_task *v)
{
    v->delta = (double)(v->flips_b - v->flips_c) / (double)v->n_items;
    stats_tango_paired(v->flips_b, v->flips_c, v->n_items, za, &v->lo, &v->hi);
    v->design_effect = design_effect(u, v);
    double w = sqrt(v->design_effect);
    v->lo = fmax(-1, v->delta - (v->delta - v->lo) * w);
    v->hi = fmin(1, v->delta + (v->hi - v->delta) * w);
    v->se = (v->hi - v->lo) / (2 * za);
    v->p_value = stats_mcnemar(v->flips_b, v->flips_c);
    stats_wilson(v->flips_b + v->flips_c, v->n_items, stats_norm_ppf(0.975), &v->flip_lo,
                 &v->flip_hi);
}

/* The interval, SE, MDE and p-value of the paired loss. */
static int estimate(const struct units *u, int ppl, const struct verdict_params *p,
                    struct verdict_task *v)
{
    double alpha = p->policy.alpha, level = 1 - 2 * alpha;
    double za = stats_norm_ppf(1 - alpha), zb = stats_norm_ppf(1 - p->policy.beta);
    v->n_units = u->n;
    v->design_effect = 1;
    if (ppl) {
        struct boot_result br;
        if (stats_bootstrap_ratio(u->loss, u->size, u->n, p->policy.bootstrap, p->seed, level, &br))
            return QG_ERR_NOMEM;
        /* the percentile interval under-covers with few windows: widened by
         * t_{W-1} / z and the bootstrap's (W-1)/W variance bias (1 at large W) */
        double W = (double)u->n,
               f = W > 2 ? stats_t_ppf(1 - alpha, W - 1) / za * sqrt(W / (W - 1)) : 1;
        v->delta = br.estimate;
        v->lo = br.estimate - (br.estimate - br.lo) * f;
        v->hi = br.estimate + (br.hi - br.estimate) * f;
        v->se = br.se * f;
        v->p_value = v->se > 0 ? 1 - stats_norm_cdf(v->delta / v->se) : (v->delta > 0 ? 0 : 1);
    } else {
        estimate_binary(u, za, v);
    }
    v->mde = (za + zb) * v->se;
    return QG_OK;
}

/* Sets a gate's verdict from its interval against its limit. */
static void gate_decide(struct verdict_gate *g)
{
    int pass = g->kind == VERDICT_GATE_MAX ? g->hi <= g->limit : g->lo >= g->limit;
    int fail = g->kind == VERDICT_GATE_MAX ? g->lo > g->limit : g->hi < g->limit;
    g->verdict = fail ? VERDICT_FAIL : pass ? VERDICT_PASS : VERDICT_INCONCLUSIVE;
}

/* A per-token rate over the candidate's windows (value[w] / n_tokens[w]),
 * bootstrapped over windows; 0 when every window has the value. */
static int window_rate_gate(const struct item_row *c, int64_t n, int top1,
                            const struct verdict_params *p, struct verdict_gate *g)
{
    double *num = malloc((size_t)(n ? n : 1) * sizeof *num),
           *den = malloc((size_t)(n ? n : 1) * sizeof *den);
    int rc = num && den ? QG_OK : QG_ERR_NOMEM;
    for (int64_t w = 0; !rc && w < n; w++) {
        num[w] = top1 ? c[w].top1_agree : c[w].kld_sum;
        den[w] = (double)c[w].n_tokens;
        if (!isfinite(num[w]) || !(den[w] > 0)) rc = -1; /* no such figure: no gate */
    }
    struct boot_result br;
    if (!rc &&
        stats_bootstrap_ratio(num, den, n, p->policy.bootstrap,
                              p->seed ^ (top1 ? 0x7431u : 0x6b6cu), 1 - 2 * p->policy.alpha, &br))
        rc = QG_ERR_NOMEM;
    if (!rc) {
        snprintf(g->name, sizeof g->name, "%s", top1 ? "top1" : "kld");
        g->kind = top1 ? VERDICT_GATE_MIN : VERDICT_GATE_MAX;
        g->value = br.estimate, g->lo = br.lo, g->hi = br.hi;
        g->limit = top1 ? p->policy.min_top1 : p->policy.margin_kld;
        gate_decide(g);
    }
    free(num);
    free(den);
    return rc;
}

/* The gates the policy sets and the data allow. QG_OK or QG_ERR_NOMEM. */
static int evaluate_gates(const struct verdict_input *in, const struct verdict_params *p, int ppl,
                          struct verdict_task *v)
{
    const struct verdict_policy *pol = &p->policy;
    if (ppl) {
        for (int top1 = 0; top1 < 2; top1++) {
            if (!((top1 ? pol->min_top1 : pol->margin_kld) > 0)) continue;
            struct verdict_gate *g = &v->gates[v->n_gates];
            int rc = window_rate_gate(in->cand, in->n_cand, top1, p, g);
            if (rc == QG_ERR_NOMEM) return rc;
            if (rc) continue;
            /* a top-K KLD is a lower bound: it can prove a FAIL, not a PASS;
             * against a stored reference (the baseline's own top-K, nearly
             * all of its mass) a bound within the limit is stated, not gated */
            if (!top1 && in->kld_top_k > 0 && g->verdict == VERDICT_PASS && in->kld_ref) {
                v->kld_stated = g->value;
                continue;
            }
            if (!top1 && in->kld_top_k > 0 && g->verdict == VERDICT_PASS)
                g->verdict = VERDICT_INCONCLUSIVE;
            v->n_gates++;
        }
    } else if (pol->max_flip_rate > 0) {
        struct verdict_gate *g = &v->gates[v->n_gates++];
        snprintf(g->name, sizeof g->name, "flip_rate");
        g->kind = VERDICT_GATE_MAX;
        g->value = (double)(v->flips_b + v->flips_c) / (double)v->n_items;
        stats_wilson(v->flips_b + v->flips_c, v->n_items, stats_norm_ppf(1 - pol->alpha), &g->lo,
                     &g->hi);
        g->limit = pol->max_flip_rate;
        gate_decide(g);
    }
    return QG_OK;
}

/* The task's verdict: FAIL when the loss or a gate fails, PASS when all
 * pass; the reason gains each gate that did not pass. */
static void combine(struct verdict_task *v)
{
    int any_fail = v->loss_verdict == VERDICT_FAIL, all_pass = v->loss_verdict == VERDICT_PASS;
    size_t k = strlen(v->reason);
    for (int i = 0; i < v->n_gates; i++) {
        const struct verdict_gate *g = &v->gates[i];
        any_fail |= g->verdict == VERDICT_FAIL;
        all_pass &= g->verdict == VERDICT_PASS;
        if (g->verdict == VERDICT_PASS || k >= sizeof v->reason) continue;
        int max = g->kind == VERDICT_GATE_MAX, w;
        if (g->verdict == VERDICT_FAIL)
            w = snprintf(v->reason + k, sizeof v->reason - k, "; %s %s bound %.4g %s limit %.4g",
                         g->name, max ? "lower" : "upper", max ? g->lo : g->hi, max ? ">" : "<",
                         g->limit);
        else if (max && g->hi <= g->limit) /* a PASS a lower-bound KLD cannot show */
            w = snprintf(v->reason + k, sizeof v->reason - k,
                         "; %s %.4g is a top-K lower bound: within limit %.4g not shown", g->name,
                         g->value, g->limit);
        else
            w = snprintf(v->reason + k, sizeof v->reason - k,
                         "; %s interval [%.4g, %.4g] contains limit %.4g", g->name, g->lo, g->hi,
                         g->limit);
        k = w > 0 ? k + (size_t)w : k;
    }
    v->verdict = any_fail ? VERDICT_FAIL : all_pass ? VERDICT_PASS : VERDICT_INCONCLUSIVE;
}

int verdict_task_compute(const struct verdict_input *in, const struct verdict_params *p,
                         struct verdict_task *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->task_id = in->task_id;
    v->kind = in->kind;
    v->critical = in->critical;
    snprintf(v->name, sizeof v->name, "%s", in->name);
    int ppl = in->metric == VERDICT_METRIC_PPL;
    snprintf(v->metric, sizeof v->metric, "%s",
             ppl ? "ln_ppl_ratio"
             : in->metric == VERDICT_METRIC_EXACT_MATCH
                 ? "exact_match"
                 : verdict_mc_metric_name(p->policy.mc_metric));
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
    v->kld_stated = -1;
    if (!rc) rc = evaluate_gates(in, p, ppl, v);
    if (rc) return qg_errf(err, errlen, rc, "task '%s': out of memory", in->name);
    decide_loss(v, ppl);
    combine(v);
    size_t k = strlen(v->reason);
    if (v->kld_stated >= 0 && k < sizeof v->reason)
        snprintf(v->reason + k, sizeof v->reason - k,
                 "; kld %.4g is a lower bound (the stored baseline's top-%d), not gated",
                 v->kld_stated, in->kld_top_k);
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
    int *crit = malloc((size_t)(n ? n : 1) * sizeof *crit), counted = 0;
    for (int i = 0; i < n; i++) {
        v[i].p_holm = pv ? pv[i] : NAN;
        if (v[i].critical && crit) crit[counted++] = v[i].verdict; /* the rest: informational */
    }
    free(pv);
    int out = crit ? verdict_combine(crit, counted) : VERDICT_INCONCLUSIVE;
    free(crit);
    return out;
}

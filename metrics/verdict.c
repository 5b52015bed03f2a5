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
                               .mc_metric = VERDICT_MC_ACC,
                               .cluster_corr = 0.8};
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

/* Units of a paired comparison (windows; clusters of items, or items):
 * per unit the summed loss, its size (tokens or items) and its discordant
 * items; per row, the unit it belongs to. */
struct units {
    double *loss, *size, *flips;
    int64_t *unit_of;
    int64_t n;
    double rho_max; /* the policy's cluster_corr */
};

static void units_free(struct units *u)
{
    free(u->loss);
    free(u->size);
    free(u->flips);
    free(u->unit_of);
    memset(u, 0, sizeof *u);
}

/* Binary items in clusters that count: at least 2 clusters, fewer than items. */
static int clustered(const struct units *u, int64_t n_items)
{
    return u->n >= 2 && u->n < n_items;
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
        u->flips[k] += b->correct != c->correct;
    }
    u->unit_of[pr->n_items++] = k;
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
    u->flips = calloc((size_t)nb, sizeof *u->flips);
    u->unit_of = calloc((size_t)nb, sizeof *u->unit_of);
    struct cluster_map map = {0};
    int rc = !u->loss || !u->size || !u->flips || !u->unit_of ? QG_ERR_NOMEM
                                                              : cluster_map_init(&map, nb);
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

/* The baseline's reruns against repeat 0 (docs/verdict.md, "Run-to-run
 * noise"). */
struct rerun {
    double var;      /* variance of the aggregate metric's change between two runs */
    double churn;    /* binary: mean share of items whose correctness changed */
    double *unit_ch; /* binary: per unit, the mean count of changed items */
    int used;        /* repeats that paired */
};

/* Repeat b against repeat a (n rows each), per unit: the summed change of
 * the metric's numerator (binary: correctness; perplexity: NLL) into d[]
 * and the changed items into ch[] (both zeroed here); -1 when the rows do
 * not pair. */
static int rerun_diff(const struct item_row *a, const struct item_row *b, int64_t n, int ppl,
                      const struct units *u, double *d, double *ch)
{
    memset(d, 0, (size_t)u->n * sizeof *d);
    memset(ch, 0, (size_t)u->n * sizeof *ch);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = u->unit_of[i];
        if (a[i].idx != b[i].idx) return -1;
        if (ppl) {
            if (isnan(a[i].nll) || isnan(b[i].nll) || a[i].n_tokens != b[i].n_tokens) return -1;
            d[k] += b[i].nll - a[i].nll;
        } else {
            if (a[i].correct < 0 || b[i].correct < 0) return -1;
            d[k] += b[i].correct - a[i].correct;
            ch[k] += a[i].correct != b[i].correct;
        }
    }
    return 0;
}

/* Run-to-run noise from the baseline's repeats against repeat 0: the
 * variance of the aggregate metric's change between two runs, the sum
 * over units of the squared per-unit change over (total size)^2 (units
 * change independently), averaged over the repeats that pair; and the
 * churn. noise = its square root. QG_OK or QG_ERR_NOMEM (rr->unit_ch is
 * the caller's to free either way). */
static int measure_noise(const struct verdict_input *in, int ppl, const struct units *u,
                         struct verdict_task *v, struct rerun *rr)
{
    memset(rr, 0, sizeof *rr);
    v->deterministic = -1;
    size_t m = (size_t)(u->n ? u->n : 1);
    double *d = malloc(m * sizeof *d), *ch = malloc(m * sizeof *ch), total = 0;
    rr->unit_ch = calloc(m, sizeof *rr->unit_ch);
    int rc = d && ch && rr->unit_ch ? QG_OK : QG_ERR_NOMEM;
    for (int64_t k = 0; k < u->n; k++)
        total += u->size[k];
    for (int r = 0; !rc && r < in->n_repeats; r++) {
        if (in->n_repeat[r] != in->n_base ||
            rerun_diff(in->base, in->repeats[r], in->n_base, ppl, u, d, ch))
            continue;
        double ss = 0, changed = 0;
        for (int64_t k = 0; k < u->n; k++) {
            ss += d[k] * d[k];
            changed += ch[k];
            rr->unit_ch[k] += ch[k];
        }
        rr->var += ss / (total * total);
        rr->churn += changed / (double)in->n_base;
        rr->used++;
        v->deterministic =
            (v->deterministic != 0) && rows_identical(in->base, in->repeats[r], in->n_base);
        v->noise_repeats = r + 1;
    }
    for (int64_t k = 0; !rc && rr->used && k < u->n; k++)
        rr->unit_ch[k] /= rr->used;
    if (rr->used) rr->var /= rr->used, rr->churn /= rr->used;
    v->noise = sqrt(rr->var);
    v->churn = ppl ? 0 : rr->churn;
    free(d);
    free(ch);
    return rc;
}

/* The loss's PASS / FAIL / INCONCLUSIVE from the interval, the margin and
 * the MDE, with the reason; estimable 0: too few windows to bound it
 * (items_needed set by estimate_ppl). */
static void decide_loss(struct verdict_task *v, int ppl, int estimable)
{
    if (!estimable) { /* the reason is estimate_ppl's */
        v->loss_verdict = VERDICT_INCONCLUSIVE;
        return;
    }
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

/* The design effect clustered items may have before their events can
 * show it: 1 + (m_w - 1) rho_max, m_w the size-weighted mean cluster size
 * and rho_max the policy's cluster_corr (default 0.8, the largest
 * within-cluster correlation bench_verdict calibrates), fading as K0 / (K0 + k) with the k events
 * seen (K0 = 10): with no or few events (a rare flip, every flip a loss) the correlation cannot be
 * estimated, and the cluster-robust variance of what was seen under-covers. */
static double prior_deff(const struct units *u, double n, double k)
{
    const double rho_max = u->rho_max, k0 = 10;
    double mw = 0;
    for (int64_t g = 0; g < u->n; g++)
        mw += u->size[g] * u->size[g] / n;
    return 1 + (mw - 1) * rho_max * k0 / (k0 + k);
}

/* Kish's design effect of a sum over clustered binary items: the
 * cluster-robust variance of the mean of x (per-unit sums s[], the units'
 * item counts as sizes, G/(G-1) small-sample factor) over the iid one
 * from sum_x and sum_x2 over the n items; at least prior_deff. 1 when the
 * items are not clustered. */
static double design_effect(const struct units *u, const double *s, double n, double sum_x,
                            double sum_x2)
{
    if (!clustered(u, (int64_t)n) || n < 2) return 1;
    double floor_ = prior_deff(u, n, sum_x2);
    double mean = sum_x / n, v_iid = (sum_x2 - n * mean * mean) / (n * (n - 1));
    if (!(v_iid > 0)) return floor_;
    double ss = 0, G = (double)u->n;
    for (int64_t g = 0; g < u->n; g++) {
        double e = s[g] - u->size[g] * mean;
        ss += e * e;
    }
    return fmax(floor_, G / (G - 1) * ss / (n * n) / v_iid);
}

/* The bound of rare events that come in bunches: items of clustered
 * units where events (count[g] of the unit's items; 2 count[g] = flips[g]
 * +- loss[g] for losses / gains, sign 0 for flips) occur, as a Poisson
 * count of clusters C with events times the mean events per such cluster
 * over n: Garwood's upper bound of C times k / C over n. Where events
 * concentrate in few clusters, the cluster-robust variance sees only
 * those few and under-covers (bench_verdict's "losses only" cells); this
 * bound does not. The bunch is at least prior_deff (with no events: C = 0,
 * Garwood's -ln alpha clusters of that bunch). 0 when not clustered. */
static double bunched_upper(const struct units *u, int sign, double n, double alpha)
{
    int64_t C = 0;
    double k = 0;
    for (int64_t g = 0; g < u->n; g++) {
        double e = sign ? (u->flips[g] + sign * u->loss[g]) / 2 : u->flips[g];
        C += e > 0.5;
        k += e;
    }
    if (!clustered(u, (int64_t)n)) return 0;
    double bunch = fmax(C ? k / (double)C : 1, prior_deff(u, n, k));
    return stats_poisson_upper(C, alpha) * bunch / n;
}

/* The quantile 1 - a of the binary statistics: Student's t with G - 1
 * degrees of freedom for items in G clusters, else normal. */
static double binary_q(const struct units *u, int64_t n, double a)
{
    return clustered(u, n) ? stats_t_ppf(1 - a, (double)(u->n - 1)) : stats_norm_ppf(1 - a);
}

/* Binary p-value: exact McNemar; where clusters or reruns widen the
 * variance, at least the two-sided t (G - 1 df) or normal test on it. */
static double binary_p(const struct units *u, double V, const struct verdict_task *v)
{
    double p = stats_mcnemar(v->flips_b, v->flips_c), n = (double)v->n_items;
    int cl = clustered(u, v->n_items);
    if (!cl && !(V > 0)) return p;
    double v_iid =
        n > 1 ? ((double)(v->flips_b + v->flips_c) - n * v->delta * v->delta) / (n * (n - 1)) : 0;
    double se = sqrt(fmax(0, v_iid) * v->design_effect + V), t = fabs(v->delta) / se;
    if (!(se > 0)) return p;
    double p2 = 2 * (cl ? stats_t_cdf(-t, (double)(u->n - 1)) : stats_norm_cdf(-t));
    return fmax(p, fmin(1, p2));
}

/* For clustered items, widens [*lo, *hi] to the t / bootstrap-t interval
 * of the per-cluster sums s[] over the cluster sizes (stats_ratio_interval
 * with its skew rule: cluster totals of rare events are skewed, and there
 * the cluster-robust variance under-covers). Unchanged when not clustered
 * or not estimable. QG_OK or QG_ERR_NOMEM. */
static int cluster_interval(const struct units *u, int64_t n, const double *s,
                            const struct verdict_params *p, uint64_t salt, double *lo, double *hi)
{
    if (!clustered(u, n)) return QG_OK;
    struct boot_result br;
    int e = stats_ratio_interval(s, u->size, u->n, p->policy.bootstrap, p->seed ^ salt,
                                 1 - 2 * p->policy.alpha, &br);
    if (e < 0) return QG_ERR_NOMEM;
    if (!e) *lo = fmin(*lo, br.lo), *hi = fmax(*hi, br.hi);
    return QG_OK;
}

/* Binary loss: Tango's paired score interval; for clustered items widened
 * by sqrt(design effect) * t_{G-1} / z around the estimate, and to at least
 * the bunched-events bounds and the clusters' t / bootstrap-t interval;
 * each side then widened by the rerun variance V (h' = sqrt(h^2 + q^2 V)).
 * QG_OK or QG_ERR_NOMEM. */
static int estimate_binary(const struct units *u, const struct verdict_params *p, double V,
                           struct verdict_task *v)
{
    const struct verdict_policy *pol = &p->policy;
    double n = (double)v->n_items, za = stats_norm_ppf(1 - pol->alpha);
    double q = binary_q(u, v->n_items, pol->alpha), qb = binary_q(u, v->n_items, pol->beta);
    int64_t b = v->flips_b, c = v->flips_c;
    v->delta = (double)(b - c) / n;
    stats_tango_paired(b, c, v->n_items, za, &v->lo, &v->hi);
    v->design_effect = design_effect(u, u->loss, n, (double)(b - c), (double)(b + c));
    double w = sqrt(v->design_effect) * q / za;
    v->lo = v->delta - (v->delta - v->lo) * w;
    v->hi = v->delta + (v->hi - v->delta) * w;
    if (clustered(u, v->n_items)) { /* losses and gains in bunches: at least Garwood's bounds */
        v->hi = fmax(v->hi, bunched_upper(u, 1, n, pol->alpha) - (double)c / n);
        v->lo = fmin(v->lo, (double)b / n - bunched_upper(u, -1, n, pol->alpha));
    }
    if (cluster_interval(u, v->n_items, u->loss, p, 0x6c6fu, &v->lo, &v->hi)) return QG_ERR_NOMEM;
    double hl = v->delta - v->lo, hh = v->hi - v->delta;
    hl = sqrt(hl * hl + q * q * V);
    hh = sqrt(hh * hh + q * q * V);
    v->lo = fmax(-1, v->delta - hl);
    v->hi = fmin(1, v->delta + hh);
    v->se = (hl + hh) / (2 * q);
    v->mde = (q + qb) * v->se;
    v->p_value = binary_p(u, V, v);
    double k = (double)(b + c), df = design_effect(u, u->flips, n, k, k);
    stats_wilson_eff(k / df, n / df, binary_q(u, v->n_items, 0.025), &v->flip_lo, &v->flip_hi);
    return QG_OK;
}

/* Perplexity: the ratio estimator's interval (stats_ratio_interval: the
 * wider of t_{W-1} and the bootstrap-t) widened by the rerun variance V;
 * p-value one-sided t_{W-1}. 0, 1 when the windows cannot bound the loss
 * (lo / hi NaN, items_needed: the windows it would take), or
 * QG_ERR_NOMEM. */
static int estimate_ppl(const struct units *u, const struct verdict_params *p, double V,
                        struct verdict_task *v)
{
    const struct verdict_policy *pol = &p->policy;
    struct boot_result br;
    int e = stats_ratio_interval(u->loss, u->size, u->n, pol->bootstrap, p->seed,
                                 1 - 2 * pol->alpha, &br);
    if (e < 0) return QG_ERR_NOMEM;
    double W = (double)u->n, df = fmax(1, W - 1);
    double q = stats_t_ppf(1 - pol->alpha, df), qb = stats_t_ppf(1 - pol->beta, df);
    v->delta = br.estimate;
    v->se = W > 1 ? sqrt(br.se * br.se + V) : NAN;
    v->mde = (q + qb) * v->se;
    if (e == 1) {
        double z = stats_norm_ppf(1 - pol->alpha) + stats_norm_ppf(1 - pol->beta),
               f = z * v->se / v->margin, need = isfinite(f) ? ceil(W * f * f) : 0,
               skewed = ceil(STATS_RATIO_SKEW_UNITS * br.skew * br.skew);
        need = fmax(fmax(need, skewed), STATS_RATIO_MIN_UNITS);
        v->items_needed = (int64_t)fmin(need, 1e12);
        v->lo = v->hi = NAN;
        v->p_value = 1;
        snprintf(v->reason, sizeof v->reason,
                 "%lld window%s cannot bound the loss%s; at least %lld windows needed",
                 (long long)u->n, u->n == 1 ? "" : "s",
                 u->n >= STATS_RATIO_MIN_UNITS && W < skewed ? " (their losses are skewed)" : "",
                 (long long)v->items_needed);
        return 1;
    }
    double hl = v->delta - br.lo, hh = br.hi - v->delta;
    v->lo = v->delta - sqrt(hl * hl + q * q * V);
    v->hi = v->delta + sqrt(hh * hh + q * q * V);
    v->p_value = v->se > 0 ? stats_t_cdf(-v->delta / v->se, W - 1) : v->delta > 0 ? 0 : 1;
    return 0;
}

/* Sets a gate's verdict from its interval against its limit (a NaN bound:
 * INCONCLUSIVE). */
static void gate_decide(struct verdict_gate *g)
{
    int pass = g->kind == VERDICT_GATE_MAX ? g->hi <= g->limit : g->lo >= g->limit;
    int fail = g->kind == VERDICT_GATE_MAX ? g->lo > g->limit : g->hi < g->limit;
    g->verdict = fail ? VERDICT_FAIL : pass ? VERDICT_PASS : VERDICT_INCONCLUSIVE;
}

/* The same-top-1 share, a per-token binary rate clustered by window:
 * Wilson on Kish's effective counts (the design effect of the windows)
 * with t_{W-1} (which, unlike the bootstrap-t, holds where nearly every
 * window agrees on every token); NaN bounds from fewer than 3 windows. */
static void top1_bounds(const double *num, const double *den, int64_t n, double alpha,
                        struct verdict_gate *g)
{
    double k = 0, N = 0, ss = 0;
    for (int64_t w = 0; w < n; w++)
        k += num[w], N += den[w];
    double p = k / N, v_iid = p * (1 - p) / N;
    for (int64_t w = 0; w < n; w++)
        ss += (num[w] - den[w] * p) * (num[w] - den[w] * p);
    double G = (double)n, v_cl = n > 1 ? G / (G - 1) * ss / (N * N) : 0;
    double deff = v_iid > 0 ? fmax(1, v_cl / v_iid) : 1;
    g->value = p;
    g->lo = g->hi = NAN;
    if (n >= 3) stats_wilson_eff(k / deff, N / deff, stats_t_ppf(1 - alpha, G - 1), &g->lo, &g->hi);
}

/* A per-token rate over the candidate's windows (value[w] / n_tokens[w]):
 * KLD with the loss's interval (stats_ratio_interval); top-1 the wider of
 * that and top1_bounds, or top1_bounds alone from 20 windows on where the
 * bootstrap-t cannot be estimated; NaN bounds when the windows cannot
 * bound it. -1 when a window lacks the value (no gate). */
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
    int e = rc ? 0
               : stats_ratio_interval(num, den, n, p->policy.bootstrap,
                                      p->seed ^ (top1 ? 0x7431u : 0x6b6cu), 1 - 2 * p->policy.alpha,
                                      &br);
    if (e < 0) rc = QG_ERR_NOMEM;
    if (!rc) {
        snprintf(g->name, sizeof g->name, "%s", top1 ? "top1" : "kld");
        g->kind = top1 ? VERDICT_GATE_MIN : VERDICT_GATE_MAX;
        if (top1) { /* the wider of both, where the bootstrap-t holds */
            top1_bounds(num, den, n, p->policy.alpha, g);
            if (!e) g->lo = fmin(g->lo, fmax(0, br.lo)), g->hi = fmax(g->hi, fmin(1, br.hi));
            if (n < STATS_RATIO_MIN_UNITS || (e && n < 2 * STATS_RATIO_MIN_UNITS))
                g->lo = g->hi = NAN; /* Wilson alone under-covers there (bench_verdict) */
        } else {
            g->value = br.estimate;
            g->lo = e ? NAN : fmax(0, br.lo);
            g->hi = e ? NAN : br.hi;
        }
        g->limit = top1 ? p->policy.min_top1 : p->policy.margin_kld;
        gate_decide(g);
    }
    free(num);
    free(den);
    return rc;
}

/* The flip-rate gate: the share of items that changed, net of the
 * baseline's own churn when it has repeats (Newcombe's combination of the
 * two Wilson intervals, conservative: both share repeat 0); Wilson on
 * Kish's effective counts with t_{G-1} for clustered items, at least the
 * bunched-events bound and the clusters' t / bootstrap-t interval. QG_OK
 * or QG_ERR_NOMEM. */
static int flip_gate(const struct units *u, const struct verdict_params *p, const struct rerun *rr,
                     const struct verdict_task *v, struct verdict_gate *g)
{
    const struct verdict_policy *pol = &p->policy;
    double n = (double)v->n_items, k = (double)(v->flips_b + v->flips_c);
    double q = binary_q(u, v->n_items, pol->alpha), df = design_effect(u, u->flips, n, k, k);
    double f = k / n, lf, uf;
    stats_wilson_eff(k / df, n / df, q, &lf, &uf);
    uf = fmax(uf, fmin(1, bunched_upper(u, 0, n, pol->alpha)));
    double lf_cl = lf; /* the upper bound guards the PASS; the lower stays Wilson's */
    if (cluster_interval(u, v->n_items, u->flips, p, 0x666cu, &lf_cl, &uf)) return QG_ERR_NOMEM;
    uf = fmin(1, uf);
    snprintf(g->name, sizeof g->name, "flip_rate");
    g->kind = VERDICT_GATE_MAX;
    g->limit = pol->max_flip_rate;
    g->value = f, g->lo = lf, g->hi = uf;
    if (rr->used) {
        double c = rr->churn, kc = c * n, dc = design_effect(u, rr->unit_ch, n, kc, kc), lc, uc;
        stats_wilson_eff(kc / dc, n / dc, q, &lc, &uc);
        g->value = f - c;
        g->lo = g->value - sqrt((f - lf) * (f - lf) + (uc - c) * (uc - c));
        g->hi = g->value + sqrt((uf - f) * (uf - f) + (c - lc) * (c - lc));
    }
    gate_decide(g);
    return QG_OK;
}

/* The gates the policy sets and the data allow. QG_OK or QG_ERR_NOMEM. */
static int evaluate_gates(const struct verdict_input *in, const struct verdict_params *p, int ppl,
                          const struct units *u, const struct rerun *rr, struct verdict_task *v)
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
        return flip_gate(u, p, rr, v, &v->gates[v->n_gates++]);
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
        else if (isnan(g->lo) || isnan(g->hi))
            w = snprintf(v->reason + k, sizeof v->reason - k,
                         "; %s %.4g cannot be bounded from %lld window%s", g->name, g->value,
                         (long long)v->n_units, v->n_units == 1 ? "" : "s");
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
    v->margin = ppl ? p->policy.margin_ppl : p->policy.margin_acc;
    u.rho_max = p->policy.cluster_corr;
    v->n_units = u.n;
    v->design_effect = 1;
    v->kld_stated = -1;
    struct rerun rr;
    int estimable = 1;
    rc = measure_noise(in, ppl, &u, v, &rr);
    if (!rc && ppl) {
        rc = estimate_ppl(&u, p, rr.var, v);
        estimable = rc != 1;
        rc = rc == 1 ? QG_OK : rc;
    } else if (!rc) {
        rc = estimate_binary(&u, p, rr.var, v);
    }
    if (!rc) rc = evaluate_gates(in, p, ppl, &u, &rr, v);
    free(rr.unit_ch);
    units_free(&u);
    if (rc) return qg_errf(err, errlen, rc, "task '%s': out of memory", in->name);
    decide_loss(v, ppl, estimable);
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

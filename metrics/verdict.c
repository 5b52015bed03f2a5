/* verdict — paired statistics and the PASS / FAIL / INCONCLUSIVE decision. */
#include "metrics/verdict.h"
#include "harness/status.h"
#include "harness/util.h"
#include "metrics/stats.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *verdict_name(int v)
{
    return v == VERDICT_PASS ? "PASS" : v == VERDICT_FAIL ? "FAIL" : "INCONCLUSIVE";
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

/* Pairs two trials' rows; perplexity: windows; binary: clusters of items.
 * Also returns the two metric values and, for binary, the flips. */
static int pair_rows(const struct store_row *b, int64_t nb, const struct store_row *c, int64_t nc, int ppl,
                     const char *task, struct units *u, double *vb, double *vc, int64_t *fb, int64_t *fc,
                     int64_t *n_items, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    if (nb != nc || nb == 0)
        return qg_errf(err, errlen, QG_ERR_DATA, "task '%s': the trials have %lld and %lld rows; they do not pair", task,
                       (long long)nb, (long long)nc);
    u->loss = calloc((size_t)nb, sizeof *u->loss);
    u->size = calloc((size_t)nb, sizeof *u->size);
    if (!u->loss || !u->size) return QG_ERR_NOMEM;
    double sb = 0, sc = 0, tokens = 0;
    int64_t flips_b = 0, flips_c = 0;
    /* clusters: map cluster id -> unit via a small open-addressing table */
    int64_t cap = 16;
    while (cap < 2 * nb) cap *= 2;
    int64_t *key = malloc((size_t)cap * sizeof *key), *unit = malloc((size_t)cap * sizeof *unit);
    if (!key || !unit) {
        free(key);
        free(unit);
        return QG_ERR_NOMEM;
    }
    for (int64_t i = 0; i < cap; i++) key[i] = INT64_MIN;
    for (int64_t i = 0; i < nb; i++) {
        if (b[i].idx != c[i].idx) {
            free(key);
            free(unit);
            return qg_errf(err, errlen, QG_ERR_DATA, "task '%s': row %lld of the baseline is item %lld, of the candidate %lld",
                           task, (long long)i, (long long)b[i].idx, (long long)c[i].idx);
        }
        int64_t k;
        double loss, size;
        if (ppl) {
            if (b[i].n_tokens != c[i].n_tokens || isnan(b[i].nll) || isnan(c[i].nll)) {
                free(key);
                free(unit);
                return qg_errf(err, errlen, QG_ERR_DATA, "task '%s': window %lld scored %lld vs %lld tokens", task,
                               (long long)b[i].idx, (long long)b[i].n_tokens, (long long)c[i].n_tokens);
            }
            k = u->n++;
            loss = c[i].nll - b[i].nll;
            size = (double)b[i].n_tokens;
            sb += b[i].nll;
            sc += c[i].nll;
            tokens += size;
        } else {
            if (b[i].correct < 0 || c[i].correct < 0) {
                free(key);
                free(unit);
                return qg_errf(err, errlen, QG_ERR_DATA, "task '%s': item %lld has no correctness", task, (long long)b[i].idx);
            }
            loss = (double)(b[i].correct - c[i].correct);
            size = 1;
            sb += b[i].correct;
            sc += c[i].correct;
            flips_b += b[i].correct && !c[i].correct;
            flips_c += !b[i].correct && c[i].correct;
            if (b[i].cluster < 0) {
                k = u->n++;
            } else {
                uint64_t h = ((uint64_t)b[i].cluster * 0x9E3779B97F4A7C15ull) & (uint64_t)(cap - 1);
                while (key[h] != INT64_MIN && key[h] != b[i].cluster) h = (h + 1) & (uint64_t)(cap - 1);
                if (key[h] == INT64_MIN) {
                    key[h] = b[i].cluster;
                    unit[h] = u->n++;
                }
                k = unit[h];
            }
        }
        u->loss[k] += loss;
        u->size[k] += size;
    }
    free(key);
    free(unit);
    *n_items = nb;
    if (ppl) {
        *vb = exp(sb / tokens);
        *vc = exp(sc / tokens);
    } else {
        *vb = sb / (double)nb;
        *vc = sc / (double)nb;
    }
    *fb = flips_b;
    *fc = flips_c;
    return QG_OK;
}

static int read_trial(struct store *s, int64_t run, const char *model, int64_t task, int repeat, const char *tname,
                      struct store_row **rows, int64_t *n, int64_t *trial, char *err, size_t errlen)
{
    int status;
    int rc = store_trial_find(s, run, model, task, repeat, trial, &status);
    if (rc == QG_ERR_NOTFOUND)
        return qg_errf(err, errlen, rc, "run %lld has no trial of model '%s' on task '%s' (repeat %d)", (long long)run,
                       model, tname, repeat);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    if (status != STORE_TRIAL_DONE)
        return qg_errf(err, errlen, QG_ERR_DATA, "the trial of '%s' on '%s' is %s, not done (resume the run first)", model,
                       tname, store_trial_status_name(status));
    rc = store_items_read(s, *trial, rows, n);
    return rc ? qg_errf(err, errlen, rc, "%s", store_errmsg(s)) : QG_OK;
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int compare_task(struct store *s, int64_t run, const char *base, const char *cand, const cJSON *task,
                        const struct verdict_params *p, struct verdict_task *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->task_id = (int64_t)cJSON_GetObjectItem(task, "id")->valuedouble;
    snprintf(v->name, sizeof v->name, "%s", cJSON_GetObjectItem(task, "name")->valuestring);
    const char *kind = cJSON_GetObjectItem(task, "kind")->valuestring;
    int ppl = strcmp(kind, "perplexity") == 0;
    v->kind = ppl ? STORE_TASK_PERPLEXITY : strcmp(kind, "generation") == 0 ? STORE_TASK_GENERATION : STORE_TASK_MULTIPLE_CHOICE;
    snprintf(v->metric, sizeof v->metric, "%s", ppl ? "ln_ppl_ratio" : v->kind == STORE_TASK_GENERATION ? "exact_match" : "acc");
    struct store_row *rb = NULL, *rc_ = NULL, *rb1 = NULL;
    int64_t nb = 0, nc = 0, nb1 = 0, tb, tc, tb1;
    int rc = read_trial(s, run, base, v->task_id, 0, v->name, &rb, &nb, &tb, err, errlen);
    if (!rc) rc = read_trial(s, run, cand, v->task_id, 0, v->name, &rc_, &nc, &tc, err, errlen);
    struct units u = {0};
    if (!rc) rc = pair_rows(rb, nb, rc_, nc, ppl, v->name, &u, &v->base_value, &v->cand_value, &v->flips_b, &v->flips_c,
                            &v->n_items, err, errlen);
    /* the noise floor: the largest loss of a baseline repeat (1, 2, ...: a
     * repeat, or a perturbed one) against its repeat 0 */
    v->noise = 0;
    v->deterministic = -1;
    for (int rep = 1; !rc && rep < 64; rep++) {
        free(rb1);
        rb1 = NULL;
        if (read_trial(s, run, base, v->task_id, rep, v->name, &rb1, &nb1, &tb1, err, errlen) != QG_OK) break;
        struct units nu;
        double x, y;
        int64_t f1, f2, ni;
        if (pair_rows(rb, nb, rb1, nb1, ppl, v->name, &nu, &x, &y, &f1, &f2, &ni, err, errlen) == QG_OK) {
            double sl = 0, ss = 0;
            for (int64_t i = 0; i < nu.n; i++) sl += nu.loss[i], ss += nu.size[i];
            v->noise = fmax(v->noise, fabs(sl / ss));
            int same = 1;
            for (int64_t i = 0; i < nb && same; i++) same = rb[i].nll == rb1[i].nll || (isnan(rb[i].nll) && isnan(rb1[i].nll));
            for (int64_t i = 0; i < nb && same; i++) same = rb[i].correct == rb1[i].correct && !strcmp(rb[i].output_hash, rb1[i].output_hash);
            v->deterministic = (v->deterministic != 0) && same;
            v->noise_repeats = rep;
            units_free(&nu);
        }
    }
    if (!rc) err[0] = '\0'; /* a missing extra repeat is no error; a failed pairing above is */
    free(rb);
    free(rc_);
    free(rb1);
    if (rc) {
        units_free(&u);
        return rc;
    }
    double pm = ppl ? p->policy.margin_ppl : p->policy.margin_acc;
    v->margin = fmax(pm, v->noise);
    struct boot_result br;
    double alpha = p->policy.alpha, level = 1 - 2 * alpha;
    if (stats_bootstrap_ratio(u.loss, u.size, u.n, p->policy.bootstrap, p->seed, level, &br)) {
        units_free(&u);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "bootstrap failed");
    }
    v->n_units = u.n;
    units_free(&u);
    v->delta = br.estimate;
    v->lo = br.lo;
    v->hi = br.hi;
    v->se = br.se;
    double za = stats_norm_ppf(1 - alpha), zb = stats_norm_ppf(1 - p->policy.beta);
    if (!ppl && v->n_units == v->n_items) {
        /* items are the units: Newcombe's paired score interval, sound with
         * few or no discordant pairs (a bootstrap collapses to a point) */
        int64_t base_ok = (int64_t)llround(v->base_value * (double)v->n_items); /* base correct = a + b */
        int64_t a = base_ok - v->flips_b, d = v->n_items - a - v->flips_b - v->flips_c;
        stats_newcombe_paired(a, v->flips_b, v->flips_c, d, za, &v->lo, &v->hi);
        v->se = fmax(v->se, (v->hi - v->lo) / (2 * za));
    }
    v->mde = (za + zb) * v->se;
    v->items_needed = -1;
    if (ppl) {
        v->p_value = v->se > 0 ? 1 - stats_norm_cdf(v->delta / v->se) : (v->delta > 0 ? 0 : 1);
    } else {
        v->p_value = stats_mcnemar(v->flips_b, v->flips_c);
        stats_wilson(v->flips_b + v->flips_c, v->n_items, stats_norm_ppf(0.975), &v->flip_lo, &v->flip_hi);
    }
    if (v->hi <= v->margin) {
        v->verdict = VERDICT_PASS;
        snprintf(v->reason, sizeof v->reason, "upper bound %.4g <= margin %.4g", v->hi, v->margin);
    } else if (v->lo > v->margin) {
        v->verdict = VERDICT_FAIL;
        snprintf(v->reason, sizeof v->reason, "lower bound %.4g > margin %.4g: a real drop", v->lo, v->margin);
    } else {
        v->verdict = VERDICT_INCONCLUSIVE;
        if (v->mde > v->margin) {
            double f = v->mde / v->margin;
            v->items_needed = (int64_t)ceil((double)v->n_items * f * f);
            snprintf(v->reason, sizeof v->reason, "underpowered: MDE %.4g > margin %.4g; about %lld %s needed", v->mde,
                     v->margin, (long long)v->items_needed, ppl ? "windows" : "items");
        } else {
            snprintf(v->reason, sizeof v->reason, "interval [%.4g, %.4g] contains the margin %.4g", v->lo, v->hi, v->margin);
        }
    }
    if (ppl) { /* lockstep KLD figures from the candidate's trial */
        char *mj = NULL;
        if (store_trial_metrics(s, tc, &mj) == QG_OK && mj) {
            cJSON *m = cJSON_Parse(mj);
            v->kld_mean = jnum(m, "kld_mean");
            v->kld_p99 = jnum(m, "kld_p99");
            v->kld_max = jnum(m, "kld_max");
            v->top1 = jnum(m, "top1_agree");
            v->dp_mean = jnum(m, "dp_mean");
            v->has_kld = !isnan(v->kld_mean);
            v->kld_top_k = isnan(jnum(m, "kld_top_k")) ? 0 : (int)jnum(m, "kld_top_k");
            cJSON_Delete(m);
        }
        free(mj);
    }
    return QG_OK;
}

int verdict_compute(struct store *s, int64_t run_id, const char *baseline, const char *candidate,
                    const struct verdict_params *p, struct verdict_task **tasks, int *n, int *suite, char *err,
                    size_t errlen)
{
    *tasks = NULL;
    *n = 0;
    int64_t mid;
    int rc = store_model_find(s, run_id, baseline, &mid);
    if (!rc) rc = store_model_find(s, run_id, candidate, &mid);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    cJSON *run;
    if ((rc = store_run_json(s, run_id, &run))) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    cJSON *tl = cJSON_GetObjectItem(run, "tasks");
    int nt = cJSON_GetArraySize(tl);
    struct verdict_task *v = calloc((size_t)(nt ? nt : 1), sizeof *v);
    if (!v) rc = QG_ERR_NOMEM;
    for (int i = 0; i < nt && !rc; i++) rc = compare_task(s, run_id, baseline, candidate, cJSON_GetArrayItem(tl, i), p, &v[i], err, errlen);
    cJSON_Delete(run);
    if (rc) {
        free(v);
        return rc;
    }
    double *pv = malloc((size_t)(nt ? nt : 1) * sizeof *pv);
    for (int i = 0; pv && i < nt; i++) pv[i] = v[i].p_value;
    if (pv) stats_holm(pv, nt, pv);
    int any_fail = 0, all_pass = 1;
    for (int i = 0; i < nt; i++) {
        v[i].p_holm = pv ? pv[i] : NAN;
        any_fail |= v[i].verdict == VERDICT_FAIL;
        all_pass &= v[i].verdict == VERDICT_PASS;
    }
    free(pv);
    *suite = any_fail ? VERDICT_FAIL : all_pass ? VERDICT_PASS : VERDICT_INCONCLUSIVE;
    *tasks = v;
    *n = nt;
    return QG_OK;
}

/* compare — a stored run's verdict: store rows in, metrics/verdict, store out. */
#include "harness/compare.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"
#include "harness/suite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int compare_load_policy(struct store *s, int64_t run_id, const char *file,
                        struct verdict_policy *pol, char *err, size_t errlen)
{
    cJSON *root = NULL;
    const char *where = file;
    if (file) {
        char *text;
        size_t n;
        int rc = qg_read_file(file, 1 << 20, &text, &n, err, errlen);
        if (rc) return rc;
        root = cJSON_ParseWithLength(text, n);
        free(text);
        if (!root) return qg_errf(err, errlen, QG_ERR_DATA, "%s: invalid JSON", file);
    } else {
        char *sj = NULL;
        if (store_run_suite_json(s, run_id, &sj) == QG_OK && sj) root = cJSON_Parse(sj);
        free(sj);
        where = "the run's suite";
    }
    const cJSON *pj = root ? cJSON_GetObjectItemCaseSensitive(root, "policy") : NULL;
    if (!pj && root && file) pj = root;
    int rc = suite_policy_from_json(pj, where ? where : "policy", pol, err, errlen);
    cJSON_Delete(root);
    return rc;
}

/* The rows of a done trial of model on task at repeat. */
static int read_trial(struct store *s, int64_t run, const char *model, int64_t task, int repeat,
                      const char *tname, struct item_row **rows, int64_t *n, int64_t *trial,
                      char *err, size_t errlen)
{
    int status;
    int rc = store_trial_find(s, run, model, task, repeat, trial, &status);
    if (rc == QG_ERR_NOTFOUND)
        return qg_errf(err, errlen, rc,
                       "run %lld has no trial of model '%s' on task '%s' (repeat %d)",
                       (long long)run, model, tname, repeat);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    if (status != STORE_TRIAL_DONE)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "the trial of '%s' on '%s' is %s, not done (resume the run first)", model,
                       tname, store_trial_status_name(status));
    rc = store_items_read(s, *trial, rows, n);
    return rc ? qg_errf(err, errlen, rc, "%s", store_errmsg(s)) : QG_OK;
}

enum { MAX_REPEATS = 63 };

/* A task's paired trials: repeat 0 of both models and the baseline's later
 * repeats (1, 2, ... until one is missing or not done). */
struct trials {
    int64_t id[MAX_REPEATS + 2]; /* [0] candidate, [1] baseline, [2..] its repeats */
    struct item_row *rows[MAX_REPEATS + 2];
    int64_t n[MAX_REPEATS + 2];
    int count; /* filled entries */
};

static void trials_release(struct trials *t)
{
    for (int i = 0; i < t->count; i++)
        free(t->rows[i]);
}

static int read_trials(struct store *s, int64_t run, const char *base, const char *cand,
                       int64_t task, const char *tname, struct trials *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    int rc =
        read_trial(s, run, cand, task, 0, tname, &t->rows[0], &t->n[0], &t->id[0], err, errlen);
    if (!rc) t->count = 1;
    if (!rc)
        rc =
            read_trial(s, run, base, task, 0, tname, &t->rows[1], &t->n[1], &t->id[1], err, errlen);
    if (!rc) t->count = 2;
    char ignored[QG_ERRMSG_MAX];
    while (!rc && t->count < MAX_REPEATS + 2 &&
           read_trial(s, run, base, task, t->count - 1, tname, &t->rows[t->count], &t->n[t->count],
                      &t->id[t->count], ignored, sizeof ignored) == QG_OK)
        t->count++;
    return rc;
}

/* Multiple choice judged on acc_norm or per_token: each item's correctness
 * from its stored predictions (extra_json pred_norm / pred_tok and gold). */
static int rejudge_mc(struct store *s, int metric, struct trials *t, char *err, size_t errlen)
{
    const char *path = metric == VERDICT_MC_ACC_NORM ? "$.pred_norm" : "$.pred_tok";
    for (int i = 0; i < t->count; i++) {
        double *pred = NULL, *gold = NULL;
        int64_t np = 0, ng = 0;
        int rc = store_items_extract(s, t->id[i], path, &pred, &np);
        if (!rc) rc = store_items_extract(s, t->id[i], "$.gold", &gold, &ng);
        if (!rc && (np != t->n[i] || ng != t->n[i])) rc = QG_ERR_DATA;
        for (int64_t k = 0; !rc && k < np; k++) {
            if (isnan(pred[k]) || isnan(gold[k]))
                rc = qg_errf(err, errlen, QG_ERR_DATA,
                             "item %lld has no stored %s prediction (a run made before qgate kept "
                             "it?): judge it on \"acc\"",
                             (long long)t->rows[i][k].idx, verdict_mc_metric_name(metric));
            else
                t->rows[i][k].correct = pred[k] == gold[k];
        }
        free(pred);
        free(gold);
        if (rc == QG_ERR_DATA && !err[0])
            qg_errf(err, errlen, rc, "items do not line up");
        else if (rc && rc != QG_ERR_DATA)
            qg_errf(err, errlen, rc, "%s", store_errmsg(s));
        if (rc) return rc;
    }
    return QG_OK;
}

/* The lockstep figures of the candidate's perplexity trial, when stored. */
static void read_kld(struct store *s, int64_t trial, struct verdict_task *v)
{
    char *mj = NULL;
    if (store_trial_metrics(s, trial, &mj) == QG_OK && mj) {
        cJSON *m = cJSON_Parse(mj);
        v->kld_mean = json_num(m, "kld_mean", NAN);
        v->kld_p99 = json_num(m, "kld_p99", NAN);
        v->kld_max = json_num(m, "kld_max", NAN);
        v->top1 = json_num(m, "top1_agree", NAN);
        v->dp_mean = json_num(m, "dp_mean", NAN);
        v->has_kld = !isnan(v->kld_mean);
        v->kld_top_k = (int)json_num(m, "kld_top_k", 0);
        v->kld_ref = json_num(m, "kld_reference", 0) > 0;
        cJSON_Delete(m);
    }
    free(mj);
}

/* The suite file's entry for a task (by name), or NULL. */
static const cJSON *suite_task(const cJSON *suite, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(
        t, json_get(suite, "tasks")) if (!strcmp(json_str(t, "name", ""), name)) return t;
    return NULL;
}

/* The task's own policy ("policy" in its suite entry, over the suite's or
 * --policy's) and whether it counts in the suite verdict. */
static int task_params(const cJSON *suite, const char *name, const struct verdict_params *p,
                       struct verdict_params *tp, int *critical, char *err, size_t errlen)
{
    const cJSON *st = suite_task(suite, name);
    *tp = *p;
    *critical = !cJSON_IsFalse(json_get(st, "critical"));
    char where[256];
    snprintf(where, sizeof where, "the run's suite, task '%.128s'", name);
    return suite_policy_apply(json_get(st, "policy"), where, &tp->policy, err, errlen);
}

/* KLD, top-1 and dp of a lockstep trial are against the run's first model:
 * against another baseline they are dropped, never shown as its. */
static void drop_kld(struct trials *t)
{
    for (int64_t i = 0; i < t->n[0]; i++) {
        t->rows[0][i].kld_sum = NAN;
        t->rows[0][i].top1_agree = NAN;
        t->rows[0][i].dp_sum = NAN;
    }
}

static int compare_task(struct store *s, int64_t run, const char *base, const char *cand,
                        int base_is_first, const cJSON *task, const cJSON *suite,
                        const struct verdict_params *p, struct verdict_task *v, char *err,
                        size_t errlen)
{
    struct verdict_input in = {.name = json_str(task, "name", ""),
                               .task_id = json_int(task, "id", 0)};
    in.kind = task_kind_from_name(json_str(task, "kind", ""));
    in.metric = in.kind == TASK_PERPLEXITY   ? VERDICT_METRIC_PPL
                : in.kind == TASK_GENERATION ? VERDICT_METRIC_EXACT_MATCH
                                             : VERDICT_METRIC_ACC;
    if (in.kind != TASK_PERPLEXITY && in.kind != TASK_GENERATION) in.kind = TASK_MULTIPLE_CHOICE;
    struct verdict_params tp;
    struct trials t;
    int rc = task_params(suite, in.name, p, &tp, &in.critical, err, errlen);
    if (!rc)
        rc = read_trials(s, run, base, cand, in.task_id, in.name, &t, err, errlen);
    else
        memset(&t, 0, sizeof t);
    if (!rc && in.kind == TASK_MULTIPLE_CHOICE && tp.policy.mc_metric != VERDICT_MC_ACC)
        rc = rejudge_mc(s, tp.policy.mc_metric, &t, err, errlen);
    struct verdict_task figs = {0};
    if (!rc && in.metric == VERDICT_METRIC_PPL && base_is_first) read_kld(s, t.id[0], &figs);
    if (!rc && !base_is_first) drop_kld(&t);
    if (!rc) {
        in.cand = t.rows[0], in.n_cand = t.n[0];
        in.base = t.rows[1], in.n_base = t.n[1];
        in.repeats = (const struct item_row *const *)&t.rows[2];
        in.n_repeat = &t.n[2];
        in.n_repeats = t.count - 2;
        in.kld_top_k = figs.kld_top_k;
        in.kld_ref = figs.kld_ref;
        rc = verdict_task_compute(&in, &tp, v, err, errlen);
    }
    if (!rc) {
        v->has_kld = figs.has_kld, v->kld_mean = figs.kld_mean, v->kld_p99 = figs.kld_p99;
        v->kld_max = figs.kld_max, v->top1 = figs.top1, v->dp_mean = figs.dp_mean;
        v->kld_top_k = figs.kld_top_k;
    }
    trials_release(&t);
    return rc;
}

int compare_same_setup(const char *a, const char *b)
{
    const char *qa = strchr(a, '?'), *qb = strchr(b, '?');
    int ca = !strncmp(a, "cuda:", 5), cb = !strncmp(b, "cuda:", 5);
    return ca == cb && !strcmp(qa ? qa : "", qb ? qb : "");
}

int compare_same_model(struct store *s, int64_t run_id, const char *baseline, const char *candidate,
                       char *why, size_t whylen)
{
    if (!strcmp(baseline, candidate))
        return snprintf(why, whylen, "baseline and candidate are both '%s'", baseline), 1;
    cJSON *run, *m;
    int rc = store_run_json(s, run_id, &run);
    if (rc) return qg_errf(why, whylen, rc, "%s", store_errmsg(s));
    const cJSON *b = NULL, *c = NULL;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(run, "models"))
    {
        const char *name = json_str(m, "name", "");
        if (!strcmp(name, baseline)) b = m;
        if (!strcmp(name, candidate)) c = m;
    }
    int same = 0;
    if (b && c) {
        const char *hb = json_str(b, "sha256", ""), *hc = json_str(c, "sha256", "");
        const char *sb = json_str(b, "spec", ""), *sc = json_str(c, "spec", "");
        if (*hb && !strcmp(hb, hc) && compare_same_setup(sb, sc))
            same = snprintf(why, whylen, "'%s' and '%s' have the same content (sha256 %.16s…)",
                            baseline, candidate, hb) > 0;
        else if (!strcmp(json_str(b, "spec", "-"), json_str(c, "spec", "+")))
            same = snprintf(why, whylen, "'%s' and '%s' are the same model (%s)", baseline,
                            candidate, json_str(b, "spec", "")) > 0;
    }
    cJSON_Delete(run);
    return same;
}

int compare_run(struct store *s, int64_t run_id, const char *baseline, const char *candidate,
                const struct verdict_params *p, struct verdict_task **tasks, int *n, int *suite,
                char *err, size_t errlen)
{
    *tasks = NULL;
    *n = 0;
    int64_t mid;
    int rc = store_model_find(s, run_id, baseline, &mid);
    if (!rc) rc = store_model_find(s, run_id, candidate, &mid);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    cJSON *run;
    if ((rc = store_run_json(s, run_id, &run)))
        return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    char *sj = NULL;
    cJSON *sjson = store_run_suite_json(s, run_id, &sj) == QG_OK && sj ? cJSON_Parse(sj) : NULL;
    free(sj);
    cJSON *tl = cJSON_GetObjectItem(run, "tasks");
    int nt = cJSON_GetArraySize(tl);
    struct verdict_task *v = calloc((size_t)(nt ? nt : 1), sizeof *v);
    if (!v) rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    if (!rc && nt == 0)
        rc = qg_errf(err, errlen, QG_ERR_DATA,
                     "run %lld has no tasks: there is nothing to compare (was it killed while "
                     "being set up?)",
                     (long long)run_id);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(run, "models"), 0);
    int base_is_first = first && !strcmp(json_str(first, "name", ""), baseline);
    for (int i = 0; i < nt && !rc; i++)
        rc = compare_task(s, run_id, baseline, candidate, base_is_first, cJSON_GetArrayItem(tl, i),
                          sjson, p, &v[i], err, errlen);
    cJSON_Delete(run);
    cJSON_Delete(sjson);
    if (rc) {
        free(v);
        return rc;
    }
    *suite = verdict_suite(v, nt);
    *tasks = v;
    *n = nt;
    return QG_OK;
}

cJSON *compare_task_json(const struct verdict_task *v)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "task", v->name);
    cJSON_AddStringToObject(o, "metric", v->metric);
    cJSON_AddNumberToObject(o, "baseline", v->base_value);
    cJSON_AddNumberToObject(o, "candidate", v->cand_value);
    cJSON_AddNumberToObject(o, "delta", v->delta);
    cJSON_AddNumberToObject(o, "ci_low", v->lo);
    cJSON_AddNumberToObject(o, "ci_high", v->hi);
    cJSON_AddNumberToObject(o, "se", v->se);
    cJSON_AddNumberToObject(o, "margin", v->margin);
    cJSON_AddNumberToObject(o, "noise", v->noise);
    if (v->kind != TASK_PERPLEXITY) cJSON_AddNumberToObject(o, "churn", v->churn);
    cJSON_AddNumberToObject(o, "mde", v->mde);
    cJSON_AddNumberToObject(o, "p_value", v->p_value);
    cJSON_AddNumberToObject(o, "p_holm", v->p_holm);
    cJSON_AddNumberToObject(o, "units", (double)v->n_units);
    cJSON_AddNumberToObject(o, "items", (double)v->n_items);
    if (v->deterministic >= 0) cJSON_AddBoolToObject(o, "deterministic", v->deterministic);
    cJSON_AddNumberToObject(o, "noise_repeats", v->noise_repeats);
    if (v->kind != 0) {
        cJSON_AddNumberToObject(o, "flips_b", (double)v->flips_b);
        cJSON_AddNumberToObject(o, "flips_c", (double)v->flips_c);
        cJSON_AddNumberToObject(o, "flip_rate_low", v->flip_lo);
        cJSON_AddNumberToObject(o, "flip_rate_high", v->flip_hi);
    } else {
        cJSON_AddNumberToObject(o, "ppl_ratio", exp(v->delta));
        if (v->has_kld) {
            cJSON_AddNumberToObject(o, "kld_mean", v->kld_mean);
            if (v->kld_top_k > 0) cJSON_AddNumberToObject(o, "kld_top_k", v->kld_top_k);
            cJSON_AddNumberToObject(o, "kld_p99", v->kld_p99);
            cJSON_AddNumberToObject(o, "kld_max", v->kld_max);
            cJSON_AddNumberToObject(o, "same_top1", v->top1);
            cJSON_AddNumberToObject(o, "dp_mean", v->dp_mean);
        }
    }
    if (v->items_needed >= 0) cJSON_AddNumberToObject(o, "items_needed", (double)v->items_needed);
    if (v->design_effect > 1) cJSON_AddNumberToObject(o, "design_effect", v->design_effect);
    cJSON_AddStringToObject(o, "loss_verdict", verdict_name(v->loss_verdict));
    cJSON *gates = cJSON_AddArrayToObject(o, "gates");
    for (int i = 0; i < v->n_gates; i++) {
        const struct verdict_gate *g = &v->gates[i];
        cJSON *gj = cJSON_CreateObject();
        cJSON_AddStringToObject(gj, "gate", g->name);
        cJSON_AddStringToObject(gj, "bound", g->kind == VERDICT_GATE_MAX ? "max" : "min");
        cJSON_AddNumberToObject(gj, "value", g->value);
        cJSON_AddNumberToObject(gj, "ci_low", g->lo);
        cJSON_AddNumberToObject(gj, "ci_high", g->hi);
        cJSON_AddNumberToObject(gj, "limit", g->limit);
        cJSON_AddStringToObject(gj, "verdict", verdict_name(g->verdict));
        cJSON_AddItemToArray(gates, gj);
    }
    cJSON_AddBoolToObject(o, "critical", v->critical);
    cJSON_AddStringToObject(o, "verdict", verdict_name(v->verdict));
    cJSON_AddStringToObject(o, "reason", v->reason);
    return o;
}

cJSON *compare_policy_json(const struct verdict_policy *pol)
{
    cJSON *pj = cJSON_CreateObject();
    cJSON_AddNumberToObject(pj, "margin_ppl", pol->margin_ppl);
    cJSON_AddNumberToObject(pj, "margin_acc", pol->margin_acc);
    cJSON_AddNumberToObject(pj, "alpha", pol->alpha);
    cJSON_AddNumberToObject(pj, "beta", pol->beta);
    cJSON_AddNumberToObject(pj, "bootstrap", pol->bootstrap);
    cJSON_AddNumberToObject(pj, "margin_kld", pol->margin_kld);
    cJSON_AddNumberToObject(pj, "min_top1", pol->min_top1);
    cJSON_AddNumberToObject(pj, "max_flip_rate", pol->max_flip_rate);
    cJSON_AddStringToObject(pj, "metric", verdict_mc_metric_name(pol->mc_metric));
    cJSON_AddNumberToObject(pj, "cluster_corr", pol->cluster_corr);
    return pj;
}

static int save_rows(struct store *s, const struct compare_save *c, int64_t cid)
{
    int rc = QG_OK;
    for (int i = 0; i < c->n_tasks && !rc; i++) {
        const struct verdict_task *v = &c->tasks[i];
        struct store_verdict_row r = {.comparison_id = cid,
                                      .task_id = v->task_id,
                                      .metric = v->metric,
                                      .base_value = v->base_value,
                                      .cand_value = v->cand_value,
                                      .delta = v->delta,
                                      .ci_low = v->lo,
                                      .ci_high = v->hi,
                                      .margin = v->margin,
                                      .noise = v->noise,
                                      .p_value = v->p_value,
                                      .p_holm = v->p_holm,
                                      .mde = v->mde,
                                      .n_units = v->n_units,
                                      .flips_b = v->kind ? v->flips_b : -1,
                                      .flips_c = v->kind ? v->flips_c : -1,
                                      .items_needed = v->items_needed,
                                      .verdict = v->verdict,
                                      .reason = v->reason};
        rc = store_verdict_row_add(s, &r);
    }
    return rc;
}

int compare_save(struct store *s, const struct compare_save *c, int64_t *comparison_id)
{
    int64_t bm = 0, cm = 0, cid = 0;
    cJSON *pj = compare_policy_json(&c->params->policy);
    char *pjs = cJSON_PrintUnformatted(pj), *sjs = cJSON_PrintUnformatted(c->summary);
    cJSON_Delete(pj);
    int rc = !pjs || !sjs ? QG_ERR_NOMEM : store_model_find(s, c->run_id, c->baseline, &bm);
    if (!rc) rc = store_model_find(s, c->run_id, c->candidate, &cm);
    struct store_comparison_new cn = {.run_id = c->run_id,
                                      .baseline_model_id = bm,
                                      .candidate_model_id = cm,
                                      .command = c->command,
                                      .policy_json = pjs,
                                      .summary_json = sjs,
                                      .bootstrap_seed = (int64_t)c->params->seed,
                                      .bootstrap_iters = c->params->policy.bootstrap,
                                      .verdict = c->suite};
    if (c->reused) *c->reused = 0;
    if (!rc && (rc = store_comparison_find_same(s, &cn, &cid)) == QG_OK) { /* no copy */
        if (c->reused) *c->reused = 1;
        free(pjs);
        free(sjs);
        *comparison_id = cid;
        return QG_OK;
    }
    if (rc == QG_ERR_NOTFOUND) rc = QG_OK;
    if (!rc) rc = store_begin(s);
    if (!rc) {
        rc = store_comparison_add(s, &cn, &cid);
        if (!rc) rc = save_rows(s, c, cid);
        if (!rc)
            rc = store_commit(s);
        else
            store_rollback(s);
    }
    free(pjs);
    free(sjs);
    if (!rc) *comparison_id = cid;
    return rc;
}

/* One task's loss in words: "perplexity +5.3 % (90 % CI +4.9…+5.7 %)" or
 * "accuracy −1.2 points (90 % CI −2.0…−0.3)", named when the suite has
 * several tasks. */
/* x without a negative zero's sign once rounded */
static double unsigned_zero(double x)
{
    return fabs(x) < 0.005 ? 0.0 : x;
}

static void plain_task(const struct verdict_task *t, int named, struct sbuf *b)
{
    if (named) sbuf_printf(b, "%s: ", t->name);
    /* two decimals for changes under 1 (of a percent or a point) */
    if (t->kind == TASK_PERPLEXITY && !(isfinite(t->lo) && isfinite(t->hi))) {
        sbuf_printf(b, "perplexity %+.2f %% (not bounded: %lld windows)",
                    unsigned_zero(100 * expm1(t->delta)), (long long)t->n_units);
    } else if (t->kind == TASK_PERPLEXITY) {
        double d = unsigned_zero(100 * expm1(t->delta)), lo = unsigned_zero(100 * expm1(t->lo)),
               hi = unsigned_zero(100 * expm1(t->hi));
        int k = fabs(d) < 1 && fabs(lo) < 1 && fabs(hi) < 1 ? 2 : 1;
        sbuf_printf(b, "perplexity %+.*f %% (90 %% CI %+.*f\u2026%+.*f %%)", k, d, k, lo, k, hi);
    } else {
        double d = unsigned_zero(-100 * t->delta), lo = unsigned_zero(-100 * t->hi),
               hi = unsigned_zero(-100 * t->lo);
        int k = fabs(d) < 1 && fabs(lo) < 1 && fabs(hi) < 1 ? 2 : 1;
        sbuf_printf(b, "accuracy %+.*f points (90 %% CI %+.*f\u2026%+.*f)", k, d, k, lo, k, hi);
    }
}

/* the margin in the loss's own unit: "1 %" or "1 point" */
static void margin_text(const struct verdict_task *t, struct sbuf *b)
{
    double m = t->kind == TASK_PERPLEXITY ? 100 * expm1(t->margin) : 100 * t->margin;
    sbuf_printf(b, "%.3g %s", m,
                t->kind == TASK_PERPLEXITY ? "%"
                : fabs(m - 1) < 1e-9       ? "point"
                                           : "points");
}

/* One gate's figure against its limit, in words: "KLD 0.0493 beyond its
 * limit 0.02", "same top token 86.9 % below its 90 % limit", "flip rate
 * 4.1 %, its interval reaching its 5 % limit". */
static void gate_text(const struct verdict_task *t, const struct verdict_gate *x, struct sbuf *b)
{
    int fail = x->verdict == VERDICT_FAIL, top1 = !strcmp(x->name, "top1");
    if (top1)
        sbuf_printf(b, "same top token %.1f %%", 100 * x->value);
    else if (!strcmp(x->name, "kld"))
        sbuf_printf(b, "KLD %.3g%s", x->value, t->kld_top_k > 0 ? " (at least)" : "");
    else
        sbuf_printf(b, "flip rate %.1f %%", 100 * x->value);
    double lim = top1 || strcmp(x->name, "kld") ? 100 * x->limit : x->limit;
    const char *unit = top1 || strcmp(x->name, "kld") ? " %" : "";
    if (fail)
        sbuf_printf(b, " %s its %.3g%s limit", x->kind == VERDICT_GATE_MIN ? "below" : "beyond",
                    lim, unit);
    else
        sbuf_printf(b, ", its interval reaching its %.3g%s limit", lim, unit);
}

/* What decided a task that did not pass: the loss against the margin, and
 * every gate with the task's verdict. */
static void plain_decided(const struct verdict_task *t, struct sbuf *b)
{
    int shown_kld = 0;
    if (t->loss_verdict == t->verdict) {
        sbuf_printf(b,
                    t->verdict == VERDICT_FAIL ? " beyond the " : ", its interval reaching the ");
        margin_text(t, b);
        sbuf_printf(b, " margin");
    }
    for (int g = 0; g < t->n_gates; g++) {
        const struct verdict_gate *x = &t->gates[g];
        if (x->verdict != t->verdict) continue;
        sbuf_printf(b, ", ");
        gate_text(t, x, b);
        shown_kld |= !strcmp(x->name, "kld") || !strcmp(x->name, "top1");
    }
    if (t->has_kld && !shown_kld)
        sbuf_printf(b, "; KLD %.3g%s, same top token %.1f %%", t->kld_mean,
                    t->kld_top_k > 0 ? " (at least)" : "", 100 * t->top1);
}

/* the tasks of one verdict, "; "-separated, each named with its numbers */
static int plain_tasks(const struct verdict_task *v, int n, int critical, int verdict,
                       struct sbuf *b, int shown)
{
    for (int i = 0; i < n; i++) {
        if (v[i].critical != critical || v[i].verdict != verdict) continue;
        sbuf_printf(b, "%s", shown++ ? "; " : "");
        if (n > 1 && verdict == VERDICT_INCONCLUSIVE) /* beside failures: which is which */
            sbuf_printf(b, "%s (too small to tell): ", v[i].name);
        plain_task(&v[i], n > 1 && verdict != VERDICT_INCONCLUSIVE, b);
        plain_decided(&v[i], b);
    }
    return shown;
}

void compare_plain(const char *cand, const struct verdict_task *v, int n, int suite, struct sbuf *b)
{
    sbuf_printf(b, "%s: %s \u2014 ", cand, verdict_name(suite));
    int n_pass = 0, shown = 0;
    for (int i = 0; i < n; i++)
        n_pass += v[i].critical && v[i].verdict == VERDICT_PASS;
    shown = plain_tasks(v, n, 1, VERDICT_FAIL, b, shown);
    shown = plain_tasks(v, n, 1, VERDICT_INCONCLUSIVE, b, shown);
    if (!shown) { /* everything critical passed: the first task's figures */
        for (int i = 0; i < n && !shown; i++)
            if (v[i].critical || i == n - 1) {
                plain_task(&v[i], n > 1, b);
                if (v[i].has_kld)
                    sbuf_printf(b, ", KLD %.3g%s, same top token %.1f %%", v[i].kld_mean,
                                v[i].kld_top_k > 0 ? " (at least)" : "", 100 * v[i].top1);
                shown = 1;
            }
        if (n_pass > 1) sbuf_printf(b, "; all %d gating tasks pass", n_pass);
    } else if (n_pass) {
        sbuf_printf(b, "; %d other task%s pass%s", n_pass, n_pass > 1 ? "s" : "",
                    n_pass > 1 ? "" : "es");
    }
    int info = 0;
    for (int i = 0; i < n; i++)
        if (!v[i].critical && v[i].verdict != VERDICT_PASS)
            sbuf_printf(b, "%s%s %s", info++ ? ", " : "; not gating: ", v[i].name,
                        verdict_name(v[i].verdict));
}

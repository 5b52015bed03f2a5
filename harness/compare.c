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

/* The baseline's later repeats (1, 2, ... until one is missing or not done). */
struct repeats {
    struct item_row *rows[MAX_REPEATS];
    int64_t n[MAX_REPEATS];
    int count;
};

static void read_repeats(struct store *s, int64_t run, const char *base, int64_t task,
                         const char *tname, struct repeats *r)
{
    char ignored[QG_ERRMSG_MAX];
    memset(r, 0, sizeof *r);
    int64_t trial;
    while (r->count < MAX_REPEATS &&
           read_trial(s, run, base, task, r->count + 1, tname, &r->rows[r->count], &r->n[r->count],
                      &trial, ignored, sizeof ignored) == QG_OK)
        r->count++;
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
        cJSON_Delete(m);
    }
    free(mj);
}

static int compare_task(struct store *s, int64_t run, const char *base, const char *cand,
                        const cJSON *task, const struct verdict_params *p, struct verdict_task *v,
                        char *err, size_t errlen)
{
    const char *kind = json_str(task, "kind", "");
    struct verdict_input in = {.name = json_str(task, "name", ""),
                               .task_id = json_int(task, "id", 0)};
    in.kind = task_kind_from_name(kind);
    in.metric = in.kind == TASK_PERPLEXITY   ? VERDICT_METRIC_PPL
                : in.kind == TASK_GENERATION ? VERDICT_METRIC_EXACT_MATCH
                                             : VERDICT_METRIC_ACC;
    if (in.kind != TASK_PERPLEXITY && in.kind != TASK_GENERATION) in.kind = TASK_MULTIPLE_CHOICE;
    struct item_row *rb = NULL, *rc_ = NULL;
    int64_t tb, tc = 0;
    struct repeats reps = {0};
    int rc = read_trial(s, run, base, in.task_id, 0, in.name, &rb, &in.n_base, &tb, err, errlen);
    if (!rc)
        rc = read_trial(s, run, cand, in.task_id, 0, in.name, &rc_, &in.n_cand, &tc, err, errlen);
    if (!rc) {
        read_repeats(s, run, base, in.task_id, in.name, &reps);
        in.base = rb;
        in.cand = rc_;
        in.repeats = (const struct item_row *const *)reps.rows;
        in.n_repeat = reps.n;
        in.n_repeats = reps.count;
        rc = verdict_task_compute(&in, p, v, err, errlen);
    }
    if (!rc && in.metric == VERDICT_METRIC_PPL) read_kld(s, tc, v);
    free(rb);
    free(rc_);
    for (int r = 0; r < reps.count; r++)
        free(reps.rows[r]);
    return rc;
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
    cJSON *tl = cJSON_GetObjectItem(run, "tasks");
    int nt = cJSON_GetArraySize(tl);
    struct verdict_task *v = calloc((size_t)(nt ? nt : 1), sizeof *v);
    if (!v) rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nt && !rc; i++)
        rc = compare_task(s, run_id, baseline, candidate, cJSON_GetArrayItem(tl, i), p, &v[i], err,
                          errlen);
    cJSON_Delete(run);
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

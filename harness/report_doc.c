/* report_doc — the report document of a stored comparison, from the store. */
#include "harness/report_doc.h"
#include "core/json.h"
#include "core/status.h"
#include "core/utf8.h"
#include "core/util.h"
#include "metrics/verdict.h"
#include "reports/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add_str(cJSON *o, const char *k, const char *v)
{
    char *s = utf8_sanitize(v ? v : "");
    cJSON_AddStringToObject(o, k, s);
    free(s);
}

/* the metric value of a trial: ppl, else acc, else the first number */
static double trial_value(struct store *s, int64_t trial)
{
    char *mj = NULL;
    double v = NAN;
    if (store_trial_metrics(s, trial, &mj) == QG_OK && mj) {
        cJSON *m = cJSON_Parse(mj);
        v = json_num(m, "ppl", NAN);
        if (isnan(v)) v = json_num(m, "acc", NAN);
        const cJSON *c;
        if (isnan(v) && m)
            cJSON_ArrayForEach(c, m) if (cJSON_IsNumber(c) && isnan(v)) v = c->valuedouble;
        cJSON_Delete(m);
    }
    free(mj);
    return v;
}

static void add_repeats(struct store *s, int64_t run, const char *model, int64_t task, cJSON *arr)
{
    for (int r = 0; r < 64; r++) {
        int64_t t;
        int st;
        if (store_trial_find(s, run, model, task, r, &t, &st) != QG_OK) break;
        if (st == STORE_TRIAL_DONE)
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(trial_value(s, t)));
    }
}

/* one side of a flipped item: its answer as text */
static char *answer_text(struct store *s, int64_t trial, int64_t idx, char **prompt, char **id)
{
    char *pred, *ext, *extra;
    if (store_item_text(s, trial, idx, &pred, &ext, &extra) != QG_OK) return NULL;
    cJSON *x = extra ? cJSON_Parse(extra) : NULL;
    struct sbuf b;
    sbuf_init(&b, 1 << 16);
    const cJSON *ch = json_get(x, "choices");
    if (cJSON_IsArray(ch) && pred) { /* multiple choice: the chosen choice */
        int64_t k = -1;
        const cJSON *c = qg_parse_i64(pred, 0, 1 << 20, &k) ? NULL : cJSON_GetArrayItem(ch, (int)k);
        sbuf_printf(&b, "%s", cJSON_IsString(c) ? c->valuestring : pred);
    } else {
        sbuf_printf(&b, "%s%s%s", ext ? ext : "", ext && pred ? " <- " : "", pred ? pred : "");
    }
    if (prompt && !*prompt && x) *prompt = qg_strdup(json_str(x, "prompt", ""));
    if (id && !*id && x) *id = qg_strdup(json_str(x, "id", ""));
    cJSON_Delete(x);
    free(pred);
    free(ext);
    free(extra);
    return b.data ? b.data : qg_strdup("");
}

static void add_flips(struct store *s, int64_t run, const char *base, const char *cand,
                      int64_t task, cJSON *t)
{
    int64_t tb, tc;
    struct item_row *rb = NULL, *rc = NULL;
    int64_t nb = 0, nc = 0;
    if (store_trial_find(s, run, base, task, 0, &tb, NULL) ||
        store_trial_find(s, run, cand, task, 0, &tc, NULL))
        return;
    if (store_items_read(s, tb, &rb, &nb) || store_items_read(s, tc, &rc, &nc) || nb != nc) {
        free(rb);
        free(rc);
        return;
    }
    cJSON *arr = cJSON_AddArrayToObject(t, "flipped_items");
    int shown = 0;
    for (int64_t i = 0; i < nb && shown < REPORT_MAX_FLIPS; i++) {
        if (rb[i].correct < 0 || rb[i].correct == rc[i].correct) continue;
        char *prompt = NULL, *id = NULL;
        char *a = answer_text(s, tb, rb[i].idx, &prompt, &id),
             *b = answer_text(s, tc, rc[i].idx, &prompt, &id);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddNumberToObject(f, "index", (double)rb[i].idx);
        add_str(f, "id", id);
        add_str(f, "prompt", prompt);
        add_str(f, "baseline_answer", a);
        add_str(f, "candidate_answer", b);
        cJSON_AddBoolToObject(f, "baseline_correct", rb[i].correct);
        cJSON_AddBoolToObject(f, "candidate_correct", rc[i].correct);
        cJSON_AddItemToArray(arr, f);
        free(prompt);
        free(id);
        free(a);
        free(b);
        shown++;
    }
    free(rb);
    free(rc);
}

static void add_kld(struct store *s, int64_t run, const char *cand, int64_t task, cJSON *t)
{
    int64_t tc;
    char *mj = NULL;
    if (store_trial_find(s, run, cand, task, 0, &tc, NULL) || store_trial_metrics(s, tc, &mj) ||
        !mj)
        return;
    cJSON *m = cJSON_Parse(mj);
    free(mj);
    if (!m || isnan(json_num(m, "kld_mean", NAN))) {
        cJSON_Delete(m);
        return;
    }
    cJSON *k = cJSON_AddObjectToObject(t, "kld");
    static const char *keys[] = {"kld_mean", "kld_median", "kld_p90",    "kld_p99",
                                 "kld_p999", "kld_max",    "top1_agree", "dp_mean"};
    static const char *names[] = {"mean",  "median", "p90",       "p99",
                                  "p99.9", "max",    "same_top1", "dp_mean"};
    for (int i = 0; i < 8; i++)
        if (!isnan(json_num(m, keys[i], NAN)))
            cJSON_AddNumberToObject(k, names[i], json_num(m, keys[i], NAN));
    /* from the candidate's top-K log-probs (a remote model): a lower bound */
    if (!isnan(json_num(m, "kld_top_k", NAN)))
        cJSON_AddNumberToObject(k, "top_k", json_num(m, "kld_top_k", NAN));
    cJSON_Delete(m);
}

/* 1 when name is the run's first model (its baseline, which lockstep KLD
 * is computed against) */
static int is_first_model(const cJSON *run, const char *name)
{
    const cJSON *m = cJSON_GetArrayItem(json_get(run, "models"), 0);
    return m && !strcmp(json_str(m, "name", ""), name);
}

/* The simulated format of a local model spec (its "?query"), or NULL. */
static const char *simulated(const char *spec)
{
    const char *q = strstr(spec, "://") ? NULL : strchr(spec, '?');
    return q && q[1] ? q + 1 : NULL;
}

/* "w=nvfp4" when model name of run is simulated, else NULL. */
static const char *model_simulated(const cJSON *run, const char *name)
{
    const cJSON *m;
    cJSON_ArrayForEach(
        m, json_get(run, "models")) if (!strcmp(json_str(m, "name", ""),
                                                name)) return simulated(json_str(m, "spec", ""));
    return NULL;
}

static cJSON *provenance(const cJSON *run)
{
    cJSON *p = cJSON_CreateObject();
    static const char *keys[] = {"command",    "host",        "kernels",
                                 "created_at", "finished_at", "qgate_version",
                                 "suite_name", "suite_hash",  "uid"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        add_str(p, keys[i], json_str(run, keys[i], ""));
    cJSON_AddNumberToObject(p, "seed", json_num(run, "seed", NAN));
    cJSON_AddNumberToObject(p, "repeats", json_num(run, "repeats", NAN));
    cJSON *models = cJSON_AddArrayToObject(p, "models");
    const cJSON *m;
    cJSON_ArrayForEach(m, json_get(run, "models"))
    {
        cJSON *o = cJSON_CreateObject();
        add_str(o, "name", json_str(m, "name", ""));
        add_str(o, "path", json_str(m, "path", ""));
        const char *sim = simulated(json_str(m, "spec", ""));
        if (sim) add_str(o, "simulated", sim); /* a format simulated on the file's weights */
        add_str(o, "sha256", json_str(m, "sha256", ""));
        add_str(o, "arch", json_str(m, "arch", ""));
        cJSON_AddNumberToObject(o, "parameters", json_num(m, "n_params", NAN));
        cJSON *types = cJSON_Parse(json_str(m, "types_json", ""));
        cJSON_AddItemToObject(o, "stored_types", types ? types : cJSON_CreateArray());
        cJSON *remote = cJSON_Parse(json_str(m, "provenance_json", ""));
        if (remote) cJSON_AddItemToObject(o, "remote", remote); /* what open detected */
        cJSON_AddItemToArray(models, o);
    }
    cJSON *tasks = cJSON_AddArrayToObject(p, "tasks");
    cJSON_ArrayForEach(m, json_get(run, "tasks"))
    {
        cJSON *o = cJSON_CreateObject();
        add_str(o, "name", json_str(m, "name", ""));
        add_str(o, "kind", json_str(m, "kind", ""));
        add_str(o, "config_sha256", json_str(m, "config_hash", ""));
        add_str(o, "datasets", json_str(m, "datasets", ""));
        cJSON_AddItemToArray(tasks, o);
    }
    return p;
}

int report_doc_build(struct store *s, int64_t comparison_id, cJSON **doc, char *err, size_t errlen)
{
    *doc = NULL;
    int64_t cid, run_id;
    char *sj, *created;
    int rc = store_comparison_get(s, comparison_id, &cid, &run_id, &sj, &created);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    cJSON *sum = sj ? cJSON_Parse(sj) : NULL;
    free(sj);
    if (!sum)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "comparison %lld has no readable summary",
                     (long long)cid);
    if (!rc) rc = report_doc_from_summary(s, cid, run_id, sum, created, doc, err, errlen);
    cJSON_Delete(sum);
    free(created);
    return rc;
}

int report_doc_from_summary(struct store *s, int64_t cid, int64_t run_id, const cJSON *sum,
                            const char *created, cJSON **doc, char *err, size_t errlen)
{
    *doc = NULL;
    cJSON *run = NULL;
    int rc = store_run_json(s, run_id, &run);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    const char *base = json_str(sum, "baseline", ""), *cand = json_str(sum, "candidate", "");
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "schema", REPORT_SCHEMA);
    char now[32];
    qg_utc_now(now);
    cJSON_AddStringToObject(d, "generated_at", now);
    cJSON_AddStringToObject(d, "qgate_version", QG_VERSION);
    add_str(d, "verdict", json_str(sum, "verdict", ""));
    if (json_get(sum, "summary")) add_str(d, "summary", json_str(sum, "summary", ""));
    cJSON *c = cJSON_AddObjectToObject(d, "comparison");
    if (cid > 0) cJSON_AddNumberToObject(c, "id", (double)cid); /* 0: computed, not stored */
    cJSON_AddNumberToObject(c, "run", (double)run_id);
    add_str(c, "created_at", created ? created : now);
    add_str(c, "baseline", base);
    add_str(c, "candidate", cand);
    const char *sb = model_simulated(run, base), *sc = model_simulated(run, cand);
    if (sb) add_str(c, "baseline_simulated", sb);
    if (sc) add_str(c, "candidate_simulated", sc);
    cJSON_AddNumberToObject(c, "bootstrap_seed", json_num(sum, "bootstrap_seed", NAN));
    cJSON_AddItemToObject(c, "policy", cJSON_Duplicate(json_get(sum, "policy"), 1));
    cJSON *tasks = cJSON_AddArrayToObject(d, "tasks");
    const cJSON *t;
    cJSON_ArrayForEach(t, json_get(sum, "tasks"))
    {
        cJSON *o = cJSON_Duplicate(t, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "task");
        add_str(o, "task", json_str(t, "task", ""));
        cJSON_DeleteItemFromObjectCaseSensitive(o, "reason");
        add_str(o, "reason", json_str(t, "reason", ""));
        int64_t task_id = -1;
        const cJSON *rt;
        const char *kind = "";
        cJSON_ArrayForEach(rt, json_get(run, "tasks")) if (!strcmp(json_str(rt, "name", ""),
                                                                   json_str(t, "task", "")))
        {
            task_id = (int64_t)json_num(rt, "id", NAN);
            kind = json_str(rt, "kind", "");
        }
        add_str(o, "kind", kind);
        if (task_id > 0) {
            cJSON *reps = cJSON_AddObjectToObject(o, "repeats");
            add_repeats(s, run_id, base, task_id, cJSON_AddArrayToObject(reps, "baseline"));
            add_repeats(s, run_id, cand, task_id, cJSON_AddArrayToObject(reps, "candidate"));
            if (!strcmp(kind, "perplexity") && is_first_model(run, base))
                add_kld(s, run_id, cand, task_id, o); /* KLD is against the run's first model */
            else
                add_flips(s, run_id, base, cand, task_id, o);
        }
        cJSON_AddItemToArray(tasks, o);
    }
    cJSON_AddItemToObject(d, "provenance", provenance(run));
    cJSON_Delete(run);
    *doc = d;
    return QG_OK;
}

/* bits per weight of a stored model: its tensors' bytes over its parameters */
static double bits_per_weight(const cJSON *m)
{
    cJSON *types = cJSON_Parse(json_str(m, "types_json", ""));
    double bytes = 0, n = json_num(m, "n_params", NAN);
    const cJSON *t;
    cJSON_ArrayForEach(t, types) bytes += json_num(t, "bytes", 0);
    cJSON_Delete(types);
    return n > 0 && bytes > 0 ? 8 * bytes / n : NAN;
}

/* tokens per second of a model's repeat-0 trials: those that ran alone by
 * their wall time, lockstep perplexity trials (one clock for all models) by
 * the model's own scoring time (eval_seconds) */
static double tokens_per_second(const cJSON *run, const char *model)
{
    double tok = 0, secs = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, json_get(run, "trials"))
    {
        if (strcmp(json_str(t, "model", ""), model) || json_num(t, "repeat", 1) != 0) continue;
        const char *kind = "";
        const cJSON *k;
        cJSON_ArrayForEach(k, json_get(run, "tasks")) if (!strcmp(json_str(k, "name", ""),
                                                                  json_str(t, "task", ""))) kind =
            json_str(k, "kind", "");
        if (!strcmp(kind, "perplexity")) {
            cJSON *mj = cJSON_Parse(json_str(t, "metrics_json", "{}"));
            double es = json_num(mj, "eval_seconds", 0);
            if (es > 0) tok += json_num(mj, "tokens_scored", 0), secs += es;
            cJSON_Delete(mj);
            continue;
        }
        tok += json_num(t, "n_tokens", 0);
        secs += json_num(t, "wall_seconds", 0);
    }
    return secs > 0 && tok > 0 ? tok / secs : NAN;
}

static cJSON *set_candidate(const cJSON *run, cJSON *one)
{
    const cJSON *c = json_get(one, "comparison");
    const char *name = json_str(c, "candidate", "");
    cJSON *o = cJSON_CreateObject();
    add_str(o, "name", name);
    add_str(o, "verdict", json_str(one, "verdict", ""));
    add_str(o, "summary", json_str(one, "summary", ""));
    const cJSON *m;
    cJSON_ArrayForEach(m, json_get(run, "models")) if (!strcmp(json_str(m, "name", ""), name))
    {
        if (json_num(m, "file_bytes", -1) > 0)
            cJSON_AddNumberToObject(o, "file_bytes", json_num(m, "file_bytes", 0));
        double bpw = bits_per_weight(m);
        if (!isnan(bpw)) cJSON_AddNumberToObject(o, "bits_per_weight", bpw);
    }
    double tps = tokens_per_second(run, name);
    if (!isnan(tps)) cJSON_AddNumberToObject(o, "tokens_per_second", tps);
    cJSON_AddItemToObject(o, "report", one);
    return o;
}

int report_doc_build_set(struct store *s, const int64_t *ids, int n, cJSON **doc, char *err,
                         size_t errlen)
{
    *doc = NULL;
    cJSON *d = cJSON_CreateObject(), *run = NULL;
    cJSON_AddStringToObject(d, "schema", REPORT_SET_SCHEMA);
    char now[32];
    qg_utc_now(now);
    cJSON_AddStringToObject(d, "generated_at", now);
    cJSON_AddStringToObject(d, "qgate_version", QG_VERSION);
    cJSON *cands = cJSON_AddArrayToObject(d, "candidates");
    int rc = QG_OK, n_verdicts = 0, *verdicts = malloc((size_t)(n > 0 ? n : 1) * sizeof *verdicts);
    if (!verdicts) rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    double best_bytes = INFINITY;
    const char *smallest = NULL;
    for (int i = 0; i < n && !rc; i++) {
        cJSON *one;
        if ((rc = report_doc_build(s, ids[i], &one, err, errlen))) break;
        const cJSON *c = json_get(one, "comparison");
        if (!run) {
            add_str(d, "baseline", json_str(c, "baseline", ""));
            cJSON_AddNumberToObject(d, "run", json_num(c, "run", NAN));
            if ((rc = store_run_json(s, (int64_t)json_num(c, "run", 0), &run)))
                qg_errf(err, errlen, rc, "%s", store_errmsg(s));
        }
        cJSON *o = set_candidate(run, one);
        cJSON_AddItemToArray(cands, o);
        int code = verdict_from_name(json_str(o, "verdict", ""));
        verdicts[n_verdicts++] = code < 0 ? VERDICT_INCONCLUSIVE : code;
        double bytes = json_num(o, "file_bytes", NAN);
        if (code == VERDICT_PASS && !isnan(bytes) && bytes < best_bytes) {
            best_bytes = bytes;
            smallest = json_str(o, "name", "");
        }
    }
    cJSON_AddStringToObject(d, "verdict", verdict_name(verdict_combine(verdicts, n_verdicts)));
    free(verdicts);
    if (smallest) add_str(d, "smallest_passing", smallest);
    if (!rc && run) cJSON_AddItemToObject(d, "provenance", provenance(run));
    cJSON_Delete(run);
    if (rc) {
        cJSON_Delete(d);
        return rc;
    }
    *doc = d;
    return QG_OK;
}

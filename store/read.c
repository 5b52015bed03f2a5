/* read — listings as JSON, look-ups, and items read back as rows. */
#include "store/store.h"
#include "store/store_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "metrics/rows.h"
#include "metrics/verdict.h"
#include <math.h>

/* Replaces integer field `key` of every object with the name from fn. */
static void name_enum(cJSON *arr, const char *key, const char *(*fn)(int))
{
    cJSON *row;
    cJSON_ArrayForEach(row, arr)
    {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);
        if (cJSON_IsNumber(v) &&
            fabs(v->valuedouble) < 1e6) /* a status code; a file's odd value stays a number */
            cJSON_ReplaceItemInObjectCaseSensitive(row, key,
                                                   cJSON_CreateString(fn((int)v->valuedouble)));
    }
}

int store_runs_json(struct store *s, int64_t limit, cJSON **out)
{
    int rc =
        sq_query_rows(s,
                      "SELECT r.id, r.uid, r.created_at, r.finished_at, r.status, r.command, "
                      "r.suite_name AS suite, r.qgate_version, "
                      "(SELECT group_concat(name, ',') FROM (SELECT name FROM models m "
                      " WHERE m.run_id=r.id ORDER BY m.id)) AS models, "
                      "(SELECT count(*) FROM tasks t WHERE t.run_id=r.id) AS tasks, "
                      "(SELECT count(*) FROM trials t WHERE t.run_id=r.id) AS trials, "
                      "(SELECT count(*) FROM trials t WHERE t.run_id=r.id AND t.status=2) "
                      "AS trials_done, "
                      /* the newest verdict of each candidate compared in the run */
                      "(SELECT group_concat(v, ', ') FROM (SELECT m.name || ' ' || "
                      " coalesce((SELECT name FROM verdict_names WHERE code = c.verdict), "
                      " 'INCONCLUSIVE') AS v FROM comparisons c JOIN models m "
                      " ON m.id=c.candidate_model_id WHERE c.run_id=r.id AND c.id=(SELECT "
                      " max(c2.id) FROM comparisons c2 WHERE c2.run_id=r.id AND "
                      " c2.candidate_model_id=c.candidate_model_id) ORDER BY m.id)) AS verdicts "
                      "FROM runs r ORDER BY r.id DESC LIMIT ?",
                      limit > 0 ? limit : -1, 1, out);
    if (!rc) name_enum(*out, "status", store_run_status_name);
    return rc;
}

int store_run_json(struct store *s, int64_t run_id, cJSON **out)
{
    *out = NULL;
    cJSON *runs = NULL, *models = NULL, *tasks = NULL, *trials = NULL;
    int rc = sq_query_rows(s, "SELECT * FROM runs WHERE id=?", run_id, 1, &runs);
    if (!rc && cJSON_GetArraySize(runs) == 0)
        rc = qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND, "%s: no run %lld (see 'qgate runs')",
                     s->path, (long long)run_id);
    if (!rc)
        rc =
            sq_query_rows(s,
                          "SELECT id, name, spec, backend, path, sha256, file_bytes, format, arch, "
                          "n_params, types_json, role, provenance_json FROM models WHERE run_id=? "
                          "ORDER BY id",
                          run_id, 1, &models);
    if (!rc)
        rc = sq_query_rows(
            s,
            "SELECT t.id, t.name, t.kind, t.config_hash, t.n_items, t.critical, "
            "(SELECT group_concat(d.path || ' ' || d.sha256, '; ') FROM task_datasets "
            " td JOIN datasets d ON d.id=td.dataset_id WHERE td.task_id=t.id) "
            "AS datasets FROM tasks t WHERE run_id=? ORDER BY id",
            run_id, 1, &tasks);
    if (!rc)
        rc = sq_query_rows(s,
                           "SELECT tr.id, m.name AS model, t.name AS task, tr.repeat, tr.seed, "
                           "tr.status, tr.deterministic, tr.started_at, tr.finished_at, "
                           "tr.wall_seconds, tr.n_items, tr.n_tokens, tr.error, tr.metrics_json, "
                           "(SELECT count(*) FROM items i WHERE i.trial_id=tr.id) AS items_stored "
                           "FROM trials tr JOIN models m ON m.id=tr.model_id "
                           "JOIN tasks t ON t.id=tr.task_id WHERE tr.run_id=? "
                           "ORDER BY t.id, m.id, tr.repeat",
                           run_id, 1, &trials);
    if (rc) {
        cJSON_Delete(runs);
        cJSON_Delete(models);
        cJSON_Delete(tasks);
        cJSON_Delete(trials);
        return rc;
    }
    cJSON *run = cJSON_DetachItemFromArray(runs, 0);
    cJSON_Delete(runs);
    cJSON *st = cJSON_GetObjectItemCaseSensitive(run, "status");
    if (cJSON_IsNumber(st) && fabs(st->valuedouble) < 1e6)
        cJSON_ReplaceItemInObjectCaseSensitive(
            run, "status", cJSON_CreateString(store_run_status_name((int)st->valuedouble)));
    name_enum(tasks, "kind", task_kind_name);
    name_enum(trials, "status", store_trial_status_name);
    cJSON_DeleteItemFromObjectCaseSensitive(run, "suite_json");
    cJSON_AddItemToObject(run, "models", models);
    cJSON_AddItemToObject(run, "tasks", tasks);
    cJSON_AddItemToObject(run, "trials", trials);
    *out = run;
    return QG_OK;
}

int store_run_latest(struct store *s, int64_t *run_id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "SELECT id FROM runs ORDER BY id DESC LIMIT 1", &st);
    if (rc) return rc;
    rc = sq_one_int64(s, st, "finding the latest run", run_id);
    if (rc == QG_ERR_NOTFOUND) qg_errf(s->err, sizeof s->err, rc, "%s: no runs", s->path);
    return rc;
}

int store_model_find(struct store *s, int64_t run_id, const char *name, int64_t *model_id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "SELECT id FROM models WHERE run_id=? AND name=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sq_bind_text(st, 2, name);
    rc = sq_one_int64(s, st, "finding a model", model_id);
    if (rc == QG_ERR_NOTFOUND)
        qg_errf(s->err, sizeof s->err, rc, "%s: run %lld has no model '%s' (see 'qgate show %lld')",
                s->path, (long long)run_id, name, (long long)run_id);
    return rc;
}

int store_trial_find(struct store *s, int64_t run_id, const char *model, int64_t task_id,
                     int repeat, int64_t *trial_id, int *status)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "SELECT tr.id, tr.status FROM trials tr JOIN models m ON m.id=tr.model_id "
                        "WHERE tr.run_id=? AND m.name=? AND tr.task_id=? AND tr.repeat=?",
                        &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sq_bind_text(st, 2, model);
    sqlite3_bind_int64(st, 3, task_id);
    sqlite3_bind_int(st, 4, repeat);
    int out = sq_step_row(s, st, "finding a trial");
    if (!out) {
        *trial_id = sqlite3_column_int64(st, 0);
        if (status) *status = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    return out;
}

int store_items_read(struct store *s, int64_t trial_id, struct item_row **rows, int64_t *n)
{
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "SELECT idx, cluster, n_tokens, nll, score, kld_sum, top1_agree, dp_sum, "
                        "correct, output_hash "
                        "FROM items WHERE trial_id=? ORDER BY idx",
                        &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    int64_t cap = 0;
    struct item_row *v = NULL;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            struct item_row *p = realloc(v, (size_t)cap * sizeof *p);
            if (!p) {
                free(v);
                sqlite3_finalize(st);
                return qg_errf(s->err, sizeof s->err, QG_ERR_NOMEM, "out of memory reading items");
            }
            v = p;
        }
        struct item_row *r = &v[(*n)++];
        r->idx = sqlite3_column_int64(st, 0);
        r->cluster = sqlite3_column_type(st, 1) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 1);
        r->n_tokens = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 2);
        r->nll = sq_col_f64(st, 3);
        r->score = sq_col_f64(st, 4);
        r->kld_sum = sq_col_f64(st, 5);
        r->top1_agree = sq_col_f64(st, 6);
        r->dp_sum = sq_col_f64(st, 7);
        r->correct = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 8);
        const char *h = (const char *)sqlite3_column_text(st, 9);
        snprintf(r->output_hash, sizeof r->output_hash, "%s", h ? h : "");
    }
    int out = rc == SQLITE_DONE ? QG_OK : sq_fail(s, "reading items");
    sqlite3_finalize(st);
    if (out) {
        free(v);
        *n = 0;
        return out;
    }
    *rows = v;
    return QG_OK;
}

int store_items_extract(struct store *s, int64_t trial_id, const char *path, double **values,
                        int64_t *n)
{
    *values = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = sq_prepare(
        s, "SELECT json_extract(extra_json, ?) FROM items WHERE trial_id=? ORDER BY idx", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, trial_id);
    int64_t cap = 0;
    double *v = NULL;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            double *p = realloc(v, (size_t)cap * sizeof *p);
            if (!p) {
                free(v);
                sqlite3_finalize(st);
                return qg_errf(s->err, sizeof s->err, QG_ERR_NOMEM, "out of memory reading items");
            }
            v = p;
        }
        v[(*n)++] = sq_col_f64(st, 0);
    }
    int out = rc == SQLITE_DONE ? QG_OK : sq_fail(s, "reading items");
    sqlite3_finalize(st);
    if (out) {
        free(v);
        *n = 0;
        return out;
    }
    *values = v;
    return QG_OK;
}

/* The text column a one-parameter query returns (malloc'd into *out; NULL
 * when the column is NULL), QG_ERR_NOTFOUND without a row. */
static int text_by_id(struct store *s, const char *sql, int64_t id, const char *what, char **out)
{
    *out = NULL;
    sqlite3_stmt *st;
    int rc = sq_prepare(s, sql, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, id);
    rc = sq_step_row(s, st, what);
    if (!rc && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *out = qg_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return rc;
}

int store_trial_metrics(struct store *s, int64_t trial_id, char **json)
{
    return text_by_id(s, "SELECT metrics_json FROM trials WHERE id=?", trial_id, "reading a trial",
                      json);
}

int store_run_suite_json(struct store *s, int64_t run_id, char **json)
{
    return text_by_id(s, "SELECT suite_json FROM runs WHERE id=?", run_id, "reading a run", json);
}

int store_comparison_get(struct store *s, int64_t id, int64_t *found_id, int64_t *run_id,
                         char **summary_json, char **created_at)
{
    *summary_json = NULL;
    if (created_at) *created_at = NULL;
    sqlite3_stmt *st;
    int rc = sq_prepare(
        s,
        id > 0 ? "SELECT id, run_id, summary_json, created_at FROM comparisons WHERE id=?"
               : "SELECT id, run_id, summary_json, created_at FROM comparisons ORDER BY id "
                 "DESC LIMIT 1",
        &st);
    if (rc) return rc;
    if (id > 0) sqlite3_bind_int64(st, 1, id);
    int out = sq_step_row(s, st, "reading a comparison");
    if (out == QG_ERR_NOTFOUND)
        qg_errf(s->err, sizeof s->err, out,
                id > 0 ? "%s: no comparison %lld (see 'qgate compare')"
                       : "%s: no comparisons yet (run 'qgate compare')",
                s->path, (long long)id);
    if (!out) {
        *found_id = sqlite3_column_int64(st, 0);
        *run_id = sqlite3_column_int64(st, 1);
        *summary_json = sq_col_dup(st, 2);
        if (created_at) *created_at = sq_col_dup(st, 3);
    }
    sqlite3_finalize(st);
    return out;
}

int store_item_text(struct store *s, int64_t trial_id, int64_t idx, char **prediction,
                    char **extracted, char **extra_json)
{
    *prediction = *extracted = *extra_json = NULL;
    sqlite3_stmt *st;
    int rc = sq_prepare(
        s, "SELECT prediction, extracted, extra_json FROM items WHERE trial_id=? AND idx=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    sqlite3_bind_int64(st, 2, idx);
    int out = sq_step_row(s, st, "reading an item");
    if (!out) {
        *prediction = sq_col_dup(st, 0);
        *extracted = sq_col_dup(st, 1);
        *extra_json = sq_col_dup(st, 2);
    }
    sqlite3_finalize(st);
    return out;
}

int store_comparisons_json(struct store *s, int64_t run_id, int64_t limit, cJSON **out)
{
    cJSON *arr;
    int rc = sq_query_rows(s,
                           "SELECT c.id, c.run_id AS run, b.name AS baseline, m.name AS candidate, "
                           "c.verdict, c.created_at, c.command FROM comparisons c "
                           "JOIN models b ON b.id=c.baseline_model_id "
                           "JOIN models m ON m.id=c.candidate_model_id "
                           "WHERE ?1 <= 0 OR c.run_id = ?1 ORDER BY c.id DESC",
                           run_id, 1, &arr);
    if (rc) return rc;
    while (limit > 0 && cJSON_GetArraySize(arr) > limit) /* the newest `limit` */
        cJSON_DeleteItemFromArray(arr, cJSON_GetArraySize(arr) - 1);
    name_enum(arr, "verdict", verdict_name);
    *out = arr;
    return QG_OK;
}

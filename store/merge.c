/* merge — shards of one run merged into one database, and a stored
 * baseline's trials copied into a new run. */
#include "store/store.h"
#include "store/store_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

struct shard_info {
    int64_t run, seed, repeats, index, count, status;
    char suite_hash[72], models[2048], tasks[8192]; /* tasks: name=config_hash, ... */
};

static int shard_read(struct store *s, const char *path, struct shard_info *si)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(
        s,
        "SELECT count(*), max(id), max(seed), max(repeats), max(shard_index), max(shard_count), "
        "max(suite_hash), (SELECT group_concat(name || '=' || coalesce(sha256, path), ',') FROM "
        "(SELECT name, sha256, path FROM src.models ORDER BY id)), (SELECT group_concat(name || "
        "'=' || config_hash, ',') FROM (SELECT name, config_hash FROM src.tasks ORDER BY id)), "
        "max(status) FROM src.runs",
        &st);
    if (rc) return rc;
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW ? QG_OK : sq_fail(s, "reading a shard");
    if (!out && sqlite3_column_int64(st, 0) != 1)
        out = qg_errf(s->err, sizeof s->err, QG_ERR_DATA,
                      "%s: holds %lld runs; merge takes one run (made with --shard) per file", path,
                      (long long)sqlite3_column_int64(st, 0));
    if (!out) {
        si->run = sqlite3_column_int64(st, 1);
        si->seed = sqlite3_column_int64(st, 2);
        si->repeats = sqlite3_column_int64(st, 3);
        si->index = sqlite3_column_int64(st, 4);
        si->count = sqlite3_column_int64(st, 5);
        snprintf(si->suite_hash, sizeof si->suite_hash, "%s",
                 (const char *)sqlite3_column_text(st, 6) ? (const char *)sqlite3_column_text(st, 6)
                                                          : "");
        snprintf(si->models, sizeof si->models, "%s",
                 (const char *)sqlite3_column_text(st, 7) ? (const char *)sqlite3_column_text(st, 7)
                                                          : "");
        si->status = sqlite3_column_int64(st, 9);
        snprintf(si->tasks, sizeof si->tasks, "%s",
                 (const char *)sqlite3_column_text(st, 8) ? (const char *)sqlite3_column_text(st, 8)
                                                          : "");
    }
    sqlite3_finalize(st);
    return out;
}

static int attach(struct store *s, const char *path)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "ATTACH DATABASE ? AS src", &st);
    if (rc) return rc;
    sq_bind_text(st, 1, path);
    return sq_step_done(s, st, "attaching a shard", 0, NULL);
}

static void detach(struct store *s)
{
    sqlite3_exec(s->db, "DETACH DATABASE src", NULL, NULL, NULL);
}

/* Reads every shard's description and checks that together they are the
 * shards of one run, each exactly once. */
static int merge_validate(struct store *s, const char *const *inputs, int n, struct shard_info *si)
{
    int rc = QG_OK;
    for (int i = 0; i < n && !rc; i++) {
        char e[QG_ERRMSG_MAX];
        struct store *chk; /* validates: a qgate store, this schema, not corrupt */
        struct store_params p = store_default_params();
        p.readonly = 1;
        if ((rc = store_open(inputs[i], &p, &chk, e, sizeof e)))
            return qg_errf(s->err, sizeof s->err, rc, "%s", e);
        store_close(chk);
        if ((rc = attach(s, inputs[i]))) break;
        rc = shard_read(s, inputs[i], &si[i]);
        detach(s);
    }
    for (int i = 0; i < n && !rc; i++) {
        if (si[i].count != si[0].count || strcmp(si[i].suite_hash, si[0].suite_hash) ||
            strcmp(si[i].models, si[0].models) || si[i].seed != si[0].seed ||
            si[i].repeats != si[0].repeats)
            rc = qg_errf(s->err, sizeof s->err, QG_ERR_DATA,
                         "%s: not a shard of the same run as %s (suite, models, seed, "
                         "repeats or shard count differ)",
                         inputs[i], inputs[0]);
        else if (si[i].status != STORE_RUN_DONE)
            /* merged, its missing rows could never be filled: finish it first */
            rc = qg_errf(s->err, sizeof s->err, QG_ERR_DATA,
                         "%s: shard %lld/%lld is %s, not done: finish it first (qgate run "
                         "--resume %lld --shard %lld/%lld --db %s, with the same suite and "
                         "models) and merge again",
                         inputs[i], (long long)si[i].index + 1, (long long)si[i].count,
                         store_run_status_name((int)si[i].status), (long long)si[i].run,
                         (long long)si[i].index + 1, (long long)si[i].count, inputs[i]);
        else if (strcmp(si[i].tasks, si[0].tasks))
            rc = qg_errf(s->err, sizeof s->err, QG_ERR_DATA,
                         "%s: its tasks were run with other settings than %s's (another --limit, "
                         "items, chunks or task list): shards of one run measure one item set",
                         inputs[i], inputs[0]);
        for (int j = 0; j < i && !rc; j++)
            if (si[j].index == si[i].index)
                rc = qg_errf(s->err, sizeof s->err, QG_ERR_DATA,
                             "%s and %s are both shard %lld/%lld", inputs[j], inputs[i],
                             (long long)si[i].index + 1, (long long)si[i].count);
    }
    if (!rc && si[0].count != n)
        rc = qg_errf(s->err, sizeof s->err, QG_ERR_DATA,
                     "the run has %lld shards but %d files were given", (long long)si[0].count, n);
    return rc;
}

/* The new run from shard 0's file (attached as src): the run, its models,
 * tasks, datasets and trials (each trial not yet counted), one transaction. */
/* shards computed on other CPUs: the merged run names every kernel set its
 * numbers came from (store_run_add_kernels); a shard from before schema v4
 * recorded none */
static int merge_note_kernels(struct store *s, int64_t run_id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "SELECT (SELECT count(*) FROM pragma_table_info('runs', 'src') WHERE name "
                        "= 'kernels')",
                        &st);
    int64_t has = 0;
    if (!rc) rc = sq_one_int64(s, st, "reading a shard's columns", &has);
    if (rc || !has) return rc;
    if ((rc = sq_prepare(s, "SELECT max(kernels) FROM src.runs", &st))) return rc;
    char *k = sqlite3_step(st) == SQLITE_ROW ? sq_col_dup(st, 0) : NULL;
    sqlite3_finalize(st);
    rc = k ? store_run_add_kernels(s, run_id, k) : QG_OK;
    free(k);
    return rc;
}

static int merge_copy_run(struct store *s, int64_t *run_id)
{
    int rc = store_begin(s);
    char uid[33];
    sq_random_uid(uid);
    sqlite3_stmt *st = NULL;
    if (!rc)
        rc = sq_prepare(
            s,
            "INSERT INTO runs(uid, created_at, finished_at, status, command, "
            "qgate_version, host, suite_name, "
            "suite_hash, suite_json, seed, repeats, shard_index, shard_count) "
            "SELECT ?1, created_at, NULL, "
            "?2, command, qgate_version, host, suite_name, suite_hash, suite_json, seed, "
            "repeats, 0, 1 "
            "FROM src.runs",
            &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, uid, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 2, STORE_RUN_RUNNING);
        rc = sq_step_done(s, st, "merging the run", 0, run_id);
    }
    int64_t R = *run_id;
    if (!rc && sq_exec3(s, /* a shard from before schema v6 has no provenance: without it */
                        "INSERT INTO models(run_id, name, spec, backend, path, sha256, file_bytes, "
                        "format, arch, n_params, types_json, role, provenance_json) SELECT ?, "
                        "name, spec, backend, path, sha256, file_bytes, format, arch, n_params, "
                        "types_json, role, provenance_json FROM src.models ORDER BY id",
                        1, R, 0, 0, "merging models") != QG_OK)
        rc = sq_exec3(s,
                      "INSERT INTO models(run_id, name, spec, backend, path, sha256, file_bytes, "
                      "format, arch, n_params, "
                      "types_json, role) SELECT ?, name, spec, backend, path, sha256, file_bytes, "
                      "format, arch, n_params, "
                      "types_json, role FROM src.models ORDER BY id",
                      1, R, 0, 0, "merging models");
    if (!rc)
        rc =
            sq_exec3(s,
                     "INSERT INTO tasks(run_id, name, kind, config_json, config_hash, n_items, "
                     "critical) SELECT ?, name, "
                     "kind, config_json, config_hash, n_items, critical FROM src.tasks ORDER BY id",
                     1, R, 0, 0, "merging tasks");
    if (!rc)
        rc = sq_exec3(
            s,
            "INSERT OR IGNORE INTO datasets(path, sha256, bytes) SELECT path, sha256, bytes "
            "FROM src.datasets",
            0, 0, 0, 0, "merging datasets");
    if (!rc)
        rc = sq_exec3(
            s,
            "INSERT OR IGNORE INTO task_datasets(task_id, dataset_id, role) SELECT t.id, "
            "d.id, td.role FROM "
            "src.task_datasets td JOIN src.tasks st ON st.id=td.task_id JOIN tasks t ON "
            "t.run_id=? AND t.name=st.name "
            "JOIN src.datasets sd ON sd.id=td.dataset_id JOIN datasets d ON d.path=sd.path "
            "AND d.sha256=sd.sha256",
            1, R, 0, 0, "merging dataset links");
    if (!rc)
        rc = sq_exec3(
            s,
            "INSERT INTO trials(run_id, model_id, task_id, repeat, seed, status, "
            "deterministic, started_at, "
            "finished_at, wall_seconds, n_items, n_tokens) SELECT ?1, m.id, t.id, tr.repeat, "
            "tr.seed, tr.status, "
            "tr.deterministic, tr.started_at, tr.finished_at, 0, 0, 0 FROM src.trials tr "
            "JOIN src.models sm ON sm.id=tr.model_id JOIN src.tasks stk ON stk.id=tr.task_id "
            "JOIN models m ON m.run_id=?1 AND m.name=sm.name JOIN tasks t ON t.run_id=?1 AND "
            "t.name=stk.name",
            1, R, 0, 0, "merging trials");
    if (!rc)
        rc = store_commit(s);
    else
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* One shard's items (attached as src) into run R, and its trials' status:
 * a trial is done only when done in every shard, deterministic only when
 * so in every shard. One transaction. */
static int merge_copy_items(struct store *s, const char *path, int64_t R)
{
    int rc = store_begin(s);
    if (rc) return rc;
    rc =
        sq_exec3(s,
                 "INSERT INTO items(trial_id, idx, cluster, nll, n_tokens, n_bytes, n_words, "
                 "correct, score, prediction, "
                 "extracted, output_hash, kld_sum, top1_agree, dp_sum, extra_json) SELECT tr.id, "
                 "i.idx, i.cluster, i.nll, "
                 "i.n_tokens, i.n_bytes, i.n_words, i.correct, i.score, i.prediction, i.extracted, "
                 "i.output_hash, i.kld_sum, "
                 "i.top1_agree, i.dp_sum, i.extra_json FROM src.items i JOIN src.trials st ON "
                 "st.id=i.trial_id "
                 "JOIN src.models sm ON sm.id=st.model_id JOIN src.tasks stk ON stk.id=st.task_id "
                 "JOIN trials tr ON tr.run_id=? AND tr.repeat=st.repeat JOIN models m ON "
                 "m.id=tr.model_id AND m.name=sm.name "
                 "JOIN tasks t ON t.id=tr.task_id AND t.name=stk.name",
                 1, R, 0, 0, "merging items");
    if (rc && (sqlite3_extended_errcode(s->db) & 0xff) == SQLITE_CONSTRAINT)
        rc = qg_errf(s->err, sizeof s->err, QG_ERR_DATA, "%s: its items overlap another shard's",
                     path);
    if (!rc)
        rc = sq_exec3(
            s,
            "UPDATE trials SET status = CASE WHEN status=?2 AND (SELECT st.status FROM "
            "src.trials st JOIN src.models sm "
            "ON sm.id=st.model_id JOIN src.tasks stk ON stk.id=st.task_id WHERE "
            "st.repeat=trials.repeat AND "
            "sm.name=(SELECT name FROM models WHERE id=trials.model_id) AND "
            "stk.name=(SELECT name FROM tasks WHERE "
            "id=trials.task_id))=?2 THEN ?2 ELSE ?3 END, deterministic = CASE WHEN "
            "deterministic=1 AND (SELECT "
            "st.deterministic FROM src.trials st JOIN src.models sm ON sm.id=st.model_id "
            "JOIN src.tasks stk ON "
            "stk.id=st.task_id WHERE st.repeat=trials.repeat AND sm.name=(SELECT name FROM "
            "models WHERE "
            "id=trials.model_id) AND stk.name=(SELECT name FROM tasks WHERE "
            "id=trials.task_id))=1 THEN 1 ELSE "
            "deterministic * 0 END WHERE run_id=?1",
            3, R, STORE_TRIAL_DONE, STORE_TRIAL_FAILED, "merging trial status");
    if (!rc)
        rc = store_commit(s);
    else
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* A merged trial's totals from its items (metrics/rows.h): PPL and the
 * lockstep means for perplexity, accuracy otherwise. Percentiles need
 * per-token values and are not kept. */
static int merge_trial_totals(struct store *s, int64_t trial, sqlite3_stmt *up)
{
    struct item_row *rows;
    int64_t n;
    int rc = store_items_read(s, trial, &rows, &n);
    if (rc) return rc;
    struct ppl_totals pt;
    cJSON *m = cJSON_CreateObject();
    int64_t tokens = -1;
    if (rows_ppl_totals(rows, n, &pt) == 0) {
        cJSON_AddNumberToObject(m, "ppl", pt.ppl);
        cJSON_AddNumberToObject(m, "merged", 1);
        cJSON_AddNumberToObject(m, "kld_mean", pt.kld_mean);
        cJSON_AddNumberToObject(m, "top1_agree", pt.top1_agree);
        cJSON_AddNumberToObject(m, "dp_mean", pt.dp_mean);
        tokens = pt.tokens;
    } else {
        cJSON_AddNumberToObject(m, "acc", rows_accuracy(rows, n));
        cJSON_AddNumberToObject(m, "merged", 1);
        tokens = rows_tokens(rows, n);
    }
    free(rows);
    char *mj = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    if (!mj) return QG_ERR_NOMEM;
    sqlite3_bind_int64(up, 1, n);
    sq_bind_opt_i64(up, 2, tokens);
    sq_bind_text(up, 3, mj);
    sqlite3_bind_int64(up, 4, trial);
    rc = sq_step_done(s, up, "merging aggregates", 1, NULL);
    free(mj);
    return rc;
}

/* Every trial's totals, then the run's status: done when every trial is. */
static int merge_aggregate(struct store *s, int64_t R)
{
    int rc = store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *sel = NULL, *up = NULL;
    rc = sq_prepare(s, "SELECT id FROM trials WHERE run_id=? ORDER BY id", &sel);
    if (!rc)
        rc = sq_prepare(s, "UPDATE trials SET n_items=?, n_tokens=?, metrics_json=? WHERE id=?",
                        &up);
    if (!rc) sqlite3_bind_int64(sel, 1, R);
    int step;
    while (!rc && (step = sqlite3_step(sel)) == SQLITE_ROW)
        rc = merge_trial_totals(s, sqlite3_column_int64(sel, 0), up);
    if (!rc && step != SQLITE_DONE) rc = sq_fail(s, "merging aggregates");
    sqlite3_finalize(sel);
    sqlite3_finalize(up);
    sqlite3_stmt *st = NULL;
    if (!rc)
        rc = sq_prepare(s,
                        "UPDATE runs SET status=CASE WHEN (SELECT count(*) FROM trials WHERE "
                        "run_id=?1 AND status<>?2)=0 "
                        "THEN ?3 ELSE ?4 END, finished_at=datetime('now') WHERE id=?1",
                        &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, R);
        sqlite3_bind_int(st, 2, STORE_TRIAL_DONE);
        sqlite3_bind_int(st, 3, STORE_RUN_DONE);
        sqlite3_bind_int(st, 4, STORE_RUN_FAILED);
        rc = sq_step_done(s, st, "finishing the merged run", 0, NULL);
    }
    if (!rc)
        rc = store_commit(s);
    else
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int store_merge_shards(struct store *s, const char *const *inputs, int n, int64_t *run_id)
{
    *run_id = 0;
    if (n < 1) return qg_errf(s->err, sizeof s->err, QG_ERR_USAGE, "no shard files");
    struct shard_info *si = calloc((size_t)n, sizeof *si);
    if (!si) return QG_ERR_NOMEM;
    int rc = merge_validate(s, inputs, n, si);
    /* shard 0's file provides the run's description */
    int first = 0;
    for (int i = 0; i < n; i++)
        if (si[i].index == 0) first = i;
    free(si);
    if (rc) return rc;
    if (!(rc = attach(s, inputs[first]))) {
        rc = merge_copy_run(s, run_id);
        detach(s);
    }
    /* every shard's items, one transaction each (SQLite detaches only
     * outside a transaction); the run stays "running" until all are in, and
     * a failed merge deletes it */
    for (int i = 0; i < n && !rc; i++) {
        if ((rc = attach(s, inputs[i]))) break;
        rc = merge_copy_items(s, inputs[i], *run_id);
        if (!rc) rc = merge_note_kernels(s, *run_id);
        detach(s);
    }
    if (!rc) rc = merge_aggregate(s, *run_id);
    if (rc) {
        char keep[QG_ERRMSG_MAX];
        snprintf(keep, sizeof keep, "%s", s->err);
        detach(s);
        if (*run_id > 0)
            sq_exec3(s, "DELETE FROM runs WHERE id=?", 1, *run_id, 0, 0, "removing a failed merge");
        snprintf(s->err, sizeof s->err, "%s", keep);
        *run_id = 0;
    }
    return rc;
}

/* the trials, then their items, of one model on one task, from schema
 * '@' ("main" or the attached "src") into the destination run */
static const char *const copy_sql[2] = {
    "INSERT INTO trials(run_id, model_id, task_id, repeat, seed, status, deterministic, "
    "started_at, finished_at, wall_seconds, n_items, n_tokens, metrics_json, error) "
    "SELECT ?1, ?2, ?3, st.repeat, st.seed, st.status, st.deterministic, st.started_at, "
    "st.finished_at, st.wall_seconds, st.n_items, st.n_tokens, "
    "json_set(coalesce(st.metrics_json, '{}'), '$.reused_from', "
    "json_object('run', ?4, 'trial', st.id, 'db', ?7)), st.error "
    "FROM @.trials st JOIN @.models sm ON sm.id=st.model_id "
    "JOIN @.tasks sk ON sk.id=st.task_id "
    "WHERE st.run_id=?4 AND sm.name=?5 AND sk.name=?6 AND st.status=2 ORDER BY st.repeat",
    "INSERT INTO items(trial_id, idx, cluster, nll, n_tokens, n_bytes, n_words, correct, score, "
    "prediction, extracted, output_hash, kld_sum, top1_agree, dp_sum, extra_json) "
    "SELECT tr.id, i.idx, i.cluster, i.nll, i.n_tokens, i.n_bytes, i.n_words, i.correct, "
    "i.score, i.prediction, i.extracted, i.output_hash, i.kld_sum, i.top1_agree, i.dp_sum, "
    "i.extra_json FROM @.items i JOIN @.trials st ON st.id=i.trial_id "
    "JOIN @.models sm ON sm.id=st.model_id JOIN @.tasks sk ON sk.id=st.task_id "
    "JOIN trials tr ON tr.run_id=?1 AND tr.model_id=?2 AND tr.task_id=?3 "
    "AND tr.repeat=st.repeat "
    "WHERE st.run_id=?4 AND sm.name=?5 AND sk.name=?6 AND st.status=2 AND ?7 IS NOT 0"};

int store_copy_trials(struct store *s, const char *src_path, int64_t src_run, const char *model,
                      const char *task, int64_t dst_run, int64_t dst_model, int64_t dst_task)
{
    const char *db = src_path ? "src" : "main";
    int rc = src_path ? attach(s, src_path) : QG_OK;
    if (!rc) rc = store_begin(s);
    for (int q = 0; q < 2 && !rc; q++) {
        char sql[2048];
        size_t o = 0;
        for (const char *c = copy_sql[q]; *c && o + 8 < sizeof sql; c++) /* '@' names the schema */
            if (*c == '@')
                o += (size_t)snprintf(sql + o, sizeof sql - o, "%s", db);
            else
                sql[o++] = *c;
        sql[o] = '\0';
        sqlite3_stmt *st;
        if ((rc = sq_prepare(s, sql, &st))) break;
        sqlite3_bind_int64(st, 1, dst_run);
        sqlite3_bind_int64(st, 2, dst_model);
        sqlite3_bind_int64(st, 3, dst_task);
        sqlite3_bind_int64(st, 4, src_run);
        sq_bind_text(st, 5, model);
        sq_bind_text(st, 6, task);
        sq_bind_text(st, 7, src_path ? src_path : s->path);
        rc = sq_step_done(s, st, "copying the stored baseline's trials", 0, NULL);
    }
    if (!rc)
        rc = store_commit(s);
    else
        store_rollback(s);
    if (src_path) detach(s);
    return rc;
}

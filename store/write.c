/* write — runs, models, datasets, tasks, trials, items and comparisons
 * as they are made. */
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
#include <unistd.h>

int store_run_create(struct store *s, const struct store_run_new *r, int64_t *run_id)
{
    sqlite3_stmt *st;
    int rc =
        sq_prepare(s,
                   "INSERT INTO runs(uid, created_at, status, command, qgate_version, host, "
                   "suite_name, suite_hash, suite_json, seed, repeats, shard_index, shard_count, "
                   "kernels) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   &st);
    if (rc) return rc;
    char uid[33], now[32], host[256] = "";
    sq_random_uid(uid);
    qg_utc_now(now);
    gethostname(host, sizeof host - 1);
    sqlite3_bind_text(st, 1, uid, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, STORE_RUN_RUNNING);
    sq_bind_text(st, 4, r->command);
    sqlite3_bind_text(st, 5, QG_VERSION, -1, SQLITE_STATIC);
    sq_bind_text(st, 6, host);
    sq_bind_text(st, 7, r->suite_name);
    sq_bind_text(st, 8, r->suite_hash);
    sq_bind_text(st, 9, r->suite_json);
    sqlite3_bind_int64(st, 10, r->seed);
    sqlite3_bind_int(st, 11, r->repeats);
    sqlite3_bind_int(st, 12, r->shard_index);
    sqlite3_bind_int(st, 13, r->shard_count > 0 ? r->shard_count : 1);
    sq_bind_text(st, 14, r->kernels);
    return sq_step_done(s, st, "creating a run", 0, run_id);
}

int store_run_add_kernels(struct store *s, int64_t run_id, const char *kernels)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "UPDATE runs SET kernels = CASE WHEN ?2 IS NULL OR ?2 = '' THEN kernels "
                        "WHEN kernels IS NULL OR kernels = '' THEN ?2 WHEN instr('; ' || kernels "
                        "|| '; ', '; ' || ?2 || '; ') THEN kernels ELSE kernels || '; ' || ?2 END "
                        "WHERE id = ?1",
                        &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sq_bind_text(st, 2, kernels);
    return sq_step_done(s, st, "recording the run's kernels", 0, NULL);
}

int store_run_set_status(struct store *s, int64_t run_id, int status)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "UPDATE runs SET status=?, finished_at=? WHERE id=?", &st);
    if (rc) return rc;
    char now[32];
    qg_utc_now(now);
    sqlite3_bind_int(st, 1, status);
    sq_bind_text(st, 2, status == STORE_RUN_RUNNING ? NULL : now);
    sqlite3_bind_int64(st, 3, run_id);
    rc = sq_step_done(s, st, "updating a run", 0, NULL);
    if (!rc && sqlite3_changes(s->db) == 0)
        return qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND, "%s: no run %lld", s->path,
                       (long long)run_id);
    return rc;
}

int store_model_add(struct store *s, int64_t run_id, const struct store_model_new *m,
                    int64_t *model_id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "INSERT INTO models(run_id, name, spec, backend, path, sha256, file_bytes, "
                        "format, arch, n_params, types_json, role) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                        &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sq_bind_text(st, 2, m->name);
    sq_bind_text(st, 3, m->spec);
    sq_bind_text(st, 4, m->backend);
    sq_bind_text(st, 5, m->path);
    sq_bind_text(st, 6, m->sha256);
    sq_bind_opt_i64(st, 7, m->file_bytes);
    sq_bind_text(st, 8, m->format);
    sq_bind_text(st, 9, m->arch);
    sq_bind_opt_i64(st, 10, m->n_params);
    sq_bind_text(st, 11, m->types_json);
    sqlite3_bind_int(st, 12, m->role);
    return sq_step_done(s, st, "adding a model", 0, model_id);
}

int store_dataset_add(struct store *s, const char *path, const char *sha256, int64_t bytes,
                      int64_t *dataset_id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "INSERT INTO datasets(path, sha256, bytes) VALUES(?,?,?) "
                        "ON CONFLICT(path, sha256) DO UPDATE SET bytes=excluded.bytes RETURNING id",
                        &st);
    if (rc) return rc;
    sq_bind_text(st, 1, path);
    sq_bind_text(st, 2, sha256);
    sq_bind_opt_i64(st, 3, bytes);
    rc = sqlite3_step(st);
    int status = rc == SQLITE_ROW ? QG_OK : sq_fail(s, "adding a dataset");
    if (!status) *dataset_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return status;
}

int store_task_add(struct store *s, int64_t run_id, const struct store_task_new *t,
                   int64_t *task_id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "INSERT INTO tasks(run_id, name, kind, config_json, config_hash, n_items, "
                        "critical) VALUES(?,?,?,?,?,?,?)",
                        &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sq_bind_text(st, 2, t->name);
    sqlite3_bind_int(st, 3, t->kind);
    sq_bind_text(st, 4, t->config_json);
    sq_bind_text(st, 5, t->config_hash ? t->config_hash : "");
    sq_bind_opt_i64(st, 6, t->n_items);
    sqlite3_bind_int(st, 7, t->critical);
    return sq_step_done(s, st, "adding a task", 0, task_id);
}

int store_task_link_dataset(struct store *s, int64_t task_id, int64_t dataset_id, const char *role)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(
        s, "INSERT OR IGNORE INTO task_datasets(task_id, dataset_id, role) VALUES(?,?,?)", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, task_id);
    sqlite3_bind_int64(st, 2, dataset_id);
    sq_bind_text(st, 3, role ? role : "data");
    return sq_step_done(s, st, "linking a dataset", 0, NULL);
}

int store_trial_create(struct store *s, const struct store_trial_new *t, int64_t *trial_id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "INSERT INTO trials(run_id, model_id, task_id, repeat, seed, status, "
                        "started_at) VALUES(?,?,?,?,?,?,?)",
                        &st);
    if (rc) return rc;
    char now[32];
    qg_utc_now(now);
    sqlite3_bind_int64(st, 1, t->run_id);
    sqlite3_bind_int64(st, 2, t->model_id);
    sqlite3_bind_int64(st, 3, t->task_id);
    sqlite3_bind_int(st, 4, t->repeat);
    sqlite3_bind_int64(st, 5, t->seed);
    sqlite3_bind_int(st, 6, STORE_TRIAL_RUNNING);
    sq_bind_text(st, 7, now);
    return sq_step_done(s, st, "creating a trial", 0, trial_id);
}

int store_trial_finish(struct store *s, int64_t trial_id, const struct store_trial_result *r)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "UPDATE trials SET status=?, finished_at=?, n_items=?, n_tokens=?, "
                        "wall_seconds=?, deterministic=?, metrics_json=?, error=? WHERE id=?",
                        &st);
    if (rc) return rc;
    char now[32];
    qg_utc_now(now);
    sqlite3_bind_int(st, 1, r->status);
    sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
    sq_bind_opt_i64(st, 3, r->n_items);
    sq_bind_opt_i64(st, 4, r->n_tokens);
    sq_bind_f64(st, 5, r->wall_seconds);
    sq_bind_opt_i64(st, 6, r->deterministic);
    sq_bind_text(st, 7, r->metrics_json);
    sq_bind_text(st, 8, r->error);
    sqlite3_bind_int64(st, 9, trial_id);
    rc = sq_step_done(s, st, "finishing a trial", 0, NULL);
    if (!rc && sqlite3_changes(s->db) == 0)
        return qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND, "%s: no trial %lld", s->path,
                       (long long)trial_id);
    return rc;
}

int store_item_put(struct store *s, const struct store_item *it)
{
    if (!s->st[ST_ITEM_PUT]) {
        int rc = sq_prepare(s,
                            "INSERT OR REPLACE INTO items(trial_id, idx, cluster, nll, n_tokens, "
                            "n_bytes, n_words, correct, score, prediction, extracted, output_hash, "
                            "kld_sum, top1_agree, dp_sum, extra_json) "
                            "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            &s->st[ST_ITEM_PUT]);
        if (rc) return rc;
    }
    sqlite3_stmt *st = s->st[ST_ITEM_PUT];
    sqlite3_bind_int64(st, 1, it->trial_id);
    sqlite3_bind_int64(st, 2, it->idx);
    sq_bind_opt_i64(st, 3, it->cluster);
    sq_bind_f64(st, 4, it->nll);
    sq_bind_opt_i64(st, 5, it->n_tokens);
    sq_bind_opt_i64(st, 6, it->n_bytes);
    sq_bind_opt_i64(st, 7, it->n_words);
    sq_bind_opt_i64(st, 8, it->correct);
    sq_bind_f64(st, 9, it->score);
    sq_bind_text(st, 10, it->prediction);
    sq_bind_text(st, 11, it->extracted);
    sq_bind_text(st, 12, it->output_hash);
    sq_bind_f64(st, 13, it->kld_sum);
    sq_bind_f64(st, 14, it->top1_agree);
    sq_bind_f64(st, 15, it->dp_sum);
    sq_bind_text(st, 16, it->extra_json);
    return sq_step_done(s, st, "writing an item", 1, NULL);
}

int store_item_count(struct store *s, int64_t trial_id, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "SELECT count(*) FROM items WHERE trial_id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    rc = sqlite3_step(st);
    int status = rc == SQLITE_ROW ? QG_OK : sq_fail(s, "counting items");
    if (!status) *n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return status;
}

int store_run_set_suite_json(struct store *s, int64_t run_id, const char *json)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "UPDATE runs SET suite_json=? WHERE id=?", &st);
    if (rc) return rc;
    sq_bind_text(st, 1, json);
    sqlite3_bind_int64(st, 2, run_id);
    return sq_step_done(s, st, "storing the suite", 0, NULL);
}

int store_run_mark_deterministic(struct store *s, int64_t run_id, int deterministic)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "UPDATE trials SET deterministic=? WHERE run_id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int(st, 1, deterministic ? 1 : 0);
    sqlite3_bind_int64(st, 2, run_id);
    return sq_step_done(s, st, "marking determinism", 0, NULL);
}

int store_trial_restart(struct store *s, int64_t trial_id)
{
    sqlite3_stmt *st;
    int rc =
        sq_prepare(s, "UPDATE trials SET status=?, finished_at=NULL, error=NULL WHERE id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int(st, 1, STORE_TRIAL_RUNNING);
    sqlite3_bind_int64(st, 2, trial_id);
    return sq_step_done(s, st, "restarting a trial", 0, NULL);
}

int store_comparison_add(struct store *s, const struct store_comparison_new *c, int64_t *id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(
        s,
        "INSERT INTO comparisons(run_id, baseline_model_id, candidate_model_id, created_at, "
        "qgate_version, command, policy_json, bootstrap_seed, bootstrap_iters, verdict, "
        "summary_json) "
        "VALUES(?,?,?,?,?,?,?,?,?,?,?)",
        &st);
    if (rc) return rc;
    char now[32];
    qg_utc_now(now);
    sqlite3_bind_int64(st, 1, c->run_id);
    sqlite3_bind_int64(st, 2, c->baseline_model_id);
    sqlite3_bind_int64(st, 3, c->candidate_model_id);
    sqlite3_bind_text(st, 4, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 5, QG_VERSION, -1, SQLITE_STATIC);
    sq_bind_text(st, 6, c->command);
    sq_bind_text(st, 7, c->policy_json);
    sqlite3_bind_int64(st, 8, c->bootstrap_seed);
    sqlite3_bind_int(st, 9, c->bootstrap_iters);
    sqlite3_bind_int(st, 10, c->verdict);
    sq_bind_text(st, 11, c->summary_json);
    return sq_step_done(s, st, "storing a comparison", 0, id);
}

int store_verdict_row_add(struct store *s, const struct store_verdict_row *r)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(
        s,
        "INSERT INTO verdict_rows(comparison_id, task_id, metric, base_value, cand_value, delta, "
        "ci_low, ci_high, margin, noise, n_units, flips_b, flips_c, p_value, p_holm, mde, "
        "items_needed, verdict, reason) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, r->comparison_id);
    sqlite3_bind_int64(st, 2, r->task_id);
    sq_bind_text(st, 3, r->metric);
    sq_bind_f64(st, 4, r->base_value);
    sq_bind_f64(st, 5, r->cand_value);
    sq_bind_f64(st, 6, r->delta);
    sq_bind_f64(st, 7, r->ci_low);
    sq_bind_f64(st, 8, r->ci_high);
    sq_bind_f64(st, 9, r->margin);
    sq_bind_f64(st, 10, r->noise);
    sq_bind_opt_i64(st, 11, r->n_units);
    sq_bind_opt_i64(st, 12, r->flips_b);
    sq_bind_opt_i64(st, 13, r->flips_c);
    sq_bind_f64(st, 14, r->p_value);
    sq_bind_f64(st, 15, r->p_holm);
    sq_bind_f64(st, 16, r->mde);
    sq_bind_opt_i64(st, 17, r->items_needed);
    sqlite3_bind_int(st, 18, r->verdict);
    sq_bind_text(st, 19, r->reason);
    return sq_step_done(s, st, "storing a verdict row", 0, NULL);
}

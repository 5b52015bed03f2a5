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
    return sq_run(s, "recording the run's kernels", NULL,
                  "UPDATE runs SET kernels = CASE WHEN ?2 IS NULL OR ?2 = '' THEN kernels "
                  "WHEN kernels IS NULL OR kernels = '' THEN ?2 WHEN instr('; ' || kernels "
                  "|| '; ', '; ' || ?2 || '; ') THEN kernels ELSE kernels || '; ' || ?2 END "
                  "WHERE id = ?1",
                  "lt", run_id, kernels);
}

int store_run_set_status(struct store *s, int64_t run_id, int status)
{
    char now[32];
    qg_utc_now(now);
    int rc = sq_run(s, "updating a run", NULL, "UPDATE runs SET status=?, finished_at=? WHERE id=?",
                    "itl", status, status == STORE_RUN_RUNNING ? NULL : now, run_id);
    if (!rc && sqlite3_changes(s->db) == 0)
        return qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND, "%s: no run %lld", s->path,
                       (long long)run_id);
    return rc;
}

int store_model_add(struct store *s, int64_t run_id, const struct store_model_new *m,
                    int64_t *model_id)
{
    return sq_run(s, "adding a model", model_id,
                  "INSERT INTO models(run_id, name, spec, backend, path, sha256, file_bytes, "
                  "format, arch, n_params, types_json, role, provenance_json) "
                  "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
                  "ltttttnttntit", run_id, m->name, m->spec, m->backend, m->path, m->sha256,
                  (int64_t)m->file_bytes, m->format, m->arch, (int64_t)m->n_params, m->types_json,
                  m->role, m->provenance_json);
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
    return sq_run(s, "adding a task", task_id,
                  "INSERT INTO tasks(run_id, name, kind, config_json, config_hash, n_items, "
                  "critical) VALUES(?,?,?,?,?,?,?)",
                  "ltittni", run_id, t->name, t->kind, t->config_json,
                  t->config_hash ? t->config_hash : "", (int64_t)t->n_items, t->critical);
}

int store_task_link_dataset(struct store *s, int64_t task_id, int64_t dataset_id, const char *role)
{
    return sq_run(s, "linking a dataset", NULL,
                  "INSERT OR IGNORE INTO task_datasets(task_id, dataset_id, role) VALUES(?,?,?)",
                  "llt", task_id, dataset_id, role ? role : "data");
}

int store_trial_create(struct store *s, const struct store_trial_new *t, int64_t *trial_id)
{
    char now[32];
    qg_utc_now(now);
    return sq_run(s, "creating a trial", trial_id,
                  "INSERT INTO trials(run_id, model_id, task_id, repeat, seed, status, "
                  "started_at) VALUES(?,?,?,?,?,?,?)",
                  "lllilit", t->run_id, t->model_id, t->task_id, t->repeat, (int64_t)t->seed,
                  (int)STORE_TRIAL_RUNNING, now);
}

int store_trial_finish(struct store *s, int64_t trial_id, const struct store_trial_result *r)
{
    char now[32];
    qg_utc_now(now);
    int rc =
        sq_run(s, "finishing a trial", NULL,
               "UPDATE trials SET status=?, finished_at=?, n_items=?, n_tokens=?, "
               "wall_seconds=?, deterministic=?, metrics_json=?, error=? WHERE id=?",
               "itnndnttl", r->status, now, (int64_t)r->n_items, (int64_t)r->n_tokens,
               r->wall_seconds, (int64_t)r->deterministic, r->metrics_json, r->error, trial_id);
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
    return sq_run(s, "storing the suite", NULL, "UPDATE runs SET suite_json=? WHERE id=?", "tl",
                  json, run_id);
}

int store_run_mark_deterministic(struct store *s, int64_t run_id, int deterministic)
{
    return sq_run(s, "marking determinism", NULL,
                  "UPDATE trials SET deterministic=? WHERE run_id=?", "il", deterministic ? 1 : 0,
                  run_id);
}

int store_trial_restart(struct store *s, int64_t trial_id)
{
    return sq_run(s, "restarting a trial", NULL,
                  "UPDATE trials SET status=?, finished_at=NULL, error=NULL WHERE id=?", "il",
                  (int)STORE_TRIAL_RUNNING, trial_id);
}

int store_comparison_add(struct store *s, const struct store_comparison_new *c, int64_t *id)
{
    char now[32];
    qg_utc_now(now);
    return sq_run(s, "storing a comparison", id,
                  "INSERT INTO comparisons(run_id, baseline_model_id, candidate_model_id, "
                  "created_at, qgate_version, command, policy_json, bootstrap_seed, "
                  "bootstrap_iters, verdict, summary_json) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                  "lllttttliit", c->run_id, c->baseline_model_id, c->candidate_model_id, now,
                  QG_VERSION, c->command, c->policy_json, (int64_t)c->bootstrap_seed,
                  c->bootstrap_iters, c->verdict, c->summary_json);
}

int store_comparison_find_same(struct store *s, const struct store_comparison_new *c, int64_t *id)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s,
                        "SELECT id FROM comparisons WHERE run_id=? AND baseline_model_id=? AND "
                        "candidate_model_id=? AND qgate_version=? AND policy_json IS ? AND "
                        "bootstrap_seed=? AND bootstrap_iters=? AND verdict=? AND "
                        "summary_json IS ? ORDER BY id DESC LIMIT 1",
                        &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, c->run_id);
    sqlite3_bind_int64(st, 2, c->baseline_model_id);
    sqlite3_bind_int64(st, 3, c->candidate_model_id);
    sq_bind_text(st, 4, QG_VERSION);
    sq_bind_text(st, 5, c->policy_json);
    sqlite3_bind_int64(st, 6, (int64_t)c->bootstrap_seed);
    sqlite3_bind_int64(st, 7, c->bootstrap_iters);
    sqlite3_bind_int64(st, 8, c->verdict);
    sq_bind_text(st, 9, c->summary_json);
    return sq_one_int64(s, st, "finding a stored comparison", id);
}

int store_verdict_row_add(struct store *s, const struct store_verdict_row *r)
{
    return sq_run(
        s, "storing a verdict row", NULL,
        "INSERT INTO verdict_rows(comparison_id, task_id, metric, base_value, cand_value, delta, "
        "ci_low, ci_high, margin, noise, n_units, flips_b, flips_c, p_value, p_holm, mde, "
        "items_needed, verdict, reason) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        "lltdddddddnnndddnit", r->comparison_id, r->task_id, r->metric, r->base_value,
        r->cand_value, r->delta, r->ci_low, r->ci_high, r->margin, r->noise, (int64_t)r->n_units,
        (int64_t)r->flips_b, (int64_t)r->flips_c, r->p_value, r->p_holm, r->mde,
        (int64_t)r->items_needed, r->verdict, r->reason);
}

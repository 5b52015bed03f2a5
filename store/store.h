/* store — qgate's results database: one SQLite file.
 *
 * Tables: runs, models, datasets, tasks, task_datasets, trials, items,
 * comparisons, verdict_rows, meta. WAL journal, foreign keys on, schema
 * version in PRAGMA user_version with forward migrations, application_id
 * 'qgat' so that qgate never writes into somebody else's SQLite file. All
 * SQL uses prepared statements with bound values. Writers group item rows in
 * transactions (store_begin/store_commit): a process killed mid-batch loses
 * only that batch, never leaves half of one.
 *
 * Errors: functions return QG_OK or a negative status; store_errmsg() has
 * the details (file path and SQLite's message). A file that is not SQLite or
 * not qgate's is QG_ERR_DATA, a corrupted one QG_ERR_CORRUPT, one made by a
 * newer qgate QG_ERR_VERSION, an unreadable/unwritable one QG_ERR_IO or
 * QG_ERR_NOINPUT.
 */
#ifndef QG_STORE_H
#define QG_STORE_H

#include "metrics/rows.h"
#include "tasks/kind.h"

#include <stdint.h>

#include <cjson/cJSON.h>

#define STORE_SCHEMA_VERSION 6
#define STORE_APPLICATION_ID 0x71676174 /* 'qgat' */
#define STORE_DEFAULT_PATH "qgate.db"

/* Persisted enums: append-only. */
enum store_run_status {
    STORE_RUN_RUNNING = 0,
    STORE_RUN_DONE = 1,
    STORE_RUN_FAILED = 2,
    STORE_RUN_INTERRUPTED = 3,
};
enum store_trial_status {
    STORE_TRIAL_PENDING = 0,
    STORE_TRIAL_RUNNING = 1,
    STORE_TRIAL_DONE = 2,
    STORE_TRIAL_FAILED = 3,
    STORE_TRIAL_SKIPPED = 4, /* e.g. a repeat skipped because the run is deterministic */
};

const char *store_run_status_name(int s);
const char *store_trial_status_name(int s);

struct store;

struct store_params {
    int readonly;        /* open without writing (no creation, no migration) */
    int busy_timeout_ms; /* wait for other writers (default 10000) */
    /* Test hook for the migration mechanism: extra migrations appended after
     * the built-in ones (SQL scripts, version = built-in count + index + 1). */
    const char *const *extra_migrations;
    int n_extra_migrations;
};

struct store_params store_default_params(void);

/* Opens (creating and migrating when writable) the database at path. On
 * success *out is a new handle (free with store_close). On failure *out is
 * NULL, err holds the message and the file is left untouched. */
int store_open(const char *path, const struct store_params *p, struct store **out, char *err,
               size_t errlen);
void store_close(struct store *s); /* accepts NULL */

/* Message of the last failure on s (valid until the next call on s). */
const char *store_errmsg(const struct store *s);
/* The database file's path as opened. */
const char *store_path(const struct store *s);
/* Schema version of the open file. */
int store_schema_version(const struct store *s);

/* Transactions for batched writes. store_begin takes the write lock
 * (BEGIN IMMEDIATE). */
int store_begin(struct store *s);
int store_commit(struct store *s);
int store_rollback(struct store *s);

/* ---- writing (ids are returned through the last parameter) ---- */
struct store_run_new {
    const char *command;    /* the command line, for provenance */
    const char *suite_name; /* may be NULL */
    const char *suite_hash;
    const char *suite_json;
    int64_t seed;
    int repeats;
    int shard_index, shard_count; /* 0/1 when not sharded */
    const char *kernels;          /* kernel_set_describe(); may be NULL */
};
int store_run_create(struct store *s, const struct store_run_new *r, int64_t *run_id);
/* Adds `kernels` (kernel_set_describe) to the run's list of the kernels
 * that computed it ("a; b"), unless it is there already: a run resumed, or
 * shards merged, from other CPUs or another forced set. */
int store_run_add_kernels(struct store *s, int64_t run_id, const char *kernels);
/* Sets the status; terminal statuses also set finished_at. */
int store_run_set_status(struct store *s, int64_t run_id, int status);

struct store_model_new {
    const char *name, *spec, *backend; /* "base", "base=a.gguf", "cpu" */
    const char *path, *sha256;         /* may be NULL (remote models) */
    int64_t file_bytes, n_params;
    const char *arch, *format;   /* "llama", "gguf" */
    const char *types_json;      /* stored tensor types, JSON */
    int role;                    /* 0 baseline, 1 candidate */
    const char *provenance_json; /* a remote model's (backend_info), or NULL */
};
int store_model_add(struct store *s, int64_t run_id, const struct store_model_new *m,
                    int64_t *model_id);

/* Records a data file (deduplicated by path and sha256). */
int store_dataset_add(struct store *s, const char *path, const char *sha256, int64_t bytes,
                      int64_t *dataset_id);

struct store_task_new {
    const char *name;
    int kind; /* enum task_kind (tasks/kind.h) */
    const char *config_json, *config_hash;
    int64_t n_items;
    int critical;
};
int store_task_add(struct store *s, int64_t run_id, const struct store_task_new *t,
                   int64_t *task_id);
int store_task_link_dataset(struct store *s, int64_t task_id, int64_t dataset_id, const char *role);

struct store_trial_new {
    int64_t run_id, model_id, task_id;
    int repeat;
    int64_t seed;
};
int store_trial_create(struct store *s, const struct store_trial_new *t, int64_t *trial_id);

struct store_trial_result {
    int status; /* enum store_trial_status */
    int64_t n_items, n_tokens;
    double wall_seconds;
    int deterministic;        /* -1 unknown, 0 no, 1 yes */
    const char *metrics_json; /* aggregates; may be NULL */
    const char *error;        /* may be NULL */
};
int store_trial_finish(struct store *s, int64_t trial_id, const struct store_trial_result *r);

/* One per-item result. Optional numbers are NAN (doubles) or -1 (ints);
 * optional strings NULL. */
struct store_item {
    int64_t trial_id, idx, cluster;
    double nll; /* sum of NLL over scored tokens (nats) */
    int64_t n_tokens, n_bytes, n_words;
    int correct; /* 0/1, -1 n/a */
    double score;
    const char *prediction, *extracted, *output_hash, *extra_json;
    double kld_sum, top1_agree, dp_sum;
};
/* Inserts or replaces (trial_id, idx); replacing makes a resumed run idempotent. */
int store_item_put(struct store *s, const struct store_item *it);
int store_item_count(struct store *s, int64_t trial_id, int64_t *n);

/* ---- reading ---- */
/* The newest run's id; QG_ERR_NOTFOUND when the store has none. */
int store_run_latest(struct store *s, int64_t *run_id);

/* The trial of model `model` (by name) on task_id at repeat in run_id:
 * its id and status; QG_ERR_NOTFOUND when there is none. */
int store_trial_find(struct store *s, int64_t run_id, const char *model, int64_t task_id,
                     int repeat, int64_t *trial_id, int *status);

/* All items of a trial by idx (struct item_row, metrics/rows.h) (malloc'd array the caller frees).
 */
int store_items_read(struct store *s, int64_t trial_id, struct item_row **rows, int64_t *n);

/* One number from every item's extra_json of a trial, by idx: json_extract
 * at path (e.g. "$.pred_norm"); NAN where absent. *values is malloc'd with
 * *n entries. */
int store_items_extract(struct store *s, int64_t trial_id, const char *path, double **values,
                        int64_t *n);

/* A trial's metrics_json (malloc'd; NULL when absent) and repeats stored. */
int store_trial_metrics(struct store *s, int64_t trial_id, char **json);

struct store_comparison_new {
    int64_t run_id, baseline_model_id, candidate_model_id;
    const char *command, *policy_json, *summary_json;
    int64_t bootstrap_seed;
    int bootstrap_iters;
    int verdict; /* 0 PASS, 1 FAIL, 2 INCONCLUSIVE */
};
int store_comparison_add(struct store *s, const struct store_comparison_new *c, int64_t *id);
/* The newest stored comparison identical to c (same run, models, policy,
 * bootstrap seed, qgate version and summary): QG_OK with *id, or
 * QG_ERR_NOTFOUND. */
int store_comparison_find_same(struct store *s, const struct store_comparison_new *c, int64_t *id);

struct store_verdict_row {
    int64_t comparison_id, task_id;
    const char *metric;
    double base_value, cand_value, delta, ci_low, ci_high, margin, noise, p_value, p_holm, mde;
    int64_t n_units, flips_b, flips_c, items_needed; /* -1 when n/a */
    int verdict;
    const char *reason;
};
int store_verdict_row_add(struct store *s, const struct store_verdict_row *r);
/* The id of model `name` in run_id; QG_ERR_NOTFOUND when absent. */
int store_model_find(struct store *s, int64_t run_id, const char *name, int64_t *model_id);
/* The run's stored suite text (malloc'd; NULL when none). */
int store_run_suite_json(struct store *s, int64_t run_id, char **json);
/* Merges the shard files `inputs` (each a qgate store holding one run made
 * with --shard i/n; together every i of one n exactly once, same suite
 * hash, models, seed and repeats) into a new run of s: models, tasks,
 * datasets, trials (done only when done in every shard; deterministic only
 * when so in every shard) and every item. Perplexity trials get ppl and KLD
 * means recomputed from the items (percentiles need per-token values and are
 * not kept). QG_OK with *run_id; QG_ERR_DATA naming the file on a mismatch,
 * a missing or repeated shard, or overlapping items. */
int store_merge_shards(struct store *s, const char *const *inputs, int n, int64_t *run_id);

/* A stored comparison: its run and summary JSON (malloc'd). id <= 0 picks
 * the newest. QG_ERR_NOTFOUND when there is none. */
int store_comparison_get(struct store *s, int64_t id, int64_t *found_id, int64_t *run_id,
                         char **summary_json, char **created_at);
/* Text fields of one item (each malloc'd, NULL when NULL). */
int store_item_text(struct store *s, int64_t trial_id, int64_t idx, char **prediction,
                    char **extracted, char **extra_json);

/* The response cache of remote endpoints (schema v2): the cached response
 * for key (malloc'd) or QG_ERR_NOTFOUND; put replaces. */
int store_cache_get(struct store *s, const char *key, char **response);
int store_cache_put(struct store *s, const char *key, const char *endpoint, const char *model,
                    const char *response);

/* Marks a trial running again (for a resumed run). */
int store_trial_restart(struct store *s, int64_t trial_id);
/* Sets deterministic (0/1) on every trial of a run. */
int store_run_mark_deterministic(struct store *s, int64_t run_id, int deterministic);
/* Sets a run's suite JSON (the suite file's text, for its policy later). */
int store_run_set_suite_json(struct store *s, int64_t run_id, const char *json);

/* Array of runs, newest first (at most limit; <= 0 for all): id, uid,
 * created_at, finished_at, status, command, suite, models, tasks, trials,
 * verdicts ("NAME VERDICT, ...": each candidate's newest comparison). */
int store_runs_json(struct store *s, int64_t limit, cJSON **out);
/* One run with its models, tasks and trials; QG_ERR_NOTFOUND when absent. */
int store_run_json(struct store *s, int64_t run_id, cJSON **out);

/* Texts pinned in the store (schema v3), e.g. text sampled from a model:
 * put keeps the first text of a sha256; find returns the oldest text of
 * origin (malloc'd and NUL-terminated, *n bytes, sha256 hex) or
 * QG_ERR_NOTFOUND. */
int store_text_put(struct store *s, const char *sha256, const char *origin, const char *content,
                   size_t n);
int store_text_find(struct store *s, const char *origin, char **content, size_t *n,
                    char sha256[65]);

/* A named data file's pin (name "TASK/ROLE"): its sha256, the path it was
 * pinned from and when. QG_OK, QG_ERR_NOTFOUND, or a store error. */
int store_pin_get(struct store *s, const char *name, char sha256[65], char *path, size_t pathlen,
                  char when[32]);
/* Pins name to sha256 (replacing an older pin). */
int store_pin_put(struct store *s, const char *name, const char *path, const char *sha256);

/* A baseline's top-K reference of one perplexity window (schema v3,
 * metrics/kld_ref.h): put replaces; get returns the blob (malloc'd) or
 * QG_ERR_NOTFOUND; count says how many windows a trial keeps. */
int store_ref_put(struct store *s, int64_t trial_id, int64_t idx, const void *blob, size_t n);
int store_ref_get(struct store *s, int64_t trial_id, int64_t idx, unsigned char **blob, size_t *n);
int store_ref_count(struct store *s, int64_t trial_id, int64_t *n);

/* Copies the done trials (every repeat) of model `model` on task `task` of
 * run src_run — in the database at src_path, or this one when NULL — with
 * their items into run dst_run as model dst_model on task dst_task, in one
 * transaction. Each copy's metrics_json gets "reused_from": {run, trial,
 * db}. QG_OK or a store error (nothing copied). */
int store_copy_trials(struct store *s, const char *src_path, int64_t src_run, const char *model,
                      const char *task, int64_t dst_run, int64_t dst_model, int64_t dst_task);

/* Array of stored comparisons, newest first (run_id <= 0: every run; at
 * most limit, <= 0 for all): id, run, baseline, candidate, verdict (name),
 * created_at, command. */
int store_comparisons_json(struct store *s, int64_t run_id, int64_t limit, cJSON **out);

#endif

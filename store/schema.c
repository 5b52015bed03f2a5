/* schema — the store's schema as forward migrations, applied in order
 * (PRAGMA user_version), and the names of its persisted enums. */
#include "store/store.h"
#include "store/store_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Schema v1, v2. Append new versions to `migrations`; never edit a shipped one. */
static const char *const migrations[] = {
    /* v0 -> v1 */
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE runs("
    "  id INTEGER PRIMARY KEY,"
    "  uid TEXT NOT NULL UNIQUE," /* random, identifies a run across shard files */
    "  created_at TEXT NOT NULL,"
    "  finished_at TEXT,"
    "  status INTEGER NOT NULL," /* enum store_run_status */
    "  command TEXT,"
    "  qgate_version TEXT NOT NULL,"
    "  host TEXT,"
    "  suite_name TEXT, suite_hash TEXT, suite_json TEXT,"
    "  seed INTEGER, repeats INTEGER,"
    "  shard_index INTEGER NOT NULL DEFAULT 0, shard_count INTEGER NOT NULL DEFAULT 1);"
    "CREATE TABLE models("
    "  id INTEGER PRIMARY KEY,"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL, spec TEXT NOT NULL, backend TEXT NOT NULL,"
    "  path TEXT, sha256 TEXT, file_bytes INTEGER, format TEXT, arch TEXT, n_params INTEGER,"
    "  types_json TEXT,"                 /* stored tensor types: count and bytes per type */
    "  role INTEGER NOT NULL DEFAULT 0," /* 0 baseline, 1 candidate */
    "  UNIQUE(run_id, name));"
    "CREATE TABLE datasets("
    "  id INTEGER PRIMARY KEY,"
    "  path TEXT NOT NULL, sha256 TEXT NOT NULL, bytes INTEGER,"
    "  UNIQUE(path, sha256));"
    "CREATE TABLE tasks("
    "  id INTEGER PRIMARY KEY,"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL, kind INTEGER NOT NULL," /* enum task_kind */
    "  config_json TEXT, config_hash TEXT NOT NULL,"
    "  n_items INTEGER, critical INTEGER NOT NULL DEFAULT 0,"
    "  UNIQUE(run_id, name));"
    "CREATE TABLE task_datasets("
    "  task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,"
    "  dataset_id INTEGER NOT NULL REFERENCES datasets(id),"
    "  role TEXT NOT NULL DEFAULT 'data',"
    "  PRIMARY KEY(task_id, dataset_id, role));"
    "CREATE TABLE trials("
    "  id INTEGER PRIMARY KEY,"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
    "  task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,"
    "  repeat INTEGER NOT NULL, seed INTEGER,"
    "  status INTEGER NOT NULL," /* enum store_trial_status */
    "  deterministic INTEGER,"   /* NULL unknown, 0, 1 */
    "  started_at TEXT, finished_at TEXT, wall_seconds REAL,"
    "  n_items INTEGER, n_tokens INTEGER,"
    "  metrics_json TEXT," /* per-trial aggregates, KLD percentiles */
    "  error TEXT,"
    "  UNIQUE(run_id, model_id, task_id, repeat));"
    "CREATE TABLE items("
    "  trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL," /* item or window index within the task */
    "  cluster INTEGER,"      /* shared passage/subject, for resampling */
    "  nll REAL,"             /* summed NLL of scored tokens, nats */
    "  n_tokens INTEGER, n_bytes INTEGER, n_words INTEGER,"
    "  correct INTEGER, score REAL,"
    "  prediction TEXT, extracted TEXT, output_hash TEXT,"
    "  kld_sum REAL, top1_agree REAL, dp_sum REAL,"
    "  extra_json TEXT,"
    "  PRIMARY KEY(trial_id, idx)) WITHOUT ROWID;"
    "CREATE TABLE comparisons("
    "  id INTEGER PRIMARY KEY,"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  baseline_model_id INTEGER NOT NULL REFERENCES models(id),"
    "  candidate_model_id INTEGER NOT NULL REFERENCES models(id),"
    "  created_at TEXT NOT NULL, qgate_version TEXT NOT NULL, command TEXT,"
    "  policy_json TEXT, bootstrap_seed INTEGER, bootstrap_iters INTEGER,"
    "  verdict INTEGER," /* 0 PASS, 1 FAIL, 2 INCONCLUSIVE */
    "  summary_json TEXT);"
    "CREATE TABLE verdict_rows("
    "  comparison_id INTEGER NOT NULL REFERENCES comparisons(id) ON DELETE CASCADE,"
    "  task_id INTEGER NOT NULL REFERENCES tasks(id),"
    "  metric TEXT NOT NULL,"
    "  base_value REAL, cand_value REAL, delta REAL, ci_low REAL, ci_high REAL,"
    "  margin REAL, noise REAL, n_units INTEGER, flips_b INTEGER, flips_c INTEGER,"
    "  p_value REAL, p_holm REAL, mde REAL, items_needed INTEGER,"
    "  verdict INTEGER NOT NULL, reason TEXT,"
    "  PRIMARY KEY(comparison_id, task_id, metric));"
    "CREATE INDEX trials_by_task ON trials(task_id, model_id);"
    "CREATE INDEX models_by_run ON models(run_id);"
    "CREATE INDEX tasks_by_run ON tasks(run_id);",
    /* v2: responses of deterministic requests to remote endpoints, so a
     * resumed or repeated run costs the server nothing */
    "CREATE TABLE http_cache("
    "  key TEXT PRIMARY KEY,"
    "  endpoint TEXT NOT NULL, model TEXT NOT NULL,"
    "  response TEXT NOT NULL, created_at TEXT NOT NULL) WITHOUT ROWID;",
    /* v3: the persisted enums as lookup tables, views that answer the
     * usual questions in one short query, and texts pinned in the store
     * (text sampled from a baseline: the default measurement of `gate`) */
    "CREATE TABLE run_statuses(code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
    "INSERT INTO run_statuses VALUES(0,'running'),(1,'done'),(2,'failed'),(3,'interrupted');"
    "CREATE TABLE trial_statuses(code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
    "INSERT INTO trial_statuses VALUES(0,'pending'),(1,'running'),(2,'done'),(3,'failed'),"
    "  (4,'skipped');"
    "CREATE TABLE task_kinds(code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
    "INSERT INTO task_kinds VALUES(0,'perplexity'),(1,'multiple_choice'),(2,'generation'),"
    "  (3,'custom');"
    "CREATE TABLE verdict_names(code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
    "INSERT INTO verdict_names VALUES(0,'PASS'),(1,'FAIL'),(2,'INCONCLUSIVE');"
    "CREATE TABLE texts("
    "  sha256 TEXT PRIMARY KEY,"
    "  origin TEXT NOT NULL," /* how it was made, e.g. sampled from a model */
    "  content BLOB NOT NULL, created_at TEXT NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX texts_by_origin ON texts(origin);"
    /* a baseline's top-K next-token distributions per perplexity window
     * (metrics/kld_ref.h), so that later candidates are judged without it */
    "CREATE TABLE refs("
    "  trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL, data BLOB NOT NULL,"
    "  PRIMARY KEY(trial_id, idx)) WITHOUT ROWID;"
    "CREATE VIEW verdicts AS"
    "  SELECT c.id AS comparison, c.run_id AS run, b.name AS baseline, m.name AS candidate,"
    "         v.name AS verdict, c.created_at, c.command"
    "  FROM comparisons c JOIN models b ON b.id = c.baseline_model_id"
    "  JOIN models m ON m.id = c.candidate_model_id LEFT JOIN verdict_names v ON v.code = "
    "c.verdict;"
    "CREATE VIEW item_results AS"
    "  SELECT t.run_id AS run, m.name AS model, m.role AS role, k.name AS task,"
    "         tk.name AS kind, t.repeat AS repeat, i.idx AS item, i.cluster AS cluster,"
    "         i.correct AS correct, i.nll AS nll, i.n_tokens AS n_tokens, i.score AS score,"
    "         i.prediction AS prediction, i.extracted AS extracted, i.kld_sum AS kld_sum,"
    "         i.top1_agree AS top1_agree, ts.name AS trial_status, i.extra_json AS extra_json"
    "  FROM items i JOIN trials t ON t.id = i.trial_id JOIN models m ON m.id = t.model_id"
    "  JOIN tasks k ON k.id = t.task_id LEFT JOIN task_kinds tk ON tk.code = k.kind"
    "  LEFT JOIN trial_statuses ts ON ts.code = t.status;"
    "CREATE VIEW flips AS"
    "  SELECT c.run AS run, c.task AS task, c.item AS item, b.model AS baseline,"
    "         c.model AS candidate,"
    "         CASE WHEN b.correct = 1 THEN 'worse' ELSE 'better' END AS direction,"
    "         b.extracted AS baseline_answer, c.extracted AS candidate_answer,"
    "         b.prediction AS baseline_prediction, c.prediction AS candidate_prediction,"
    "         json_extract(b.extra_json, '$.prompt') AS prompt"
    "  FROM item_results b JOIN item_results c"
    "    ON c.run = b.run AND c.task = b.task AND c.item = b.item AND c.repeat = b.repeat"
    "  WHERE b.role = 0 AND c.role <> 0 AND b.repeat = 0 AND b.correct IS NOT NULL"
    "    AND c.correct IS NOT NULL AND b.correct <> c.correct;",
    /* v4: the kernels that computed a run (backends/kernel_set.h): kernel
     * sets round differently in the last bits */
    "ALTER TABLE runs ADD COLUMN kernels TEXT;",
    /* v5: the data files of named benchmarks (tasks/registry.h), pinned on
     * first use: a later run refuses a changed file */
    "CREATE TABLE pins("
    "  name TEXT PRIMARY KEY," /* "hellaswag/data" */
    "  path TEXT NOT NULL, sha256 TEXT NOT NULL, pinned_at TEXT NOT NULL) WITHOUT ROWID;",
    /* v6: what was detected of a remote model at open (endpoint, server,
     * fingerprint, scoring route, capabilities, context), JSON */
    "ALTER TABLE models ADD COLUMN provenance_json TEXT;",
};

#define N_MIGRATIONS ((int)(sizeof migrations / sizeof *migrations))

const char *store_run_status_name(int s)
{
    static const char *n[] = {"running", "done", "failed", "interrupted"};
    return s >= 0 && s < 4 ? n[s] : "unknown";
}

const char *store_trial_status_name(int s)
{
    static const char *n[] = {"pending", "running", "done", "failed", "skipped"};
    return s >= 0 && s < 5 ? n[s] : "unknown";
}

int sq_migrate(struct store *s, const struct store_params *p, int64_t from)
{
    int total = N_MIGRATIONS + p->n_extra_migrations;
    for (int v = (int)from; v < total; v++) {
        const char *sql = v < N_MIGRATIONS ? migrations[v] : p->extra_migrations[v - N_MIGRATIONS];
        char what[96], set[64];
        snprintf(what, sizeof what, "migrating the schema to version %d", v + 1);
        snprintf(set, sizeof set, "PRAGMA user_version=%d", v + 1);
        int rc = sq_exec(s, "BEGIN IMMEDIATE", what);
        /* another qgate may have migrated while this one waited for the
         * write lock: re-read the version inside the transaction */
        int64_t now = 0;
        if (!rc) rc = sq_pragma_int(s, "PRAGMA user_version", &now);
        if (!rc && now > v) {
            rc = sq_exec(s, "COMMIT", what);
            if (rc) return rc;
            v = (int)now - 1;
            continue;
        }
        if (!rc) rc = sq_exec(s, sql, what);
        if (!rc && v == 0) {
            char app[64];
            snprintf(app, sizeof app, "PRAGMA application_id=%d", STORE_APPLICATION_ID);
            rc = sq_exec(s, app, what);
        }
        if (!rc) rc = sq_exec(s, set, what);
        if (!rc) rc = sq_exec(s, "COMMIT", what);
        if (rc) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return rc;
        }
    }
    s->version = total;
    return QG_OK;
}

/* Reads version and identity; refuses foreign, newer and damaged files. */
int sq_check_identity(struct store *s, const struct store_params *p, int64_t *version)
{
    /* one statement, so one snapshot: another qgate may be creating the
     * file, and version, id and tables must come from the same state */
    int64_t app = 0, tables = 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT (SELECT user_version FROM pragma_user_version), "
                                "(SELECT application_id FROM pragma_application_id), "
                                "(SELECT count(*) FROM sqlite_master)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *version = sqlite3_column_int64(st, 0);
        app = sqlite3_column_int64(st, 1);
        tables = sqlite3_column_int64(st, 2);
    }
    rc = rc == SQLITE_ROW ? QG_OK : sq_fail(s, "reading the database header");
    sqlite3_finalize(st);
    if (rc) return rc;
    if (app != STORE_APPLICATION_ID && (tables > 0 || *version != 0))
        return qg_errf(s->err, sizeof s->err, QG_ERR_DATA,
                       "%s: an SQLite database that qgate did not make (application_id %lld); "
                       "refusing to modify it",
                       s->path, (long long)app);
    int known = N_MIGRATIONS + p->n_extra_migrations;
    if (*version > known)
        return qg_errf(s->err, sizeof s->err, QG_ERR_VERSION,
                       "%s: made by a newer qgate (schema version %lld; this qgate %s knows up to "
                       "%d); upgrade qgate to read it",
                       s->path, (long long)*version, QG_VERSION, known);
    return QG_OK;
}

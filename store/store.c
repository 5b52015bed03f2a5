/* store — SQLite results database: schema, migrations, writes, listings. */
#include "store/store.h"
#include "metrics/rows.h"
#include "metrics/verdict.h"
#include "core/status.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof *migrations))

enum { ST_ITEM_PUT, ST_COUNT };

struct store {
    sqlite3 *db;
    char *path;
    int version;
    int readonly;
    int busy_ms; /* how long a writer waits for another */
    sqlite3_stmt *st[ST_COUNT];
    char err[QG_ERRMSG_MAX];
};

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

struct store_params store_default_params(void)
{
    struct store_params p = {.readonly = 0, .busy_timeout_ms = 10000};
    return p;
}

/* Maps an SQLite result code to a qgate status. */
static int map_rc(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return QG_OK;
    case SQLITE_NOTADB:
        return QG_ERR_DATA;
    case SQLITE_CORRUPT:
        return QG_ERR_CORRUPT;
    case SQLITE_NOMEM:
        return QG_ERR_NOMEM;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
        return QG_ERR_DATA;
    case SQLITE_CANTOPEN:
        return QG_ERR_NOINPUT;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL:
        return QG_ERR_IO;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return QG_ERR_BUSY;
    }
    return QG_ERR_INTERNAL;
}

/* Records the connection's last error with context and returns its status. */
static int db_fail(struct store *s, const char *what)
{
    int code = sqlite3_extended_errcode(s->db);
    int st = map_rc(code);
    const char *hint = "";
    if (st == QG_ERR_CORRUPT) hint = " (the database file is corrupted; restore it from a copy)";
    if (st == QG_ERR_DATA && (code & 0xff) == SQLITE_NOTADB) hint = " (not an SQLite database)";
    if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
        snprintf(s->err, sizeof s->err,
                 "%s: %s: database is busy (another qgate is writing; waited %.0f s for it)",
                 s->path, what, s->busy_ms / 1000.0);
        return st;
    }
    snprintf(s->err, sizeof s->err, "%s: %s: %s%s", s->path, what, sqlite3_errmsg(s->db), hint);
    return st;
}

const char *store_errmsg(const struct store *s)
{
    return s ? s->err : "no store";
}

const char *store_path(const struct store *s)
{
    return s->path;
}

int store_schema_version(const struct store *s)
{
    return s->version;
}

static int exec(struct store *s, const char *sql, const char *what)
{
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? QG_OK : db_fail(s, what);
}

static int pragma_int(struct store *s, const char *sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    int status = rc == SQLITE_OK ? QG_OK : db_fail(s, "reading the database header");
    sqlite3_finalize(st);
    return status;
}

/* A non-empty file must start with SQLite's header; checked before SQLite
 * touches it, so that qgate never rewrites a file that is not a database. */
static int check_header(const char *path, char *err, int errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return QG_OK;
        return qg_errf(err, (size_t)errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
    }
    struct stat stt;
    char head[16] = {0};
    int rc = QG_OK;
    if (fstat(fd, &stt) != 0 || !S_ISREG(stt.st_mode))
        rc = qg_errf(err, (size_t)errlen, QG_ERR_DATA, "%s: not a regular file", path);
    else if (stt.st_size > 0 &&
             (read(fd, head, 16) != 16 || memcmp(head, "SQLite format 3", 16) != 0))
        rc = qg_errf(err, (size_t)errlen, QG_ERR_DATA,
                     "%s: not an SQLite database (refusing to overwrite it; check --db)", path);
    close(fd);
    return rc;
}

static int migrate(struct store *s, const struct store_params *p, int64_t from)
{
    int total = N_MIGRATIONS + p->n_extra_migrations;
    for (int v = (int)from; v < total; v++) {
        const char *sql = v < N_MIGRATIONS ? migrations[v] : p->extra_migrations[v - N_MIGRATIONS];
        char what[96], set[64];
        snprintf(what, sizeof what, "migrating the schema to version %d", v + 1);
        snprintf(set, sizeof set, "PRAGMA user_version=%d", v + 1);
        int rc = exec(s, "BEGIN IMMEDIATE", what);
        /* another qgate may have migrated while this one waited for the
         * write lock: re-read the version inside the transaction */
        int64_t now = 0;
        if (!rc) rc = pragma_int(s, "PRAGMA user_version", &now);
        if (!rc && now > v) {
            rc = exec(s, "COMMIT", what);
            if (rc) return rc;
            v = (int)now - 1;
            continue;
        }
        if (!rc) rc = exec(s, sql, what);
        if (!rc && v == 0) {
            char app[64];
            snprintf(app, sizeof app, "PRAGMA application_id=%d", STORE_APPLICATION_ID);
            rc = exec(s, app, what);
        }
        if (!rc) rc = exec(s, set, what);
        if (!rc) rc = exec(s, "COMMIT", what);
        if (rc) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return rc;
        }
    }
    s->version = total;
    return QG_OK;
}

/* Reads version and identity; refuses foreign, newer and damaged files. */
static int check_identity(struct store *s, const struct store_params *p, int64_t *version)
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
    rc = rc == SQLITE_ROW ? QG_OK : db_fail(s, "reading the database header");
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

static int quick_check(struct store *s)
{
    struct stat stt;
    if (stat(s->path, &stt) != 0 || stt.st_size > ((off_t)64 << 20)) return QG_OK;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int status = QG_OK;
    if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(st, 0);
        if (!r || strcmp(r, "ok") != 0)
            status = qg_errf(s->err, sizeof s->err, QG_ERR_CORRUPT,
                             "%s: the database file is corrupted (%s); restore it from a copy",
                             s->path, r ? r : "?");
    } else {
        status = db_fail(s, "checking integrity");
    }
    sqlite3_finalize(st);
    return status;
}

/* "file:" URI of path with ?immutable=1: the file read as it is, with no
 * locks and no -shm (for read-only media). NULL when out of memory. */
static char *immutable_uri(const char *path)
{
    struct sbuf b;
    sbuf_init(&b, 0);
    sbuf_printf(&b, "file:");
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        if (*c == '%' || *c == '?' || *c == '#' || *c < 0x21 || *c > 0x7e)
            sbuf_printf(&b, "%%%02X", *c);
        else
            sbuf_printf(&b, "%c", *c);
    sbuf_printf(&b, "?immutable=1");
    if (b.failed) {
        sbuf_release(&b);
        return NULL;
    }
    return b.data;
}

/* A read-only open that could not make the -shm file WAL mode needs (a
 * read-only mount or directory) reads the file as immutable instead —
 * unless a -wal file holds changes that such a read would miss. */
static int reopen_immutable(struct store *s)
{
    int code = sqlite3_extended_errcode(s->db) & 0xff;
    if (code != SQLITE_CANTOPEN && code != SQLITE_READONLY && code != SQLITE_IOERR)
        return QG_ERR_NOTFOUND;
    char wal[4200];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", s->path);
    if (stat(wal, &st) == 0 && st.st_size > 0)
        return qg_errf(s->err, sizeof s->err, QG_ERR_NOINPUT,
                       "%s: cannot be read here: its write-ahead log %s holds changes, and "
                       "reading them needs write access to the folder (copy both files to a "
                       "writable place)",
                       s->path, wal);
    char *uri = immutable_uri(s->path);
    if (!uri) return qg_errf(s->err, sizeof s->err, QG_ERR_NOMEM, "out of memory");
    sqlite3_close(s->db);
    s->db = NULL;
    int rc = sqlite3_open_v2(uri, &s->db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    free(uri);
    if (rc != SQLITE_OK)
        return s->db ? db_fail(s, "cannot open")
                     : qg_errf(s->err, sizeof s->err, QG_ERR_NOMEM, "out of memory");
    sqlite3_extended_result_codes(s->db, 1);
    return QG_OK;
}

static int open_db(struct store *s, const struct store_params *p)
{
    int flags = (p->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        if (!s->db)
            return qg_errf(s->err, sizeof s->err, QG_ERR_NOMEM, "%s: out of memory", s->path);
        int st = db_fail(s, p->readonly ? "cannot open" : "cannot open or create");
        return st == QG_ERR_NOINPUT && !p->readonly ? QG_ERR_CANTCREAT : st;
    }
    sqlite3_extended_result_codes(s->db, 1);
    s->busy_ms = p->busy_timeout_ms > 0 ? p->busy_timeout_ms : 10000;
    sqlite3_busy_timeout(s->db, s->busy_ms);
    int64_t version = 0;
    rc = check_identity(s, p, &version);
    if (rc && p->readonly) {
        int r2 = reopen_immutable(s);
        if (r2 != QG_ERR_NOTFOUND) rc = r2 ? r2 : check_identity(s, p, &version);
    }
    if (rc) return rc;
    if ((rc = quick_check(s))) return rc;
    if ((rc = exec(s, "PRAGMA foreign_keys=ON", "enabling foreign keys"))) return rc;
    if (p->readonly) {
        /* an older schema is read as it is: readers use only the tables
         * of v1 (a writer migrates it) */
        if (version == 0)
            return qg_errf(s->err, sizeof s->err, QG_ERR_NOINPUT, "%s: empty database (no runs)",
                           s->path);
        s->version = (int)version;
        return QG_OK;
    }
    /* switching to WAL needs a moment alone with the file: another qgate
     * creating it at the same time can hold it briefly */
    for (int tries = 0; (rc = exec(s, "PRAGMA journal_mode=WAL", "enabling WAL")) && tries < 200 &&
                        (sqlite3_extended_errcode(s->db) & 0xff) == SQLITE_BUSY;
         tries++)
        usleep(20000);
    if (rc || (rc = exec(s, "PRAGMA synchronous=NORMAL", "setting synchronous"))) return rc;
    return migrate(s, p, version);
}

int store_open(const char *path, const struct store_params *p, struct store **out, char *err,
               int errlen)
{
    *out = NULL;
    struct store_params def = store_default_params();
    if (!p) p = &def;
    int rc = check_header(path, err, errlen);
    if (rc) return rc;
    if (p->readonly && access(path, F_OK) != 0)
        return qg_errf(err, (size_t)errlen, QG_ERR_NOINPUT, "%s: no such database", path);
    struct store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = qg_strdup(path))) {
        free(s);
        return qg_errf(err, (size_t)errlen, QG_ERR_NOMEM, "out of memory");
    }
    s->readonly = p->readonly;
    rc = open_db(s, p);
    if (rc) {
        qg_errf(err, (size_t)errlen, rc, "%s", s->err);
        store_close(s);
        return rc;
    }
    *out = s;
    return QG_OK;
}

void store_close(struct store *s)
{
    if (!s) return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i]);
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

int store_begin(struct store *s)
{
    return exec(s, "BEGIN IMMEDIATE", "starting a transaction");
}
int store_commit(struct store *s)
{
    return exec(s, "COMMIT", "committing");
}
int store_rollback(struct store *s)
{
    /* a failed COMMIT or a busy BEGIN may have ended the transaction already */
    if (sqlite3_get_autocommit(s->db)) return QG_OK;
    return exec(s, "ROLLBACK", "rolling back");
}

/* ---- binding helpers: NULL strings, NAN doubles and negative "absent"
 * integers become SQL NULL ---- */
static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static void bind_f64(sqlite3_stmt *st, int i, double v)
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

static void bind_opt_i64(sqlite3_stmt *st, int i, int64_t v)
{
    if (v < 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

static int prepare(struct store *s, const char *sql, sqlite3_stmt **st)
{
    return sqlite3_prepare_v2(s->db, sql, -1, st, NULL) == SQLITE_OK
               ? QG_OK
               : db_fail(s, "preparing a query");
}

/* Steps a write statement to completion; finalizes it unless cached. */
static int step_done(struct store *s, sqlite3_stmt *st, const char *what, int cached, int64_t *id)
{
    int rc = sqlite3_step(st);
    int status = rc == SQLITE_DONE ? QG_OK : db_fail(s, what);
    if (!status && id) *id = sqlite3_last_insert_rowid(s->db);
    if (cached) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    } else {
        sqlite3_finalize(st);
    }
    return status;
}

static void random_uid(char out[33])
{
    unsigned char b[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    if (n != sizeof b) sqlite3_randomness((int)sizeof b, b);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

int store_run_create(struct store *s, const struct store_run_new *r, int64_t *run_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "INSERT INTO runs(uid, created_at, status, command, qgate_version, host, "
                     "suite_name, suite_hash, suite_json, seed, repeats, shard_index, shard_count, "
                     "kernels) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     &st);
    if (rc) return rc;
    char uid[33], now[32], host[256] = "";
    random_uid(uid);
    qg_utc_now(now);
    gethostname(host, sizeof host - 1);
    sqlite3_bind_text(st, 1, uid, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, STORE_RUN_RUNNING);
    bind_text(st, 4, r->command);
    sqlite3_bind_text(st, 5, QG_VERSION, -1, SQLITE_STATIC);
    bind_text(st, 6, host);
    bind_text(st, 7, r->suite_name);
    bind_text(st, 8, r->suite_hash);
    bind_text(st, 9, r->suite_json);
    sqlite3_bind_int64(st, 10, r->seed);
    sqlite3_bind_int(st, 11, r->repeats);
    sqlite3_bind_int(st, 12, r->shard_index);
    sqlite3_bind_int(st, 13, r->shard_count > 0 ? r->shard_count : 1);
    bind_text(st, 14, r->kernels);
    return step_done(s, st, "creating a run", 0, run_id);
}

int store_run_set_status(struct store *s, int64_t run_id, int status)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "UPDATE runs SET status=?, finished_at=? WHERE id=?", &st);
    if (rc) return rc;
    char now[32];
    qg_utc_now(now);
    sqlite3_bind_int(st, 1, status);
    bind_text(st, 2, status == STORE_RUN_RUNNING ? NULL : now);
    sqlite3_bind_int64(st, 3, run_id);
    rc = step_done(s, st, "updating a run", 0, NULL);
    if (!rc && sqlite3_changes(s->db) == 0)
        return qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND, "%s: no run %lld", s->path,
                       (long long)run_id);
    return rc;
}

int store_model_add(struct store *s, int64_t run_id, const struct store_model_new *m,
                    int64_t *model_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "INSERT INTO models(run_id, name, spec, backend, path, sha256, file_bytes, "
                     "format, arch, n_params, types_json, role) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                     &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    bind_text(st, 2, m->name);
    bind_text(st, 3, m->spec);
    bind_text(st, 4, m->backend);
    bind_text(st, 5, m->path);
    bind_text(st, 6, m->sha256);
    bind_opt_i64(st, 7, m->file_bytes);
    bind_text(st, 8, m->format);
    bind_text(st, 9, m->arch);
    bind_opt_i64(st, 10, m->n_params);
    bind_text(st, 11, m->types_json);
    sqlite3_bind_int(st, 12, m->role);
    return step_done(s, st, "adding a model", 0, model_id);
}

int store_dataset_add(struct store *s, const char *path, const char *sha256, int64_t bytes,
                      int64_t *dataset_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "INSERT INTO datasets(path, sha256, bytes) VALUES(?,?,?) "
                     "ON CONFLICT(path, sha256) DO UPDATE SET bytes=excluded.bytes RETURNING id",
                     &st);
    if (rc) return rc;
    bind_text(st, 1, path);
    bind_text(st, 2, sha256);
    bind_opt_i64(st, 3, bytes);
    rc = sqlite3_step(st);
    int status = rc == SQLITE_ROW ? QG_OK : db_fail(s, "adding a dataset");
    if (!status) *dataset_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return status;
}

int store_task_add(struct store *s, int64_t run_id, const struct store_task_new *t,
                   int64_t *task_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "INSERT INTO tasks(run_id, name, kind, config_json, config_hash, n_items, "
                     "critical) VALUES(?,?,?,?,?,?,?)",
                     &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    bind_text(st, 2, t->name);
    sqlite3_bind_int(st, 3, t->kind);
    bind_text(st, 4, t->config_json);
    bind_text(st, 5, t->config_hash ? t->config_hash : "");
    bind_opt_i64(st, 6, t->n_items);
    sqlite3_bind_int(st, 7, t->critical);
    return step_done(s, st, "adding a task", 0, task_id);
}

int store_task_link_dataset(struct store *s, int64_t task_id, int64_t dataset_id, const char *role)
{
    sqlite3_stmt *st;
    int rc = prepare(
        s, "INSERT OR IGNORE INTO task_datasets(task_id, dataset_id, role) VALUES(?,?,?)", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, task_id);
    sqlite3_bind_int64(st, 2, dataset_id);
    bind_text(st, 3, role ? role : "data");
    return step_done(s, st, "linking a dataset", 0, NULL);
}

int store_trial_create(struct store *s, const struct store_trial_new *t, int64_t *trial_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
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
    bind_text(st, 7, now);
    return step_done(s, st, "creating a trial", 0, trial_id);
}

int store_trial_finish(struct store *s, int64_t trial_id, const struct store_trial_result *r)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "UPDATE trials SET status=?, finished_at=?, n_items=?, n_tokens=?, "
                     "wall_seconds=?, deterministic=?, metrics_json=?, error=? WHERE id=?",
                     &st);
    if (rc) return rc;
    char now[32];
    qg_utc_now(now);
    sqlite3_bind_int(st, 1, r->status);
    sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
    bind_opt_i64(st, 3, r->n_items);
    bind_opt_i64(st, 4, r->n_tokens);
    bind_f64(st, 5, r->wall_seconds);
    bind_opt_i64(st, 6, r->deterministic);
    bind_text(st, 7, r->metrics_json);
    bind_text(st, 8, r->error);
    sqlite3_bind_int64(st, 9, trial_id);
    rc = step_done(s, st, "finishing a trial", 0, NULL);
    if (!rc && sqlite3_changes(s->db) == 0)
        return qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND, "%s: no trial %lld", s->path,
                       (long long)trial_id);
    return rc;
}

int store_item_put(struct store *s, const struct store_item *it)
{
    if (!s->st[ST_ITEM_PUT]) {
        int rc = prepare(s,
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
    bind_opt_i64(st, 3, it->cluster);
    bind_f64(st, 4, it->nll);
    bind_opt_i64(st, 5, it->n_tokens);
    bind_opt_i64(st, 6, it->n_bytes);
    bind_opt_i64(st, 7, it->n_words);
    bind_opt_i64(st, 8, it->correct);
    bind_f64(st, 9, it->score);
    bind_text(st, 10, it->prediction);
    bind_text(st, 11, it->extracted);
    bind_text(st, 12, it->output_hash);
    bind_f64(st, 13, it->kld_sum);
    bind_f64(st, 14, it->top1_agree);
    bind_f64(st, 15, it->dp_sum);
    bind_text(st, 16, it->extra_json);
    return step_done(s, st, "writing an item", 1, NULL);
}

int store_item_count(struct store *s, int64_t trial_id, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "SELECT count(*) FROM items WHERE trial_id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    rc = sqlite3_step(st);
    int status = rc == SQLITE_ROW ? QG_OK : db_fail(s, "counting items");
    if (!status) *n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return status;
}

/* ---- reading into JSON ---- */

/* Adds column i of the current row to obj under its name, typed. */
static int add_column(cJSON *obj, sqlite3_stmt *st, int i)
{
    const char *name = sqlite3_column_name(st, i);
    cJSON *v = NULL;
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
        v = cJSON_CreateNumber((double)sqlite3_column_int64(st, i));
        break;
    case SQLITE_FLOAT:
        v = cJSON_CreateNumber(sqlite3_column_double(st, i));
        break;
    case SQLITE_NULL:
        v = cJSON_CreateNull();
        break;
    default:
        v = cJSON_CreateString((const char *)sqlite3_column_text(st, i));
        break;
    }
    return v && cJSON_AddItemToObject(obj, name, v) ? QG_OK : QG_ERR_NOMEM;
}

/* Runs a query with one optional int64 parameter and returns its rows as an
 * array of objects keyed by column name. */
static int query_rows(struct store *s, const char *sql, int64_t param, int has_param, cJSON **out)
{
    sqlite3_stmt *st;
    *out = NULL;
    int rc = prepare(s, sql, &st);
    if (rc) return rc;
    if (has_param) sqlite3_bind_int64(st, 1, param);
    cJSON *arr = cJSON_CreateArray();
    int status = arr ? QG_OK : QG_ERR_NOMEM;
    while (!status && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        cJSON *row = cJSON_CreateObject();
        if (!row || !cJSON_AddItemToArray(arr, row)) {
            cJSON_Delete(row);
            status = QG_ERR_NOMEM;
            break;
        }
        for (int i = 0; i < sqlite3_column_count(st) && !status; i++)
            status = add_column(row, st, i);
    }
    if (!status && rc != SQLITE_DONE) status = db_fail(s, "reading");
    sqlite3_finalize(st);
    if (status) {
        cJSON_Delete(arr);
        return status;
    }
    *out = arr;
    return QG_OK;
}

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
    int rc = query_rows(s,
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
    int rc = query_rows(s, "SELECT * FROM runs WHERE id=?", run_id, 1, &runs);
    if (!rc && cJSON_GetArraySize(runs) == 0)
        rc = qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND, "%s: no run %lld (see 'qgate runs')",
                     s->path, (long long)run_id);
    if (!rc)
        rc = query_rows(s,
                        "SELECT id, name, spec, backend, path, sha256, file_bytes, format, arch, "
                        "n_params, types_json, role FROM models WHERE run_id=? ORDER BY id",
                        run_id, 1, &models);
    if (!rc)
        rc = query_rows(s,
                        "SELECT t.id, t.name, t.kind, t.config_hash, t.n_items, t.critical, "
                        "(SELECT group_concat(d.path || ' ' || d.sha256, '; ') FROM task_datasets "
                        " td JOIN datasets d ON d.id=td.dataset_id WHERE td.task_id=t.id) "
                        "AS datasets FROM tasks t WHERE run_id=? ORDER BY id",
                        run_id, 1, &tasks);
    if (!rc)
        rc = query_rows(s,
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

static int one_int64(struct store *s, sqlite3_stmt *st, const char *what, int64_t *out)
{
    int rc = sqlite3_step(st);
    int status = rc == SQLITE_ROW ? QG_OK : rc == SQLITE_DONE ? QG_ERR_NOTFOUND : db_fail(s, what);
    if (!status) *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return status;
}

int store_run_latest(struct store *s, int64_t *run_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "SELECT id FROM runs ORDER BY id DESC LIMIT 1", &st);
    if (rc) return rc;
    rc = one_int64(s, st, "finding the latest run", run_id);
    if (rc == QG_ERR_NOTFOUND) qg_errf(s->err, sizeof s->err, rc, "%s: no runs", s->path);
    return rc;
}

int store_model_find(struct store *s, int64_t run_id, const char *name, int64_t *model_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "SELECT id FROM models WHERE run_id=? AND name=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    bind_text(st, 2, name);
    rc = one_int64(s, st, "finding a model", model_id);
    if (rc == QG_ERR_NOTFOUND)
        qg_errf(s->err, sizeof s->err, rc, "%s: run %lld has no model '%s' (see 'qgate show %lld')",
                s->path, (long long)run_id, name, (long long)run_id);
    return rc;
}

int store_trial_find(struct store *s, int64_t run_id, const char *model, int64_t task_id,
                     int repeat, int64_t *trial_id, int *status)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "SELECT tr.id, tr.status FROM trials tr JOIN models m ON m.id=tr.model_id "
                     "WHERE tr.run_id=? AND m.name=? AND tr.task_id=? AND tr.repeat=?",
                     &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    bind_text(st, 2, model);
    sqlite3_bind_int64(st, 3, task_id);
    sqlite3_bind_int(st, 4, repeat);
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW    ? QG_OK
              : rc == SQLITE_DONE ? QG_ERR_NOTFOUND
                                  : db_fail(s, "finding a trial");
    if (!out) {
        *trial_id = sqlite3_column_int64(st, 0);
        if (status) *status = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    return out;
}

static double col_f64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

int store_items_read(struct store *s, int64_t trial_id, struct item_row **rows, int64_t *n)
{
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = prepare(s,
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
        r->nll = col_f64(st, 3);
        r->score = col_f64(st, 4);
        r->kld_sum = col_f64(st, 5);
        r->top1_agree = col_f64(st, 6);
        r->dp_sum = col_f64(st, 7);
        r->correct = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 8);
        const char *h = (const char *)sqlite3_column_text(st, 9);
        snprintf(r->output_hash, sizeof r->output_hash, "%s", h ? h : "");
    }
    int out = rc == SQLITE_DONE ? QG_OK : db_fail(s, "reading items");
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
    int rc = prepare(
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
        v[(*n)++] = col_f64(st, 0);
    }
    int out = rc == SQLITE_DONE ? QG_OK : db_fail(s, "reading items");
    sqlite3_finalize(st);
    if (out) {
        free(v);
        *n = 0;
        return out;
    }
    *values = v;
    return QG_OK;
}

int store_trial_metrics(struct store *s, int64_t trial_id, char **json)
{
    *json = NULL;
    sqlite3_stmt *st;
    int rc = prepare(s, "SELECT metrics_json FROM trials WHERE id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW    ? QG_OK
              : rc == SQLITE_DONE ? QG_ERR_NOTFOUND
                                  : db_fail(s, "reading a trial");
    if (!out && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *json = qg_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
}

int store_comparison_add(struct store *s, const struct store_comparison_new *c, int64_t *id)
{
    sqlite3_stmt *st;
    int rc = prepare(
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
    bind_text(st, 6, c->command);
    bind_text(st, 7, c->policy_json);
    sqlite3_bind_int64(st, 8, c->bootstrap_seed);
    sqlite3_bind_int(st, 9, c->bootstrap_iters);
    sqlite3_bind_int(st, 10, c->verdict);
    bind_text(st, 11, c->summary_json);
    return step_done(s, st, "storing a comparison", 0, id);
}

int store_verdict_row_add(struct store *s, const struct store_verdict_row *r)
{
    sqlite3_stmt *st;
    int rc = prepare(
        s,
        "INSERT INTO verdict_rows(comparison_id, task_id, metric, base_value, cand_value, delta, "
        "ci_low, ci_high, margin, noise, n_units, flips_b, flips_c, p_value, p_holm, mde, "
        "items_needed, verdict, reason) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, r->comparison_id);
    sqlite3_bind_int64(st, 2, r->task_id);
    bind_text(st, 3, r->metric);
    bind_f64(st, 4, r->base_value);
    bind_f64(st, 5, r->cand_value);
    bind_f64(st, 6, r->delta);
    bind_f64(st, 7, r->ci_low);
    bind_f64(st, 8, r->ci_high);
    bind_f64(st, 9, r->margin);
    bind_f64(st, 10, r->noise);
    bind_opt_i64(st, 11, r->n_units);
    bind_opt_i64(st, 12, r->flips_b);
    bind_opt_i64(st, 13, r->flips_c);
    bind_f64(st, 14, r->p_value);
    bind_f64(st, 15, r->p_holm);
    bind_f64(st, 16, r->mde);
    bind_opt_i64(st, 17, r->items_needed);
    sqlite3_bind_int(st, 18, r->verdict);
    bind_text(st, 19, r->reason);
    return step_done(s, st, "storing a verdict row", 0, NULL);
}

int store_run_set_suite_json(struct store *s, int64_t run_id, const char *json)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "UPDATE runs SET suite_json=? WHERE id=?", &st);
    if (rc) return rc;
    bind_text(st, 1, json);
    sqlite3_bind_int64(st, 2, run_id);
    return step_done(s, st, "storing the suite", 0, NULL);
}

int store_run_mark_deterministic(struct store *s, int64_t run_id, int deterministic)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "UPDATE trials SET deterministic=? WHERE run_id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int(st, 1, deterministic ? 1 : 0);
    sqlite3_bind_int64(st, 2, run_id);
    return step_done(s, st, "marking determinism", 0, NULL);
}

int store_run_suite_json(struct store *s, int64_t run_id, char **json)
{
    *json = NULL;
    sqlite3_stmt *st;
    int rc = prepare(s, "SELECT suite_json FROM runs WHERE id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW    ? QG_OK
              : rc == SQLITE_DONE ? QG_ERR_NOTFOUND
                                  : db_fail(s, "reading a run");
    if (!out && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *json = qg_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
}

int store_trial_restart(struct store *s, int64_t trial_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "UPDATE trials SET status=?, finished_at=NULL, error=NULL WHERE id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int(st, 1, STORE_TRIAL_RUNNING);
    sqlite3_bind_int64(st, 2, trial_id);
    return step_done(s, st, "restarting a trial", 0, NULL);
}

/* runs a statement with up to 3 int64 parameters and no result */
static int exec3(struct store *s, const char *sql, int np, int64_t a, int64_t b, int64_t c,
                 const char *what)
{
    sqlite3_stmt *st;
    int rc = prepare(s, sql, &st);
    if (rc) return rc;
    int64_t v[3] = {a, b, c};
    for (int i = 0; i < np; i++)
        sqlite3_bind_int64(st, i + 1, v[i]);
    return step_done(s, st, what, 0, NULL);
}

struct shard_info {
    int64_t run, seed, repeats, index, count;
    char suite_hash[72], models[2048];
};

static int shard_read(struct store *s, const char *path, struct shard_info *si)
{
    sqlite3_stmt *st;
    int rc = prepare(
        s,
        "SELECT count(*), max(id), max(seed), max(repeats), max(shard_index), max(shard_count), "
        "max(suite_hash), (SELECT group_concat(name || '=' || coalesce(sha256, path), ',') FROM "
        "(SELECT name, sha256, path FROM src.models ORDER BY id)) FROM src.runs",
        &st);
    if (rc) return rc;
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW ? QG_OK : db_fail(s, "reading a shard");
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
    }
    sqlite3_finalize(st);
    return out;
}

static int attach(struct store *s, const char *path)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "ATTACH DATABASE ? AS src", &st);
    if (rc) return rc;
    bind_text(st, 1, path);
    return step_done(s, st, "attaching a shard", 0, NULL);
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
/* shards computed on other CPUs: the merged run names every kernel set
 * its numbers came from ("a; b") */
static int merge_note_kernels(struct store *s, int64_t run_id)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "UPDATE runs SET kernels = (SELECT CASE WHEN k IS NULL OR k = '' THEN kernels "
                     "WHEN kernels IS NULL OR kernels = '' THEN k WHEN instr('; ' || kernels || "
                     "'; ', '; ' || k || '; ') THEN kernels ELSE kernels || '; ' || k END FROM "
                     "(SELECT max(kernels) AS k FROM src.runs)) WHERE id = ?",
                     &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    return step_done(s, st, "merging the shards' kernel sets", 0, NULL);
}

static int merge_copy_run(struct store *s, int64_t *run_id)
{
    int rc = store_begin(s);
    char uid[33];
    random_uid(uid);
    sqlite3_stmt *st = NULL;
    if (!rc)
        rc = prepare(s,
                     "INSERT INTO runs(uid, created_at, finished_at, status, command, "
                     "qgate_version, host, suite_name, "
                     "suite_hash, suite_json, seed, repeats, shard_index, shard_count, kernels) "
                     "SELECT ?1, created_at, NULL, "
                     "?2, command, qgate_version, host, suite_name, suite_hash, suite_json, seed, "
                     "repeats, 0, 1, kernels "
                     "FROM src.runs",
                     &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, uid, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 2, STORE_RUN_RUNNING);
        rc = step_done(s, st, "merging the run", 0, run_id);
    }
    int64_t R = *run_id;
    if (!rc)
        rc = exec3(s,
                   "INSERT INTO models(run_id, name, spec, backend, path, sha256, file_bytes, "
                   "format, arch, n_params, "
                   "types_json, role) SELECT ?, name, spec, backend, path, sha256, file_bytes, "
                   "format, arch, n_params, "
                   "types_json, role FROM src.models ORDER BY id",
                   1, R, 0, 0, "merging models");
    if (!rc)
        rc = exec3(s,
                   "INSERT INTO tasks(run_id, name, kind, config_json, config_hash, n_items, "
                   "critical) SELECT ?, name, "
                   "kind, config_json, config_hash, n_items, critical FROM src.tasks ORDER BY id",
                   1, R, 0, 0, "merging tasks");
    if (!rc)
        rc = exec3(s,
                   "INSERT OR IGNORE INTO datasets(path, sha256, bytes) SELECT path, sha256, bytes "
                   "FROM src.datasets",
                   0, 0, 0, 0, "merging datasets");
    if (!rc)
        rc = exec3(s,
                   "INSERT OR IGNORE INTO task_datasets(task_id, dataset_id, role) SELECT t.id, "
                   "d.id, td.role FROM "
                   "src.task_datasets td JOIN src.tasks st ON st.id=td.task_id JOIN tasks t ON "
                   "t.run_id=? AND t.name=st.name "
                   "JOIN src.datasets sd ON sd.id=td.dataset_id JOIN datasets d ON d.path=sd.path "
                   "AND d.sha256=sd.sha256",
                   1, R, 0, 0, "merging dataset links");
    if (!rc)
        rc =
            exec3(s,
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
    rc = exec3(s,
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
        rc = exec3(s,
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
    bind_opt_i64(up, 2, tokens);
    bind_text(up, 3, mj);
    sqlite3_bind_int64(up, 4, trial);
    rc = step_done(s, up, "merging aggregates", 1, NULL);
    free(mj);
    return rc;
}

/* Every trial's totals, then the run's status: done when every trial is. */
static int merge_aggregate(struct store *s, int64_t R)
{
    int rc = store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *sel = NULL, *up = NULL;
    rc = prepare(s, "SELECT id FROM trials WHERE run_id=? ORDER BY id", &sel);
    if (!rc)
        rc = prepare(s, "UPDATE trials SET n_items=?, n_tokens=?, metrics_json=? WHERE id=?", &up);
    if (!rc) sqlite3_bind_int64(sel, 1, R);
    int step;
    while (!rc && (step = sqlite3_step(sel)) == SQLITE_ROW)
        rc = merge_trial_totals(s, sqlite3_column_int64(sel, 0), up);
    if (!rc && step != SQLITE_DONE) rc = db_fail(s, "merging aggregates");
    sqlite3_finalize(sel);
    sqlite3_finalize(up);
    sqlite3_stmt *st = NULL;
    if (!rc)
        rc = prepare(s,
                     "UPDATE runs SET status=CASE WHEN (SELECT count(*) FROM trials WHERE "
                     "run_id=?1 AND status<>?2)=0 "
                     "THEN ?3 ELSE ?4 END, finished_at=datetime('now') WHERE id=?1",
                     &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, R);
        sqlite3_bind_int(st, 2, STORE_TRIAL_DONE);
        sqlite3_bind_int(st, 3, STORE_RUN_DONE);
        sqlite3_bind_int(st, 4, STORE_RUN_FAILED);
        rc = step_done(s, st, "finishing the merged run", 0, NULL);
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
            exec3(s, "DELETE FROM runs WHERE id=?", 1, *run_id, 0, 0, "removing a failed merge");
        snprintf(s->err, sizeof s->err, "%s", keep);
        *run_id = 0;
    }
    return rc;
}

static char *col_dup(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL
               ? NULL
               : qg_strdup((const char *)sqlite3_column_text(st, i));
}

int store_comparison_get(struct store *s, int64_t id, int64_t *found_id, int64_t *run_id,
                         char **summary_json, char **created_at)
{
    *summary_json = NULL;
    if (created_at) *created_at = NULL;
    sqlite3_stmt *st;
    int rc =
        prepare(s,
                id > 0 ? "SELECT id, run_id, summary_json, created_at FROM comparisons WHERE id=?"
                       : "SELECT id, run_id, summary_json, created_at FROM comparisons ORDER BY id "
                         "DESC LIMIT 1",
                &st);
    if (rc) return rc;
    if (id > 0) sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW    ? QG_OK
              : rc == SQLITE_DONE ? QG_ERR_NOTFOUND
                                  : db_fail(s, "reading a comparison");
    if (out == QG_ERR_NOTFOUND)
        qg_errf(s->err, sizeof s->err, out,
                id > 0 ? "%s: no comparison %lld (see 'qgate compare')"
                       : "%s: no comparisons yet (run 'qgate compare')",
                s->path, (long long)id);
    if (!out) {
        *found_id = sqlite3_column_int64(st, 0);
        *run_id = sqlite3_column_int64(st, 1);
        *summary_json = col_dup(st, 2);
        if (created_at) *created_at = col_dup(st, 3);
    }
    sqlite3_finalize(st);
    return out;
}

int store_item_text(struct store *s, int64_t trial_id, int64_t idx, char **prediction,
                    char **extracted, char **extra_json)
{
    *prediction = *extracted = *extra_json = NULL;
    sqlite3_stmt *st;
    int rc = prepare(
        s, "SELECT prediction, extracted, extra_json FROM items WHERE trial_id=? AND idx=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    sqlite3_bind_int64(st, 2, idx);
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW    ? QG_OK
              : rc == SQLITE_DONE ? QG_ERR_NOTFOUND
                                  : db_fail(s, "reading an item");
    if (!out) {
        *prediction = col_dup(st, 0);
        *extracted = col_dup(st, 1);
        *extra_json = col_dup(st, 2);
    }
    sqlite3_finalize(st);
    return out;
}

int store_cache_get(struct store *s, const char *key, char **response)
{
    *response = NULL;
    sqlite3_stmt *st;
    int rc = prepare(s, "SELECT response FROM http_cache WHERE key=?", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW    ? QG_OK
              : rc == SQLITE_DONE ? QG_ERR_NOTFOUND
                                  : db_fail(s, "reading the response cache");
    if (!out && !(*response = col_dup(st, 0))) out = QG_ERR_NOMEM;
    sqlite3_finalize(st);
    return out;
}

int store_cache_put(struct store *s, const char *key, const char *endpoint, const char *model,
                    const char *response)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "INSERT OR REPLACE INTO http_cache(key, endpoint, model, response, "
                     "created_at) VALUES(?,?,?,?,?)",
                     &st);
    if (rc) return rc;
    char now[32];
    qg_utc_now(now);
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, endpoint, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, model, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, response, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 5, now, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st) == SQLITE_DONE ? QG_OK : db_fail(s, "writing the response cache");
    sqlite3_finalize(st);
    return rc;
}

/* Column i's blob, copied into malloc'd memory with a NUL after it (*n
 * bytes); NULL when out of memory. */
static char *col_blob_dup(sqlite3_stmt *st, int i, size_t *n)
{
    size_t len = (size_t)sqlite3_column_bytes(st, i);
    const void *b = sqlite3_column_blob(st, i);
    char *out = malloc(len + 1);
    if (!out) return NULL;
    if (len) memcpy(out, b, len);
    out[len] = '\0';
    *n = len;
    return out;
}

int store_text_put(struct store *s, const char *sha256, const char *origin, const char *content,
                   size_t n)
{
    sqlite3_stmt *st;
    int rc = prepare(s,
                     "INSERT OR IGNORE INTO texts(sha256, origin, content, created_at) "
                     "VALUES(?,?,?,?)",
                     &st);
    if (rc) return rc;
    char now[32];
    qg_utc_now(now);
    sqlite3_bind_text(st, 1, sha256, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, origin, -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob64(st, 3, content, n, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, now, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st) == SQLITE_DONE ? QG_OK : db_fail(s, "storing a text");
    sqlite3_finalize(st);
    return rc;
}

int store_text_find(struct store *s, const char *origin, char **content, size_t *n, char sha256[65])
{
    *content = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = prepare(
        s, "SELECT sha256, content FROM texts WHERE origin=? ORDER BY created_at LIMIT 1", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, origin, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW    ? QG_OK
              : rc == SQLITE_DONE ? QG_ERR_NOTFOUND
                                  : db_fail(s, "reading a stored text");
    if (!out) {
        const char *h = (const char *)sqlite3_column_text(st, 0);
        snprintf(sha256, 65, "%s", h ? h : "");
        if (!(*content = col_blob_dup(st, 1, n))) out = QG_ERR_NOMEM;
    }
    sqlite3_finalize(st);
    return out;
}

int store_comparisons_json(struct store *s, int64_t run_id, int64_t limit, cJSON **out)
{
    cJSON *arr;
    int rc = query_rows(s,
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

int store_ref_put(struct store *s, int64_t trial_id, int64_t idx, const void *blob, size_t n)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "INSERT OR REPLACE INTO refs(trial_id, idx, data) VALUES(?,?,?)", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    sqlite3_bind_int64(st, 2, idx);
    sqlite3_bind_blob64(st, 3, blob, n, SQLITE_TRANSIENT);
    return step_done(s, st, "storing a baseline reference", 0, NULL);
}

int store_ref_get(struct store *s, int64_t trial_id, int64_t idx, unsigned char **blob, size_t *n)
{
    *blob = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = prepare(s, "SELECT data FROM refs WHERE trial_id=? AND idx=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    sqlite3_bind_int64(st, 2, idx);
    rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW    ? QG_OK
              : rc == SQLITE_DONE ? QG_ERR_NOTFOUND
                                  : db_fail(s, "reading a baseline reference");
    if (!out && !(*blob = (unsigned char *)col_blob_dup(st, 0, n))) out = QG_ERR_NOMEM;
    if (out == QG_ERR_NOTFOUND)
        qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND,
                "%s: trial %lld keeps no reference of window %lld", s->path, (long long)trial_id,
                (long long)idx);
    sqlite3_finalize(st);
    return out;
}

int store_ref_count(struct store *s, int64_t trial_id, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = prepare(s, "SELECT count(*) FROM refs WHERE trial_id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    return one_int64(s, st, "counting baseline references", n);
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
        if ((rc = prepare(s, sql, &st))) break;
        sqlite3_bind_int64(st, 1, dst_run);
        sqlite3_bind_int64(st, 2, dst_model);
        sqlite3_bind_int64(st, 3, dst_task);
        sqlite3_bind_int64(st, 4, src_run);
        bind_text(st, 5, model);
        bind_text(st, 6, task);
        bind_text(st, 7, src_path ? src_path : s->path);
        rc = step_done(s, st, "copying the stored baseline's trials", 0, NULL);
    }
    if (!rc)
        rc = store_commit(s);
    else
        store_rollback(s);
    if (src_path) detach(s);
    return rc;
}

/* test_store — the SQLite results store: schema, migrations, batching,
 * concurrency, crash safety and refusal of files it must not touch. */
#include "datasets/hash.h"
#include "core/status.h"
#include "store/store.h"
#include "metrics/verdict.h"
#include "tasks/kind.h"
#include "core/util.h"
#include "tests/test.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct store *open_rw(const char *path)
{
    char err[QG_ERRMSG_MAX];
    struct store *s = NULL;
    if (store_open(path, NULL, &s, err, sizeof err) != QG_OK) fprintf(stderr, "%s\n", err);
    return s;
}

static int64_t sql_int(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

static int sql_exec(const char *path, const char *sql)
{
    sqlite3 *db;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

/* A run with two models, one task and a trial per model; returns trial ids. */
static int make_run(struct store *s, int64_t *run, int64_t trials[2])
{
    struct store_run_new r = {.command = "qgate run --suite s.json",
                              .suite_name = "smoke",
                              .suite_hash = "abc",
                              .seed = 7,
                              .repeats = 1,
                              .shard_count = 1};
    if (store_run_create(s, &r, run)) return -1;
    int64_t models[2], task, ds;
    for (int i = 0; i < 2; i++) {
        struct store_model_new m = {.name = i ? "q8" : "base",
                                    .spec = i ? "q8=b.gguf" : "base=a.gguf",
                                    .backend = "cpu",
                                    .path = "a.gguf",
                                    .sha256 = "00ff",
                                    .file_bytes = 100,
                                    .n_params = 1000,
                                    .arch = "llama",
                                    .format = "gguf",
                                    .types_json = "[]",
                                    .role = i};
        if (store_model_add(s, *run, &m, &models[i])) return -1;
    }
    struct store_task_new t = {.name = "wiki",
                               .kind = TASK_PERPLEXITY,
                               .config_json = "{}",
                               .config_hash = "cafe",
                               .n_items = 10};
    if (store_task_add(s, *run, &t, &task)) return -1;
    if (store_dataset_add(s, "wiki.txt", "beef", 123, &ds)) return -1;
    if (store_task_link_dataset(s, task, ds, "corpus")) return -1;
    for (int i = 0; i < 2; i++) {
        struct store_trial_new tr = {
            .run_id = *run, .model_id = models[i], .task_id = task, .repeat = 0, .seed = 7};
        if (store_trial_create(s, &tr, &trials[i])) return -1;
    }
    return 0;
}

static struct store_item item(int64_t trial, int64_t idx)
{
    struct store_item it = {.trial_id = trial,
                            .idx = idx,
                            .cluster = idx / 10,
                            .nll = 1.5 + (double)idx,
                            .n_tokens = 64,
                            .n_bytes = 250,
                            .n_words = 50,
                            .correct = -1,
                            .score = NAN,
                            .kld_sum = NAN,
                            .top1_agree = NAN,
                            .dp_sum = NAN};
    return it;
}

TEST(store_create, unit)
{
    const char *path = t_path("new.db");
    struct store *s = open_rw(path);
    ASSERT(s);
    ASSERT_EQ(store_schema_version(s), STORE_SCHEMA_VERSION);
    store_close(s);
    ASSERT_EQ(sql_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    ASSERT_EQ(sql_int(path, "PRAGMA application_id"), STORE_APPLICATION_ID);
    ASSERT_EQ(sql_int(path, "PRAGMA journal_mode='wal'") >= -1, 1);
    const char *tables[] = {"runs",   "models", "datasets",    "tasks",        "task_datasets",
                            "trials", "items",  "comparisons", "verdict_rows", "meta"};
    for (int i = 0; i < 10; i++) {
        char q[128];
        snprintf(q, sizeof q, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='%s'",
                 tables[i]);
        if (sql_int(path, q) != 1) T_FAIL_("table %s missing", tables[i]);
    }
    /* columns later issues rely on */
    ASSERT_EQ(sql_int(path, "SELECT count(*) FROM pragma_table_info('items') WHERE name IN "
                            "('nll','n_tokens','n_bytes','correct','prediction','extracted',"
                            "'output_hash','kld_sum','top1_agree','dp_sum','cluster')"),
              11);
    ASSERT_EQ(sql_int(path, "SELECT count(*) FROM pragma_table_info('trials') WHERE name IN "
                            "('seed','status','started_at','finished_at','wall_seconds',"
                            "'deterministic','metrics_json')"),
              7);
    return 0;
}

TEST(store_reopen, unit)
{
    const char *path = t_path("r.db");
    struct store *s = open_rw(path);
    ASSERT(s);
    int64_t run, trials[2];
    ASSERT_OK(make_run(s, &run, trials));
    ASSERT_OK(store_begin(s));
    for (int i = 0; i < 10; i++) {
        struct store_item it = item(trials[0], i);
        it.prediction = "Paris";
        ASSERT_OK(store_item_put(s, &it));
    }
    ASSERT_OK(store_commit(s));
    struct store_trial_result res = {.status = STORE_TRIAL_DONE,
                                     .n_items = 10,
                                     .n_tokens = 640,
                                     .wall_seconds = 1.25,
                                     .deterministic = 1,
                                     .metrics_json = "{\"ppl\":4.0}"};
    ASSERT_OK(store_trial_finish(s, trials[0], &res));
    ASSERT_OK(store_run_set_status(s, run, STORE_RUN_DONE));
    ASSERT_EQ(store_run_set_status(s, 999, STORE_RUN_DONE), QG_ERR_NOTFOUND);
    store_close(s);

    struct store_params p = store_default_params();
    p.readonly = 1;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(store_open(path, &p, &s, err, sizeof err));
    int64_t n;
    ASSERT_OK(store_item_count(s, trials[0], &n));
    ASSERT_EQ(n, 10);
    cJSON *j;
    ASSERT_OK(store_run_json(s, run, &j));
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "status")->valuestring, "done");
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "suite_name")->valuestring, "smoke");
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(j, "models")), 2);
    cJSON *task = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tasks"), 0);
    ASSERT_STR_EQ(cJSON_GetObjectItem(task, "kind")->valuestring, "perplexity");
    ASSERT_STR_EQ(cJSON_GetObjectItem(task, "datasets")->valuestring, "wiki.txt beef");
    cJSON *tr = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "trials"), 0);
    ASSERT_STR_EQ(cJSON_GetObjectItem(tr, "status")->valuestring, "done");
    ASSERT_EQ(cJSON_GetObjectItem(tr, "items_stored")->valuedouble, 10);
    ASSERT_EQ(cJSON_GetObjectItem(tr, "deterministic")->valuedouble, 1);
    cJSON_Delete(j);
    ASSERT_EQ(store_run_json(s, 42, &j), QG_ERR_NOTFOUND);
    ASSERT_CONTAINS(store_errmsg(s), "no run 42");
    /* a read-only handle cannot write */
    ASSERT(store_begin(s) != QG_OK ||
           store_item_put(s, &(struct store_item){.trial_id = trials[0],
                                                  .idx = 99,
                                                  .cluster = -1,
                                                  .correct = -1,
                                                  .n_tokens = -1,
                                                  .n_bytes = -1,
                                                  .n_words = -1,
                                                  .nll = NAN,
                                                  .score = NAN,
                                                  .kld_sum = NAN,
                                                  .top1_agree = NAN,
                                                  .dp_sum = NAN}) != QG_OK);
    store_close(s);
    return 0;
}

TEST(store_migrate, unit)
{
    /* an empty SQLite file (v0) is migrated to the current version */
    const char *path = t_path("m.db");
    ASSERT_EQ(sql_exec(path, "PRAGMA user_version=0"), SQLITE_OK);
    struct store *s = open_rw(path);
    ASSERT(s);
    int64_t run, trials[2];
    ASSERT_OK(make_run(s, &run, trials));
    store_close(s);
    ASSERT_EQ(sql_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    /* a later migration applies forward and keeps the data */
    const char *v2[] = {"ALTER TABLE runs ADD COLUMN note TEXT; UPDATE runs SET note='migrated';"};
    struct store_params p = store_default_params();
    p.extra_migrations = v2;
    p.n_extra_migrations = 1;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(store_open(path, &p, &s, err, sizeof err));
    ASSERT_EQ(store_schema_version(s), STORE_SCHEMA_VERSION + 1);
    store_close(s);
    ASSERT_EQ(sql_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION + 1);
    ASSERT_EQ(sql_int(path, "SELECT count(*) FROM runs WHERE note='migrated'"), 1);
    ASSERT_EQ(sql_int(path, "SELECT count(*) FROM models"), 2);
    /* and this qgate now refuses the newer file */
    ASSERT_EQ(store_open(path, NULL, &s, err, sizeof err), QG_ERR_VERSION);
    char want[64];
    snprintf(want, sizeof want, "newer qgate (schema version %d", STORE_SCHEMA_VERSION + 1);
    ASSERT_CONTAINS(err, want);
    ASSERT(s == NULL);
    /* a failing migration rolls back completely */
    const char *bad[] = {"ALTER TABLE runs ADD COLUMN x TEXT;", "ALTER TABLE nope ADD COLUMN y;"};
    const char *path2 = t_path("m2.db");
    s = open_rw(path2);
    store_close(s);
    p.extra_migrations = bad;
    p.n_extra_migrations = 2;
    ASSERT(store_open(path2, &p, &s, err, sizeof err) != QG_OK);
    snprintf(want, sizeof want, "migrating the schema to version %d", STORE_SCHEMA_VERSION + 2);
    ASSERT_CONTAINS(err, want);
    ASSERT_EQ(sql_int(path2, "PRAGMA user_version"), STORE_SCHEMA_VERSION + 1);
    return 0;
}

TEST(store_batch_1e5_items, slow)
{
    const char *path = t_path("b.db");
    struct store *s = open_rw(path);
    ASSERT(s);
    int64_t run, trials[2];
    ASSERT_OK(make_run(s, &run, trials));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const int total = 100000, batch = 1000;
    for (int b = 0; b < total / batch; b++) {
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < batch; i++) {
            struct store_item it = item(trials[0], (int64_t)b * batch + i);
            it.output_hash = "0123456789abcdef";
            ASSERT_OK(store_item_put(s, &it));
        }
        ASSERT_OK(store_commit(s));
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    int64_t n;
    ASSERT_OK(store_item_count(s, trials[0], &n));
    ASSERT_EQ(n, total);
    store_close(s);
    ASSERT_NEAR((double)sql_int(path, "SELECT sum(idx) FROM items"),
                (double)total * (total - 1) / 2, 0);
    printf("%d items in batches of %d: %.2f s (%.0f items/s)\n", total, batch, dt, total / dt);
    return 0;
}

TEST(store_reader_while_writer, e2e)
{
    const char *path = t_path("c.db");
    struct store *s = open_rw(path);
    ASSERT(s);
    int64_t run, trials[2];
    ASSERT_OK(make_run(s, &run, trials));
    store_close(s);
    const int batches = 60, batch = 250;
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        struct store *w = open_rw(path);
        if (!w) _exit(2);
        for (int b = 0; b < batches; b++) {
            if (store_begin(w)) _exit(3);
            for (int i = 0; i < batch; i++) {
                struct store_item it = item(trials[0], (int64_t)b * batch + i);
                if (store_item_put(w, &it)) _exit(4);
            }
            if (store_commit(w)) _exit(5);
            usleep(2000);
        }
        store_close(w);
        _exit(0);
    }
    struct store_params p = store_default_params();
    p.readonly = 1;
    int64_t last = 0, reads = 0, distinct = 0;
    for (;;) {
        struct store *r;
        char err[QG_ERRMSG_MAX];
        ASSERT_OK(store_open(path, &p, &r, err, sizeof err));
        int64_t n;
        ASSERT_OK(store_item_count(r, trials[0], &n));
        store_close(r);
        reads++;
        if (n % batch != 0) T_FAIL_("reader saw a partial batch: %lld items", (long long)n);
        if (n < last)
            T_FAIL_("item count went back from %lld to %lld", (long long)last, (long long)n);
        if (n != last) distinct++;
        last = n;
        if (n == (int64_t)batches * batch) break;
        usleep(1000);
    }
    int st;
    waitpid(pid, &st, 0);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    ASSERT(distinct >= 2); /* the reader really overlapped the writer */
    printf("%lld reads, %lld distinct committed states, never a partial batch\n", (long long)reads,
           (long long)distinct);
    return 0;
}

TEST(store_killed_mid_batch, e2e)
{
    const char *path = t_path("k.db");
    struct store *s = open_rw(path);
    ASSERT(s);
    int64_t run, trials[2];
    ASSERT_OK(make_run(s, &run, trials));
    store_close(s);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        struct store *w = open_rw(path);
        if (!w || store_begin(w)) _exit(2);
        for (int i = 0; i < 300; i++) {
            struct store_item it = item(trials[0], i);
            if (store_item_put(w, &it)) _exit(3);
        }
        if (store_commit(w) || store_begin(w)) _exit(4);
        for (int i = 300; i < 500; i++) { /* this batch is in flight when killed */
            struct store_item it = item(trials[0], i);
            if (store_item_put(w, &it)) _exit(5);
        }
        kill(getpid(), SIGKILL);
        _exit(6);
    }
    int st;
    waitpid(pid, &st, 0);
    ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    s = open_rw(path);
    ASSERT(s);
    int64_t n;
    ASSERT_OK(store_item_count(s, trials[0], &n));
    ASSERT_EQ(n, 300);
    /* and the store is writable again: the lost batch can be redone */
    ASSERT_OK(store_begin(s));
    for (int i = 300; i < 500; i++) {
        struct store_item it = item(trials[0], i);
        ASSERT_OK(store_item_put(s, &it));
    }
    ASSERT_OK(store_commit(s));
    ASSERT_OK(store_item_count(s, trials[0], &n));
    ASSERT_EQ(n, 500);
    store_close(s);
    return 0;
}

TEST(store_item_replace_idempotent, unit)
{
    struct store *s = open_rw(t_path("i.db"));
    ASSERT(s);
    int64_t run, trials[2];
    ASSERT_OK(make_run(s, &run, trials));
    struct store_item it = item(trials[1], 5);
    ASSERT_OK(store_item_put(s, &it));
    it.nll = 9.0;
    ASSERT_OK(store_item_put(s, &it));
    int64_t n;
    ASSERT_OK(store_item_count(s, trials[1], &n));
    ASSERT_EQ(n, 1);
    store_close(s);
    ASSERT_EQ(sql_int(t_path("i.db"), "SELECT CAST(nll AS INTEGER) FROM items"), 9);
    /* an item of a trial that does not exist violates the foreign key */
    s = open_rw(t_path("i.db"));
    it.trial_id = 12345;
    ASSERT_EQ(store_item_put(s, &it), QG_ERR_DATA);
    ASSERT_CONTAINS(store_errmsg(s), "FOREIGN KEY");
    store_close(s);
    return 0;
}

static int same_hash(const char *path, const char *before)
{
    char h[65], err[QG_ERRMSG_MAX];
    return hash_sha256_file(path, h, err, sizeof err) == QG_OK && strcmp(h, before) == 0;
}

TEST(store_refuse_not_sqlite, e2e)
{
    const char *path = t_path("notes.txt");
    const char *text = "these are my notes, not a database\n";
    ASSERT_OK(t_write_file(path, text, strlen(text)));
    char before[65], err[QG_ERRMSG_MAX];
    ASSERT_OK(hash_sha256_file(path, before, err, sizeof err));
    struct store *s;
    ASSERT_EQ(store_open(path, NULL, &s, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "not an SQLite database");
    ASSERT(same_hash(path, before));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "runs", "--db", path, NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "not an SQLite database");
    t_out_free(&o);
    ASSERT(same_hash(path, before));
    return 0;
}

TEST(store_refuse_foreign_sqlite, unit)
{
    const char *path = t_path("other.db");
    ASSERT_EQ(sql_exec(path, "CREATE TABLE customers(id INTEGER, name TEXT);"
                             "INSERT INTO customers VALUES(1,'ada');"),
              SQLITE_OK);
    char before[65], err[QG_ERRMSG_MAX];
    ASSERT_OK(hash_sha256_file(path, before, err, sizeof err));
    struct store *s;
    ASSERT_EQ(store_open(path, NULL, &s, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "did not make");
    ASSERT(same_hash(path, before));
    return 0;
}

TEST(store_refuse_newer, e2e)
{
    const char *path = t_path("n.db");
    struct store *s = open_rw(path);
    ASSERT(s);
    store_close(s);
    ASSERT_EQ(sql_exec(path, "PRAGMA user_version=99"), SQLITE_OK);
    char err[QG_ERRMSG_MAX];
    ASSERT_EQ(store_open(path, NULL, &s, err, sizeof err), QG_ERR_VERSION);
    ASSERT_CONTAINS(err, "schema version 99");
    ASSERT_EQ(sql_int(path, "PRAGMA user_version"), 99);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "runs", "--db", path, NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "made by a newer qgate");
    t_out_free(&o);
    return 0;
}

TEST(store_refuse_corrupt, e2e)
{
    const char *path = t_path("x.db");
    struct store *s = open_rw(path);
    ASSERT(s);
    int64_t run, trials[2];
    ASSERT_OK(make_run(s, &run, trials));
    ASSERT_OK(store_begin(s));
    for (int i = 0; i < 5000; i++) {
        struct store_item it = item(trials[0], i);
        it.prediction = "some text to fill pages with";
        ASSERT_OK(store_item_put(s, &it));
    }
    ASSERT_OK(store_commit(s));
    store_close(s); /* the last close checkpoints the WAL into the file */
    size_t n;
    char *bytes = t_read_file(path, &n);
    ASSERT(bytes && n > 64 * 1024);
    for (size_t i = n / 3; i < n / 3 + 8192; i++)
        bytes[i] = (char)(i * 31); /* trash pages */
    ASSERT_OK(t_write_file(path, bytes, n));
    free(bytes);
    char err[QG_ERRMSG_MAX];
    int rc = store_open(path, NULL, &s, err, sizeof err);
    ASSERT_EQ(rc, QG_ERR_CORRUPT);
    ASSERT_CONTAINS(err, "corrupted");
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "show", "1", "--db", path, NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "corrupted");
    t_out_free(&o);
    /* a file cut short is refused too */
    bytes = t_read_file(path, &n);
    ASSERT_OK(t_write_file(path, bytes, 100));
    free(bytes);
    rc = store_open(path, NULL, &s, err, sizeof err);
    ASSERT(rc == QG_ERR_DATA || rc == QG_ERR_CORRUPT);
    return 0;
}

TEST(cli_runs_and_show, e2e)
{
    const char *path = t_path("cli.db");
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "runs", "--db", path, NULL));
    ASSERT_EQ(o.code, 66);
    ASSERT_CONTAINS(o.err, "no such database");
    t_out_free(&o);
    ASSERT(access(path, F_OK) != 0); /* listing never creates a file */
    struct store *s = open_rw(path);
    ASSERT(s);
    store_close(s);
    ASSERT_OK(t_qgate(&o, "runs", "--db", path, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "no runs in");
    t_out_free(&o);
    s = open_rw(path);
    int64_t run, trials[2];
    ASSERT_OK(make_run(s, &run, trials));
    struct store_item it = item(trials[0], 0);
    ASSERT_OK(store_item_put(s, &it));
    store_close(s);
    ASSERT_OK(t_qgate(&o, "runs", "--db", path, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "base,q8");
    ASSERT_CONTAINS(o.out, "running");
    ASSERT_CONTAINS(o.out, "0/2");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "runs", "--json", "--db", path, NULL));
    ASSERT_EQ(o.code, 0);
    cJSON *j = cJSON_Parse(o.out);
    ASSERT(j && cJSON_GetArraySize(j) == 1);
    ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "trials")->valuedouble, 2);
    cJSON_Delete(j);
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "show", "1", "--db", path, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "suite      smoke");
    ASSERT_CONTAINS(o.out, "perplexity");
    ASSERT_CONTAINS(o.out, "candidate");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "show", "1", "--json", "--db", path, NULL));
    ASSERT_EQ(o.code, 0);
    j = cJSON_Parse(o.out);
    ASSERT(j);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(j, "trials")), 2);
    ASSERT_EQ(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "trials"), 0), "items_stored")
            ->valuedouble,
        1);
    cJSON_Delete(j);
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "show", "7", "--db", path, NULL));
    ASSERT_EQ(o.code, 66);
    ASSERT_CONTAINS(o.err, "no run 7");
    t_out_free(&o);
    return 0;
}

/* one mapping per persisted enum: the store's verdict_names table (which
 * SQL views and listings read) names each value as verdict_name() does,
 * and the names convert back */
TEST(store_enum_names_match, unit)
{
    const char *path = t_path("v.db");
    struct store *s = open_rw(path);
    ASSERT(s);
    store_close(s);
    static const int all[] = {VERDICT_PASS, VERDICT_FAIL, VERDICT_INCONCLUSIVE};
    for (int i = 0; i < 3; i++) {
        char sql[160];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM verdict_names WHERE code = %d AND name = '%s'", all[i],
                 verdict_name(all[i]));
        ASSERT_EQ(sql_int(path, sql), 1);
        ASSERT_EQ(verdict_from_name(verdict_name(all[i])), all[i]);
    }
    ASSERT_EQ(sql_int(path, "SELECT count(*) FROM verdict_names"), 3);
    /* the other persisted enums: each lookup table names every value as
     * the C code does, and holds nothing else */
    static const struct {
        const char *table;
        const char *(*name)(int);
        int n;
    } enums[] = {{"run_statuses", store_run_status_name, 4},
                 {"trial_statuses", store_trial_status_name, 5},
                 {"task_kinds", task_kind_name, TASK_CUSTOM + 1}};
    for (int e = 0; e < 3; e++) {
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", enums[e].table);
        ASSERT_EQ(sql_int(path, sql), enums[e].n);
        for (int k = 0; k < enums[e].n; k++) {
            snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE code = %d AND name = '%s'",
                     enums[e].table, k, enums[e].name(k));
            ASSERT_EQ(sql_int(path, sql), 1);
        }
    }
    ASSERT_EQ(verdict_from_name("pass"), -1);
    ASSERT_EQ(verdict_from_name(NULL), -1);
    int v[3] = {VERDICT_PASS, VERDICT_INCONCLUSIVE, VERDICT_PASS};
    ASSERT_EQ(verdict_combine(v, 2), VERDICT_INCONCLUSIVE);
    ASSERT_EQ(verdict_combine(v, 1), VERDICT_PASS);
    ASSERT_EQ(verdict_combine(v, 0), VERDICT_INCONCLUSIVE);
    v[2] = VERDICT_FAIL;
    ASSERT_EQ(verdict_combine(v, 3), VERDICT_FAIL);
    return 0;
}

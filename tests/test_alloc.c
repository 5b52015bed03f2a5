/* test_alloc — every allocation failure point of the GGUF, tokenizer,
 * suite and store loaders, hit once each: the loader returns an error (or
 * copes), never crashes, and (under the sanitizer build) leaks nothing. */
#include "backends/gguf.h"
#include "backends/synth.h"
#include "backends/tokenizer.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/hash.h"
#include "store/store.h"
#include "harness/suite.h"
#include "tests/alloc_fail.h"
#include "tests/test.h"

#include <stdlib.h>
#include <unistd.h>

#ifdef T_HAVE_ALLOC_FAIL

/* Runs fn once to count its allocations, then once per allocation with that
 * one failing. fn returns a status; it must be QG_OK when nothing failed
 * and must not crash when something did. */
static int every_failure(const char *what, int (*fn)(void *), void *ud)
{
    t_alloc_fail_at(0);
    int rc = fn(ud);
    long n = t_alloc_count();
    if (rc != QG_OK) T_FAIL_("%s: fails without injection (%d)", what, rc);
    long errors = 0, coped = 0;
    for (long i = 1; i <= n; i++) {
        t_alloc_fail_at(i);
        rc = fn(ud);
        int hit = t_alloc_failed();
        t_alloc_fail_at(0);
        if (!hit) { /* fewer allocations this time (SQLite's caches vary): it must have succeeded */
            if (rc != QG_OK) T_FAIL_("%s: failed (%d) with no allocation failing", what, rc);
            coped++;
            continue;
        }
        if (rc > 0)
            T_FAIL_("%s: allocation %ld failed and the loader returned %d, not a status", what, i,
                    rc);
        rc ? errors++ : coped++;
    }
    printf("%-10s %6ld allocations failed one at a time: %ld errors, %ld coped\n", what, n, errors,
           coped);
    ASSERT(errors > 0);
    return 0;
}

static int load_gguf(void *ud)
{
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    int rc = gguf_open(ud, &g, err, sizeof err);
    gguf_close(rc ? NULL : g);
    return rc;
}

static int load_tokenizer(void *ud)
{
    struct gguf *g;
    struct tokenizer *t = NULL;
    char err[QG_ERRMSG_MAX];
    int rc = gguf_open(ud, &g, err, sizeof err);
    if (rc) return rc;
    rc = tok_load(g, ud, &t, err, sizeof err);
    int32_t *ids = NULL;
    int64_t n = 0;
    static const char text[] = "Once upon a time, Lily saw a big red ball. <s> \xc3\xa9";
    if (!rc) rc = tok_encode(t, text, sizeof text - 1, 1, 1, &ids, &n);
    free(ids);
    tok_free(t);
    gguf_close(g);
    return rc;
}

static int load_suite(void *ud)
{
    struct suite *s;
    char err[QG_ERRMSG_MAX];
    int rc = suite_load(ud, 0, &s, err, sizeof err);
    if (rc) return rc;
    for (int i = 0; i < s->n_tasks && !rc; i++) {
        int64_t n;
        if (s->tasks[i].kind == TASK_MULTIPLE_CHOICE) {
            struct mc_item *items;
            if (!(rc = task_mc_items(&s->tasks[i], &items, &n, err, sizeof err)))
                mc_items_free(items, n);
        } else if (s->tasks[i].kind == TASK_GENERATION) {
            struct gen_item *items;
            if (!(rc = task_gen_items(&s->tasks[i], &items, &n, err, sizeof err)))
                gen_items_free(items, n);
        }
    }
    suite_free(s);
    return rc;
}

/* a new database, a run with a model, task, trial and item, read back */
static int load_store(void *ud)
{
    char side[300];
    unlink(ud);
    snprintf(side, sizeof side, "%s-wal", (const char *)ud), unlink(side);
    snprintf(side, sizeof side, "%s-shm", (const char *)ud), unlink(side);
    struct store *s;
    char err[QG_ERRMSG_MAX];
    int rc = store_open(ud, NULL, &s, err, sizeof err);
    if (rc) return rc;
    int64_t run = 0, model = 0, task = 0, trial = 0, n = 0;
    struct store_run_new rn = {.command = "qgate run",
                               .suite_name = "s",
                               .suite_hash = "h",
                               .suite_json = "{}",
                               .repeats = 1};
    struct store_model_new mn = {
        .name = "base", .spec = "base=x.gguf", .backend = "cpu", .arch = "llama", .format = "gguf"};
    struct store_task_new tn = {.name = "t",
                                .kind = TASK_PERPLEXITY,
                                .config_json = "{}",
                                .config_hash = "h",
                                .n_items = 1};
    if (!(rc = store_run_create(s, &rn, &run))) rc = store_model_add(s, run, &mn, &model);
    if (!rc) rc = store_task_add(s, run, &tn, &task);
    struct store_trial_new tr = {.run_id = run, .model_id = model, .task_id = task};
    if (!rc) rc = store_trial_create(s, &tr, &trial);
    struct store_item it = {.trial_id = trial,
                            .idx = 0,
                            .cluster = 0,
                            .nll = 12.5,
                            .n_tokens = 8,
                            .n_bytes = 30,
                            .n_words = 6,
                            .correct = -1,
                            .score = NAN,
                            .kld_sum = NAN,
                            .top1_agree = NAN,
                            .dp_sum = NAN};
    if (!rc) rc = store_item_put(s, &it);
    struct item_row *rows = NULL;
    if (!rc) rc = store_items_read(s, trial, &rows, &n);
    if (!rc && (n != 1 || rows[0].nll != 12.5)) rc = QG_ERR_INTERNAL;
    free(rows);
    store_close(s);
    return rc;
}

static int write_text(const char *name, const char *text)
{
    return t_write_file(t_path(name), text, strlen(text));
}

TEST(alloc_failure_every_loader, slow)
{
    ASSERT_OK(t_alloc_hook_libraries());
    char err[QG_ERRMSG_MAX];
    struct synth_params p = synth_default_params();
    p.n_vocab = 300, p.dim = 32, p.n_layers = 1, p.ffn = 32;
    ASSERT_OK(synth_write(&p, t_path("m.gguf"), err, sizeof err));
    ASSERT_OK(every_failure("gguf", load_gguf, (void *)t_path("m.gguf")));
    ASSERT_OK(every_failure("tokenizer", load_tokenizer, (void *)t_path("m.gguf")));
    /* a suite with a perplexity task and a custom multiple-choice task */
    ASSERT_OK(write_text("text.txt", "Once upon a time there was a girl.\n"));
    ASSERT_OK(write_text("gen.jsonl", "{\"id\": \"a\", \"p\": \"2+2=\", \"a\": \"4\"}\n"));
    ASSERT_OK(
        write_text("mc.jsonl",
                   "{\"id\": \"a\", \"q\": \"Sky?\", \"c\": [\"blue\", \"green\"], \"g\": 0}\n"
                   "{\"id\": \"b\", \"q\": \"Grass?\", \"c\": [\"blue\", \"green\"], \"g\": 1}\n"));
    char h1[HASH_HEX_LEN + 1], h2[HASH_HEX_LEN + 1], h3[HASH_HEX_LEN + 1], suite[2048];
    ASSERT_OK(hash_sha256_file(t_path("text.txt"), h1, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_path("mc.jsonl"), h2, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_path("gen.jsonl"), h3, err, sizeof err));
    snprintf(
        suite, sizeof suite,
        "{\"name\": \"s\", \"policy\": {\"margin_acc\": 0.02}, \"tasks\": ["
        "{\"name\": \"ppl\", \"kind\": \"perplexity\", \"data\": \"text.txt\", \"sha256\": \"%s\", "
        "\"ctx\": 16},"
        "{\"name\": \"mc\", \"kind\": \"custom\", \"data\": \"mc.jsonl\", \"sha256\": \"%s\","
        " \"fields\": {\"id\": \"id\", \"context\": \"q\", \"choices\": \"c\", \"gold\": \"g\"}},"
        "{\"name\": \"gen\", \"kind\": \"custom\", \"data\": \"gen.jsonl\", \"sha256\": \"%s\","
        " \"fields\": {\"id\": \"id\", \"prompt\": \"p\", \"answer\": \"a\"},"
        " \"pipelines\": [{\"name\": \"n\", \"regex\": \"(-?[0-9]+)\", \"select\": \"last\"}],"
        " \"normalize\": {\"ignore_case\": true, \"ignore\": [\",\"]}, \"stop\": [\"\\n\"]}]}",
        h1, h2, h3);
    ASSERT_OK(write_text("suite.json", suite));
    ASSERT_OK(every_failure("suite", load_suite, (void *)t_path("suite.json")));
    /* in memory-backed /dev/shm where there is one: thousands of fresh
     * databases, each synced */
    char db[256];
    if (access("/dev/shm", W_OK) == 0)
        snprintf(db, sizeof db, "/dev/shm/qgate-alloc-%ld.db", (long)getpid());
    else
        snprintf(db, sizeof db, "%s", t_path("q.db"));
    int rc = every_failure("store", load_store, db);
    char side[300];
    unlink(db);
    snprintf(side, sizeof side, "%s-wal", db), unlink(side);
    snprintf(side, sizeof side, "%s-shm", db), unlink(side);
    ASSERT_OK(rc);
    return 0;
}

#else

TEST(alloc_failure_every_loader, slow)
{
    SKIP("built without QG_ALLOC_FAIL (allocation-failure injection)");
}

#endif

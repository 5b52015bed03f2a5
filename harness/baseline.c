/* baseline — finding a stored baseline that can stand in for a new one. */
#include "harness/baseline.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The baseline trial of task `task` at repeat 0 in the run's JSON. */
static const cJSON *trial0(const cJSON *run, const char *model, const char *task)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, json_get(run, "trials")) if (!strcmp(json_str(t, "model", ""), model) &&
                                                       !strcmp(json_str(t, "task", ""), task) &&
                                                       json_int(t, "repeat", -1) == 0) return t;
    return NULL;
}

/* 0 when the run can stand in for the baseline (b filled), else -1 with
 * why it cannot. */
static int match(struct store *bs, const cJSON *run, const char *sha, const struct suite *suite,
                 struct baseline_ref *b, char *why, size_t n)
{
    const cJSON *m0 = cJSON_GetArrayItem(json_get(run, "models"), 0);
    long long id = json_int(run, "id", 0);
    if (strcmp(json_str(run, "status", ""), "done"))
        return snprintf(why, n, "run %lld is %s, not done", id, json_str(run, "status", "?")), -1;
    if (json_int(run, "shard_count", 1) > 1)
        return snprintf(why, n, "run %lld is one shard (merge the shards first)", id), -1;
    if (!m0 || strcmp(json_str(m0, "sha256", ""), sha))
        return snprintf(why, n, "run %lld's baseline is another file (sha256 %.12s...)", id,
                        json_str(m0, "sha256", "?")),
               -1;
    if (strcmp(json_str(run, "qgate_version", ""), QG_VERSION))
        return snprintf(why, n, "run %lld was made by qgate %s, this is %s", id,
                        json_str(run, "qgate_version", "?"), QG_VERSION),
               -1;
    snprintf(b->model, sizeof b->model, "%s", json_str(m0, "name", ""));
    b->file_bytes = json_int(m0, "file_bytes", -1);
    b->n_params = json_int(m0, "n_params", -1);
    snprintf(b->arch, sizeof b->arch, "%s", json_str(m0, "arch", ""));
    free(b->types_json);
    b->types_json = json_get(m0, "types_json") && cJSON_IsString(json_get(m0, "types_json"))
                        ? qg_strdup(json_str(m0, "types_json", ""))
                        : NULL;
    b->deterministic = 1;
    for (int i = 0; i < suite->n_tasks; i++) {
        const struct task_config *t = &suite->tasks[i];
        const cJSON *k, *found = NULL;
        cJSON_ArrayForEach(k, json_get(run, "tasks")) if (!strcmp(json_str(k, "name", ""), t->name))
            found = k;
        if (!found) return snprintf(why, n, "run %lld has no task '%s'", id, t->name), -1;
        if (strcmp(json_str(found, "config_hash", ""), t->config_hash))
            return snprintf(why, n, "run %lld's task '%s' has another configuration or data", id,
                            t->name),
                   -1;
        const cJSON *tr = trial0(run, b->model, t->name);
        if (!tr || strcmp(json_str(tr, "status", ""), "done"))
            return snprintf(why, n, "run %lld's baseline trial of '%s' is not done", id, t->name),
                   -1;
        b->trial0[i] = json_int(tr, "id", 0);
        b->deterministic &= json_int(tr, "deterministic", 0) == 1;
        cJSON *mj = cJSON_Parse(json_str(tr, "metrics_json", "{}"));
        snprintf(b->tokens_sha[i], 65, "%s", json_str(mj, "tokens_sha256", ""));
        if (json_int(mj, "n_vocab", 0) > 0) b->n_vocab = (int)json_int(mj, "n_vocab", 0);
        cJSON_Delete(mj);
        int64_t refs = 0, windows = json_int(tr, "n_items", 0);
        if (t->kind == TASK_PERPLEXITY &&
            (store_ref_count(bs, b->trial0[i], &refs) || refs == 0 || !b->tokens_sha[i][0]))
            return snprintf(why, n,
                            "run %lld keeps no top-K references of '%s' (it was run without "
                            "them)",
                            id, t->name),
                   -1;
        if (t->kind == TASK_PERPLEXITY && refs < windows) /* e.g. resumed without them */
            return snprintf(why, n,
                            "run %lld keeps top-K references of %lld of the %lld windows of "
                            "'%s'",
                            id, (long long)refs, (long long)windows, t->name),
                   -1;
    }
    b->run = id;
    return 0;
}

static int open_store(struct store *s, const char *db, struct baseline_ref *b, char *err,
                      size_t errlen)
{
    b->store = s;
    if (!db || qg_same_file(db, store_path(s)) == 1) return QG_OK;
    struct store_params sp = store_default_params();
    sp.readonly = 1;
    int rc = store_open(db, &sp, &b->store, err, errlen);
    if (rc) return rc;
    b->own = 1;
    b->path = db;
    return QG_OK;
}

int baseline_find(struct store *s, const char *db, int64_t run, const char *sha256,
                  const struct suite *suite, struct baseline_ref *b, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    b->n_tasks = suite->n_tasks;
    b->trial0 = calloc((size_t)suite->n_tasks + 1, sizeof *b->trial0);
    b->tokens_sha = calloc((size_t)suite->n_tasks + 1, sizeof *b->tokens_sha);
    if (!b->trial0 || !b->tokens_sha) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    int rc = open_store(s, db, b, err, errlen);
    if (rc) return rc;
    cJSON *runs = NULL;
    if (run > 0) {
        runs = cJSON_CreateArray();
        cJSON *one = cJSON_CreateObject();
        cJSON_AddNumberToObject(one, "id", (double)run);
        cJSON_AddItemToArray(runs, one);
    } else if ((rc = store_runs_json(b->store, 200, &runs))) {
        return qg_errf(err, errlen, rc, "%s", store_errmsg(b->store));
    }
    char why[512] = "the database holds no run";
    const cJSON *r;
    int found = 0;
    cJSON_ArrayForEach(r, runs)
    {
        cJSON *full;
        if (found || (rc = store_run_json(b->store, json_int(r, "id", 0), &full))) break;
        found = match(b->store, full, sha256, suite, b, why, sizeof why) == 0;
        cJSON_Delete(full);
    }
    cJSON_Delete(runs);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(b->store));
    if (!found)
        return qg_errf(err, errlen, run > 0 ? QG_ERR_DATA : QG_ERR_NOTFOUND,
                       "%s: %s; it cannot stand in for the baseline", store_path(b->store), why);
    return QG_OK;
}

void baseline_release(struct baseline_ref *b)
{
    if (b->own) store_close(b->store);
    free(b->trial0);
    free(b->tokens_sha);
    free(b->types_json);
    memset(b, 0, sizeof *b);
}

int baseline_sel_is_sha(const char *sel)
{
    return sel && strlen(sel) == 64 && strspn(sel, "0123456789abcdefABCDEF") == 64;
}

/* the stored suite's sampled-text window (0: none) */
static int sampled_ctx(struct store *bs, int64_t run)
{
    char *text = NULL;
    if (store_run_suite_json(bs, run, &text)) return 0;
    cJSON *j = cJSON_Parse(text ? text : "");
    free(text);
    const cJSON *t;
    int ctx = 0;
    cJSON_ArrayForEach(t,
                       json_get(j, "tasks")) if (!strcmp(json_str(t, "name", ""), "sampled-text"))
        ctx = (int)json_int(t, "ctx", 0);
    cJSON_Delete(j);
    return ctx;
}

/* 1 when a stored baseline m0 answers the selector */
static int identity_match(const cJSON *run, const cJSON *m0, int64_t id, const char *sel,
                          const char *spec)
{
    if (!m0 || !*json_str(m0, "sha256", "")) return 0;
    if (baseline_sel_is_sha(sel)) return !strcasecmp(json_str(m0, "sha256", ""), sel);
    if (strcmp(sel, "auto")) return json_int(run, "id", 0) == id;
    const char *was = json_str(m0, "spec", ""), *b1 = strrchr(was, '/'), *b2 = strrchr(spec, '/');
    return !strcmp(was, spec) || !strcmp(b1 ? b1 + 1 : was, b2 ? b2 + 1 : spec);
}

int baseline_identify(struct store *s, const char *db, const char *sel, const char *spec,
                      struct baseline_identity *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct baseline_ref b = {0};
    int64_t id = 0;
    if (!baseline_sel_is_sha(sel) && strcmp(sel, "auto") &&
        qg_parse_i64(sel, 1, INT64_MAX / 2, &id))
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "--baseline-run takes a run id, a sha256 or 'auto', got '%s'", sel);
    int rc = open_store(s, db, &b, err, errlen);
    cJSON *runs = NULL;
    if (!rc && id > 0) { /* that run alone, however old */
        runs = cJSON_CreateArray();
        cJSON *one = cJSON_CreateObject();
        cJSON_AddNumberToObject(one, "id", (double)id);
        cJSON_AddItemToArray(runs, one);
    } else if (!rc && (rc = store_runs_json(b.store, 0, &runs))) {
        rc = qg_errf(err, errlen, rc, "%s", store_errmsg(b.store));
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, runs)
    {
        cJSON *full = NULL;
        if (rc || out->run) break;
        int rr = store_run_json(b.store, json_int(r, "id", 0), &full);
        if (rr == QG_ERR_NOTFOUND) break; /* said below */
        if (rr) {
            rc = qg_errf(err, errlen, rr, "%s", store_errmsg(b.store));
            break;
        }
        const cJSON *m0 = cJSON_GetArrayItem(json_get(full, "models"), 0);
        if (!strcmp(json_str(full, "status", ""), "done") &&
            identity_match(full, m0, id, sel, spec)) {
            snprintf(out->sha256, sizeof out->sha256, "%s", json_str(m0, "sha256", ""));
            snprintf(out->spec, sizeof out->spec, "%s", json_str(m0, "spec", ""));
            out->file_bytes = json_int(m0, "file_bytes", -1);
            out->run = json_int(full, "id", 0);
            out->ctx = sampled_ctx(b.store, out->run);
        }
        cJSON_Delete(full);
    }
    cJSON_Delete(runs);
    if (!rc && !out->run)
        rc = qg_errf(err, errlen, QG_ERR_NOTFOUND, "%s holds no done run whose baseline is %s%s",
                     store_path(b.store),
                     baseline_sel_is_sha(sel) ? "the file of sha256 "
                     : id                     ? "run "
                                              : "",
                     baseline_sel_is_sha(sel) || id ? sel : spec);
    baseline_release(&b);
    return rc;
}

/* registry_suite — named benchmarks as a suite (see registry_suite.h). */
#include "harness/registry_suite.h"
#include "core/closest.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/hash.h"
#include "harness/sampled.h"
#include "tasks/registry.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_NAMES = 64 };

/* the list split into names (in names' storage); the count, -1 too many */
static int split(const char *tasks, char (*names)[64])
{
    int n = 0;
    for (const char *p = tasks; *p;) {
        size_t k = strcspn(p, ",");
        while (k && p[k - 1] == ' ')
            k--;
        if (k) {
            if (n == MAX_NAMES) return -1;
            snprintf(names[n++], 64, "%.*s", (int)(k < 63 ? k : 63), p);
        }
        p += strcspn(p, ",");
        p += strspn(p, ", ");
    }
    return n;
}

int registry_suite_names_known(const char *tasks)
{
    char names[MAX_NAMES][64];
    int n = tasks ? split(tasks, names) : 0;
    for (int i = 0; i < n; i++)
        if (!registry_find(names[i]) && !registry_mmlu_subject(names[i])) return 0;
    return n > 0;
}

static int unknown(const char *name, char *err, size_t errlen)
{
    const char *cands[32];
    int n = 0;
    for (const struct registry_task *t; n < 32 && (t = registry_at(n));)
        cands[n++] = t->name;
    const char *near = qg_closest(name, cands, n);
    char all[512];
    registry_names(all, sizeof all);
    return qg_errf(err, errlen, QG_ERR_USAGE,
                   "'%s' is not a task qgate knows%s%s%s (it knows %s, mmlu_SUBJECT; 'qgate "
                   "tasks' lists them; a suite file runs anything else)",
                   name, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "", all);
}

int registry_task_fill(cJSON *o, int ctx, char *err, size_t errlen)
{
    const cJSON *tv = cJSON_GetObjectItemCaseSensitive(o, "task");
    const struct registry_task *t = cJSON_IsString(tv) ? registry_find(tv->valuestring) : NULL;
    if (!t) return unknown(cJSON_IsString(tv) ? tv->valuestring : "?", err, errlen);
    if (!cJSON_GetObjectItemCaseSensitive(o, "name")) cJSON_AddStringToObject(o, "name", t->name);
    int ppl = !strcmp(t->kind, "perplexity");
    if (!cJSON_GetObjectItemCaseSensitive(o, "kind") &&
        !cJSON_GetObjectItemCaseSensitive(o, "benchmark"))
        cJSON_AddStringToObject(o, ppl ? "kind" : "benchmark", t->kind);
    if (ppl && !cJSON_GetObjectItemCaseSensitive(o, "protocol"))
        cJSON_AddStringToObject(o, "protocol",
                                strcmp(t->name, "wikitext") ? "llamacpp" : "rolling");
    if (ppl && !cJSON_GetObjectItemCaseSensitive(o, "ctx")) cJSON_AddNumberToObject(o, "ctx", ctx);
    if (!strcmp(t->kind, "gsm8k") && !cJSON_GetObjectItemCaseSensitive(o, "max_tokens"))
        cJSON_AddNumberToObject(o, "max_tokens", 256);
    cJSON *pol = cJSON_GetObjectItemCaseSensitive(o, "policy");
    if (!strcmp(t->metric, "acc_norm") && !cJSON_GetObjectItemCaseSensitive(pol, "metric")) {
        if (!pol) pol = cJSON_AddObjectToObject(o, "policy");
        if (cJSON_IsObject(pol)) cJSON_AddStringToObject(pol, "metric", "acc_norm");
    }
    return QG_OK;
}

/* dir/rel as an absolute path */
static void absolute(const char *dir, const char *rel, char *out, size_t n)
{
    char cwd[PATH_MAX] = "";
    if (dir[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
    snprintf(out, n, "%s%s%s/%s", cwd, cwd[0] ? "/" : "", dir, rel);
}

/* the first candidate that exists (out ""), and the list tried in tried */
static void find_file(const char *dir, const struct registry_file *f, const char *subject,
                      char *out, size_t n, char *tried, size_t tn)
{
    out[0] = tried[0] = '\0';
    for (int k = 0; k < REGISTRY_MAX_PATHS && f->paths[k]; k++) {
        char rel[512], path[PATH_MAX + 600];
        if (subject)
            snprintf(rel, sizeof rel, "%s/%s_test.csv", f->paths[k], subject);
        else
            snprintf(rel, sizeof rel, "%s", f->paths[k]);
        absolute(dir, rel, path, sizeof path);
        size_t used = strlen(tried);
        snprintf(tried + used, tn - used, "%s%s", used ? ", " : "", rel);
        if (access(path, R_OK) == 0) {
            snprintf(out, n, "%s", path);
            return;
        }
    }
}

/* The pin of file `path` as "TASK/ROLE": checked (a changed file refused
 * unless allow_changed) or, when new, added to pins_new. */
static int check_pin(struct store *s, const struct registry_suite_params *p, const char *key,
                     const char *path, const char *sha, int *is_new, char *err, size_t errlen)
{
    char was[65], from[PATH_MAX], when[32];
    *is_new = 0;
    int rc = store_pin_get(s, key, was, from, sizeof from, when);
    if (rc == QG_ERR_NOTFOUND) {
        *is_new = 1;
        return QG_OK;
    }
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    if (!strcmp(was, sha) || p->allow_changed) return QG_OK;
    return qg_errf(err, errlen, QG_ERR_DATA,
                   "%s: %s has changed since it was pinned in %s on %s (sha256 then %.16s..., "
                   "now %.16s...; pinned from %s): a benchmark must not change between the runs "
                   "it compares. Restore the file, use another database, or run with "
                   "--allow-changed-data (the pin stays)",
                   key, path, store_path(s), when, was, sha, from);
}

/* One task's suite entry: its files found, hashed and pin-checked. */
static int task_entry(struct store *s, const struct registry_suite_params *p, const char *name,
                      cJSON *tasks, cJSON *pins_new, char *err, size_t errlen)
{
    const char *subject = registry_mmlu_subject(name);
    const struct registry_task *t = subject ? registry_find("mmlu") : registry_find(name);
    if (!t) return unknown(name, err, errlen);
    cJSON *e = cJSON_CreateObject(), *data = cJSON_CreateObject(), *shas = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", subject ? name : t->name);
    int rc = QG_OK, n_files = 0;
    for (int r = 0; r < REGISTRY_MAX_ROLES + 1 && t->files[r].role && !rc; r++) {
        char path[PATH_MAX + 600], tried[2048], sha[HASH_HEX_LEN + 1], key[128];
        find_file(p->data_dir, &t->files[r], subject, path, sizeof path, tried, sizeof tried);
        if (!path[0] && t->files[r].optional) continue;
        if (!path[0]) {
            rc = qg_errf(err, errlen, QG_ERR_NOINPUT,
                         "task '%s' needs its %s file in the data folder %s: none of %s is there "
                         "('qgate tasks' says what each task reads)",
                         name, t->files[r].role, p->data_dir, tried);
            break;
        }
        snprintf(key, sizeof key, "%s/%s", subject ? name : t->name, t->files[r].role);
        int is_new = 0;
        rc = hash_sha256_path(path, sha, err, errlen);
        if (!rc) rc = check_pin(s, p, key, path, sha, &is_new, err, errlen);
        if (!rc && is_new) {
            cJSON *pin = cJSON_CreateArray();
            cJSON_AddItemToArray(pin, cJSON_CreateString(key));
            cJSON_AddItemToArray(pin, cJSON_CreateString(path));
            cJSON_AddItemToArray(pin, cJSON_CreateString(sha));
            cJSON_AddItemToArray(pins_new, pin);
        }
        cJSON_AddStringToObject(data, t->files[r].role, path);
        cJSON_AddStringToObject(shas, t->files[r].role, sha);
        n_files++;
    }
    cJSON_AddStringToObject(e, "task", subject ? "mmlu" : t->name);
    cJSON_AddItemToObject(e, "data", data);
    cJSON_AddItemToObject(e, "sha256", shas);
    if (!strcmp(t->kind, "gsm8k") && n_files > 1) cJSON_AddNumberToObject(e, "fewshot", 5);
    if (!rc) rc = registry_task_fill(e, p->ctx, err, errlen);
    cJSON_AddItemToArray(tasks, e);
    return rc;
}

/* the new pins, in one transaction */
static int save_pins(struct store *s, const cJSON *pins, int quiet, char *err, size_t errlen)
{
    if (cJSON_GetArraySize(pins) == 0) return QG_OK;
    int rc = store_begin(s);
    const cJSON *pin;
    cJSON_ArrayForEach(pin, pins)
    {
        const char *k = cJSON_GetArrayItem(pin, 0)->valuestring,
                   *path = cJSON_GetArrayItem(pin, 1)->valuestring,
                   *sha = cJSON_GetArrayItem(pin, 2)->valuestring;
        if (!rc) rc = store_pin_put(s, k, path, sha);
        if (!rc && !quiet) printf("pinned %s: %s (sha256 %.16s...)\n", k, path, sha);
    }
    if (!rc)
        rc = store_commit(s);
    else
        store_rollback(s);
    return rc ? qg_errf(err, errlen, rc, "%s", store_errmsg(s)) : QG_OK;
}

static int write_suite(const cJSON *root, const char *dir, char *suite, size_t suitelen, char *err,
                       size_t errlen)
{
    char *json = cJSON_Print(root);
    if (!json) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    snprintf(suite, suitelen, "%s/suite.json", dir);
    int rc = qg_write_file_atomic(suite, json, strlen(json), err, errlen);
    free(json);
    return rc;
}

int registry_suite_make(struct store *s, const struct registry_suite_params *p, char *dir,
                        size_t dirlen, char *suite, size_t suitelen, char *err, size_t errlen)
{
    dir[0] = suite[0] = '\0';
    char names[MAX_NAMES][64];
    int n = split(p->tasks, names);
    if (n <= 0)
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       n < 0 ? "--tasks names more than 64 tasks" : "--tasks names no task");
    struct stat st;
    if (stat(p->data_dir, &st) || !S_ISDIR(st.st_mode))
        return qg_errf(err, errlen, QG_ERR_NOINPUT, "data folder %s: %s", p->data_dir,
                       errno && stat(p->data_dir, &st) ? strerror(errno) : "not a folder");
    cJSON *root = cJSON_CreateObject(), *pins = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "name", "registry");
    char desc[600];
    snprintf(desc, sizeof desc,
             "Written by qgate: the named benchmarks %.200s over the files of %.300s.", p->tasks,
             p->data_dir);
    cJSON_AddStringToObject(root, "description", desc);
    cJSON *tasks = cJSON_AddArrayToObject(root, "tasks");
    int rc = QG_OK;
    for (int i = 0; i < n && !rc; i++) /* every name first: a typo costs no hashing */
        if (!registry_find(names[i]) && !registry_mmlu_subject(names[i]))
            rc = unknown(names[i], err, errlen);
    for (int i = 0; i < n && !rc; i++) {
        for (int j = 0; j < i && !rc; j++)
            if (!strcmp(names[i], names[j]))
                rc = qg_errf(err, errlen, QG_ERR_USAGE, "--tasks names '%s' twice", names[i]);
        if (!rc) rc = task_entry(s, p, names[i], tasks, pins, err, errlen);
    }
    const char *tmp = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/qgate-tasks-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!rc && !mkdtemp(tmpl))
        rc = qg_errf(err, errlen, QG_ERR_CANTCREAT, "cannot create a folder for the suite (%s): %s",
                     tmpl, strerror(errno));
    if (!rc) {
        snprintf(dir, dirlen, "%s", tmpl);
        rc = write_suite(root, dir, suite, suitelen, err, errlen);
    }
    if (!rc) rc = save_pins(s, pins, p->quiet, err, errlen);
    if (rc && dir[0]) { /* nothing left behind */
        sampled_suite_remove(dir);
        dir[0] = suite[0] = '\0';
    }
    cJSON_Delete(root);
    cJSON_Delete(pins);
    return rc;
}

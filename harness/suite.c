/* suite — parse and validate suite files, resolve and pin their data. */
#include "harness/suite.h"
#include "harness/registry_suite.h"
#include "datasets/reader.h"
#include "core/closest.h"
#include "core/json.h"
#include "core/status.h"
#include "store/store.h"
#include "core/util.h"
#include "tasks/perplexity.h"

#include <stdio.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ctx {
    const char *file;
    char *err;
    size_t errlen;
};

static int fail_task(struct ctx *c, int i, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_task(struct ctx *c, int i, const char *name, const char *fmt, ...)
{
    char msg[QG_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (name)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: task %d ('%s'): %s", c->file, i + 1,
                       name, msg);
    return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: task %d: %s", c->file, i + 1, msg);
}

static const char *const task_keys[] = {
    "name",         "kind",       "benchmark",   "data",        "sha256",    "critical",
    "protocol",     "ctx",        "stride",      "chunks",      "limit",     "fewshot",
    "fewshot_seed", "max_tokens", "temperature", "top_p",       "delimiter", "pipelines",
    "normalize",    "stop",       "fields",      "description", "policy",    "items",
    "items_file",   "task",       NULL};

static int check_keys(struct ctx *c, int i, const char *name, const cJSON *o,
                      const char *const *keys)
{
    const char *near, *bad = json_unknown_key(o, keys, &near);
    if (!bad) return QG_OK;
    if (near) return fail_task(c, i, name, "unknown key \"%s\" (did you mean \"%s\"?)", bad, near);
    return fail_task(c, i, name, "unknown key \"%s\"", bad);
}

static int get_int(struct ctx *c, int i, const char *name, const cJSON *o, const char *key,
                   int64_t lo, int64_t hi, int64_t def, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        *out = def;
        return QG_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return fail_task(c, i, name, "\"%s\" must be an integer in %lld..%lld", key, (long long)lo,
                         (long long)hi);
    *out = (int64_t)v->valuedouble;
    return QG_OK;
}

static int nomem(struct ctx *c)
{
    return qg_errf(c->err, c->errlen, QG_ERR_NOMEM, "%s: out of memory", c->file);
}

/* A copy of s (NULL stays NULL) into *out; QG_ERR_NOMEM when it fails. */
static int dup_opt(struct ctx *c, const char *s, char **out)
{
    *out = s ? qg_strdup(s) : NULL;
    return s && !*out ? nomem(c) : QG_OK;
}

static const char *get_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static char *resolve(const char *dir, const char *p)
{
    struct sbuf b;
    sbuf_init(&b, 0);
    if (p[0] == '/' || !dir[0])
        sbuf_printf(&b, "%s", p);
    else
        sbuf_printf(&b, "%s/%s", dir, p);
    if (b.failed) sbuf_release(&b);
    return b.data; /* NULL when out of memory */
}

/* data + sha256 into t->files, hashing and checking each pin */
static int load_files(struct ctx *c, int i, struct task_config *t, const cJSON *o, const char *dir,
                      int allow_changed)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data"),
                *pins = cJSON_GetObjectItemCaseSensitive(o, "sha256");
    static const char *const roles[TASK_MAX_FILES] = {"data", "labels", "train"};
    if (!data)
        return fail_task(c, i, t->name, "missing \"data\" (a path, or {\"data\": PATH, ...})");
    for (int r = 0; r < TASK_MAX_FILES; r++) {
        const char *p = NULL, *pin = NULL;
        if (cJSON_IsString(data)) {
            if (r > 0) break;
            p = data->valuestring;
            if (pins && !cJSON_IsString(pins))
                return fail_task(c, i, t->name,
                                 "\"sha256\" must be a hex string when \"data\" is a path");
            pin = pins ? pins->valuestring : NULL;
        } else if (cJSON_IsObject(data)) {
            const cJSON *dv = cJSON_GetObjectItemCaseSensitive(data, roles[r]);
            if (!dv) continue;
            if (!cJSON_IsString(dv))
                return fail_task(c, i, t->name, "\"data\".\"%s\" must be a path", roles[r]);
            p = dv->valuestring;
            const cJSON *pv =
                cJSON_IsObject(pins) ? cJSON_GetObjectItemCaseSensitive(pins, roles[r]) : NULL;
            if (pv && !cJSON_IsString(pv))
                return fail_task(c, i, t->name, "\"sha256\".\"%s\" must be a hex string", roles[r]);
            pin = pv ? pv->valuestring : NULL;
        } else {
            return fail_task(c, i, t->name, "\"data\" must be a path or an object of paths");
        }
        struct task_file *f = &t->files[t->n_files++];
        f->role = roles[r];
        if (!(f->path = resolve(dir, p))) return nomem(c);
        char err[QG_ERRMSG_MAX];
        int rc = hash_sha256_path(f->path, f->sha256, err, sizeof err);
        if (rc)
            return qg_errf(c->err, c->errlen, rc, "%s: task %d ('%s'): %s", c->file, i + 1, t->name,
                           err);
        if (!pin && cJSON_IsObject(data)) /* say what to pin: the file's hash as it is */
            return fail_task(c, i, t->name,
                             "%s has no sha256 pin; if this is the data you mean, pin it: "
                             "\"sha256\": {\"%s\": \"%s\", ...} (or 'qgate suite pin %s')",
                             f->path, roles[r], f->sha256, c->file);
        if (!pin)
            return fail_task(c, i, t->name,
                             "%s has no sha256 pin; if this is the data you mean, pin it: "
                             "\"sha256\": \"%s\" (or 'qgate suite pin %s')",
                             f->path, f->sha256, c->file);
        if (strcmp(f->sha256, pin) != 0) {
            if (!allow_changed)
                return fail_task(c, i, t->name,
                                 "%s has sha256 %s but the suite pins %s (the data changed; "
                                 "re-pin it or pass --allow-changed-data)",
                                 f->path, f->sha256, pin);
            f->changed = 1;
        }
    }
    if (cJSON_IsObject(data) && !task_config_file(t, "data"))
        return fail_task(c, i, t->name, "\"data\" needs a \"data\" path");
    return QG_OK;
}

/* lm-eval's gsm8k filters and exact_match settings */
static const char *gsm8k_defaults =
    "{\"pipelines\":[{\"name\":\"strict-match\",\"regex\":\"#### "
    "(\\\\-?[0-9\\\\.\\\\,]+)\",\"select\":\"first\"},"
    "{\"name\":\"flexible-extract\",\"regex\":\"(-?[$0-9.,]{2,})|(-?[0-9]+)\",\"select\":\"last\"}]"
    ","
    "\"normalize\":{\"ignore_case\":true,\"ignore\":[\",\",\"\\\\$\",\"(?s).*#### \",\"\\\\.$\"]},"
    "\"stop\":[\"Question:\",\"</s>\",\"<|im_end|>\"]}";

static int load_generation(struct ctx *c, int i, struct task_config *t, const cJSON *o)
{
    cJSON *def =
        t->benchmark && !strcmp(t->benchmark, "gsm8k") ? cJSON_Parse(gsm8k_defaults) : NULL;
    if (t->benchmark && !strcmp(t->benchmark, "gsm8k") && !def) return nomem(c);
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(o, "pipelines"),
                *nm = cJSON_GetObjectItemCaseSensitive(o, "normalize");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!pl && def) pl = cJSON_GetObjectItemCaseSensitive(def, "pipelines");
    if (!nm && def) nm = cJSON_GetObjectItemCaseSensitive(def, "normalize");
    if (!st && def) st = cJSON_GetObjectItemCaseSensitive(def, "stop");
    char where[512];
    snprintf(where, sizeof where, "%s: task %d ('%s')", c->file, i + 1, t->name);
    int rc = QG_OK;
    if (!pl) {
        /* no extraction: the whole output, stripped */
        cJSON *whole =
            cJSON_Parse("[{\"name\":\"exact\",\"regex\":\"(?s)^\\\\s*(.*?)\\\\s*$\",\"group\":1}]");
        rc = !whole ? nomem(c)
                    : extract_pipeline_new(cJSON_GetArrayItem(whole, 0), where, &t->pipelines[0],
                                           c->err, c->errlen);
        if (!rc) t->n_pipelines = 1;
        cJSON_Delete(whole);
    } else if (!cJSON_IsArray(pl) || cJSON_GetArraySize(pl) < 1 ||
               cJSON_GetArraySize(pl) > TASK_MAX_PIPELINES) {
        rc = fail_task(c, i, t->name, "\"pipelines\" must be an array of 1..%d pipelines",
                       TASK_MAX_PIPELINES);
    } else {
        const cJSON *p;
        cJSON_ArrayForEach(p, pl)
        {
            if (!cJSON_IsObject(p)) {
                rc = fail_task(c, i, t->name, "each pipeline must be an object");
                break;
            }
            if ((rc = extract_pipeline_new(p, where, &t->pipelines[t->n_pipelines], c->err,
                                           c->errlen)))
                break;
            t->n_pipelines++;
        }
    }
    if (!rc && nm && !cJSON_IsObject(nm))
        rc = fail_task(c, i, t->name, "\"normalize\" must be an object");
    if (!rc) rc = extract_normalizer_new(nm, where, &t->norm, c->err, c->errlen);
    if (!rc && st) {
        if (!cJSON_IsArray(st))
            rc = fail_task(c, i, t->name, "\"stop\" must be an array of strings");
        else if (!(t->stop = calloc((size_t)cJSON_GetArraySize(st) + 1, sizeof *t->stop)))
            rc = nomem(c);
        const cJSON *s;
        cJSON_ArrayForEach(s, st)
        {
            if (rc) break;
            if (!cJSON_IsString(s) || !*s->valuestring)
                rc = fail_task(c, i, t->name, "\"stop\" entries must be non-empty strings");
            else if (!(t->stop[t->n_stop++] = qg_strdup(s->valuestring)))
                rc = nomem(c);
        }
    }
    cJSON_Delete(def);
    return rc;
}

static int load_custom(struct ctx *c, int i, struct task_config *t, const cJSON *o)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "fields");
    if (!cJSON_IsObject(f))
        return fail_task(c, i, t->name,
                         "a custom task needs \"fields\" (the names of its JSONL fields)");
    static const char *const field_keys[] = {"id",      "prompt", "answer", "context",
                                             "choices", "gold",   NULL};
    const char *near, *bad = json_unknown_key(f, field_keys, &near);
    if (bad)
        return fail_task(c, i, t->name, "unknown key \"%s\" in \"fields\"%s%s%s", bad,
                         near ? " (did you mean \"" : "", near ? near : "", near ? "\"?)" : "");
    if (dup_opt(c, get_str(f, "id"), &t->f_id) || dup_opt(c, get_str(f, "prompt"), &t->f_prompt) ||
        dup_opt(c, get_str(f, "answer"), &t->f_answer) ||
        dup_opt(c, get_str(f, "context"), &t->f_context) ||
        dup_opt(c, get_str(f, "choices"), &t->f_choices) ||
        dup_opt(c, get_str(f, "gold"), &t->f_gold))
        return QG_ERR_NOMEM;
    int mc = t->f_choices || t->f_gold || t->f_context;
    if (mc && !(t->f_context && t->f_choices && t->f_gold))
        return fail_task(c, i, t->name,
                         "multiple-choice \"fields\" need \"context\", \"choices\" and \"gold\"");
    if (!mc && !(t->f_prompt && t->f_answer))
        return fail_task(c, i, t->name,
                         "\"fields\" need \"prompt\" and \"answer\" (exact match) or \"context\", "
                         "\"choices\", \"gold\"");
    t->kind = mc ? TASK_MULTIPLE_CHOICE : TASK_GENERATION;
    return mc ? QG_OK : load_generation(c, i, t, o);
}

/* sha256 of the task's settings with its data hashes instead of its paths */
static int hash_config(struct task_config *t, const cJSON *o)
{
    cJSON *cfg = cJSON_Duplicate(o, 1);
    if (!cfg) return QG_ERR_NOMEM;
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "data");
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "sha256");
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "description");
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "items_file"); /* hashed as what it lists */
    if (t->n_select) {
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, "items");
        cJSON *sel = cJSON_AddArrayToObject(cfg, "items");
        for (int64_t k = 0; sel && k < t->n_select; k++)
            if (!cJSON_AddItemToArray(sel, cJSON_CreateNumber((double)t->select[k]))) sel = NULL;
        if (!sel) {
            cJSON_Delete(cfg);
            return QG_ERR_NOMEM;
        }
    }
    cJSON *h = cJSON_AddObjectToObject(cfg, "data_sha256");
    int ok = h != NULL;
    for (int f = 0; f < t->n_files && ok; f++)
        ok = cJSON_AddStringToObject(h, t->files[f].role, t->files[f].sha256) != NULL;
    char *s = ok ? cJSON_PrintUnformatted(cfg) : NULL; /* never a hash of a partial config */
    cJSON_Delete(cfg);
    if (!s) return QG_ERR_NOMEM;
    hash_sha256_mem(s, strlen(s), t->config_hash);
    t->config_json = s;
    return QG_OK;
}

/* protocol, ctx, stride and chunks of a perplexity task */
static int load_perplexity(struct ctx *c, int i, const char *name, struct task_config *t,
                           const cJSON *o)
{
    int rc;
    int64_t v = 0;
    const char *proto = get_str(o, "protocol");
    t->protocol = ppl_protocol_from_name(proto ? proto : "llamacpp");
    if (t->protocol < 0)
        return fail_task(c, i, name, "unknown protocol '%s' (llamacpp, rolling, stride)", proto);
    if ((rc = get_int(c, i, name, o, "ctx", 4, 1 << 20, 512, &v))) return rc;
    t->ctx = (int)v;
    if ((rc = get_int(c, i, name, o, "stride", 1, t->ctx, t->ctx / 2, &v))) return rc;
    t->stride = (int)v;
    if ((rc = get_int(c, i, name, o, "chunks", 0, INT64_MAX / 2, 0, &t->chunks))) return rc;
    return QG_OK;
}

/* The options every kind shares: critical, limit, few-shot, max_tokens,
 * temperature and top_p, range-checked. */
static int load_options(struct ctx *c, int i, const char *name, struct task_config *t,
                        const cJSON *o)
{
    int rc;
    const cJSON *crit = cJSON_GetObjectItemCaseSensitive(o, "critical");
    if (crit && !cJSON_IsBool(crit))
        return fail_task(c, i, name, "\"critical\" must be true or false");
    t->critical =
        crit ? cJSON_IsTrue(crit) : 1; /* false: informational, not in the suite verdict */
    int64_t v = 0;
    if ((rc = get_int(c, i, name, o, "limit", 0, INT64_MAX / 2, 0, &t->limit))) return rc;
    if ((rc = get_int(c, i, name, o, "fewshot", 0, 64, 0, &v))) return rc;
    t->fewshot = (int)v;
    if ((rc = get_int(c, i, name, o, "fewshot_seed", 0, INT64_MAX / 2, 1234, &v))) return rc;
    t->fewshot_seed = (uint64_t)v;
    if (t->fewshot > 0 && t->kind == TASK_MULTIPLE_CHOICE &&
        !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "data")))
        return fail_task(
            c, i, name,
            "\"fewshot\" needs a split to draw from: \"data\": {\"data\": ..., \"train\": ...}");
    if ((rc = get_int(c, i, name, o, "max_tokens", 1, 1 << 16, 256, &v))) return rc;
    t->max_tokens = (int)v;
    t->temperature = 0;
    t->top_p = 1;
    const cJSON *tv = cJSON_GetObjectItemCaseSensitive(o, "temperature"),
                *pv = cJSON_GetObjectItemCaseSensitive(o, "top_p");
    if (tv && (!cJSON_IsNumber(tv) || tv->valuedouble < 0 || tv->valuedouble > 10))
        return fail_task(c, i, name, "\"temperature\" must be a number in 0..10");
    if (pv && (!cJSON_IsNumber(pv) || pv->valuedouble <= 0 || pv->valuedouble > 1))
        return fail_task(c, i, name, "\"top_p\" must be a number in (0, 1]");
    if (tv) t->temperature = tv->valuedouble;
    if (pv) t->top_p = pv->valuedouble;
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(o, "policy");
    if (tp) { /* checked here; applied over the suite's by harness/compare.c */
        char where[512];
        struct verdict_policy tmp;
        snprintf(where, sizeof where, "%s: task %d ('%s')", c->file, i + 1, name);
        if ((rc = suite_policy_from_json(tp, where, &tmp, c->err, c->errlen))) return rc;
    }
    return QG_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "items_file": one item index per line ('#' starts a comment), resolved
 * against the suite's folder, into *v (malloc'd, *n entries) */
static int read_items_file(struct ctx *c, int i, const char *name, const char *dir, const char *rel,
                           int64_t **v, int64_t *n)
{
    char path[4200], *text = NULL, err[QG_ERRMSG_MAX];
    size_t len;
    snprintf(path, sizeof path, "%s%s%s", rel[0] == '/' || !*dir ? "" : dir,
             rel[0] == '/' || !*dir ? "" : "/", rel);
    if (qg_read_file(path, (size_t)64 << 20, &text, &len, err, sizeof err))
        return fail_task(c, i, name, "\"items_file\": %s", err);
    int64_t cap = 0, line = 0;
    int rc = QG_OK;
    for (char *p = text, *e; !rc && p < text + len; p = e + 1) {
        e = memchr(p, '\n', (size_t)(text + len - p));
        if (!e) e = text + len;
        line++;
        char *hash = memchr(p, '#', (size_t)(e - p));
        char buf[64];
        size_t k = (size_t)((hash ? hash : e) - p);
        while (k && (p[k - 1] == ' ' || p[k - 1] == '\t' || p[k - 1] == '\r'))
            k--;
        while (k && (*p == ' ' || *p == '\t'))
            p++, k--;
        if (!k) continue;
        int64_t x;
        snprintf(buf, sizeof buf, "%.*s", (int)(k < 63 ? k : 63), p);
        if (k > 20 || qg_parse_i64(buf, 0, INT64_MAX / 2, &x)) {
            /* the line is quoted only when it is one short word: a file
             * pointed at by mistake (a .env's KEY=value) must not reach the
             * terminal */
            int numeric = k <= 12 && strspn(buf, "0123456789+-.abcdefghijklmnopqrstuvwxyz"
                                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == strlen(buf);
            rc = numeric ? fail_task(c, i, name, "%s:%lld: not an item index: '%s'", path,
                                     (long long)line, buf)
                         : fail_task(c, i, name,
                                     "%s:%lld: not an item index (the line holds %zu bytes of "
                                     "text, not shown: is this the items file?)",
                                     path, (long long)line, k);
            break;
        }
        if (*n == cap) {
            int64_t *g = realloc(*v, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *g);
            if (!g) {
                rc = nomem(c);
                break;
            }
            *v = g;
        }
        (*v)[(*n)++] = x;
    }
    free(text);
    return rc;
}

/* "items": [indices] or "items_file": the items to run, sorted, unique */
static int load_items(struct ctx *c, int i, const char *name, struct task_config *t, const cJSON *o,
                      const char *dir)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(o, "items");
    const char *file = get_str(o, "items_file");
    if (!items && !cJSON_GetObjectItemCaseSensitive(o, "items_file")) return QG_OK;
    if (items && cJSON_GetObjectItemCaseSensitive(o, "items_file"))
        return fail_task(c, i, name, "give \"items\" or \"items_file\", not both");
    if (t->kind == TASK_PERPLEXITY)
        return fail_task(c, i, name,
                         "\"items\" selects items of multiple-choice and generation tasks; a "
                         "perplexity task takes \"chunks\"");
    int64_t *v = NULL, n = 0;
    int rc = QG_OK;
    if (items) {
        if (!cJSON_IsArray(items) || cJSON_GetArraySize(items) == 0)
            return fail_task(c, i, name, "\"items\" must be a non-empty array of item indices");
        if (!(v = malloc((size_t)cJSON_GetArraySize(items) * sizeof *v))) return nomem(c);
        const cJSON *x;
        cJSON_ArrayForEach(x, items)
        {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 1e15 ||
                x->valuedouble != floor(x->valuedouble)) {
                free(v);
                return fail_task(c, i, name,
                                 "\"items\"[%lld] is not an item index (an integer >= 0)",
                                 (long long)n);
            }
            v[n++] = (int64_t)x->valuedouble;
        }
    } else if (!file) {
        return fail_task(c, i, name, "\"items_file\" must be a path");
    } else if ((rc = read_items_file(c, i, name, dir, file, &v, &n))) {
        free(v);
        return rc;
    }
    if (n == 0) {
        free(v);
        return fail_task(c, i, name, "\"items_file\" %s lists no item", file);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++)
        if (!k || v[j] != v[k - 1]) v[k++] = v[j];
    t->select = v;
    t->n_select = k;
    return QG_OK;
}

static int load_task_named(struct ctx *c, int i, const cJSON *o, const char *dir, int allow_changed,
                           struct task_config *t);

/* A task that names a registry task ("task": "hellaswag") takes its kind,
 * benchmark, protocol and metric from the registry where it does not say
 * otherwise (registry_task_fill); then as any task. */
static int load_task(struct ctx *c, int i, const cJSON *o, const char *dir, int allow_changed,
                     struct task_config *t)
{
    if (!cJSON_IsObject(o) || !cJSON_GetObjectItemCaseSensitive(o, "task"))
        return load_task_named(c, i, o, dir, allow_changed, t);
    cJSON *full = cJSON_Duplicate(o, 1);
    if (!full) return nomem(c);
    char e2[QG_ERRMSG_MAX];
    int rc = registry_task_fill(full, 512, e2, sizeof e2);
    if (rc)
        rc = fail_task(c, i, get_str(o, "name"), "%s", e2);
    else
        rc = load_task_named(c, i, full, dir, allow_changed, t);
    cJSON_Delete(full);
    return rc;
}

static int load_task_named(struct ctx *c, int i, const cJSON *o, const char *dir, int allow_changed,
                           struct task_config *t)
{
    if (!cJSON_IsObject(o)) return fail_task(c, i, NULL, "must be an object");
    const char *name = get_str(o, "name");
    if (!name || !*name) return fail_task(c, i, NULL, "missing \"name\" (a non-empty string)");
    if (!(t->name = qg_strdup(name))) return nomem(c);
    t->ctx = 512;
    t->chunks = 0;
    int rc = check_keys(c, i, name, o, task_keys);
    if (rc) return rc;
    const char *kind = get_str(o, "kind"), *bench = get_str(o, "benchmark");
    if (!!kind == !!bench)
        return fail_task(c, i, name, "give exactly one of \"kind\" and \"benchmark\"");
    if (bench) {
        int bk = bench_kind(bench);
        if (bk < 0)
            return fail_task(c, i, name, "unknown benchmark '%s' (known: %s)", bench,
                             bench_names());
        if (!(t->benchmark = qg_strdup(bench))) return nomem(c);
        t->kind = bk == BENCH_MC ? TASK_MULTIPLE_CHOICE : TASK_GENERATION;
    } else if ((t->kind = task_kind_from_name(kind)) < 0) {
        return fail_task(c, i, name,
                         "unknown kind '%s' (perplexity, multiple_choice, generation, custom)",
                         kind);
    } else if (t->kind == TASK_MULTIPLE_CHOICE || t->kind == TASK_GENERATION) {
        return fail_task(c, i, name,
                         "kind '%s' needs a \"benchmark\", or use kind \"custom\" with \"fields\"",
                         kind);
    }
    if ((rc = load_options(c, i, name, t, o))) return rc;
    const char *delim = get_str(o, "delimiter");
    if (!(t->delimiter = qg_strdup(delim ? delim : " "))) return nomem(c);
    if ((rc = load_files(c, i, t, o, dir, allow_changed))) return rc;
    if (t->benchmark && !strcmp(t->benchmark, "gsm8k") && task_config_file(t, "train") &&
        !cJSON_GetObjectItemCaseSensitive(o, "fewshot"))
        t->fewshot = 8; /* the chain-of-thought 8-shot prompt when a train split is given */
    if (t->kind == TASK_PERPLEXITY) {
        struct stat st;
        const struct task_file *f = task_config_file(t, "data");
        if (f && stat(f->path, &st) == 0 && !S_ISREG(st.st_mode))
            return fail_task(c, i, name, "perplexity data %s must be a file (a text to score)",
                             f->path);
        if ((rc = load_perplexity(c, i, name, t, o))) return rc;
    } else if (t->kind == TASK_CUSTOM) {
        if ((rc = load_custom(c, i, t, o))) return rc;
    } else if (t->kind == TASK_GENERATION) {
        if ((rc = load_generation(c, i, t, o))) return rc;
    }
    if (t->benchmark && !strcmp(t->benchmark, "piqa") && !task_config_file(t, "labels"))
        return fail_task(c, i, name, "piqa needs \"data\": {\"data\": ..., \"labels\": ...}");
    if ((rc = load_items(c, i, name, t, o, dir))) return rc;
    return hash_config(t, o) ? nomem(c) : QG_OK;
}

static const char *const policy_keys[] = {"margin_ppl", "margin_acc",   "alpha",    "beta",
                                          "bootstrap",  "margin_kld",   "min_top1", "max_flip_rate",
                                          "metric",     "cluster_corr", NULL};

/* One policy key k into pol; QG_ERR_DATA naming it when its value is out
 * of range. */
static int policy_key(struct ctx *c, const cJSON *k, struct verdict_policy *pol)
{
    struct {
        const char *key;
        double lo, hi, *dst;
    } nums[] = {
        {"margin_ppl", 0, 1, &pol->margin_ppl},       {"margin_acc", 0, 1, &pol->margin_acc},
        {"alpha", 1e-6, 0.25, &pol->alpha},           {"beta", 1e-6, 0.5, &pol->beta},
        {"margin_kld", 0, 10, &pol->margin_kld},      {"min_top1", 0, 1, &pol->min_top1},
        {"max_flip_rate", 0, 1, &pol->max_flip_rate}, {"cluster_corr", 0, 1, &pol->cluster_corr}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        if (strcmp(k->string, nums[i].key)) continue;
        if (!cJSON_IsNumber(k) || k->valuedouble < nums[i].lo || k->valuedouble > nums[i].hi)
            return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                           "%s: policy \"%s\" must be a number in [%g, %g]", c->file, nums[i].key,
                           nums[i].lo, nums[i].hi);
        *nums[i].dst = k->valuedouble;
        return QG_OK;
    }
    if (!strcmp(k->string, "bootstrap")) {
        if (!cJSON_IsNumber(k) || k->valuedouble < 100 || k->valuedouble > 1e7)
            return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                           "%s: policy \"bootstrap\" must be 100..1e7", c->file);
        pol->bootstrap = (int)k->valuedouble;
        return QG_OK;
    }
    if (!strcmp(k->string, "metric")) {
        int m = cJSON_IsString(k) ? verdict_mc_metric_from_name(k->valuestring) : -1;
        if (m < 0)
            return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                           "%s: policy \"metric\" must be \"acc\", \"acc_norm\" or \"per_token\"",
                           c->file);
        pol->mc_metric = m;
        return QG_OK;
    }
    const char *near =
        qg_closest(k->string, policy_keys, (int)(sizeof policy_keys / sizeof *policy_keys) - 1);
    return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: unknown policy key \"%s\"%s%s%s", c->file,
                   k->string, near ? " (did you mean \"" : "", near ? near : "",
                   near ? "\"?)" : "");
}

int suite_policy_apply(const cJSON *p, const char *where, struct verdict_policy *pol, char *err,
                       size_t errlen)
{
    struct ctx cc = {where, err, errlen};
    if (!p) return QG_OK;
    if (!cJSON_IsObject(p))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: \"policy\" must be an object", where);
    const cJSON *k;
    cJSON_ArrayForEach(k, p)
    {
        int rc = policy_key(&cc, k, pol);
        if (rc) return rc;
    }
    return QG_OK;
}

int suite_policy_from_json(const cJSON *p, const char *where, struct verdict_policy *pol, char *err,
                           size_t errlen)
{
    *pol = verdict_default_policy();
    return suite_policy_apply(p, where, pol, err, errlen);
}

int suite_load(const char *path, int allow_changed, struct suite **out, char *err, size_t errlen)
{
    *out = NULL;
    char *text;
    size_t n;
    int rc = qg_read_file(path, (size_t)16 << 20, &text, &n, err, errlen);
    if (rc) return rc;
    struct ctx c = {path, err, errlen};
    cJSON *root = cJSON_ParseWithLength(text, n);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = text; at && p < at && p < text + n; p++)
            line += *p == '\n';
        free(text);
        return qg_errf(err, errlen, QG_ERR_DATA, "%s:%d: invalid JSON", path, line);
    }
    struct suite *s = calloc(1, sizeof *s);
    if (!s) rc = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", path);
    if (!rc) {
        s->path = qg_strdup(path);
        const char *slash = strrchr(path, '/');
        s->dir = slash ? qg_strndup(path, (size_t)(slash - path)) : qg_strdup("");
        if (!s->path || !s->dir)
            rc = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", path);
        else
            hash_sha256_mem(text, n, s->sha256);
    }
    const char *name = cJSON_IsObject(root) ? get_str(root, "name") : NULL;
    const cJSON *tasks =
        cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "tasks") : NULL;
    if (!rc && !cJSON_IsObject(root))
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: the suite must be a JSON object", path);
    else if (!rc && (!name || !*name))
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: missing \"name\"", path);
    else if (!rc && (!cJSON_IsArray(tasks) || cJSON_GetArraySize(tasks) == 0))
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: \"tasks\" must be a non-empty array", path);
    if (!rc) {
        const cJSON *k;
        cJSON_ArrayForEach(k, root) if (strcmp(k->string, "name") && strcmp(k->string, "tasks") &&
                                        strcmp(k->string, "policy") &&
                                        strcmp(k->string, "description")) rc =
            qg_errf(err, errlen, QG_ERR_DATA, "%s: unknown key \"%s\"", path, k->string);
    }
    if (!rc && !(s->name = qg_strdup(name)))
        rc = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", path);
    if (!rc) {
        rc = suite_policy_from_json(cJSON_GetObjectItemCaseSensitive(root, "policy"), path,
                                    &s->policy, err, errlen);
    }
    if (!rc) {
        int nt = cJSON_GetArraySize(tasks);
        if (!(s->tasks = calloc((size_t)nt, sizeof *s->tasks)))
            rc = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", path);
        for (int i = 0; i < nt && !rc; i++) {
            s->n_tasks = i + 1;
            rc =
                load_task(&c, i, cJSON_GetArrayItem(tasks, i), s->dir, allow_changed, &s->tasks[i]);
            for (int j = 0; j < i && !rc; j++)
                if (!strcmp(s->tasks[j].name, s->tasks[i].name))
                    rc = fail_task(&c, i, s->tasks[i].name, "duplicate task name (also task %d)",
                                   j + 1);
        }
    }
    cJSON_Delete(root);
    free(text);
    if (rc) {
        suite_free(s);
        return rc;
    }
    *out = s;
    return QG_OK;
}

void suite_free(struct suite *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_tasks; i++)
        task_config_release(&s->tasks[i]);
    free(s->tasks);
    free(s->path);
    free(s->dir);
    free(s->name);
    free(s);
}

/* 1 when name is one of the comma-separated names */
static int name_listed(const char *names, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (e != NULL);
    }
    return 0;
}

/* the task capped at limit items (windows), its config JSON and hash too */
static int task_limit(struct task_config *t, int64_t limit)
{
    const char *key = t->kind == TASK_PERPLEXITY ? "chunks" : "limit";
    int64_t *v = t->kind == TASK_PERPLEXITY ? &t->chunks : &t->limit;
    if (*v > 0 && *v <= limit) return QG_OK;
    *v = limit;
    cJSON *cfg = cJSON_Parse(t->config_json);
    if (!cfg) return QG_ERR_NOMEM;
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
    char *s = cJSON_AddNumberToObject(cfg, key, (double)limit) ? cJSON_PrintUnformatted(cfg) : NULL;
    cJSON_Delete(cfg);
    if (!s) return QG_ERR_NOMEM;
    free(t->config_json);
    t->config_json = s;
    hash_sha256_mem(s, strlen(s), t->config_hash);
    return QG_OK;
}

int suite_select(struct suite *s, const char *names, int64_t limit, char *err, size_t errlen)
{
    if (names && !names[strspn(names, ", ")])
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "--tasks names no task: give one or more of %s's task names, "
                       "comma-separated",
                       s->path);
    if (names) {
        for (const char *p = names; *p;) {
            const char *e = strchr(p, ',');
            int len = (int)(e ? (size_t)(e - p) : strlen(p)), found = 0;
            for (int i = 0; i < s->n_tasks; i++)
                found |= (int)strlen(s->tasks[i].name) == len &&
                         !strncmp(p, s->tasks[i].name, (size_t)len);
            if (!found) {
                struct sbuf all;
                sbuf_init(&all, 1 << 16);
                for (int i = 0; i < s->n_tasks; i++)
                    sbuf_printf(&all, "%s%s", i ? ", " : "", s->tasks[i].name);
                int rc = qg_errf(err, errlen, QG_ERR_USAGE, "%s has no task '%.*s' (it has: %s)",
                                 s->path, len, p, sbuf_str(&all));
                sbuf_release(&all);
                return rc;
            }
            p += len + (e != NULL);
        }
        int k = 0;
        for (int i = 0; i < s->n_tasks; i++) {
            if (name_listed(names, s->tasks[i].name))
                s->tasks[k++] = s->tasks[i];
            else
                task_config_release(&s->tasks[i]);
        }
        s->n_tasks = k;
    }
    for (int i = 0; i < s->n_tasks && limit > 0; i++)
        if (task_limit(&s->tasks[i], limit))
            return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    return QG_OK;
}

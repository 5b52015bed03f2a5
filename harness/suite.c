/* suite — parse and validate suite files, resolve and pin their data. */
#include "harness/suite.h"
#include "datasets/reader.h"
#include "harness/cli.h"
#include "harness/status.h"
#include "harness/store.h"
#include "harness/util.h"
#include "tasks/perplexity.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct ctx {
    const char *file;
    char *err;
    size_t errlen;
};

static int fail_task(struct ctx *c, int i, const char *name, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_task(struct ctx *c, int i, const char *name, const char *fmt, ...)
{
    char msg[QG_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (name) return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: task %d ('%s'): %s", c->file, i + 1, name, msg);
    return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: task %d: %s", c->file, i + 1, msg);
}

static const char *const task_keys[] = {
    "name", "kind", "benchmark", "data", "sha256", "critical", "protocol", "ctx", "stride", "chunks", "limit",
    "fewshot", "fewshot_seed", "max_tokens", "temperature", "top_p", "delimiter", "pipelines", "normalize", "stop", "fields", "description", NULL};

static int check_keys(struct ctx *c, int i, const char *name, const cJSON *o, const char *const *keys)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, o)
    {
        int ok = 0, n = 0;
        for (; keys[n]; n++) ok |= strcmp(keys[n], k->string) == 0;
        if (ok) continue;
        const char *near = cli_closest(k->string, (const char *const *)keys, n);
        if (near) return fail_task(c, i, name, "unknown key \"%s\" (did you mean \"%s\"?)", k->string, near);
        return fail_task(c, i, name, "unknown key \"%s\"", k->string);
    }
    return QG_OK;
}

static int get_int(struct ctx *c, int i, const char *name, const cJSON *o, const char *key, int64_t lo, int64_t hi,
                   int64_t def, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        *out = def;
        return QG_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return fail_task(c, i, name, "\"%s\" must be an integer in %lld..%lld", key, (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return QG_OK;
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
    if (p[0] == '/' || !dir[0]) sbuf_printf(&b, "%s", p);
    else sbuf_printf(&b, "%s/%s", dir, p);
    return b.data;
}

/* data + sha256 into t->files, hashing and checking each pin */
static int load_files(struct ctx *c, int i, struct suite_task *t, const cJSON *o, const char *dir, int allow_changed)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data"), *pins = cJSON_GetObjectItemCaseSensitive(o, "sha256");
    static const char *const roles[SUITE_MAX_FILES] = {"data", "labels", "train"};
    if (!data) return fail_task(c, i, t->name, "missing \"data\" (a path, or {\"data\": PATH, ...})");
    if (!pins) return fail_task(c, i, t->name, "missing \"sha256\" pin(s) for the data");
    for (int r = 0; r < SUITE_MAX_FILES; r++) {
        const char *p = NULL, *pin = NULL;
        if (cJSON_IsString(data)) {
            if (r > 0) break;
            p = data->valuestring;
            if (!cJSON_IsString(pins)) return fail_task(c, i, t->name, "\"sha256\" must be a hex string when \"data\" is a path");
            pin = pins->valuestring;
        } else if (cJSON_IsObject(data)) {
            const cJSON *dv = cJSON_GetObjectItemCaseSensitive(data, roles[r]);
            if (!dv) continue;
            if (!cJSON_IsString(dv)) return fail_task(c, i, t->name, "\"data\".\"%s\" must be a path", roles[r]);
            p = dv->valuestring;
            const cJSON *pv = cJSON_IsObject(pins) ? cJSON_GetObjectItemCaseSensitive(pins, roles[r]) : NULL;
            if (!cJSON_IsString(pv)) return fail_task(c, i, t->name, "\"sha256\".\"%s\" pin is missing", roles[r]);
            pin = pv->valuestring;
        } else {
            return fail_task(c, i, t->name, "\"data\" must be a path or an object of paths");
        }
        struct suite_file *f = &t->files[t->n_files++];
        f->role = roles[r];
        f->path = resolve(dir, p);
        char err[QG_ERRMSG_MAX];
        int rc = hash_sha256_path(f->path, f->sha256, err, sizeof err);
        if (rc) return qg_errf(c->err, c->errlen, rc, "%s: task %d ('%s'): %s", c->file, i + 1, t->name, err);
        if (strcmp(f->sha256, pin) != 0) {
            if (!allow_changed)
                return fail_task(c, i, t->name, "%s has sha256 %s but the suite pins %s (the data changed; "
                                 "re-pin it or pass --allow-changed-data)", f->path, f->sha256, pin);
            f->changed = 1;
        }
    }
    if (cJSON_IsObject(data) && !suite_task_file(t, "data"))
        return fail_task(c, i, t->name, "\"data\" needs a \"data\" path");
    return QG_OK;
}

static int kind_from_name(const char *k)
{
    if (!strcmp(k, "perplexity")) return STORE_TASK_PERPLEXITY;
    if (!strcmp(k, "multiple_choice")) return STORE_TASK_MULTIPLE_CHOICE;
    if (!strcmp(k, "generation")) return STORE_TASK_GENERATION;
    if (!strcmp(k, "custom")) return STORE_TASK_CUSTOM;
    return -1;
}

/* lm-eval's gsm8k filters and exact_match settings */
static const char *gsm8k_defaults =
    "{\"pipelines\":[{\"name\":\"strict-match\",\"regex\":\"#### (\\\\-?[0-9\\\\.\\\\,]+)\",\"select\":\"first\"},"
    "{\"name\":\"flexible-extract\",\"regex\":\"(-?[$0-9.,]{2,})|(-?[0-9]+)\",\"select\":\"last\"}],"
    "\"normalize\":{\"ignore_case\":true,\"ignore\":[\",\",\"\\\\$\",\"(?s).*#### \",\"\\\\.$\"]},"
    "\"stop\":[\"Question:\",\"</s>\",\"<|im_end|>\"]}";

static int load_generation(struct ctx *c, int i, struct suite_task *t, const cJSON *o)
{
    cJSON *def = t->benchmark && !strcmp(t->benchmark, "gsm8k") ? cJSON_Parse(gsm8k_defaults) : NULL;
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(o, "pipelines"), *nm = cJSON_GetObjectItemCaseSensitive(o, "normalize");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!pl && def) pl = cJSON_GetObjectItemCaseSensitive(def, "pipelines");
    if (!nm && def) nm = cJSON_GetObjectItemCaseSensitive(def, "normalize");
    if (!st && def) st = cJSON_GetObjectItemCaseSensitive(def, "stop");
    char where[512];
    snprintf(where, sizeof where, "%s: task %d ('%s')", c->file, i + 1, t->name);
    int rc = QG_OK;
    if (!pl) {
        /* no extraction: the whole output, stripped */
        cJSON *whole = cJSON_Parse("[{\"name\":\"exact\",\"regex\":\"(?s)^\\\\s*(.*?)\\\\s*$\",\"group\":1}]");
        rc = pipeline_new(cJSON_GetArrayItem(whole, 0), where, &t->pipelines[0], c->err, c->errlen);
        if (!rc) t->n_pipelines = 1;
        cJSON_Delete(whole);
    } else if (!cJSON_IsArray(pl) || cJSON_GetArraySize(pl) < 1 || cJSON_GetArraySize(pl) > SUITE_MAX_PIPELINES) {
        rc = fail_task(c, i, t->name, "\"pipelines\" must be an array of 1..%d pipelines", SUITE_MAX_PIPELINES);
    } else {
        const cJSON *p;
        cJSON_ArrayForEach(p, pl)
        {
            if (!cJSON_IsObject(p)) {
                rc = fail_task(c, i, t->name, "each pipeline must be an object");
                break;
            }
            if ((rc = pipeline_new(p, where, &t->pipelines[t->n_pipelines], c->err, c->errlen))) break;
            t->n_pipelines++;
        }
    }
    if (!rc && nm && !cJSON_IsObject(nm)) rc = fail_task(c, i, t->name, "\"normalize\" must be an object");
    if (!rc) rc = normalizer_new(nm, where, &t->norm, c->err, c->errlen);
    if (!rc && st) {
        if (!cJSON_IsArray(st)) rc = fail_task(c, i, t->name, "\"stop\" must be an array of strings");
        t->stop = calloc((size_t)cJSON_GetArraySize(st) + 1, sizeof *t->stop);
        const cJSON *s;
        cJSON_ArrayForEach(s, st)
        {
            if (rc) break;
            if (!cJSON_IsString(s) || !*s->valuestring) rc = fail_task(c, i, t->name, "\"stop\" entries must be non-empty strings");
            else t->stop[t->n_stop++] = qg_strdup(s->valuestring);
        }
    }
    cJSON_Delete(def);
    return rc;
}

static int load_custom(struct ctx *c, int i, struct suite_task *t, const cJSON *o)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "fields");
    if (!cJSON_IsObject(f)) return fail_task(c, i, t->name, "a custom task needs \"fields\" (the names of its JSONL fields)");
    t->f_id = qg_strdup(get_str(f, "id"));
    t->f_prompt = qg_strdup(get_str(f, "prompt"));
    t->f_answer = qg_strdup(get_str(f, "answer"));
    t->f_context = qg_strdup(get_str(f, "context"));
    t->f_choices = qg_strdup(get_str(f, "choices"));
    t->f_gold = qg_strdup(get_str(f, "gold"));
    int mc = t->f_choices || t->f_gold || t->f_context;
    if (mc && !(t->f_context && t->f_choices && t->f_gold))
        return fail_task(c, i, t->name, "multiple-choice \"fields\" need \"context\", \"choices\" and \"gold\"");
    if (!mc && !(t->f_prompt && t->f_answer))
        return fail_task(c, i, t->name, "\"fields\" need \"prompt\" and \"answer\" (exact match) or \"context\", \"choices\", \"gold\"");
    t->kind = mc ? STORE_TASK_MULTIPLE_CHOICE : STORE_TASK_GENERATION;
    return mc ? QG_OK : load_generation(c, i, t, o);
}

/* sha256 of the task's settings with its data hashes instead of its paths */
static int hash_config(struct suite_task *t, const cJSON *o)
{
    cJSON *cfg = cJSON_Duplicate(o, 1);
    if (!cfg) return QG_ERR_NOMEM;
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "data");
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "sha256");
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "description");
    cJSON *h = cJSON_AddObjectToObject(cfg, "data_sha256");
    for (int f = 0; f < t->n_files; f++) cJSON_AddStringToObject(h, t->files[f].role, t->files[f].sha256);
    char *s = cJSON_PrintUnformatted(cfg);
    cJSON_Delete(cfg);
    if (!s) return QG_ERR_NOMEM;
    hash_sha256_mem(s, strlen(s), t->config_hash);
    t->config_json = s;
    return QG_OK;
}

static int load_task(struct ctx *c, int i, const cJSON *o, const char *dir, int allow_changed, struct suite_task *t)
{
    if (!cJSON_IsObject(o)) return fail_task(c, i, NULL, "must be an object");
    const char *name = get_str(o, "name");
    if (!name || !*name) return fail_task(c, i, NULL, "missing \"name\" (a non-empty string)");
    t->name = qg_strdup(name);
    t->ctx = 512;
    t->chunks = 0;
    int rc = check_keys(c, i, name, o, task_keys);
    if (rc) return rc;
    const char *kind = get_str(o, "kind"), *bench = get_str(o, "benchmark");
    if (!!kind == !!bench) return fail_task(c, i, name, "give exactly one of \"kind\" and \"benchmark\"");
    if (bench) {
        int bk = bench_kind(bench);
        if (bk < 0) return fail_task(c, i, name, "unknown benchmark '%s' (known: %s)", bench, bench_names());
        t->benchmark = qg_strdup(bench);
        t->kind = bk == BENCH_MC ? STORE_TASK_MULTIPLE_CHOICE : STORE_TASK_GENERATION;
    } else if ((t->kind = kind_from_name(kind)) < 0) {
        return fail_task(c, i, name, "unknown kind '%s' (perplexity, multiple_choice, generation, custom)", kind);
    } else if (t->kind == STORE_TASK_MULTIPLE_CHOICE || t->kind == STORE_TASK_GENERATION) {
        return fail_task(c, i, name, "kind '%s' needs a \"benchmark\", or use kind \"custom\" with \"fields\"", kind);
    }
    const cJSON *crit = cJSON_GetObjectItemCaseSensitive(o, "critical");
    if (crit && !cJSON_IsBool(crit)) return fail_task(c, i, name, "\"critical\" must be true or false");
    t->critical = cJSON_IsTrue(crit);
    int64_t v;
    if ((rc = get_int(c, i, name, o, "limit", 0, INT64_MAX / 2, 0, &t->limit))) return rc;
    if ((rc = get_int(c, i, name, o, "fewshot", 0, 64, 0, &v))) return rc;
    t->fewshot = (int)v;
    if ((rc = get_int(c, i, name, o, "fewshot_seed", 0, INT64_MAX / 2, 1234, &v))) return rc;
    t->fewshot_seed = (uint64_t)v;
    if (t->fewshot > 0 && t->kind == STORE_TASK_MULTIPLE_CHOICE && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "data")))
        return fail_task(c, i, name, "\"fewshot\" needs a split to draw from: \"data\": {\"data\": ..., \"train\": ...}");
    if ((rc = get_int(c, i, name, o, "max_tokens", 1, 1 << 16, 256, &v))) return rc;
    t->max_tokens = (int)v;
    t->temperature = 0;
    t->top_p = 1;
    const cJSON *tv = cJSON_GetObjectItemCaseSensitive(o, "temperature"), *pv = cJSON_GetObjectItemCaseSensitive(o, "top_p");
    if (tv && (!cJSON_IsNumber(tv) || tv->valuedouble < 0 || tv->valuedouble > 10))
        return fail_task(c, i, name, "\"temperature\" must be a number in 0..10");
    if (pv && (!cJSON_IsNumber(pv) || pv->valuedouble <= 0 || pv->valuedouble > 1))
        return fail_task(c, i, name, "\"top_p\" must be a number in (0, 1]");
    if (tv) t->temperature = tv->valuedouble;
    if (pv) t->top_p = pv->valuedouble;
    const char *delim = get_str(o, "delimiter");
    t->delimiter = qg_strdup(delim ? delim : " ");
    if ((rc = load_files(c, i, t, o, dir, allow_changed))) return rc;
    if (t->benchmark && !strcmp(t->benchmark, "gsm8k") && suite_task_file(t, "train") &&
        !cJSON_GetObjectItemCaseSensitive(o, "fewshot"))
        t->fewshot = 8; /* the chain-of-thought 8-shot prompt when a train split is given */
    if (t->kind == STORE_TASK_PERPLEXITY) {
        const char *proto = get_str(o, "protocol");
        t->protocol = ppl_protocol_from_name(proto ? proto : "llamacpp");
        if (t->protocol < 0) return fail_task(c, i, name, "unknown protocol '%s' (llamacpp, rolling, stride)", proto);
        if ((rc = get_int(c, i, name, o, "ctx", 4, 1 << 20, 512, &v))) return rc;
        t->ctx = (int)v;
        if ((rc = get_int(c, i, name, o, "stride", 1, t->ctx, t->ctx / 2, &v))) return rc;
        t->stride = (int)v;
        if ((rc = get_int(c, i, name, o, "chunks", 0, INT64_MAX / 2, 0, &t->chunks))) return rc;
    } else if (t->kind == STORE_TASK_CUSTOM) {
        if ((rc = load_custom(c, i, t, o))) return rc;
    } else if (t->kind == STORE_TASK_GENERATION) {
        if ((rc = load_generation(c, i, t, o))) return rc;
    }
    if (t->benchmark && !strcmp(t->benchmark, "piqa") && !suite_task_file(t, "labels"))
        return fail_task(c, i, name, "piqa needs \"data\": {\"data\": ..., \"labels\": ...}");
    return hash_config(t, o);
}

int suite_policy_from_json(const cJSON *p, const char *where, struct suite_policy *pol, char *err, size_t errlen)
{
    struct ctx cc = {where, err, errlen}, *c = &cc;
    pol->margin_ppl = log(1.01);
    pol->margin_acc = 0.01;
    pol->alpha = 0.05;
    pol->beta = 0.2;
    pol->bootstrap = 10000;
    if (!p) return QG_OK;
    if (!cJSON_IsObject(p)) return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: \"policy\" must be an object", c->file);
    struct { const char *key; double lo, hi, *dst; } nums[] = {
        {"margin_ppl", 0, 1, &pol->margin_ppl}, {"margin_acc", 0, 1, &pol->margin_acc},
        {"alpha", 1e-6, 0.5, &pol->alpha}, {"beta", 1e-6, 0.5, &pol->beta}};
    const cJSON *k;
    cJSON_ArrayForEach(k, p)
    {
        int found = 0;
        for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
            if (strcmp(k->string, nums[i].key)) continue;
            found = 1;
            if (!cJSON_IsNumber(k) || k->valuedouble < nums[i].lo || k->valuedouble > nums[i].hi)
                return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: policy \"%s\" must be a number in [%g, %g]", c->file,
                               nums[i].key, nums[i].lo, nums[i].hi);
            *nums[i].dst = k->valuedouble;
        }
        if (!strcmp(k->string, "bootstrap")) {
            found = 1;
            if (!cJSON_IsNumber(k) || k->valuedouble < 100 || k->valuedouble > 1e7)
                return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: policy \"bootstrap\" must be 100..1e7", c->file);
            pol->bootstrap = (int)k->valuedouble;
        }
        if (!found) return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: unknown policy key \"%s\"", c->file, k->string);
    }
    return QG_OK;
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
        for (const char *p = text; at && p < at && p < text + n; p++) line += *p == '\n';
        free(text);
        return qg_errf(err, errlen, QG_ERR_DATA, "%s:%d: invalid JSON", path, line);
    }
    struct suite *s = calloc(1, sizeof *s);
    if (!s) rc = QG_ERR_NOMEM;
    if (!rc) {
        s->path = qg_strdup(path);
        const char *slash = strrchr(path, '/');
        s->dir = slash ? qg_strndup(path, (size_t)(slash - path)) : qg_strdup("");
        hash_sha256_mem(text, n, s->sha256);
    }
    const char *name = cJSON_IsObject(root) ? get_str(root, "name") : NULL;
    const cJSON *tasks = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "tasks") : NULL;
    if (!rc && !cJSON_IsObject(root)) rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: the suite must be a JSON object", path);
    else if (!rc && (!name || !*name)) rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: missing \"name\"", path);
    else if (!rc && (!cJSON_IsArray(tasks) || cJSON_GetArraySize(tasks) == 0))
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: \"tasks\" must be a non-empty array", path);
    if (!rc) {
        const cJSON *k;
        cJSON_ArrayForEach(k, root) if (strcmp(k->string, "name") && strcmp(k->string, "tasks") && strcmp(k->string, "policy") &&
                                        strcmp(k->string, "description")) rc = qg_errf(err, errlen, QG_ERR_DATA,
                                                                                        "%s: unknown key \"%s\"", path, k->string);
    }
    if (!rc) {
        s->name = qg_strdup(name);
        rc = suite_policy_from_json(cJSON_GetObjectItemCaseSensitive(root, "policy"), path, &s->policy, err, errlen);
    }
    if (!rc) {
        int nt = cJSON_GetArraySize(tasks);
        s->tasks = calloc((size_t)nt, sizeof *s->tasks);
        for (int i = 0; i < nt && !rc; i++) {
            s->n_tasks = i + 1;
            rc = load_task(&c, i, cJSON_GetArrayItem(tasks, i), s->dir, allow_changed, &s->tasks[i]);
            for (int j = 0; j < i && !rc; j++)
                if (!strcmp(s->tasks[j].name, s->tasks[i].name))
                    rc = fail_task(&c, i, s->tasks[i].name, "duplicate task name (also task %d)", j + 1);
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
    for (int i = 0; i < s->n_tasks; i++) {
        struct suite_task *t = &s->tasks[i];
        free(t->name);
        free(t->benchmark);
        free(t->delimiter);
        free(t->config_json);
        for (int f = 0; f < t->n_files; f++) free(t->files[f].path);
        for (int p = 0; p < t->n_pipelines; p++) pipeline_free(t->pipelines[p]);
        normalizer_free(t->norm);
        for (int k = 0; k < t->n_stop; k++) free(t->stop[k]);
        free(t->stop);
        free(t->f_id);
        free(t->f_prompt);
        free(t->f_answer);
        free(t->f_context);
        free(t->f_choices);
        free(t->f_gold);
    }
    free(s->tasks);
    free(s->path);
    free(s->dir);
    free(s->name);
    free(s);
}

const struct suite_file *suite_task_file(const struct suite_task *t, const char *role)
{
    for (int f = 0; f < t->n_files; f++)
        if (!strcmp(t->files[f].role, role)) return &t->files[f];
    return NULL;
}

static struct bench_source source_of(const struct suite_task *t)
{
    const struct suite_file *d = suite_task_file(t, "data"), *l = suite_task_file(t, "labels"), *tr = suite_task_file(t, "train");
    struct bench_source s = {.data = d ? d->path : NULL, .labels = l ? l->path : NULL, .train = tr ? tr->path : NULL,
                             .fewshot = t->fewshot, .fewshot_seed = t->fewshot_seed, .limit = t->limit};
    return s;
}

/* custom JSONL: one item per object, fields named by the task */
static int custom_items(const struct suite_task *t, int mc, void **out, int64_t *n, char *err, size_t errlen)
{
    const char *path = suite_task_file(t, "data")->path;
    struct lines *l;
    int rc = lines_open(path, &l, err, errlen);
    if (rc) return rc;
    size_t elem = mc ? sizeof(struct mc_item) : sizeof(struct gen_item);
    char *items = NULL;
    int64_t k = 0, cap = 0;
    cJSON *o;
    while ((t->limit <= 0 || k < t->limit) && (rc = jsonl_next(l, &o)) == 1) {
        rc = 0;
        if (k == cap) {
            cap = cap ? 2 * cap : 64;
            char *p = realloc(items, (size_t)cap * elem);
            if (!p) {
                rc = QG_ERR_NOMEM;
                cJSON_Delete(o);
                break;
            }
            items = p;
        }
        char *slot = items + (size_t)k * elem;
        memset(slot, 0, elem);
        const cJSON *idv = t->f_id ? cJSON_GetObjectItemCaseSensitive(o, t->f_id) : NULL;
        char idbuf[64];
        snprintf(idbuf, sizeof idbuf, "%lld", (long long)(k + 1));
        const char *id = cJSON_IsString(idv) ? idv->valuestring : idbuf;
        if (t->f_id && !idv) rc = lines_fail(l, "missing field \"%s\"", t->f_id);
        if (!rc && mc) {
            struct mc_item *it = (struct mc_item *)slot;
            const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(o, t->f_context), *ch = cJSON_GetObjectItemCaseSensitive(o, t->f_choices);
            const cJSON *gold = cJSON_GetObjectItemCaseSensitive(o, t->f_gold);
            if (!cJSON_IsString(ctx)) rc = lines_fail(l, "item %s: field \"%s\" is missing or not a string", id, t->f_context);
            else if (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) < 1 || cJSON_GetArraySize(ch) > MC_MAX_CHOICES)
                rc = lines_fail(l, "item %s: field \"%s\" must be an array of 1..%d strings (empty choices?)", id, t->f_choices, MC_MAX_CHOICES);
            else if (!cJSON_IsNumber(gold) || gold->valuedouble != floor(gold->valuedouble) || gold->valuedouble < 0 ||
                     gold->valuedouble >= cJSON_GetArraySize(ch))
                rc = lines_fail(l, "item %s: answer index \"%s\" is out of range (0..%d)", id, t->f_gold, cJSON_GetArraySize(ch) - 1);
            if (!rc) {
                it->id = qg_strdup(id);
                it->cluster = -1;
                it->context = qg_strdup(ctx->valuestring);
                it->gold = (int)gold->valuedouble;
                it->n_choices = cJSON_GetArraySize(ch);
                it->choices = calloc((size_t)it->n_choices, sizeof *it->choices);
                for (int c2 = 0; c2 < it->n_choices && !rc; c2++) {
                    const cJSON *cv = cJSON_GetArrayItem(ch, c2);
                    if (!cJSON_IsString(cv) || !*cv->valuestring) rc = lines_fail(l, "item %s: choice %d is empty or not a string", id, c2);
                    else it->choices[c2] = qg_strdup(cv->valuestring);
                }
                k++;
            }
        } else if (!rc) {
            struct gen_item *it = (struct gen_item *)slot;
            const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, t->f_prompt), *an = cJSON_GetObjectItemCaseSensitive(o, t->f_answer);
            if (!cJSON_IsString(pr)) rc = lines_fail(l, "item %s: field \"%s\" is missing or not a string", id, t->f_prompt);
            else if (!cJSON_IsString(an) && !(cJSON_IsArray(an) && cJSON_GetArraySize(an) > 0))
                rc = lines_fail(l, "item %s: field \"%s\" must be a string or a non-empty array of strings", id, t->f_answer);
            if (!rc) {
                it->id = qg_strdup(id);
                it->cluster = -1;
                it->prompt = qg_strdup(pr->valuestring);
                it->n_targets = cJSON_IsString(an) ? 1 : cJSON_GetArraySize(an);
                it->targets = calloc((size_t)it->n_targets, sizeof *it->targets);
                for (int a = 0; a < it->n_targets && !rc; a++) {
                    const cJSON *av = cJSON_IsString(an) ? an : cJSON_GetArrayItem(an, a);
                    if (!cJSON_IsString(av)) rc = lines_fail(l, "item %s: answer %d is not a string", id, a);
                    else it->targets[a] = qg_strdup(av->valuestring);
                }
                k++;
            }
        }
        cJSON_Delete(o);
        if (rc) break;
    }
    if (rc < 0 && !err[0]) qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    else if (rc < 0) qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    lines_close(l);
    if (!rc && k == 0) rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: no items (empty dataset)", path);
    /* duplicate ids */
    for (int64_t a = 0; !rc && t->f_id && a < k; a++)
        for (int64_t b = a + 1; !rc && b < k && b < a + 100000; b++) {
            const char *ia = mc ? ((struct mc_item *)items)[a].id : ((struct gen_item *)items)[a].id;
            const char *ib = mc ? ((struct mc_item *)items)[b].id : ((struct gen_item *)items)[b].id;
            if (!strcmp(ia, ib)) rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: duplicate item id '%s'", path, ia);
        }
    if (rc) {
        if (mc) mc_items_free((struct mc_item *)items, k);
        else gen_items_free((struct gen_item *)items, k);
        return rc;
    }
    *out = items;
    *n = k;
    return QG_OK;
}

int suite_task_mc_items(const struct suite_task *t, struct mc_item **items, int64_t *n, char *err, size_t errlen)
{
    if (t->kind != STORE_TASK_MULTIPLE_CHOICE) return qg_errf(err, errlen, QG_ERR_USAGE, "task '%s' is not multiple choice", t->name);
    if (!t->benchmark) return custom_items(t, 1, (void **)items, n, err, errlen);
    struct bench_source src = source_of(t);
    return bench_load_mc(t->benchmark, &src, items, n, err, errlen);
}

int suite_task_gen_items(const struct suite_task *t, struct gen_item **items, int64_t *n, char *err, size_t errlen)
{
    if (t->kind != STORE_TASK_GENERATION) return qg_errf(err, errlen, QG_ERR_USAGE, "task '%s' is not generation", t->name);
    if (!t->benchmark) return custom_items(t, 0, (void **)items, n, err, errlen);
    struct bench_source src = source_of(t);
    return bench_load_gen(t->benchmark, &src, items, n, err, errlen);
}

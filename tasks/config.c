/* config — task settings: kind names, data files, release, and the items
 * of multiple-choice and generation tasks. */
#include "tasks/config.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/reader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"perplexity", "multiple_choice", "generation", "custom"};

const char *task_kind_name(int kind)
{
    return kind >= 0 && kind < (int)(sizeof kind_names / sizeof *kind_names) ? kind_names[kind]
                                                                             : "unknown";
}

int task_kind_from_name(const char *name)
{
    for (int k = 0; k < (int)(sizeof kind_names / sizeof *kind_names); k++)
        if (!strcmp(name, kind_names[k])) return k;
    return -1;
}

int task_read_text(const struct task_config *t, char **text, size_t *n, char *err, size_t errlen)
{
    const struct task_file *f = task_config_file(t, "data");
    if (!f) return qg_errf(err, errlen, QG_ERR_DATA, "task '%s' has no data file", t->name);
    return qg_read_file(f->path, (size_t)1 << 32, text, n, err, errlen);
}

int task_item_selected(const struct task_config *t, int64_t idx)
{
    if (t->n_select <= 0) return 1;
    int64_t lo = 0, hi = t->n_select;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (t->select[mid] < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n_select && t->select[lo] == idx;
}

int task_check_selection(const struct task_config *t, int64_t n_items, char *err, size_t errlen)
{
    if (t->n_select <= 0 || t->select[t->n_select - 1] < n_items) return QG_OK;
    return qg_errf(err, errlen, QG_ERR_DATA,
                   "task '%s': \"items\" names item %lld, but its data has %lld items (0..%lld)",
                   t->name, (long long)t->select[t->n_select - 1], (long long)n_items,
                   (long long)n_items - 1);
}

void task_config_release(struct task_config *t)
{
    if (!t) return;
    free(t->select);
    free(t->name);
    free(t->benchmark);
    free(t->delimiter);
    free(t->config_json);
    for (int f = 0; f < t->n_files; f++)
        free(t->files[f].path);
    for (int p = 0; p < t->n_pipelines; p++)
        extract_pipeline_free(t->pipelines[p]);
    extract_normalizer_free(t->norm);
    for (int k = 0; k < t->n_stop; k++)
        free(t->stop[k]);
    free(t->stop);
    free(t->f_id);
    free(t->f_prompt);
    free(t->f_answer);
    free(t->f_context);
    free(t->f_choices);
    free(t->f_gold);
}

const struct task_file *task_config_file(const struct task_config *t, const char *role)
{
    for (int f = 0; f < t->n_files; f++)
        if (!strcmp(t->files[f].role, role)) return &t->files[f];
    return NULL;
}

static struct bench_source source_of(const struct task_config *t)
{
    const struct task_file *d = task_config_file(t, "data"), *l = task_config_file(t, "labels"),
                           *tr = task_config_file(t, "train");
    struct bench_source s = {.data = d ? d->path : NULL,
                             .labels = l ? l->path : NULL,
                             .train = tr ? tr->path : NULL,
                             .fewshot = t->fewshot,
                             .fewshot_seed = t->fewshot_seed,
                             .limit = t->limit};
    return s;
}

/* One custom multiple-choice item from object o (id already read). */
static int custom_mc_item(const struct task_config *t, struct lines *l, const cJSON *o,
                          const char *id, struct mc_item *it)
{
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(o, t->f_context),
                *ch = cJSON_GetObjectItemCaseSensitive(o, t->f_choices);
    const cJSON *gold = cJSON_GetObjectItemCaseSensitive(o, t->f_gold);
    if (!cJSON_IsString(ctx))
        return lines_fail(l, "item %s: field \"%s\" is missing or not a string", id, t->f_context);
    /* one choice is always right: it would pad both accuracies with sure hits */
    if (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) < 2 || cJSON_GetArraySize(ch) > MC_MAX_CHOICES)
        return lines_fail(
            l,
            "item %s: field \"%s\" must be an array of 2..%d strings (a question needs a "
            "choice to make)",
            id, t->f_choices, MC_MAX_CHOICES);
    if (!cJSON_IsNumber(gold))
        return lines_fail(l, "item %s: answer index \"%s\" must be a number (0..%d)", id, t->f_gold,
                          cJSON_GetArraySize(ch) - 1);
    if (gold->valuedouble != floor(gold->valuedouble) || gold->valuedouble < 0 ||
        gold->valuedouble >= cJSON_GetArraySize(ch))
        return lines_fail(l, "item %s: answer index \"%s\" is out of range (0..%d)", id, t->f_gold,
                          cJSON_GetArraySize(ch) - 1);
    it->id = qg_strdup(id);
    it->cluster = -1;
    it->context = qg_strdup(ctx->valuestring);
    it->gold = (int)gold->valuedouble;
    it->choices = calloc((size_t)cJSON_GetArraySize(ch), sizeof *it->choices);
    if (it->choices) it->n_choices = cJSON_GetArraySize(ch); /* only then: the free walks them */
    if (!it->id || !it->context || !it->choices)
        return lines_fail(l, "item %s: out of memory", id), QG_ERR_NOMEM;
    for (int c = 0; c < it->n_choices; c++) {
        const cJSON *cv = cJSON_GetArrayItem(ch, c);
        if (!cJSON_IsString(cv) || !*cv->valuestring)
            return lines_fail(l, "item %s: choice %d is empty or not a string", id, c);
        if (!(it->choices[c] = qg_strdup(cv->valuestring)))
            return lines_fail(l, "item %s: out of memory", id), QG_ERR_NOMEM;
    }
    return QG_OK;
}

/* One custom generation item from object o (id already read). */
static int custom_gen_item(const struct task_config *t, struct lines *l, const cJSON *o,
                           const char *id, struct gen_item *it)
{
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, t->f_prompt),
                *an = cJSON_GetObjectItemCaseSensitive(o, t->f_answer);
    if (!cJSON_IsString(pr))
        return lines_fail(l, "item %s: field \"%s\" is missing or not a string", id, t->f_prompt);
    if (!cJSON_IsString(an) && !(cJSON_IsArray(an) && cJSON_GetArraySize(an) > 0))
        return lines_fail(l,
                          "item %s: field \"%s\" must be a string or a non-empty array of strings",
                          id, t->f_answer);
    it->id = qg_strdup(id);
    it->cluster = -1;
    it->prompt = qg_strdup(pr->valuestring);
    int nt = cJSON_IsString(an) ? 1 : cJSON_GetArraySize(an);
    it->targets = calloc((size_t)nt, sizeof *it->targets);
    if (it->targets) it->n_targets = nt; /* only then: the free walks them */
    if (!it->id || !it->prompt || !it->targets)
        return lines_fail(l, "item %s: out of memory", id), QG_ERR_NOMEM;
    for (int a = 0; a < it->n_targets; a++) {
        const cJSON *av = cJSON_IsString(an) ? an : cJSON_GetArrayItem(an, a);
        if (!cJSON_IsString(av)) return lines_fail(l, "item %s: answer %d is not a string", id, a);
        if (!(it->targets[a] = qg_strdup(av->valuestring)))
            return lines_fail(l, "item %s: out of memory", id), QG_ERR_NOMEM;
    }
    return QG_OK;
}

static const char *item_id(const void *items, int mc, int64_t i)
{
    return mc ? ((const struct mc_item *)items)[i].id : ((const struct gen_item *)items)[i].id;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* QG_ERR_DATA naming the first id that two items share: one pass over a
 * hash set of the ids (linear in the items). */
static int check_unique_ids(const struct task_config *t, const char *path, const void *items,
                            int mc, int64_t k, char *err, size_t errlen)
{
    if (!t->f_id || k < 2) return QG_OK;
    int64_t cap = 16;
    while (cap < 2 * k)
        cap *= 2;
    int64_t *slot = malloc((size_t)cap * sizeof *slot);
    if (!slot) return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < cap; i++)
        slot[i] = -1;
    int rc = QG_OK;
    for (int64_t i = 0; i < k && !rc; i++) {
        const char *id = item_id(items, mc, i);
        uint64_t h = fnv1a(id) & (uint64_t)(cap - 1);
        while (slot[h] >= 0 && strcmp(item_id(items, mc, slot[h]), id))
            h = (h + 1) & (uint64_t)(cap - 1);
        if (slot[h] >= 0)
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "%s: duplicate item id '%s' (items %lld and %lld)", path, id,
                         (long long)slot[h] + 1, (long long)i + 1);
        else
            slot[h] = i;
    }
    free(slot);
    return rc;
}

/* Makes room for item k in *items (elem bytes each, *cap slots). */
static int grow_items(char **items, int64_t k, int64_t *cap, size_t elem)
{
    if (k < *cap) return QG_OK;
    int64_t c = *cap ? 2 * *cap : 64;
    char *p = realloc(*items, (size_t)c * elem);
    if (!p) return QG_ERR_NOMEM;
    *items = p;
    *cap = c;
    return QG_OK;
}

/* custom JSONL: one item per object, fields named by the task */
static int custom_items(const struct task_config *t, int mc, void **out, int64_t *n, char *err,
                        size_t errlen)
{
    const char *path = task_config_file(t, "data")->path;
    struct lines *l;
    int rc = lines_open(path, &l, err, errlen);
    if (rc) return rc;
    size_t elem = mc ? sizeof(struct mc_item) : sizeof(struct gen_item);
    char *items = NULL;
    int64_t k = 0, cap = 0;
    cJSON *o;
    while ((t->limit <= 0 || k < t->limit) && (rc = jsonl_next(l, &o)) == 1) {
        rc = grow_items(&items, k, &cap, elem);
        if (!rc) {
            char *slot = items + (size_t)k * elem;
            memset(slot, 0, elem);
            const cJSON *idv = t->f_id ? cJSON_GetObjectItemCaseSensitive(o, t->f_id) : NULL;
            char idbuf[64];
            snprintf(idbuf, sizeof idbuf, "%lld", (long long)(k + 1));
            if (cJSON_IsNumber(idv)) /* a numeric id is its number, not the line's */
                snprintf(idbuf, sizeof idbuf, "%.17g", idv->valuedouble);
            const char *id = cJSON_IsString(idv) ? idv->valuestring : idbuf;
            if (t->f_id && !idv)
                rc = lines_fail(l, "missing field \"%s\"", t->f_id);
            else if (idv && !cJSON_IsString(idv) && !cJSON_IsNumber(idv))
                rc = lines_fail(l, "field \"%s\" must be a string or a number", t->f_id);
            else
                rc = mc ? custom_mc_item(t, l, o, id, (struct mc_item *)slot)
                        : custom_gen_item(t, l, o, id, (struct gen_item *)slot);
            k++; /* a half-filled slot is freed with the others */
        }
        cJSON_Delete(o);
        if (rc) break;
    }
    if (rc == QG_ERR_NOMEM && !lines_errmsg(l)[0])
        qg_errf(err, errlen, rc, "%s: out of memory", path);
    else if (rc < 0)
        qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    lines_close(l);
    if (!rc && k == 0) rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: no items (empty dataset)", path);
    if (!rc) rc = check_unique_ids(t, path, items, mc, k, err, errlen);
    if (rc) {
        if (mc)
            mc_items_free((struct mc_item *)items, k);
        else
            gen_items_free((struct gen_item *)items, k);
        return rc;
    }
    *out = items;
    *n = k;
    return QG_OK;
}

int task_mc_items(const struct task_config *t, struct mc_item **items, int64_t *n, char *err,
                  size_t errlen)
{
    if (t->kind != TASK_MULTIPLE_CHOICE)
        return qg_errf(err, errlen, QG_ERR_USAGE, "task '%s' is not multiple choice", t->name);
    if (!t->benchmark) return custom_items(t, 1, (void **)items, n, err, errlen);
    struct bench_source src = source_of(t);
    return bench_load_mc(t->benchmark, &src, items, n, err, errlen);
}

int task_gen_items(const struct task_config *t, struct gen_item **items, int64_t *n, char *err,
                   size_t errlen)
{
    if (t->kind != TASK_GENERATION)
        return qg_errf(err, errlen, QG_ERR_USAGE, "task '%s' is not generation", t->name);
    if (!t->benchmark) return custom_items(t, 0, (void **)items, n, err, errlen);
    struct bench_source src = source_of(t);
    return bench_load_gen(t->benchmark, &src, items, n, err, errlen);
}

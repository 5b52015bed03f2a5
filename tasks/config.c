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
    return kind >= 0 && kind < (int)(sizeof kind_names / sizeof *kind_names) ? kind_names[kind] : "unknown";
}

int task_kind_from_name(const char *name)
{
    for (int k = 0; k < (int)(sizeof kind_names / sizeof *kind_names); k++)
        if (!strcmp(name, kind_names[k])) return k;
    return -1;
}

void task_config_release(struct task_config *t)
{
    if (!t) return;
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

const struct task_file *task_config_file(const struct task_config *t, const char *role)
{
    for (int f = 0; f < t->n_files; f++)
        if (!strcmp(t->files[f].role, role)) return &t->files[f];
    return NULL;
}

static struct bench_source source_of(const struct task_config *t)
{
    const struct task_file *d = task_config_file(t, "data"), *l = task_config_file(t, "labels"), *tr = task_config_file(t, "train");
    struct bench_source s = {.data = d ? d->path : NULL, .labels = l ? l->path : NULL, .train = tr ? tr->path : NULL,
                             .fewshot = t->fewshot, .fewshot_seed = t->fewshot_seed, .limit = t->limit};
    return s;
}

/* custom JSONL: one item per object, fields named by the task */
static int custom_items(const struct task_config *t, int mc, void **out, int64_t *n, char *err, size_t errlen)
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

int task_mc_items(const struct task_config *t, struct mc_item **items, int64_t *n, char *err, size_t errlen)
{
    if (t->kind != TASK_MULTIPLE_CHOICE) return qg_errf(err, errlen, QG_ERR_USAGE, "task '%s' is not multiple choice", t->name);
    if (!t->benchmark) return custom_items(t, 1, (void **)items, n, err, errlen);
    struct bench_source src = source_of(t);
    return bench_load_mc(t->benchmark, &src, items, n, err, errlen);
}

int task_gen_items(const struct task_config *t, struct gen_item **items, int64_t *n, char *err, size_t errlen)
{
    if (t->kind != TASK_GENERATION) return qg_errf(err, errlen, QG_ERR_USAGE, "task '%s' is not generation", t->name);
    if (!t->benchmark) return custom_items(t, 0, (void **)items, n, err, errlen);
    struct bench_source src = source_of(t);
    return bench_load_gen(t->benchmark, &src, items, n, err, errlen);
}

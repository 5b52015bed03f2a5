/* bench — loaders for the common benchmarks' public file layouts: the
 * names, the shared machinery (JSONL walking, clusters, duplicate ids,
 * few-shot), GSM8K; bench_readers.c reads the multiple-choice layouts,
 * bench_adapters.c LLM-Adapters' JSON. */
#include "tasks/bench.h"
#include "tasks/bench_impl.h"
#include "datasets/reader.h"
#include "core/status.h"
#include "core/util.h"
#include "core/rng.h"
#include "core/utf8.h"

#include <ctype.h>
#include <stdarg.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int kind;
} known[] = {{"hellaswag", BENCH_MC}, {"mmlu", BENCH_MC},  {"piqa", BENCH_MC},
             {"arc", BENCH_MC},       {"boolq", BENCH_MC}, {"winogrande", BENCH_MC},
             {"gsm8k", BENCH_GEN}};

int bench_kind(const char *name)
{
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(known[i].name, name) == 0) return known[i].kind;
    return -1;
}

const char *bench_names(void)
{
    return "hellaswag, mmlu, piqa, arc, boolq, winogrande, gsm8k";
}

void gen_items_free(struct gen_item *items, int64_t n)
{
    for (int64_t i = 0; items && i < n; i++) {
        free(items[i].id);
        free(items[i].prompt);
        for (int k = 0; k < items[i].n_targets; k++)
            free(items[i].targets[k]);
        free(items[i].targets);
    }
    free(items);
}

void *bn_vec_push(struct vec *v)
{
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 64;
        void *p = realloc(v->p, (size_t)cap * v->elem);
        if (!p) return NULL;
        v->p = p;
        v->cap = cap;
    }
    void *slot = (char *)v->p + (size_t)v->n++ * v->elem;
    memset(slot, 0, v->elem);
    return slot;
}

char *bn_xstrdup_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* a string field of a JSONL object, or an error naming file:line and field */
const char *bn_jfield(struct lines *l, const cJSON *o, const char *key, int *rc)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (!*rc) *rc = lines_fail(l, v ? "field \"%s\" is not a string" : "missing field \"%s\"", key);
    return NULL;
}

int64_t bn_cluster_of(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (int64_t)(h >> 1);
}

static int check_dup_ids(struct mc_item *it, int64_t n, const char *path, char *err, size_t errlen)
{
    /* items are few enough (<= 1e5) for a sort-free check via a hash set */
    int64_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    int64_t *slot = malloc((size_t)cap * sizeof *slot);
    if (!slot) return QG_ERR_NOMEM;
    memset(slot, 0xff, (size_t)cap * sizeof *slot);
    int rc = QG_OK;
    for (int64_t i = 0; i < n && !rc; i++) {
        uint64_t h = (uint64_t)bn_cluster_of(it[i].id) & (uint64_t)(cap - 1);
        for (;; h = (h + 1) & (uint64_t)(cap - 1)) {
            if (slot[h] < 0) {
                slot[h] = i;
                break;
            }
            if (strcmp(it[slot[h]].id, it[i].id) == 0) {
                rc =
                    qg_errf(err, errlen, QG_ERR_DATA, "%s: duplicate item id '%s'", path, it[i].id);
                break;
            }
        }
    }
    free(slot);
    return rc;
}

static int finish_mc(struct vec *v, int rc, const char *path, struct mc_item **items, int64_t *n,
                     char *err, size_t errlen)
{
    if (!rc && v->n == 0)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: no items (empty dataset)", path);
    if (!rc) rc = check_dup_ids(v->p, v->n, path, err, errlen);
    for (int64_t i = 0; !rc && i < v->n; i++) {
        struct mc_item *it = &((struct mc_item *)v->p)[i];
        for (int c = 0; c < it->n_choices && !rc; c++)
            if (!it->choices[c] || (!it->contexts && !it->choices[c][0]))
                rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: item %s: choice %d is empty", path,
                             it->id, c);
    }
    if (rc) {
        mc_items_free(v->p, v->n);
        return rc;
    }
    *items = v->p;
    *n = v->n;
    return QG_OK;
}

int bn_each_jsonl(const struct bench_source *src, struct vec *v, jsonl_item_fn fn, char *err,
                  size_t errlen)
{
    struct lines *l;
    int rc = lines_open(src->data, &l, err, errlen);
    if (rc) return rc;
    cJSON *o;
    while (!rc && (src->limit <= 0 || v->n < src->limit) && (rc = jsonl_next(l, &o)) == 1) {
        rc = fn(l, o, v);
        cJSON_Delete(o);
    }
    if (rc < 0) qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    lines_close(l);
    return rc < 0 ? rc : QG_OK;
}

int bn_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int bn_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* text between `after` and the earliest of the `ends` markers (trimmed),
 * searching from *pos; advances *pos past it. NULL when not found. */
char *bn_between(const char *s, const char **pos, const char *after, const char *const *ends,
                 int n_ends)
{
    const char *a = strstr(*pos, after);
    if (!a) return NULL;
    a += strlen(after);
    const char *e = NULL;
    for (int i = 0; i < n_ends; i++) {
        const char *x = strstr(a, ends[i]);
        if (x && (!e || x < e)) e = x;
    }
    if (!e) e = a + strlen(a);
    *pos = e;
    while (a < e && isspace((unsigned char)*a))
        a++;
    while (e > a && isspace((unsigned char)e[-1]))
        e--;
    (void)s;
    return qg_strndup(a, (size_t)(e - a));
}

/* 1 when the file's first non-blank byte is '[' (a JSON array) */
static int starts_with_array(const char *path)
{
    FILE *f = fopen(path, "rb");
    int c = EOF;
    while (f && (c = fgetc(f)) != EOF && isspace(c)) {
    }
    if (f) fclose(f);
    return c == '[';
}

/* Prepends k seeded train examples to every item's context. */
static int add_fewshot(const char *name, const struct bench_source *src, struct vec *v, char *err,
                       size_t errlen)
{
    if (!strcmp(name, "winogrande") || !strcmp(name, "piqa"))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: few-shot is not supported for %s", src->data,
                       name);
    struct bench_source tsrc = {.data = src->train};
    struct mc_item *train;
    int64_t nt;
    int rc = bench_load_mc(name, &tsrc, &train, &nt, err, errlen);
    if (rc) return rc;
    if (nt < src->fewshot) {
        mc_items_free(train, nt);
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %lld examples, fewer than fewshot %d",
                       src->train, (long long)nt, src->fewshot);
    }
    uint64_t seed = src->fewshot_seed ? src->fewshot_seed : 1234;
    int64_t *pick = malloc((size_t)nt * sizeof *pick);
    if (!pick) rc = QG_ERR_NOMEM;
    for (int64_t i = 0; !rc && i < v->n; i++) {
        struct mc_item *it = &((struct mc_item *)v->p)[i];
        for (int64_t k = 0; k < nt; k++)
            pick[k] = k;
        struct sbuf pre;
        sbuf_init(&pre, 0);
        for (int k = 0; k < src->fewshot; k++) { /* partial Fisher-Yates */
            int64_t j = k + (int64_t)(rng_next(&seed) % (uint64_t)(nt - k)), tmp = pick[k];
            pick[k] = pick[j];
            pick[j] = tmp;
            const struct mc_item *ex = &train[pick[k]];
            sbuf_printf(&pre, "%s %s\n\n", ex->context, ex->choices[ex->gold]);
        }
        sbuf_printf(&pre, "%s", it->context);
        free(it->context);
        it->context = pre.data;
    }
    free(pick);
    mc_items_free(train, nt);
    return rc;
}

int bench_load_mc(const char *name, const struct bench_source *src, struct mc_item **items,
                  int64_t *n, char *err, size_t errlen)
{
    *items = NULL;
    *n = 0;
    struct vec v = {.elem = sizeof(struct mc_item)};
    int rc;
    if (strcmp(name, "hellaswag") == 0)
        rc = bn_ends_with(src->data, ".jsonl") ? bn_load_hellaswag_jsonl(src, &v, err, errlen)
                                               : bn_load_hellaswag_txt(src, &v, err, errlen);
    else if (strcmp(name, "mmlu") == 0)
        rc = bn_load_mmlu(src, &v, err, errlen);
    else if (strcmp(name, "piqa") == 0)
        rc = bn_load_piqa(src, &v, err, errlen);
    else if ((!strcmp(name, "arc") || !strcmp(name, "boolq") || !strcmp(name, "winogrande")) &&
             starts_with_array(src->data))
        rc = bn_load_adapters(name, src, &v, err, errlen);
    else if (strcmp(name, "arc") == 0)
        rc = bn_load_arc(src, &v, err, errlen);
    else if (strcmp(name, "boolq") == 0)
        rc = bn_load_boolq(src, &v, err, errlen);
    else if (strcmp(name, "winogrande") == 0)
        rc = bn_load_winogrande(src, &v, err, errlen);
    else
        rc = qg_errf(err, errlen, QG_ERR_DATA, "unknown multiple-choice benchmark '%s' (known: %s)",
                     name, bench_names());
    if (!rc && src->fewshot > 0 && src->train && strcmp(name, "mmlu") != 0)
        rc = add_fewshot(name, src, &v, err, errlen);
    return finish_mc(&v, rc, src->data, items, n, err, errlen);
}

/* GSM8K: the answer after "#### " is the target; the prompt is lm-eval's */
static int gsm8k_read(const char *path, int64_t limit, struct vec *v, char *err, size_t errlen)
{
    struct lines *l;
    int rc = lines_open(path, &l, err, errlen);
    if (rc) return rc;
    cJSON *o;
    while (!rc && (limit <= 0 || v->n < limit) && (rc = jsonl_next(l, &o)) == 1) {
        rc = 0;
        const char *q = bn_jfield(l, o, "question", &rc), *a = bn_jfield(l, o, "answer", &rc);
        if (!rc && !strstr(a, "#### ")) rc = lines_fail(l, "answer has no \"#### N\" line");
        if (!rc) {
            struct gen_item *it = bn_vec_push(v);
            it->id = bn_xstrdup_printf("%lld", (long long)(v->n - 1));
            it->cluster = -1;
            it->prompt = qg_strdup(q); /* the question; see bench_load_gen */
            it->n_targets = 1;
            it->targets = calloc(1, sizeof *it->targets);
            it->targets[0] = qg_strdup(a);
        }
        cJSON_Delete(o);
    }
    if (rc < 0) qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    lines_close(l);
    return rc < 0 ? rc : QG_OK;
}

int bench_load_gen(const char *name, const struct bench_source *src, struct gen_item **items,
                   int64_t *n, char *err, size_t errlen)
{
    *items = NULL;
    *n = 0;
    if (strcmp(name, "gsm8k") != 0)
        return qg_errf(err, errlen, QG_ERR_DATA, "unknown generation benchmark '%s' (known: gsm8k)",
                       name);
    struct vec v = {.elem = sizeof(struct gen_item)}, shots = {.elem = sizeof(struct gen_item)};
    int rc = gsm8k_read(src->data, src->limit, &v, err, errlen);
    if (!rc && src->fewshot > 0 && src->train)
        rc = gsm8k_read(src->train, src->fewshot, &shots, err, errlen);
    struct sbuf pre;
    sbuf_init(&pre, 0);
    sbuf_append(&pre, "", 0);
    for (int64_t i = 0; !rc && i < shots.n; i++) {
        struct gen_item *s = &((struct gen_item *)shots.p)[i];
        sbuf_printf(&pre, "Question: %s\nAnswer: %s\n\n", s->prompt, s->targets[0]);
    }
    for (int64_t i = 0; !rc && i < v.n; i++) {
        struct gen_item *it = &((struct gen_item *)v.p)[i];
        char *p = bn_xstrdup_printf("%sQuestion: %s\nAnswer:", sbuf_str(&pre), it->prompt);
        free(it->prompt);
        it->prompt = p;
    }
    sbuf_release(&pre);
    gen_items_free(shots.p, shots.n);
    if (!rc && v.n == 0)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: no items (empty dataset)", src->data);
    if (rc) {
        gen_items_free(v.p, v.n);
        return rc;
    }
    *items = v.p;
    *n = v.n;
    return QG_OK;
}

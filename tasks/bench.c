/* bench — loaders for the common benchmarks' public file layouts. */
#include "tasks/bench.h"
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

/* ---- a growable array of items ---- */
struct vec {
    void *p;
    int64_t n, cap;
    size_t elem;
};

static void *vec_push(struct vec *v)
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

static char *xstrdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xstrdup_printf(const char *fmt, ...)
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
static const char *jfield(struct lines *l, const cJSON *o, const char *key, int *rc)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (!*rc) *rc = lines_fail(l, v ? "field \"%s\" is not a string" : "missing field \"%s\"", key);
    return NULL;
}

static int64_t cluster_of(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (int64_t)(h >> 1);
}

/* lm-eval's hellaswag preprocess: strip, " [title]" -> ". ", drop "[...]", "  " -> " " */
static char *hs_preprocess(const char *in)
{
    struct sbuf b;
    sbuf_init(&b, 0);
    sbuf_append(&b, "", 0);
    while (*in == ' ' || *in == '\n' || *in == '\t')
        in++;
    for (const char *p = in; *p;) {
        if (strncmp(p, " [title]", 8) == 0) {
            sbuf_append(&b, ". ", 2);
            p += 8;
        } else if (*p == '[' && strchr(p, ']')) {
            p = strchr(p, ']') + 1;
        } else {
            sbuf_append(&b, p, 1);
            p++;
        }
    }
    char *s = b.data;
    size_t k = 0;
    for (size_t i = 0; s[i]; i++)
        if (!(s[i] == ' ' && s[i + 1] == ' ')) s[k++] = s[i];
    while (k > 0 && isspace((unsigned char)s[k - 1]))
        k--;
    s[k] = '\0';
    return s;
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
        uint64_t h = (uint64_t)cluster_of(it[i].id) & (uint64_t)(cap - 1);
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

/* Runs fn on every object of src->data (up to src->limit items in v);
 * fn returns 0 or an error status (set with lines_fail). */
typedef int (*jsonl_item_fn)(struct lines *l, const cJSON *o, struct vec *v);

static int each_jsonl(const struct bench_source *src, struct vec *v, jsonl_item_fn fn, char *err,
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

/* llama.cpp's --hellaswag layout: 6 lines per task */
static int load_hellaswag_txt(const struct bench_source *src, struct vec *v, char *err,
                              size_t errlen)
{
    struct lines *l;
    int rc = lines_open(src->data, &l, err, errlen);
    if (rc) return rc;
    const char *s;
    size_t len;
    while (!rc && (src->limit <= 0 || v->n < src->limit)) {
        int got = lines_next(l, &s, &len);
        if (got <= 0) {
            rc = got;
            break;
        }
        struct mc_item *it = vec_push(v);
        if (!it) return QG_ERR_NOMEM;
        int64_t first = lines_lineno(l);
        it->id = xstrdup_printf("%lld", (long long)(v->n - 1));
        it->context = hs_preprocess(s);
        const char *colon = strstr(s, ": ");
        it->cluster = -1;
        if (colon) { /* "activity label: context" */
            char *label = qg_strndup(s, (size_t)(colon - s));
            it->cluster = cluster_of(label ? label : "");
            free(label);
        }
        if ((got = lines_next(l, &s, &len)) <= 0) {
            rc = got < 0
                     ? got
                     : lines_fail(l, "task starting at line %lld is cut short", (long long)first);
            break;
        }
        int64_t gold;
        if (qg_parse_i64(s, 0, 3, &gold)) {
            rc = lines_fail(l, "gold index '%.20s' is not 0..3", s);
            break;
        }
        it->gold = (int)gold;
        it->n_choices = 4;
        it->choices = calloc(4, sizeof *it->choices);
        for (int c = 0; c < 4 && !rc; c++) {
            if ((got = lines_next(l, &s, &len)) <= 0) {
                rc = got < 0 ? got
                             : lines_fail(l, "task starting at line %lld is cut short",
                                          (long long)first);
                break;
            }
            it->choices[c] = hs_preprocess(s);
        }
    }
    if (rc < 0) qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    lines_close(l);
    return rc < 0 ? rc : QG_OK;
}

/* HF hellaswag JSONL */
static int hellaswag_item(struct lines *l, const cJSON *o, struct vec *v)
{
    int rc = 0;
    const char *a = jfield(l, o, "ctx_a", &rc), *b = jfield(l, o, "ctx_b", &rc),
               *act = jfield(l, o, "activity_label", &rc);
    const cJSON *ends = cJSON_GetObjectItemCaseSensitive(o, "endings"),
                *lab = cJSON_GetObjectItemCaseSensitive(o, "label");
    if (!rc && (!cJSON_IsArray(ends) || cJSON_GetArraySize(ends) < 2 ||
                cJSON_GetArraySize(ends) > MC_MAX_CHOICES))
        rc = lines_fail(l, "\"endings\" must be an array of 2..%d strings", MC_MAX_CHOICES);
    int64_t gold = -1;
    if (!rc && cJSON_IsNumber(lab) && lab->valuedouble >= 0 && lab->valuedouble < 100 &&
        lab->valuedouble == floor(lab->valuedouble))
        gold = (int64_t)lab->valuedouble; /* checked before the conversion */
    else if (!rc && cJSON_IsString(lab) && qg_parse_i64(lab->valuestring, 0, 99, &gold))
        gold = -1;
    if (!rc && (gold < 0 || gold >= cJSON_GetArraySize(ends)))
        rc = lines_fail(l, "\"label\" is missing or out of range");
    if (!rc) {
        struct mc_item *it = vec_push(v);
        const cJSON *ind = cJSON_GetObjectItemCaseSensitive(o, "ind");
        it->id = cJSON_IsNumber(ind) ? xstrdup_printf("%lld", (long long)ind->valuedouble)
                                     : xstrdup_printf("line %lld", (long long)lines_lineno(l));
        char *ctx = xstrdup_printf("%s: %s %c%s", act, a, b[0] ? toupper((unsigned char)b[0]) : ' ',
                                   b[0] ? b + 1 : "");
        it->context = hs_preprocess(ctx);
        free(ctx);
        it->cluster = cluster_of(act);
        it->gold = (int)gold;
        it->n_choices = cJSON_GetArraySize(ends);
        it->choices = calloc((size_t)it->n_choices, sizeof *it->choices);
        for (int c = 0; c < it->n_choices && !rc; c++) {
            const cJSON *e = cJSON_GetArrayItem(ends, c);
            if (!cJSON_IsString(e))
                rc = lines_fail(l, "ending %d is not a string", c);
            else
                it->choices[c] = hs_preprocess(e->valuestring);
        }
    }
    return rc;
}

static int load_hellaswag_jsonl(const struct bench_source *src, struct vec *v, char *err,
                                size_t errlen)
{
    return each_jsonl(src, v, hellaswag_item, err, errlen);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* one MMLU CSV: "question, A, B, C, D, answer" with or without the HF header */
static int load_mmlu_file(const char *path, const char *subject, const char *prefix, struct vec *v,
                          int64_t limit, char *err, size_t errlen)
{
    struct lines *l;
    int rc = lines_open(path, &l, err, errlen);
    if (rc) return rc;
    char **f;
    int nf, first = 1;
    int64_t row = 0;
    while ((limit <= 0 || v->n < limit) && (rc = csv_next(l, &f, &nf)) == 1) {
        rc = 0;
        if (first && nf >= 1 && strcmp(f[0], "question") == 0) { /* the HF export's header */
            first = 0;
            csv_fields_free(f, nf);
            continue;
        }
        first = 0;
        if (nf != 6) {
            rc = lines_fail(l, "expected 6 fields (question, 4 choices, answer), found %d", nf);
            csv_fields_free(f, nf);
            break;
        }
        int64_t gold = -1;
        if (strlen(f[5]) == 1 && f[5][0] >= 'A' && f[5][0] <= 'D')
            gold = f[5][0] - 'A';
        else if (qg_parse_i64(f[5], 0, 3, &gold))
            gold = -1;
        if (gold < 0) {
            rc = lines_fail(l, "answer '%.20s' is not A-D or 0-3", f[5]);
            csv_fields_free(f, nf);
            break;
        }
        struct mc_item *it = vec_push(v);
        if (!it) return QG_ERR_NOMEM;
        it->id = xstrdup_printf("%s/%lld", subject, (long long)row++);
        it->cluster = cluster_of(subject);
        it->context = xstrdup_printf("%s%s\nA. %s\nB. %s\nC. %s\nD. %s\nAnswer:", prefix, f[0],
                                     f[1], f[2], f[3], f[4]);
        it->gold = (int)gold;
        it->n_choices = 4;
        it->choices = calloc(4, sizeof *it->choices);
        for (int c = 0; c < 4; c++)
            it->choices[c] = xstrdup_printf("%c", 'A' + c);
        csv_fields_free(f, nf);
    }
    if (rc < 0) qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    lines_close(l);
    return rc < 0 ? rc : QG_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "Q\nA. ..\nB. ..\nC. ..\nD. ..\nAnswer: X\n\n" for the first k rows of the
 * subject's dev file (lm-eval's MMLU few-shot: the dev split, in order) */
static int mmlu_shots(const char *dir, const char *subject, int k, struct sbuf *out, char *err,
                      size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_dev.csv", dir, subject);
    struct lines *l;
    int rc = lines_open(path, &l, err, errlen);
    if (rc) return rc;
    char **f;
    int nf, got = 0;
    while (got < k && (rc = csv_next(l, &f, &nf)) == 1) {
        rc = 0;
        if (nf == 6 && strcmp(f[0], "question") != 0) {
            int64_t gold = -1;
            if (strlen(f[5]) == 1 && f[5][0] >= 'A' && f[5][0] <= 'D')
                gold = f[5][0] - 'A';
            else if (qg_parse_i64(f[5], 0, 3, &gold))
                gold = -1;
            if (gold < 0) { /* a wrong few-shot answer would be a silent wrong number */
                rc = lines_fail(l, "answer '%.20s' is not A..D or 0..3", f[5]);
                csv_fields_free(f, nf);
                break;
            }
            sbuf_printf(out, "%s\nA. %s\nB. %s\nC. %s\nD. %s\nAnswer: %c\n\n", f[0], f[1], f[2],
                        f[3], f[4], (char)('A' + gold));
            got++;
        }
        csv_fields_free(f, nf);
    }
    if (rc < 0) qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    lines_close(l);
    return rc < 0 ? rc : QG_OK;
}

static int load_mmlu(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    DIR *d = opendir(src->data);
    char *names[256];
    int nn = 0;
    if (!d) { /* a single file */
        const char *base = strrchr(src->data, '/');
        base = base ? base + 1 : src->data;
        char subject[256];
        snprintf(subject, sizeof subject, "%s", base);
        char *t = strstr(subject, "_test.csv");
        if (!t) t = strstr(subject, ".csv");
        if (t) *t = '\0';
        names[nn++] = qg_strdup(subject);
    } else {
        struct dirent *e;
        while ((e = readdir(d)) && nn < 256)
            if (ends_with(e->d_name, ".csv")) names[nn++] = qg_strdup(e->d_name);
        closedir(d);
        qsort(names, (size_t)nn, sizeof *names, cmp_str);
        if (nn == 0)
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: no .csv files in the directory",
                           src->data);
    }
    int rc = QG_OK;
    for (int i = 0; i < nn && !rc; i++) {
        char subject[256], path[4096];
        snprintf(subject, sizeof subject, "%s", names[i]);
        char *t = strstr(subject, "_test.csv");
        if (!t) t = strstr(subject, "_dev.csv");
        if (!t) t = strstr(subject, ".csv");
        if (t) *t = '\0';
        if (d)
            snprintf(path, sizeof path, "%s/%s", src->data, names[i]);
        else
            snprintf(path, sizeof path, "%s", src->data);
        char pretty[256];
        snprintf(pretty, sizeof pretty, "%s", subject);
        for (char *p = pretty; *p; p++)
            if (*p == '_') *p = ' ';
        struct sbuf pre;
        sbuf_init(&pre, 0);
        sbuf_printf(&pre,
                    "The following are multiple choice questions (with answers) about %s.\n\n",
                    pretty);
        if (src->fewshot > 0 && src->train)
            rc = mmlu_shots(src->train, subject, src->fewshot, &pre, err, errlen);
        if (!rc) rc = load_mmlu_file(path, subject, sbuf_str(&pre), v, src->limit, err, errlen);
        sbuf_release(&pre);
    }
    for (int i = 0; i < nn; i++)
        free(names[i]);
    return rc;
}

static int load_piqa(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    if (!src->labels)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: piqa needs its labels file (\"labels\")",
                       src->data);
    struct lines *l, *lab;
    int rc = lines_open(src->data, &l, err, errlen);
    if (rc) return rc;
    if ((rc = lines_open(src->labels, &lab, err, errlen))) {
        lines_close(l);
        return rc;
    }
    cJSON *o;
    while (!rc && (src->limit <= 0 || v->n < src->limit) && (rc = jsonl_next(l, &o)) == 1) {
        rc = 0;
        const char *goal = jfield(l, o, "goal", &rc), *s1 = jfield(l, o, "sol1", &rc),
                   *s2 = jfield(l, o, "sol2", &rc);
        const char *ls;
        size_t ll;
        int got = rc ? 1 : lines_next(lab, &ls, &ll);
        int64_t gold = 0;
        if (!rc && got <= 0)
            rc = got < 0 ? got
                         : lines_fail(lab, "fewer labels than items (item at %s:%lld)", src->data,
                                      (long long)lines_lineno(l));
        else if (!rc && qg_parse_i64(ls, 0, 1, &gold))
            rc = lines_fail(lab, "label '%.20s' is not 0 or 1", ls);
        if (!rc) {
            struct mc_item *it = vec_push(v);
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
            it->id = cJSON_IsString(id) ? qg_strdup(id->valuestring)
                                        : xstrdup_printf("%lld", (long long)(v->n - 1));
            it->cluster = -1;
            it->context = xstrdup_printf("Question: %s\nAnswer:", goal);
            it->gold = (int)gold;
            it->n_choices = 2;
            it->choices = calloc(2, sizeof *it->choices);
            it->choices[0] = qg_strdup(s1);
            it->choices[1] = qg_strdup(s2);
        }
        cJSON_Delete(o);
    }
    if (rc == 0 &&
        (src->limit <= 0 ||
         v->n < src->limit)) { /* every item read: a label left over means the files do not pair */
        const char *ls;
        size_t ll;
        int more;
        while ((more = lines_next(lab, &ls, &ll)) == 1 && ll == 0)
            ;
        if (more == 1)
            rc =
                lines_fail(lab, "more labels than items (%s has %lld)", src->data, (long long)v->n);
        else if (more < 0)
            rc = more;
    }
    if (rc < 0)
        qg_errf(err, errlen, rc, "%s", *lines_errmsg(lab) ? lines_errmsg(lab) : lines_errmsg(l));
    lines_close(l);
    lines_close(lab);
    return rc < 0 ? rc : QG_OK;
}

static int arc_item(struct lines *l, const cJSON *o, struct vec *v)
{
    int rc = 0;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "question");
    const char *id = jfield(l, o, "id", &rc), *key = jfield(l, o, "answerKey", &rc);
    const char *stem = !rc && cJSON_IsObject(q) ? jfield(l, q, "stem", &rc) : NULL;
    const cJSON *ch = cJSON_IsObject(q) ? cJSON_GetObjectItemCaseSensitive(q, "choices") : NULL;
    if (!rc && !stem) rc = lines_fail(l, "missing field \"question\" object");
    if (!rc && (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) < 2 ||
                cJSON_GetArraySize(ch) > MC_MAX_CHOICES))
        rc = lines_fail(l, "item %s: \"question.choices\" must be an array of 2..%d", id,
                        MC_MAX_CHOICES);
    if (!rc) {
        struct mc_item *it = vec_push(v);
        it->id = qg_strdup(id);
        it->cluster = -1;
        it->context = xstrdup_printf("Question: %s\nAnswer:", stem);
        it->n_choices = cJSON_GetArraySize(ch);
        it->choices = calloc((size_t)it->n_choices, sizeof *it->choices);
        it->gold = -1;
        for (int c = 0; c < it->n_choices && !rc; c++) {
            const cJSON *cc = cJSON_GetArrayItem(ch, c);
            const char *text = jfield(l, cc, "text", &rc), *label = jfield(l, cc, "label", &rc);
            if (rc) break;
            it->choices[c] = qg_strdup(text);
            if (strcmp(label, key) == 0) it->gold = c;
        }
        if (!rc && it->gold < 0)
            rc = lines_fail(l, "item %s: answerKey '%s' is not one of the choice labels", id, key);
    }
    return rc;
}

static int load_arc(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    return each_jsonl(src, v, arc_item, err, errlen);
}

static int boolq_item(struct lines *l, const cJSON *o, struct vec *v)
{
    int rc = 0;
    const char *q = jfield(l, o, "question", &rc), *p = jfield(l, o, "passage", &rc);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "answer");
    if (!rc && !cJSON_IsBool(a)) rc = lines_fail(l, "field \"answer\" must be true or false");
    if (!rc) {
        struct mc_item *it = vec_push(v);
        it->id = xstrdup_printf("%lld", (long long)(v->n - 1));
        it->cluster = cluster_of(p);
        it->context = xstrdup_printf("%s\nQuestion: %s?\nAnswer:", p, q);
        it->gold = cJSON_IsTrue(a);
        it->n_choices = 2;
        it->choices = calloc(2, sizeof *it->choices);
        it->choices[0] = qg_strdup("no");
        it->choices[1] = qg_strdup("yes");
    }
    return rc;
}

static int load_boolq(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    return each_jsonl(src, v, boolq_item, err, errlen);
}

static int winogrande_item(struct lines *l, const cJSON *o, struct vec *v)
{
    int rc = 0;
    const char *s = jfield(l, o, "sentence", &rc), *o1 = jfield(l, o, "option1", &rc),
               *o2 = jfield(l, o, "option2", &rc);
    const char *ans = jfield(l, o, "answer", &rc);
    const char *blank = s ? strchr(s, '_') : NULL;
    if (!rc && !blank) rc = lines_fail(l, "the sentence has no \"_\" blank");
    if (!rc && strcmp(ans, "1") && strcmp(ans, "2"))
        rc = lines_fail(l, "answer '%.10s' is not \"1\" or \"2\"", ans);
    if (!rc) {
        struct mc_item *it = vec_push(v);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "qID");
        it->id = cJSON_IsString(id) ? qg_strdup(id->valuestring)
                                    : xstrdup_printf("%lld", (long long)(v->n - 1));
        it->cluster = -1;
        it->gold = ans[0] - '1';
        it->n_choices = 2;
        it->contexts = calloc(2, sizeof *it->contexts);
        it->choices = calloc(2, sizeof *it->choices);
        const char *rest = blank + 1;
        while (*rest == ' ')
            rest++;
        size_t rl = strlen(rest);
        while (rl > 0 && isspace((unsigned char)rest[rl - 1]))
            rl--;
        for (int c = 0; c < 2; c++) {
            it->contexts[c] = xstrdup_printf("%.*s%s", (int)(blank - s), s, c ? o2 : o1);
            it->choices[c] = xstrdup_printf(" %.*s", (int)rl, rest);
        }
    }
    return rc;
}

static int load_winogrande(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    return each_jsonl(src, v, winogrande_item, err, errlen);
}

/* text between `after` and the earliest of the `ends` markers (trimmed),
 * searching from *pos; advances *pos past it. NULL when not found. */
static char *between(const char *s, const char **pos, const char *after, const char *const *ends,
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

/* One LLM-Adapters item (instruction text with embedded choices, answer
 * "answerK" / "true" / "optionK") as a multiple-choice item. */
/* ARC in the adapters' instruction layout: question, Answer1..N. */
static int adapters_arc(const char *text, const char *pos, const char *a, struct mc_item *it,
                        char *why, size_t whylen)
{
    static const char *const qe[] = {"\n\nAnswer1:"};
    char *q = between(text, &pos, "question:", qe, 1);
    if (!q) return qg_errf(why, whylen, QG_ERR_DATA, "no \"question:\" before \"Answer1:\"");
    it->context = xstrdup_printf("Question: %s\nAnswer:", q);
    free(q);
    it->choices = calloc(MC_MAX_CHOICES, sizeof *it->choices);
    if (!it->context || !it->choices) return qg_errf(why, whylen, QG_ERR_NOMEM, "out of memory");
    for (int c = 1; c <= MC_MAX_CHOICES; c++) {
        char mark[32], next[32];
        snprintf(mark, sizeof mark, "Answer%d:", c);
        snprintf(next, sizeof next, " Answer%d:", c + 1);
        const char *ends[] = {next, "\n\nAnswer format"};
        const char *save = pos;
        char *ch = between(text, &pos, mark, ends, 2);
        if (!ch) {
            pos = save;
            break;
        }
        it->choices[it->n_choices++] = ch;
    }
    if (it->n_choices < 2)
        return qg_errf(why, whylen, QG_ERR_DATA, "fewer than 2 \"AnswerN:\" choices");
    int64_t g1 = 0;
    int g = strncmp(a, "answer", 6) == 0 && !qg_parse_i64(a + 6, 1, 99, &g1) ? (int)g1 - 1 : -1;
    if (g < 0 || g >= it->n_choices)
        return qg_errf(why, whylen, QG_ERR_DATA, "answer '%.20s' is not answer1..answer%d", a,
                       it->n_choices);
    it->gold = g;
    return QG_OK;
}

/* BoolQ in the adapters' layout: question, true/false. */
static int adapters_boolq(const char *text, const char *pos, const char *a, struct mc_item *it,
                          char *why, size_t whylen)
{
    static const char *const qe[] = {"\n\nAnswer format"};
    char *q = between(text, &pos, "question:", qe, 1);
    if (!q) return qg_errf(why, whylen, QG_ERR_DATA, "no \"question:\"");
    size_t ql = strlen(q);
    it->context = xstrdup_printf("Question: %s%s\nAnswer:", q, ql && q[ql - 1] == '?' ? "" : "?");
    free(q);
    if (strcmp(a, "true") && strcmp(a, "false"))
        return qg_errf(why, whylen, QG_ERR_DATA, "answer '%.20s' is not true or false", a);
    it->gold = !strcmp(a, "true");
    if (!it->context || !(it->choices = calloc(2, sizeof *it->choices)))
        return qg_errf(why, whylen, QG_ERR_NOMEM, "out of memory");
    it->n_choices = 2;
    it->choices[0] = qg_strdup("no");
    it->choices[1] = qg_strdup("yes");
    if (!it->choices[0] || !it->choices[1])
        return qg_errf(why, whylen, QG_ERR_NOMEM, "out of memory");
    return QG_OK;
}

/* WinoGrande in the adapters' layout: a sentence with a blank, two options. */
static int adapters_winogrande(const char *text, const char *pos, const char *a, struct mc_item *it,
                               char *why, size_t whylen)
{
    static const char *const se[] = {"\n\nOption1:"};
    char *sent = between(text, &pos, "sentence:", se, 1);
    static const char *const e1[] = {" Option2:"};
    static const char *const e2[] = {" Answer format", "\n"};
    char *o1 = sent ? between(text, &pos, "Option1:", e1, 1) : NULL;
    char *o2 = o1 ? between(text, &pos, "Option2:", e2, 2) : NULL;
    const char *blank = sent ? strchr(sent, '_') : NULL;
    int64_t g1 = 0;
    int g = strncmp(a, "option", 6) == 0 && !qg_parse_i64(a + 6, 1, 2, &g1) ? (int)g1 - 1 : -1;
    int rc = QG_OK;
    if (!sent || !o1 || !o2)
        rc = qg_errf(why, whylen, QG_ERR_DATA,
                     "cannot find \"sentence:\", \"Option1:\" and \"Option2:\"");
    else if (!blank)
        rc = qg_errf(why, whylen, QG_ERR_DATA, "the sentence has no \"_\" blank");
    else if (g < 0 || g > 1)
        rc = qg_errf(why, whylen, QG_ERR_DATA, "answer '%.20s' is not option1 or option2", a);
    if (!rc) {
        const char *rest = blank + 1;
        while (*rest == ' ')
            rest++;
        it->gold = g;
        it->contexts = calloc(2, sizeof *it->contexts);
        it->choices = calloc(2, sizeof *it->choices);
        if (it->contexts && it->choices) it->n_choices = 2; /* only then: the free walks them */
        for (int c = 0; c < it->n_choices; c++) {
            it->contexts[c] = xstrdup_printf("%.*s%s", (int)(blank - sent), sent, c ? o2 : o1);
            it->choices[c] = xstrdup_printf(" %s", rest);
            if (!it->contexts[c] || !it->choices[c]) rc = QG_ERR_NOMEM;
        }
        if (!it->n_choices || rc) rc = qg_errf(why, whylen, QG_ERR_NOMEM, "out of memory");
    }
    free(sent);
    free(o1);
    free(o2);
    return rc;
}

static int adapters_item(const char *name, const cJSON *o, int64_t k, struct mc_item *it, char *why,
                         size_t whylen)
{
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(o, "instruction"),
                *ans = cJSON_GetObjectItemCaseSensitive(o, "answer");
    if (!cJSON_IsString(ins) || !cJSON_IsString(ans))
        return qg_errf(why, whylen, QG_ERR_DATA, "needs \"instruction\" and \"answer\" strings");
    const char *text = ins->valuestring, *pos = text, *a = ans->valuestring;
    it->id = xstrdup_printf("%lld", (long long)k);
    it->cluster = -1;
    if (!strcmp(name, "arc")) return adapters_arc(text, pos, a, it, why, whylen);
    if (!strcmp(name, "boolq")) return adapters_boolq(text, pos, a, it, why, whylen);
    return adapters_winogrande(text, pos, a, it, why, whylen);
}

/* LLM-Adapters' JSON array layout (the ARC, BoolQ and WinoGrande copies in
 * ../shared/data/llm-adapters): one object per item */
static int load_adapters(const char *name, const struct bench_source *src, struct vec *v, char *err,
                         size_t errlen)
{
    char *text;
    size_t n;
    int rc = qg_read_file(src->data, (size_t)256 << 20, &text, &n, err, errlen);
    if (rc) return rc;
    size_t bad;
    if (!utf8_valid(text, n, &bad)) {
        free(text);
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: not valid UTF-8 (byte %zu)", src->data,
                       bad + 1);
    }
    cJSON *arr = cJSON_ParseWithLength(text, n);
    if (!arr) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = text; at && p < at && p < text + n; p++)
            line += *p == '\n';
        free(text);
        return qg_errf(err, errlen, QG_ERR_DATA, "%s:%d: invalid JSON", src->data, line);
    }
    free(text);
    if (!cJSON_IsArray(arr))
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: expected a JSON array of items", src->data);
    int64_t k = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, arr)
    {
        if (rc || (src->limit > 0 && v->n >= src->limit)) break;
        struct mc_item *it = vec_push(v);
        char why[256];
        if (!it)
            rc = QG_ERR_NOMEM;
        else if (!cJSON_IsObject(o))
            rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: item %lld is not an object", src->data,
                         (long long)k);
        else if (adapters_item(name, o, k, it, why, sizeof why))
            rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: item %lld: %s", src->data, (long long)k,
                         why);
        k++;
    }
    cJSON_Delete(arr);
    return rc;
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
        rc = ends_with(src->data, ".jsonl") ? load_hellaswag_jsonl(src, &v, err, errlen)
                                            : load_hellaswag_txt(src, &v, err, errlen);
    else if (strcmp(name, "mmlu") == 0)
        rc = load_mmlu(src, &v, err, errlen);
    else if (strcmp(name, "piqa") == 0)
        rc = load_piqa(src, &v, err, errlen);
    else if ((!strcmp(name, "arc") || !strcmp(name, "boolq") || !strcmp(name, "winogrande")) &&
             starts_with_array(src->data))
        rc = load_adapters(name, src, &v, err, errlen);
    else if (strcmp(name, "arc") == 0)
        rc = load_arc(src, &v, err, errlen);
    else if (strcmp(name, "boolq") == 0)
        rc = load_boolq(src, &v, err, errlen);
    else if (strcmp(name, "winogrande") == 0)
        rc = load_winogrande(src, &v, err, errlen);
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
        const char *q = jfield(l, o, "question", &rc), *a = jfield(l, o, "answer", &rc);
        if (!rc && !strstr(a, "#### ")) rc = lines_fail(l, "answer has no \"#### N\" line");
        if (!rc) {
            struct gen_item *it = vec_push(v);
            it->id = xstrdup_printf("%lld", (long long)(v->n - 1));
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
        char *p = xstrdup_printf("%sQuestion: %s\nAnswer:", sbuf_str(&pre), it->prompt);
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

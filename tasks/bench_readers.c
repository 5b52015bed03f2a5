/* bench_readers — the multiple-choice benchmarks in their public layouts:
 * HellaSwag (text and JSONL), MMLU (CSV per subject), PIQA, ARC, BoolQ,
 * WinoGrande. */
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

/* lm-eval builds the context as ctx_a + " " + ctx_b.capitalize(); llama.cpp's
 * text keeps ctx_b as it was (a lowercase fragment after ctx_a's last
 * sentence: "... on a roof. he"). The fragment after the last sentence end,
 * when it starts lowercase, is capitalized as Python does (first letter
 * upper, the rest lower): lm-eval's prompt when ctx_b is that fragment (a
 * heuristic: a ctx_b of several sentences is split wrongly). Context that ends in
 * a whole sentence (ctx_b empty, as in WikiHow items) is left alone. */
static void hs_capitalize_tail(char *ctx)
{
    char *tail = NULL;
    for (char *p = ctx; *p; p++)
        if ((*p == '.' || *p == '?' || *p == '!') && p[1] == ' ') tail = p + 2;
    if (!tail || !islower((unsigned char)*tail)) return;
    *tail = (char)toupper((unsigned char)*tail);
    for (char *p = tail + 1; *p; p++)
        *p = (char)tolower((unsigned char)*p);
}

/* llama.cpp's --hellaswag layout: 6 lines per task */
int bn_load_hellaswag_txt(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
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
        struct mc_item *it = bn_vec_push(v);
        if (!it) return QG_ERR_NOMEM;
        int64_t first = lines_lineno(l);
        it->id = bn_xstrdup_printf("%lld", (long long)(v->n - 1));
        it->context = hs_preprocess(s);
        if (it->context) hs_capitalize_tail(it->context);
        const char *colon = strstr(s, ": ");
        it->cluster = -1;
        if (colon) { /* "activity label: context" */
            char *label = qg_strndup(s, (size_t)(colon - s));
            it->cluster = bn_cluster_of(label ? label : "");
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
    const char *a = bn_jfield(l, o, "ctx_a", &rc), *b = bn_jfield(l, o, "ctx_b", &rc),
               *act = bn_jfield(l, o, "activity_label", &rc);
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
        struct mc_item *it = bn_vec_push(v);
        const cJSON *ind = cJSON_GetObjectItemCaseSensitive(o, "ind");
        it->id = cJSON_IsNumber(ind) ? bn_xstrdup_printf("%lld", (long long)ind->valuedouble)
                                     : bn_xstrdup_printf("line %lld", (long long)lines_lineno(l));
        char *ctx = bn_xstrdup_printf("%s: %s %c%s", act, a,
                                      b[0] ? toupper((unsigned char)b[0]) : ' ', b[0] ? b + 1 : "");
        it->context = hs_preprocess(ctx);
        free(ctx);
        it->cluster = bn_cluster_of(act);
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

int bn_load_hellaswag_jsonl(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    return bn_each_jsonl(src, v, hellaswag_item, err, errlen);
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
        struct mc_item *it = bn_vec_push(v);
        if (!it) return QG_ERR_NOMEM;
        it->id = bn_xstrdup_printf("%s/%lld", subject, (long long)row++);
        it->cluster = bn_cluster_of(subject);
        it->context = bn_xstrdup_printf("%s%s\nA. %s\nB. %s\nC. %s\nD. %s\nAnswer:", prefix, f[0],
                                        f[1], f[2], f[3], f[4]);
        it->gold = (int)gold;
        it->n_choices = 4;
        it->choices = calloc(4, sizeof *it->choices);
        for (int c = 0; c < 4; c++)
            it->choices[c] = bn_xstrdup_printf("%c", 'A' + c);
        csv_fields_free(f, nf);
    }
    if (rc < 0) qg_errf(err, errlen, rc, "%s", lines_errmsg(l));
    lines_close(l);
    return rc < 0 ? rc : QG_OK;
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

int bn_load_mmlu(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
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
            if (bn_ends_with(e->d_name, ".csv")) names[nn++] = qg_strdup(e->d_name);
        closedir(d);
        qsort(names, (size_t)nn, sizeof *names, bn_cmp_str);
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

int bn_load_piqa(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
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
        const char *goal = bn_jfield(l, o, "goal", &rc), *s1 = bn_jfield(l, o, "sol1", &rc),
                   *s2 = bn_jfield(l, o, "sol2", &rc);
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
            struct mc_item *it = bn_vec_push(v);
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
            it->id = cJSON_IsString(id) ? qg_strdup(id->valuestring)
                                        : bn_xstrdup_printf("%lld", (long long)(v->n - 1));
            it->cluster = -1;
            it->context = bn_xstrdup_printf("Question: %s\nAnswer:", goal);
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
    const char *id = bn_jfield(l, o, "id", &rc), *key = bn_jfield(l, o, "answerKey", &rc);
    const char *stem = !rc && cJSON_IsObject(q) ? bn_jfield(l, q, "stem", &rc) : NULL;
    const cJSON *ch = cJSON_IsObject(q) ? cJSON_GetObjectItemCaseSensitive(q, "choices") : NULL;
    if (!rc && !stem) rc = lines_fail(l, "missing field \"question\" object");
    if (!rc && (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) < 2 ||
                cJSON_GetArraySize(ch) > MC_MAX_CHOICES))
        rc = lines_fail(l, "item %s: \"question.choices\" must be an array of 2..%d", id,
                        MC_MAX_CHOICES);
    if (!rc) {
        struct mc_item *it = bn_vec_push(v);
        it->id = qg_strdup(id);
        it->cluster = -1;
        it->context = bn_xstrdup_printf("Question: %s\nAnswer:", stem);
        it->n_choices = cJSON_GetArraySize(ch);
        it->choices = calloc((size_t)it->n_choices, sizeof *it->choices);
        it->gold = -1;
        for (int c = 0; c < it->n_choices && !rc; c++) {
            const cJSON *cc = cJSON_GetArrayItem(ch, c);
            const char *text = bn_jfield(l, cc, "text", &rc),
                       *label = bn_jfield(l, cc, "label", &rc);
            if (rc) break;
            it->choices[c] = qg_strdup(text);
            if (strcmp(label, key) == 0) it->gold = c;
        }
        if (!rc && it->gold < 0)
            rc = lines_fail(l, "item %s: answerKey '%s' is not one of the choice labels", id, key);
    }
    return rc;
}

int bn_load_arc(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    return bn_each_jsonl(src, v, arc_item, err, errlen);
}

static int boolq_item(struct lines *l, const cJSON *o, struct vec *v)
{
    int rc = 0;
    const char *q = bn_jfield(l, o, "question", &rc), *p = bn_jfield(l, o, "passage", &rc);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "answer");
    if (!rc && !cJSON_IsBool(a)) rc = lines_fail(l, "field \"answer\" must be true or false");
    if (!rc) {
        struct mc_item *it = bn_vec_push(v);
        it->id = bn_xstrdup_printf("%lld", (long long)(v->n - 1));
        it->cluster = bn_cluster_of(p);
        it->context = bn_xstrdup_printf("%s\nQuestion: %s?\nAnswer:", p, q);
        it->gold = cJSON_IsTrue(a);
        it->n_choices = 2;
        it->choices = calloc(2, sizeof *it->choices);
        it->choices[0] = qg_strdup("no");
        it->choices[1] = qg_strdup("yes");
    }
    return rc;
}

int bn_load_boolq(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    return bn_each_jsonl(src, v, boolq_item, err, errlen);
}

static int winogrande_item(struct lines *l, const cJSON *o, struct vec *v)
{
    int rc = 0;
    const char *s = bn_jfield(l, o, "sentence", &rc), *o1 = bn_jfield(l, o, "option1", &rc),
               *o2 = bn_jfield(l, o, "option2", &rc);
    const char *ans = bn_jfield(l, o, "answer", &rc);
    const char *blank = s ? strchr(s, '_') : NULL;
    if (!rc && !blank) rc = lines_fail(l, "the sentence has no \"_\" blank");
    if (!rc && strcmp(ans, "1") && strcmp(ans, "2"))
        rc = lines_fail(l, "answer '%.10s' is not \"1\" or \"2\"", ans);
    if (!rc) {
        struct mc_item *it = bn_vec_push(v);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "qID");
        it->id = cJSON_IsString(id) ? qg_strdup(id->valuestring)
                                    : bn_xstrdup_printf("%lld", (long long)(v->n - 1));
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
            it->contexts[c] = bn_xstrdup_printf("%.*s%s", (int)(blank - s), s, c ? o2 : o1);
            it->choices[c] = bn_xstrdup_printf(" %.*s", (int)rl, rest);
        }
    }
    return rc;
}

int bn_load_winogrande(const struct bench_source *src, struct vec *v, char *err, size_t errlen)
{
    return bn_each_jsonl(src, v, winogrande_item, err, errlen);
}

/* bench_adapters — ARC, BoolQ and WinoGrande in LLM-Adapters' JSON layout. */
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

/* One LLM-Adapters item (instruction text with embedded choices, answer
 * "answerK" / "true" / "optionK") as a multiple-choice item. */
/* ARC in the adapters' instruction layout: question, Answer1..N. */
static int adapters_arc(const char *text, const char *pos, const char *a, struct mc_item *it,
                        char *why, size_t whylen)
{
    static const char *const qe[] = {"\n\nAnswer1:"};
    char *q = bn_between(text, &pos, "question:", qe, 1);
    if (!q) return qg_errf(why, whylen, QG_ERR_DATA, "no \"question:\" before \"Answer1:\"");
    it->context = bn_xstrdup_printf("Question: %s\nAnswer:", q);
    free(q);
    it->choices = calloc(MC_MAX_CHOICES, sizeof *it->choices);
    if (!it->context || !it->choices) return qg_errf(why, whylen, QG_ERR_NOMEM, "out of memory");
    for (int c = 1; c <= MC_MAX_CHOICES; c++) {
        char mark[32], next[32];
        snprintf(mark, sizeof mark, "Answer%d:", c);
        snprintf(next, sizeof next, " Answer%d:", c + 1);
        const char *ends[] = {next, "\n\nAnswer format"};
        const char *save = pos;
        char *ch = bn_between(text, &pos, mark, ends, 2);
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
    char *q = bn_between(text, &pos, "question:", qe, 1);
    if (!q) return qg_errf(why, whylen, QG_ERR_DATA, "no \"question:\"");
    size_t ql = strlen(q);
    it->context =
        bn_xstrdup_printf("Question: %s%s\nAnswer:", q, ql && q[ql - 1] == '?' ? "" : "?");
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
    char *sent = bn_between(text, &pos, "sentence:", se, 1);
    static const char *const e1[] = {" Option2:"};
    static const char *const e2[] = {" Answer format", "\n"};
    char *o1 = sent ? bn_between(text, &pos, "Option1:", e1, 1) : NULL;
    char *o2 = o1 ? bn_between(text, &pos, "Option2:", e2, 2) : NULL;
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
            it->contexts[c] = bn_xstrdup_printf("%.*s%s", (int)(blank - sent), sent, c ? o2 : o1);
            it->choices[c] = bn_xstrdup_printf(" %s", rest);
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
    it->id = bn_xstrdup_printf("%lld", (long long)k);
    it->cluster = -1;
    if (!strcmp(name, "arc")) return adapters_arc(text, pos, a, it, why, whylen);
    if (!strcmp(name, "boolq")) return adapters_boolq(text, pos, a, it, why, whylen);
    return adapters_winogrande(text, pos, a, it, why, whylen);
}

/* LLM-Adapters' JSON array layout (the ARC, BoolQ and WinoGrande copies in
 * ../shared/data/llm-adapters): one object per item */
int bn_load_adapters(const char *name, const struct bench_source *src, struct vec *v, char *err,
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
        struct mc_item *it = bn_vec_push(v);
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

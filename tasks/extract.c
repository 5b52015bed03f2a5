/* extract — lm-eval-compatible regex extraction, normalisation, exact match. */
#include "tasks/extract.h"
#include "core/json.h"
#include "core/status.h"
#include "core/utf8.h"
#include "core/util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct normalizer {
    int ignore_case, ignore_punct, whitespace, numbers;
    pcre2_code **ignore;
    int n_ignore;
};

struct pipeline {
    char *name;
    pcre2_code *re;
    int group; /* -1: first non-empty group (or the whole match) */
    int last;  /* select the last match instead of the first */
    char *fallback;
};

int extract_regex_compile(const char *pattern, const char *where, void **out, char *err,
                          size_t errlen)
{
    int ec;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &ec, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: invalid regex '%s': %s at offset %zu", where,
                       pattern, (const char *)msg, (size_t)off);
    }
    *out = re;
    return QG_OK;
}

void extract_regex_free(void *re)
{
    pcre2_code_free(re);
}

static int get_bool(const cJSON *spec, const char *key, int def, const char *where, int *out,
                    char *err, size_t errlen)
{
    const cJSON *v = spec ? cJSON_GetObjectItemCaseSensitive(spec, key) : NULL;
    if (!v) {
        *out = def;
        return QG_OK;
    }
    if (!cJSON_IsBool(v))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: \"%s\" must be true or false", where, key);
    *out = cJSON_IsTrue(v);
    return QG_OK;
}

/* QG_ERR_DATA naming the first key of o not in keys (what: "pipeline 'x'"). */
static int known_keys(const cJSON *o, const char *const *keys, const char *where, const char *what,
                      char *err, size_t errlen)
{
    const char *near, *bad = o ? json_unknown_key(o, keys, &near) : NULL;
    if (!bad) return QG_OK;
    return qg_errf(err, errlen, QG_ERR_DATA, "%s: unknown key \"%s\" in %s%s%s%s", where, bad, what,
                   near ? " (did you mean \"" : "", near ? near : "", near ? "\"?)" : "");
}

int extract_normalizer_new(const cJSON *spec, const char *where, struct normalizer **out, char *err,
                           size_t errlen)
{
    *out = NULL;
    static const char *const keys[] = {
        "ignore_case", "ignore_punctuation", "whitespace", "numbers", "ignore", NULL};
    int krc =
        cJSON_IsObject(spec) ? known_keys(spec, keys, where, "\"normalize\"", err, errlen) : 0;
    if (krc) return krc;
    struct normalizer *n = calloc(1, sizeof *n);
    if (!n) return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", where);
    int rc = get_bool(spec, "ignore_case", 0, where, &n->ignore_case, err, errlen);
    if (!rc) rc = get_bool(spec, "ignore_punctuation", 0, where, &n->ignore_punct, err, errlen);
    if (!rc) rc = get_bool(spec, "whitespace", 1, where, &n->whitespace, err, errlen);
    if (!rc) rc = get_bool(spec, "numbers", 0, where, &n->numbers, err, errlen);
    const cJSON *ig = spec ? cJSON_GetObjectItemCaseSensitive(spec, "ignore") : NULL;
    if (!rc && ig && !cJSON_IsArray(ig))
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: \"ignore\" must be an array of regexes", where);
    if (!rc && ig) {
        if (!(n->ignore = calloc((size_t)cJSON_GetArraySize(ig) + 1, sizeof *n->ignore)))
            rc = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", where);
        const cJSON *r;
        cJSON_ArrayForEach(r, ig)
        {
            if (rc) break;
            if (!cJSON_IsString(r)) {
                rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: \"ignore\" entries must be strings",
                             where);
                break;
            }
            void *re;
            if ((rc = extract_regex_compile(r->valuestring, where, &re, err, errlen))) break;
            n->ignore[n->n_ignore++] = re;
        }
    }
    if (rc) {
        extract_normalizer_free(n);
        return rc;
    }
    *out = n;
    return QG_OK;
}

void extract_normalizer_free(struct normalizer *n)
{
    if (!n) return;
    for (int i = 0; i < n->n_ignore; i++)
        pcre2_code_free(n->ignore[i]);
    free(n->ignore);
    free(n);
}

/* Deletes every match of re from s (malloc'd result). */
static char *delete_matches(pcre2_code *re, const char *s)
{
    PCRE2_SIZE len = 0;
    pcre2_substitute(re, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0,
                     PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH, NULL, NULL,
                     (PCRE2_SPTR) "", 0, NULL, &len);
    PCRE2_UCHAR *out = malloc(len + 1);
    if (!out) return NULL;
    PCRE2_SIZE cap = len + 1;
    int rc = pcre2_substitute(re, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0, PCRE2_SUBSTITUTE_GLOBAL,
                              NULL, NULL, (PCRE2_SPTR) "", 0, out, &cap);
    if (rc < 0) { /* should not happen; keep the input */
        free(out);
        return qg_strdup(s);
    }
    return (char *)out;
}

char *extract_normalize(const struct normalizer *n, const char *s)
{
    char *cur = qg_strdup(s ? s : "");
    for (int i = 0; cur && i < n->n_ignore; i++) {
        char *next = delete_matches(n->ignore[i], cur);
        free(cur);
        cur = next;
    }
    if (!cur) return NULL;
    size_t k = 0, len = strlen(cur);
    int prev_space = 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)cur[i];
        if (n->ignore_punct && c < 0x80 && ispunct(c)) continue;
        if (n->ignore_case && c < 0x80) c = (unsigned char)tolower(c);
        if (n->whitespace && c < 0x80 && isspace(c)) {
            if (prev_space) continue;
            c = ' ';
            prev_space = 1;
        } else {
            prev_space = 0;
        }
        cur[k++] = (char)c;
    }
    if (n->whitespace && k > 0 && cur[k - 1] == ' ') k--;
    cur[k] = '\0';
    return cur;
}

/* Parses "1,000", "$1,000.50", "-3" as a number; 0 when s is not one. */
static int as_number(const char *s, double *out)
{
    char buf[128];
    size_t k = 0;
    for (const char *p = s; *p && k + 1 < sizeof buf; p++)
        if (*p != ',' && *p != '$' && !isspace((unsigned char)*p)) buf[k++] = *p;
    buf[k] = '\0';
    if (k == 0) return 0;
    if (k > 1 && buf[k - 1] == '.') buf[--k] = '\0'; /* "72." */
    char *end;
    double v = strtod(buf, &end);
    if (*end || !isfinite(v)) return 0;
    for (size_t i = 0; i < k; i++) /* digits, sign and point only: no "inf", "0x1p3" */
        if (!isdigit((unsigned char)buf[i]) && buf[i] != '.' && buf[i] != '-' && buf[i] != '+')
            return 0;
    *out = v;
    return 1;
}

int extract_normalized_equal(const struct normalizer *n, const char *a, const char *b)
{
    char *x = extract_normalize(n, a), *y = extract_normalize(n, b);
    int eq = x && y && strcmp(x, y) == 0;
    double u, v;
    if (!eq && x && y && n->numbers && as_number(x, &u) && as_number(y, &v)) eq = u == v;
    free(x);
    free(y);
    return eq;
}

int extract_pipeline_new(const cJSON *spec, const char *where, struct pipeline **out, char *err,
                         size_t errlen)
{
    *out = NULL;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(spec, "name"),
                *regex = cJSON_GetObjectItemCaseSensitive(spec, "regex");
    const cJSON *group = cJSON_GetObjectItemCaseSensitive(spec, "group"),
                *sel = cJSON_GetObjectItemCaseSensitive(spec, "select");
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(spec, "fallback");
    if (!cJSON_IsString(name) || !*name->valuestring)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: a pipeline needs a \"name\" string", where);
    if (!cJSON_IsString(regex))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: pipeline '%s' needs a \"regex\" string",
                       where, name->valuestring);
    if (group && (!cJSON_IsNumber(group) || group->valuedouble < 0 || group->valuedouble > 99))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: pipeline '%s': \"group\" must be 0..99",
                       where, name->valuestring);
    if (sel && (!cJSON_IsString(sel) ||
                (strcmp(sel->valuestring, "first") && strcmp(sel->valuestring, "last"))))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: pipeline '%s': \"select\" must be \"first\" or \"last\"", where,
                       name->valuestring);
    static const char *const keys[] = {"name", "regex", "group", "select", "fallback", NULL};
    char what[160];
    snprintf(what, sizeof what, "pipeline '%.100s'", name->valuestring);
    int krc = known_keys(spec, keys, where, what, err, errlen);
    if (krc) return krc;
    if (fb && !cJSON_IsString(fb))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: pipeline '%s': \"fallback\" must be a string",
                       where, name->valuestring);
    struct pipeline *p = calloc(1, sizeof *p);
    if (!p) return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", where);
    char w[512];
    snprintf(w, sizeof w, "%s: pipeline '%s'", where, name->valuestring);
    void *re = NULL;
    int rc = extract_regex_compile(regex->valuestring, w, &re, err, errlen);
    p->re = re;
    p->name = qg_strdup(name->valuestring);
    p->fallback = qg_strdup(fb ? fb->valuestring : "[invalid]");
    if (!rc && (!p->name || !p->fallback))
        rc = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", w);
    p->group = group ? (int)group->valuedouble : -1;
    p->last = sel && strcmp(sel->valuestring, "last") == 0;
    uint32_t ncap = 0;
    if (!rc) pcre2_pattern_info(p->re, PCRE2_INFO_CAPTURECOUNT, &ncap);
    if (!rc && p->group > (int)ncap)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: group %d but the regex has %u", w, p->group,
                     ncap);
    if (rc) {
        extract_pipeline_free(p);
        return rc;
    }
    *out = p;
    return QG_OK;
}

void extract_pipeline_free(struct pipeline *p)
{
    if (!p) return;
    pcre2_code_free(p->re);
    free(p->name);
    free(p->fallback);
    free(p);
}

const char *extract_pipeline_name(const struct pipeline *p)
{
    return p->name;
}

/* The answer of one match: the chosen group, the first non-empty group, or
 * the whole match. Returns NULL when that is empty (lm-eval then falls back). */
static char *from_match(const struct pipeline *p, const char *text, pcre2_match_data *md, int rc)
{
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    int g = p->group;
    if (g < 0) {
        g = 0;
        for (int i = 1; i < rc; i++)
            if (ov[2 * i] != PCRE2_UNSET && ov[2 * i + 1] > ov[2 * i]) {
                g = i;
                break;
            }
        uint32_t ncap = 0;
        pcre2_pattern_info(p->re, PCRE2_INFO_CAPTURECOUNT, &ncap);
        if (g == 0 && ncap > 0) return NULL; /* every group empty */
    }
    if (g >= rc || ov[2 * g] == PCRE2_UNSET) return NULL;
    /* strip, as lm-eval does */
    size_t a = ov[2 * g], b = ov[2 * g + 1];
    while (a < b && isspace((unsigned char)text[a]))
        a++;
    while (b > a && isspace((unsigned char)text[b - 1]))
        b--;
    return qg_strndup(text + a, b - a);
}

char *extract_pipeline_extract(const struct pipeline *p, const char *raw)
{
    /* a model's output is bytes: invalid UTF-8 becomes U+FFFD, so the
     * (UTF) regex matches the rest instead of failing on it */
    char *text = utf8_sanitize(raw);
    pcre2_match_data *md = text ? pcre2_match_data_create_from_pattern(p->re, NULL) : NULL;
    if (!md) {
        free(text);
        return NULL;
    }
    size_t n = strlen(text), off = 0;
    char *chosen = NULL;
    int found = 0, failed = 0;
    while (off <= n) {
        int rc = pcre2_match(p->re, (PCRE2_SPTR)text, n, off, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc <= 0) { /* a match limit or another error: not a miss */
            failed = 1;
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (!found || p->last) {
            free(chosen);
            chosen = from_match(p, text, md, rc);
            found = 1;
        }
        if (!p->last) break;
        /* past an empty match by one character, not one byte */
        off = ov[1] > ov[0] ? ov[1] : ov[0] + (ov[0] < n ? utf8_lead_len((uint8_t)text[ov[0]]) : 1);
    }
    pcre2_match_data_free(md);
    free(text);
    if (failed) {
        free(chosen);
        return NULL;
    }
    if (!chosen || !*chosen) {
        free(chosen);
        return qg_strdup(p->fallback);
    }
    return chosen;
}

/* json — typed look-ups in cJSON objects. */
#include "core/json.h"
#include "core/closest.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

const cJSON *json_get(const cJSON *o, const char *k)
{
    return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

const char *json_str(const cJSON *o, const char *k, const char *def)
{
    const cJSON *v = json_get(o, k);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : def;
}

double json_num(const cJSON *o, const char *k, double def)
{
    const cJSON *v = json_get(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

long long json_int(const cJSON *o, const char *k, long long def)
{
    const cJSON *v = json_get(o, k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : def;
}

const char *json_unknown_key(const cJSON *o, const char *const *keys, const char **near)
{
    const cJSON *k;
    if (near) *near = NULL;
    cJSON_ArrayForEach(k, o)
    {
        int ok = 0, n = 0;
        for (; keys[n]; n++)
            ok |= k->string && strcmp(keys[n], k->string) == 0;
        if (ok || !k->string) continue;
        if (near) *near = qg_closest(k->string, keys, n);
        return k->string;
    }
    return NULL;
}

/* a scalar as JSON (cJSON's escaping and number format) */
static void scalar(struct sbuf *b, const cJSON *v)
{
    cJSON copy = *v; /* printed alone: no siblings, no key */
    copy.next = copy.prev = NULL;
    copy.string = NULL;
    char *s = cJSON_PrintUnformatted(&copy);
    if (s)
        sbuf_append(b, s, strlen(s));
    else
        b->failed = 1;
    free(s);
}

static void key(struct sbuf *b, const cJSON *v)
{
    cJSON *k = cJSON_CreateString(v->string ? v->string : "");
    scalar(b, k);
    cJSON_Delete(k);
    sbuf_append(b, ": ", 2);
}

/* on one line, ", " and ": " inside */
static void compact(struct sbuf *b, const cJSON *v)
{
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) {
        scalar(b, v);
        return;
    }
    int obj = cJSON_IsObject(v);
    sbuf_append(b, obj ? "{" : "[", 1);
    for (const cJSON *c = v->child; c; c = c->next) {
        if (obj) key(b, c);
        compact(b, c);
        if (c->next) sbuf_append(b, ", ", 2);
    }
    sbuf_append(b, obj ? "}" : "]", 1);
}

static void pretty(struct sbuf *b, const cJSON *v, int indent, int width)
{
    size_t at = b->len;
    compact(b, v);
    size_t line = b->len - at + (size_t)indent + 1; /* a trailing comma */
    if (line <= (size_t)width || (!cJSON_IsObject(v) && !cJSON_IsArray(v)) || !v->child) return;
    b->len = at; /* too wide: one member per line */
    if (b->data) b->data[at] = '\0';
    int obj = cJSON_IsObject(v);
    sbuf_append(b, obj ? "{\n" : "[\n", 2);
    for (const cJSON *c = v->child; c; c = c->next) {
        sbuf_printf(b, "%*s", indent + 2, "");
        if (obj) key(b, c);
        pretty(b, c, indent + 2, width);
        sbuf_append(b, c->next ? ",\n" : "\n", c->next ? 2 : 1);
    }
    sbuf_printf(b, "%*s%s", indent, "", obj ? "}" : "]");
}

char *json_print_pretty(const cJSON *v, int width)
{
    struct sbuf b;
    sbuf_init(&b, 0);
    pretty(&b, v, 0, width);
    sbuf_append(&b, "\n", 1);
    if (b.failed) {
        sbuf_release(&b);
        return NULL;
    }
    return b.data;
}

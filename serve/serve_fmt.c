/* serve_fmt — OpenAI response shapes for `qgate serve` (see serve_fmt.h). */
#include "serve/serve_fmt.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

int64_t serve_chars(const char *s)
{
    int64_t n = 0;
    for (; s && *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

cJSON *serve_chunks(const char *text, const char *const *pieces, int64_t n, cJSON **tokens)
{
    cJSON *a = cJSON_CreateArray(), *t = cJSON_CreateArray();
    size_t len = strlen(text), pos = 0;
    int64_t i = 0, carried = 0; /* tokens of empty pieces ride with the next chunk */
    for (; a && t && i < n && pos < len; i++) {
        const char *p = pieces[i];
        size_t pl = strlen(p);
        int whole = pl <= len - pos && !memcmp(text + pos, p, pl);
        /* the first piece's leading space may be dropped from the text */
        int spaced =
            !whole && pos == 0 && p[0] == ' ' && pl - 1 <= len && !memcmp(text, p + 1, pl - 1);
        if (!whole && !spaced) break;
        if (spaced) p++, pl--;
        carried++;
        if (!pl) continue;
        char *c = malloc(pl + 1);
        if (!c) break;
        memcpy(c, p, pl), c[pl] = '\0';
        cJSON_AddItemToArray(a, cJSON_CreateString(c));
        cJSON_AddItemToArray(t, cJSON_CreateNumber((double)carried));
        carried = 0;
        free(c);
        pos += pl;
    }
    if (a && t && pos < len) { /* the rest: its text and every token left */
        cJSON_AddItemToArray(a, cJSON_CreateString(text + pos));
        cJSON_AddItemToArray(t, cJSON_CreateNumber((double)(n - i + carried)));
    } else if (t && cJSON_GetArraySize(t) > 0 && n - i + carried > 0) { /* trailing empty pieces */
        cJSON *last = cJSON_GetArrayItem(t, cJSON_GetArraySize(t) - 1);
        cJSON_SetNumberValue(last, last->valuedouble + (double)(n - i + carried));
    } else if (a && t && n > 0 && cJSON_GetArraySize(t) == 0) { /* tokens of no text */
        cJSON_AddItemToArray(a, cJSON_CreateString(""));
        cJSON_AddItemToArray(t, cJSON_CreateNumber((double)n));
    }
    if (tokens)
        *tokens = t;
    else
        cJSON_Delete(t);
    return a;
}

/* One event: a chunk object of the completion's id, created and model with
 * this choice (NULL: none) and usage (NULL: none). */
static void event(struct sbuf *b, const cJSON *body, int chat, cJSON *choice, const cJSON *usage)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddItemToObject(e, "id", cJSON_Duplicate(cJSON_GetObjectItem(body, "id"), 1));
    cJSON_AddStringToObject(e, "object", chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddItemToObject(e, "created", cJSON_Duplicate(cJSON_GetObjectItem(body, "created"), 1));
    cJSON_AddItemToObject(e, "model", cJSON_Duplicate(cJSON_GetObjectItem(body, "model"), 1));
    cJSON *cs = cJSON_AddArrayToObject(e, "choices");
    if (choice) cJSON_AddItemToArray(cs, choice);
    if (usage) cJSON_AddItemToObject(e, "usage", cJSON_Duplicate(usage, 1));
    char *s = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    if (!s) {
        b->failed = 1;
        return;
    }
    sbuf_printf(b, "data: %s\n\n", s);
    free(s);
}

/* Entries [from, from + n) of every array member of a completion's
 * logprobs object (tokens, token_logprobs, top_logprobs, text_offset, ...),
 * or of a chat logprobs object's "content"; NULL when lp is not an object. */
static cJSON *lp_slice(const cJSON *lp, int from, int n)
{
    if (!cJSON_IsObject(lp)) return NULL;
    cJSON *o = cJSON_CreateObject();
    const cJSON *m;
    cJSON_ArrayForEach(m, lp)
    {
        if (!cJSON_IsArray(m)) continue;
        cJSON *a = cJSON_AddArrayToObject(o, m->string);
        for (int i = from; i < from + n && i < cJSON_GetArraySize(m); i++)
            cJSON_AddItemToArray(a, cJSON_Duplicate(cJSON_GetArrayItem(m, i), 1));
    }
    return o;
}

/* A streamed choice: text (chat: a delta with content, and the role
 * first), its log-probs (owned; NULL: null) and the finish reason (NULL:
 * null). */
static cJSON *stream_choice(int chat, const char *text, int with_role, cJSON *lp,
                            const char *finish)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (with_role) cJSON_AddStringToObject(d, "role", "assistant");
        if (text) cJSON_AddStringToObject(d, "content", text);
    } else {
        cJSON_AddStringToObject(c, "text", text ? text : "");
    }
    if (lp)
        cJSON_AddItemToObject(c, "logprobs", lp);
    else
        cJSON_AddNullToObject(c, "logprobs");
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    return c;
}

char *serve_sse(const cJSON *body, int chat, int include_usage)
{
    struct sbuf b;
    sbuf_init(&b, (size_t)1 << 30);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(body, "choices"), 0), *k;
    const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason"),
                *lp = cJSON_GetObjectItem(ch, "logprobs"),
                *counts = cJSON_GetObjectItem(body, "_chunk_tokens");
    if (chat) event(&b, body, 1, stream_choice(1, "", 1, NULL, NULL), NULL);
    int at = 0, i = 0;
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(body, "_chunks"))
    {
        const cJSON *c = cJSON_GetArrayItem(counts, i++);
        int n = cJSON_IsNumber(c) ? (int)c->valuedouble : 0;
        event(&b, body, chat, stream_choice(chat, k->valuestring, 0, lp_slice(lp, at, n), NULL),
              NULL);
        at += n;
    }
    event(&b, body, chat,
          stream_choice(chat, chat ? NULL : "", 0, NULL,
                        cJSON_IsString(fr) ? fr->valuestring : "stop"),
          NULL);
    if (include_usage) event(&b, body, chat, NULL, cJSON_GetObjectItem(body, "usage"));
    sbuf_printf(&b, "data: [DONE]\n\n");
    if (b.failed) {
        sbuf_release(&b);
        return NULL;
    }
    return b.data;
}

static cJSON *bytes_of(const char *s)
{
    cJSON *a = cJSON_CreateArray();
    for (; *s; s++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)*s));
    return a;
}

/* {token, logprob, bytes} */
static cJSON *lp_entry(const char *token, double lp)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "token", token);
    cJSON_AddNumberToObject(e, "logprob", lp);
    cJSON_AddItemToObject(e, "bytes", bytes_of(token));
    return e;
}

cJSON *serve_chat_logprobs(const cJSON *lp, int k)
{
    const cJSON *toks = cJSON_GetObjectItem(lp, "tokens"),
                *tlp = cJSON_GetObjectItem(lp, "token_logprobs"),
                *tops = cJSON_GetObjectItem(lp, "top_logprobs"), *t;
    if (!cJSON_IsArray(toks) || !cJSON_IsArray(tlp)) return NULL;
    cJSON *o = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(o, "content");
    int i = 0;
    cJSON_ArrayForEach(t, toks)
    {
        const cJSON *v = cJSON_GetArrayItem(tlp, i), *top = cJSON_GetArrayItem(tops, i), *p;
        i++;
        if (!cJSON_IsString(t) || !cJSON_IsNumber(v)) continue;
        cJSON *e = lp_entry(t->valuestring, v->valuedouble),
              *te = cJSON_AddArrayToObject(e, "top_logprobs");
        int n = 0;
        cJSON_ArrayForEach(p, top) if (n < k && cJSON_IsNumber(p))
        {
            cJSON_AddItemToArray(te, lp_entry(p->string, p->valuedouble));
            n++;
        }
        cJSON_AddItemToArray(content, e);
    }
    return o;
}

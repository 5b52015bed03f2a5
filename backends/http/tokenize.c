/* tokenize — the server as tokenizer: /tokenize and /detokenize in
 * llama.cpp's and vLLM's forms, token pieces remembered per id. */
#include "backends/backend.h"
#include "backends/gguf.h"
#include "backends/http/http.h"
#include "backends/http/http_impl.h"
#include "backends/tokenizer.h"
#include "datasets/hash.h"
#include "datasets/reader.h"
#include "core/status.h"
#include "core/util.h"
#include "core/utf8.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static int cmp_piece(const void *a, const void *b)
{
    return strcmp(((const struct piece_id *)a)->text, ((const struct piece_id *)b)->text);
}

/* the id whose decoded text is text; -1 when none or several */
int32_t hp_piece_lookup(const struct http *h, const char *text)
{
    if (!h->pieces) return -1;
    struct piece_id key = {.text = (char *)text};
    const struct piece_id *f =
        bsearch(&key, h->pieces, (size_t)h->n_pieces, sizeof *h->pieces, cmp_piece);
    return f ? f->id : -1;
}

static int is_byte_token(const struct tokenizer *t, int32_t id)
{
    const char *s = tok_text(t, id);
    return s && strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>';
}

int hp_build_pieces(struct http *h)
{
    int V = tok_n_vocab(h->tok), n = 0;
    h->pieces = calloc((size_t)V, sizeof *h->pieces);
    if (!h->pieces) return QG_ERR_NOMEM;
    for (int32_t id = 0; id < V; id++) {
        char buf[512];
        int len = tok_piece(h->tok, id, 0, buf, sizeof buf);
        if (len <= 0 || len >= (int)sizeof buf) continue;
        buf[len] = '\0';
        if (strlen(buf) != (size_t)len) continue; /* holds a NUL */
        if (!(h->pieces[n].text = qg_strdup(buf))) return QG_ERR_NOMEM;
        h->pieces[n++].id = id;
    }
    qsort(h->pieces, (size_t)n, sizeof *h->pieces, cmp_piece);
    /* one entry per text. A byte-fallback token ("<0x2C>") decodes to the
     * same text as the ordinary token (","): the ordinary one wins, as a
     * server names it; other shared texts map to -1 (unknown) */
    int w = 0;
    for (int i = 0; i < n; i++) {
        if (w && !strcmp(h->pieces[w - 1].text, h->pieces[i].text)) {
            int32_t a = h->pieces[w - 1].id, b = h->pieces[i].id;
            int byte_a = a >= 0 && is_byte_token(h->tok, a), byte_b = is_byte_token(h->tok, b);
            h->pieces[w - 1].id = a < 0 ? -1 : byte_a && !byte_b ? b : byte_b && !byte_a ? a : -1;
            free(h->pieces[i].text);
            continue;
        }
        h->pieces[w++] = h->pieces[i];
    }
    h->n_pieces = w;
    return QG_OK;
}

/* Remembers the text of id (len bytes) the first time it is seen. */
static int remember_piece(struct http *h, int32_t id, const char *text, int len)
{
    if (id < 0 || len < 0) return QG_OK;
    if (id >= h->n_spc) {
        int cap = h->n_vocab > 0 ? h->n_vocab : id + 1024;
        if (cap > (1 << 24)) cap = 1 << 24;
        if (id >= cap) return QG_OK; /* not remembered; asked again when needed */
        struct spiece *g = realloc(h->spc, (size_t)cap * sizeof *g);
        if (!g) return QG_ERR_NOMEM;
        memset(g + h->n_spc, 0, (size_t)(cap - h->n_spc) * sizeof *g);
        h->spc = g, h->n_spc = cap;
    }
    if (h->spc[id].text) return QG_OK;
    if (!(h->spc[id].text = malloc((size_t)len + 1))) return QG_ERR_NOMEM;
    memcpy(h->spc[id].text, text, (size_t)len);
    h->spc[id].text[len] = '\0';
    h->spc[id].len = len;
    return QG_OK;
}

/* A with_pieces piece: a string, or (text that is not UTF-8) its bytes. */
static int read_piece(const cJSON *p, char *buf, int cap)
{
    if (cJSON_IsString(p)) {
        int len = (int)strlen(p->valuestring);
        if (len > cap) return -1;
        memcpy(buf, p->valuestring, (size_t)len);
        return len;
    }
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) > cap) return -1;
    int len = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, p)
    {
        if (!cJSON_IsNumber(b) || b->valuedouble < 0 || b->valuedouble > 255 ||
            b->valuedouble != floor(b->valuedouble))
            return -1;
        buf[len++] = (char)(int)b->valuedouble;
    }
    return len;
}

static int parse_tokens(struct http *h, const char *url, const cJSON *ans, int32_t **ids,
                        int64_t *n_ids);

/* Tokenizes text (n bytes) on the server, through the cache unless live
 * (open()'s checks ask the server itself). *status: the last HTTP status
 * (404 or 405: no /tokenize). */
int hp_server_tokenize(struct http *h, const char *text, size_t n, int add, int live, int32_t **ids,
                       int64_t *n_ids, long *status)
{
    *ids = NULL;
    *n_ids = 0;
    *status = 0;
    char url[1100];
    snprintf(url, sizeof url, "%s/tokenize", h->root);
    if (memchr(text, '\0', n))
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: the text holds a NUL byte, which a JSON request cannot carry", url);
    char *copy = malloc(n + 1);
    if (!copy) return qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
    memcpy(copy, text, n);
    copy[n] = '\0';
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", h->model);
    cJSON_AddStringToObject(req, "content", copy); /* llama.cpp, qgate serve */
    cJSON_AddStringToObject(req, "prompt", copy);  /* vLLM, SGLang */
    cJSON_AddStringToObject(req, "inputs", copy);  /* TGI (it always adds BOS) */
    cJSON_AddBoolToObject(req, "add_special", add);
    cJSON_AddBoolToObject(req, "add_special_tokens", add);
    cJSON_AddTrueToObject(req, "with_pieces");
    free(copy);
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!body) return qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
    cJSON *ans;
    int rc =
        live ? hp_request(h, url, body, &ans, status) : hp_post_cached(h, url, body, &ans, status);
    free(body);
    if (rc) return rc;
    rc = parse_tokens(h, url, ans, ids, n_ids);
    cJSON_Delete(ans);
    return rc;
}

/* Reads a /tokenize answer: "tokens" as ids, or as {"id", "piece"} whose
 * pieces are remembered. QG_OK with *ids (malloc'd), or the error in h->err. */
static int parse_tokens(struct http *h, const char *url, const cJSON *ans, int32_t **ids,
                        int64_t *n_ids)
{
    int rc = QG_OK;
    /* TGI answers a bare array of {id, text, start, stop} */
    const cJSON *toks = cJSON_IsArray(ans) ? ans : cJSON_GetObjectItem(ans, "tokens"), *t;
    int m = cJSON_GetArraySize(toks);
    if (!cJSON_IsArray(toks))
        rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA, "%s: the answer has no \"tokens\" array",
                     url);
    else if (!(*ids = malloc((size_t)(m ? m : 1) * sizeof **ids)))
        rc = qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
    double limit = h->n_vocab > 0 ? h->n_vocab : 2147483647.0;
    const cJSON *walk = rc ? NULL : toks;
    cJSON_ArrayForEach(t, walk)
    {
        const cJSON *v = cJSON_IsObject(t) ? cJSON_GetObjectItem(t, "id") : t;
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= limit ||
            v->valuedouble != floor(v->valuedouble)) {
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                         "%s: token %lld of the answer is not a token id%s", url, (long long)*n_ids,
                         h->n_vocab > 0 ? " of the served vocabulary" : "");
            break;
        }
        int32_t id = (int32_t)v->valuedouble;
        (*ids)[(*n_ids)++] = id;
        char buf[1024];
        int len = cJSON_IsObject(t)
                      ? read_piece(cJSON_GetObjectItem(t, "piece"), buf, (int)sizeof buf)
                      : -1;
        if (len >= 0 && (rc = remember_piece(h, id, buf, len)))
            qg_errf(h->err, sizeof h->err, rc, "out of memory");
    }
    if (rc) free(*ids), *ids = NULL, *n_ids = 0;
    return rc;
}

int http_parse_tokenize(const char *json, size_t n, int n_vocab, int32_t **ids, int64_t *n_ids,
                        char *err, size_t errlen)
{
    struct http h;
    memset(&h, 0, sizeof h);
    h.n_vocab = n_vocab;
    *ids = NULL;
    *n_ids = 0;
    cJSON *ans = cJSON_ParseWithLength(json, n);
    int rc = ans ? parse_tokens(&h, "answer", ans, ids, n_ids)
                 : qg_errf(h.err, sizeof h.err, QG_ERR_DATA, "answer: not JSON");
    /* every remembered piece is whole: len bytes and a NUL */
    for (int32_t id = 0; !rc && id < h.n_spc; id++)
        if (h.spc[id].text && (h.spc[id].len < 0 || h.spc[id].text[h.spc[id].len] != '\0'))
            rc = QG_ERR_INTERNAL;
    cJSON_Delete(ans);
    for (int i = 0; i < h.n_spc; i++)
        free(h.spc[i].text);
    free(h.spc);
    if (rc) snprintf(err, errlen, "%s", h.err);
    return rc;
}

/* Detokenizes ids on the server: a malloc'd string, or NULL with h->err. */
char *hp_server_detokenize(struct http *h, const int32_t *ids, int64_t n)
{
    char url[1100];
    snprintf(url, sizeof url, "%s/detokenize", h->root);
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", h->model);
    cJSON *a = cJSON_AddArrayToObject(req, "tokens");
    for (int64_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!body) return qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory"), NULL;
    cJSON *ans;
    long status;
    int rc = hp_post_cached(h, url, body, &ans, &status);
    free(body);
    if (rc) return NULL;
    const cJSON *c = cJSON_GetObjectItem(ans, "content");           /* llama.cpp, qgate serve */
    if (!cJSON_IsString(c)) c = cJSON_GetObjectItem(ans, "prompt"); /* vLLM */
    char *out = cJSON_IsString(c) ? qg_strdup(c->valuestring) : NULL;
    if (!cJSON_IsString(c))
        qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                "%s: the answer has no \"content\" or \"prompt\" string", url);
    cJSON_Delete(ans);
    return out;
}

/* The text of id from the server: remembered, or learnt by detokenizing
 * [pair_a, id] and removing pair_a's own text (a lone SentencePiece piece
 * would lose its leading space); [id] alone when that does not fit. */
int hp_server_piece(struct http *h, int32_t id, char *buf, size_t cap)
{
    if (id < 0 || (h->n_vocab > 0 && id >= h->n_vocab)) return -1;
    if (id >= h->n_spc || !h->spc[id].text) {
        if (!h->pair_text && !(h->pair_text = hp_server_detokenize(h, &h->pair_a, 1)))
            return QG_ERR_UNAVAILABLE;
        int32_t two[2] = {h->pair_a, id};
        char *t = hp_server_detokenize(h, two, 2);
        if (!t) return QG_ERR_UNAVAILABLE;
        size_t pl = strlen(h->pair_text);
        const char *p = t + pl;
        char *alone = NULL;
        if (strncmp(t, h->pair_text, pl)) {
            if (!(alone = hp_server_detokenize(h, &id, 1))) return free(t), QG_ERR_UNAVAILABLE;
            p = alone;
        }
        int rc = remember_piece(h, id, p, (int)strlen(p));
        free(t), free(alone);
        if (rc) return rc;
        if (id >= h->n_spc || !h->spc[id].text)
            return QG_ERR_UNSUPPORTED; /* an id beyond any vocabulary */
    }
    int len = h->spc[id].len;
    memcpy(buf, h->spc[id].text, (size_t)len < cap ? (size_t)len : cap);
    return len;
}

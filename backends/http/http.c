/* http — a model behind an OpenAI-compatible server (vLLM, SGLang, TGI,
 * llama.cpp's server, `qgate serve`), over libcurl. This file: the spec,
 * opening and probing, scoring and generation; transport.c (requests,
 * retries), dialects.c (reading log-probs) and tokenize.c (the server's
 * tokenizer) do the rest.
 *
 * Spec: http(s)://HOST:PORT/v1?model=ID[&tokenizer=PATH.gguf][&api_key_env=VAR]
 *       [&timeout=SECONDS][&retries=N][&ctx=N][&concurrency=N][&chat=1]
 *
 * Scoring posts the window as token ids to /completions with echo, logprobs
 * and max_tokens 0 (1 when the server refuses 0; the generated token is then
 * dropped), and checks that the server scored exactly the ids sent. When
 * echo gives no prompt log-probs, vLLM's "prompt_logprobs" (keyed by token
 * id) is tried instead. Before anything is trusted, open() checks on a
 * sample that the server's /tokenize (when it has one) agrees with the local
 * tokenizer, and that the endpoint returns a log-prob for every prompt
 * token; an endpoint that does not is refused for scoring, never scored as
 * if it had answered.
 *
 * Without tokenizer=, the server tokenizes: POST /tokenize (llama.cpp's
 * {"content", "add_special", "with_pieces"} and vLLM's {"prompt",
 * "add_special_tokens"} in one body) and /detokenize; BOS is what
 * add_special puts in front of the sample. A token's text comes from
 * with_pieces when the server gives it, else from detokenizing it after a
 * fixed token and removing that token's text (so SentencePiece's leading
 * space is kept); pieces are remembered per id. Top-K log-probs then need
 * ids from the server (qgate serve's top_token_ids or vLLM's
 * prompt_logprobs): texts alone cannot be mapped to ids.
 *
 * Requests are retried with exponential backoff and jitter on connection
 * errors, timeouts, 408, 429 (honouring Retry-After), 500, 502, 503, 504
 * and bodies that are not complete JSON, up to `retries`; then the error
 * names the endpoint and the last status. An answer that says a parameter
 * is unsupported (llama-server's HTTP 500 "Unsupported param: echo", a
 * 501, a 400 "unknown parameter") is an answer about what the endpoint
 * can do: never retried, it makes the probe try the next scoring route. The API key (from VAR, else
 * QGATE_API_KEY, else OPENAI_API_KEY) is sent only as a bearer header and appears in no message.
 *
 * Scoring requests given together (backend_score_many) are kept up to
 * `concurrency` (default 8) in flight over shared connections.
 *
 * chat=1 sends generation tasks to /chat/completions as one user message
 * (the server's chat template applies); scoring always uses /completions.
 * The template's tokens count against the context: open() renders a sample
 * message through the server's /apply-template (llama.cpp's server, qgate
 * serve) and tokenizes both, and the context it reports is smaller by the
 * difference plus HTTP_CHAT_SLACK; a server without /apply-template gets
 * HTTP_CHAT_RESERVE positions reserved (chat_reserve=N sets it).
 *
 * Scoring answers are cached through backend_open_params.cache (the
 * store's http_cache), keyed by sha256 of the request-format version, the
 * endpoint URL, the served model id and the full request body; scoring
 * requests are deterministic (temperature 0, echo, no sampling). Generation
 * is never cached.
 *
 * Tokenization, detokenization and piece requests are deterministic and
 * cached the same way.
 */
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

static void http_close(void *impl)
{
    struct http *h = impl;
    if (!h) return;
    if (h->curl) curl_easy_cleanup(h->curl);
    if (h->multi) curl_multi_cleanup(h->multi);
    for (int i = 0; i < h->n_idle; i++)
        curl_easy_cleanup(h->idle[i]);
    curl_slist_free_all(h->headers);
    if (h->key) memset(h->key, 0, strlen(h->key));
    free(h->key);
    free(h->models_json);
    free(h->prov);
    tok_free(h->tok);
    for (int i = 0; i < h->n_pieces; i++)
        free(h->pieces[i].text);
    free(h->pieces);
    for (int i = 0; i < h->n_spc; i++)
        free(h->spc[i].text);
    free(h->spc);
    free(h->pair_text);
    sbuf_release(&h->reply.body);
    free(h);
}

static char *http_detokenize(void *impl, const int32_t *ids, int64_t n);

static int http_tokenize(void *impl, const char *text, size_t n, int add_special, int32_t **ids,
                         int64_t *n_ids);

static int http_info(void *impl, struct backend_info *o);

int hp_http_piece(void *impl, int32_t id, char *buf, size_t cap);

/* The body of a request scoring ids (malloc'd; NULL with h->err). As text,
 * a leading BOS is left to the server, which adds it to a text prompt. */
static char *score_body(struct http *h, const int32_t *ids, int n, int from, int top_k)
{
    if (h->api) return hp_native_body(h, ids, n, from, top_k);
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", h->model);
    if (h->text_prompt) {
        char *text = hp_prompt_text(h, ids, n);
        if (!text) {
            cJSON_Delete(req);
            return NULL;
        }
        cJSON_AddStringToObject(req, "prompt", text);
        free(text);
    } else {
        cJSON *p = cJSON_AddArrayToObject(req, "prompt");
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(p, cJSON_CreateNumber(ids[i]));
    }
    if (h->plp) { /* vLLM: the prompt's log-probs by id; it generates one token */
        cJSON_AddNumberToObject(req, "prompt_logprobs", top_k > 0 ? top_k : 0);
        cJSON_AddNumberToObject(req, "max_tokens", 1);
    } else {
        cJSON_AddTrueToObject(req, "echo");
        cJSON_AddNumberToObject(req, "logprobs", top_k > 0 ? top_k : 0);
        cJSON_AddNumberToObject(req, "max_tokens", h->max_tokens_one);
    }
    cJSON_AddNumberToObject(req, "temperature", 0);
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    return body;
}

/* Scores n requests with up to h->concurrency in flight, each retried on
 * its own; the first refusal or exhausted retries stops them all. */
/* Builds each request's body; answers found in the cache are parsed and
 * their transfers marked done (*finished counts them). keys (NULL without
 * a cache) receives each body's cache key. */
static int score_prepare(struct http *h, const char *url, struct backend_score *reqs, int n,
                         struct xfer *x, char (*keys)[HASH_HEX_LEN + 1], int *finished)
{
    for (int j = 0; j < n; j++) {
        h->err[0] = '\0';
        if (!(x[j].body =
                  score_body(h, reqs[j].tokens, reqs[j].n_tokens, reqs[j].from, reqs[j].top_k))) {
            if (h->err[0])
                return QG_ERR_UNAVAILABLE; /* the server could not detokenize a text prompt */
            return qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
        }
        if (!keys) continue;
        hp_cache_key(h, url, x[j].body, keys[j]);
        char *hit = h->cache.get(h->cache.ud, keys[j]);
        cJSON *ans = hit ? cJSON_Parse(hit) : NULL;
        if (ans && hp_parse_score(h, url, ans, &reqs[j]) == QG_OK) x[j].done = 1, (*finished)++;
        cJSON_Delete(ans);
        free(hit);
    }
    return QG_OK;
}

/* One finished transfer t (request j): parsed and cached, a retry
 * scheduled with backoff, or the error that ends the batch. */
static int score_finished(struct http *h, const char *url, CURLMsg *msg, struct xfer *x,
                          struct backend_score *reqs, char (*keys)[HASH_HEX_LEN + 1], int *active,
                          int *finished)
{
    struct xfer *t;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
    CURLcode cc = msg->data.result;
    long code = 0;
    curl_easy_getinfo(t->e, CURLINFO_RESPONSE_CODE, &code);
    curl_multi_remove_handle(h->multi, t->e);
    if (h->n_idle < (int)(sizeof h->idle / sizeof *h->idle))
        h->idle[h->n_idle++] = t->e, t->e = NULL;
    t->active = 0;
    (*active)--;
    int j = (int)(t - x), rc = QG_OK;
    cJSON *ans;
    int v = hp_judge(h, url, cc, code, &t->reply, &ans, t->last, sizeof t->last);
    if (v == QG_OK) {
        if (!(rc = hp_parse_score(h, url, ans, &reqs[j]))) {
            t->done = 1, (*finished)++;
            if (keys) h->cache.put(h->cache.ud, keys[j], url, h->model, t->reply.body.data);
        }
        cJSON_Delete(ans);
    } else if (v != TRY_AGAIN) {
        rc = v;
    } else if (++t->attempts > h->retries) {
        rc = qg_errf(h->err, sizeof h->err, QG_ERR_UNAVAILABLE,
                     "%s: no answer after %d attempts; last: %s", url, h->retries + 1, t->last);
    } else {
        t->not_before = qg_now_s() + hp_backoff(h, t->attempts, t->reply.retry_after);
    }
    return rc;
}

/* Starts what may start now (up to the concurrency); *soonest is when the
 * next one waiting for its backoff may. */
static int score_start(struct http *h, const char *url, struct xfer *x, int n, int *active,
                       double *soonest)
{
    double now = qg_now_s();
    *soonest = INFINITY;
    for (int j = 0; j < n && *active < h->concurrency; j++) {
        if (x[j].done || x[j].active) continue;
        if (x[j].not_before > now) {
            *soonest = fmin(*soonest, x[j].not_before);
            continue;
        }
        int rc = hp_x_start(h, h->multi, &x[j], url);
        if (rc) return qg_errf(h->err, sizeof h->err, rc, "%s: cannot start a request", url);
        (*active)++;
    }
    return QG_OK;
}

static int score_many(struct http *h, struct backend_score *reqs, int n)
{
    char url[1100];
    if (h->api) /* SGLang's and TGI's own route */
        snprintf(url, sizeof url, "%s/generate", h->root);
    else
        snprintf(url, sizeof url, "%s/completions", h->base);
    struct xfer *x = calloc((size_t)n, sizeof *x);
    if (!x) return qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
    int rc = QG_OK, active = 0, finished = 0;
    char(*keys)[HASH_HEX_LEN + 1] = h->cache.get ? calloc((size_t)n, sizeof *keys) : NULL;
    if (h->cache.get && !keys) rc = qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
    if (!rc) rc = score_prepare(h, url, reqs, n, x, keys, &finished);
    while (!rc && finished < n) {
        double soonest;
        if ((rc = score_start(h, url, x, n, &active, &soonest))) break;
        int running, left;
        curl_multi_perform(h->multi, &running);
        CURLMsg *msg;
        while (!rc && (msg = curl_multi_info_read(h->multi, &left)))
            if (msg->msg == CURLMSG_DONE)
                rc = score_finished(h, url, msg, x, reqs, keys, &active, &finished);
        if (rc || finished == n) break;
        if (active)
            curl_multi_poll(h->multi, NULL, 0, 50, NULL);
        else if (soonest < INFINITY)
            usleep((useconds_t)(fmax(0, fmin(soonest - qg_now_s(), 1.0)) * 1e6) + 1000);
    }
    free(keys);
    for (int j = 0; j < n; j++) {
        if (x[j].active) curl_multi_remove_handle(h->multi, x[j].e);
        if (x[j].e) curl_easy_cleanup(x[j].e);
        free(x[j].body);
        sbuf_release(&x[j].reply.body);
    }
    free(x);
    return rc;
}

/* One request scoring ids; fills lp[from..n-1]. */
int hp_score_ids(struct http *h, const int32_t *ids, int n, int from, double *lp)
{
    struct backend_score r = {.tokens = ids, .n_tokens = n, .from = from, .logprob = lp};
    return score_many(h, &r, 1);
}

static int parse_spec(struct http *h, const char *spec, char *tokpath, size_t tokcap, char *keyvar,
                      size_t keycap, char *err, size_t errlen)
{
    const char *q = strchr(spec, '?');
    size_t blen = q ? (size_t)(q - spec) : strlen(spec);
    while (blen > 0 && spec[blen - 1] == '/')
        blen--;
    if (blen >= sizeof h->base)
        return qg_errf(err, errlen, QG_ERR_USAGE, "model spec URL too long");
    memcpy(h->base, spec, blen);
    h->base[blen] = '\0';
    snprintf(h->root, sizeof h->root, "%s", h->base);
    size_t rl = strlen(h->root);
    if (rl >= 3 && !strcmp(h->root + rl - 3, "/v1")) h->root[rl - 3] = '\0';
    char *query = qg_strdup(q ? q + 1 : ""), *save = NULL;
    int rc = QG_OK;
    for (char *kv = strtok_r(query, "&", &save); kv && !rc; kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            rc = qg_errf(err, errlen, QG_ERR_USAGE, "%s: query part '%s' is not KEY=VALUE", h->base,
                         kv);
            break;
        }
        *eq = '\0';
        const char *v = eq + 1;
        int64_t iv;
        if (!strcmp(kv, "model"))
            snprintf(h->model, sizeof h->model, "%s", v);
        else if (!strcmp(kv, "tokenizer"))
            snprintf(tokpath, tokcap, "%s", v);
        else if (!strcmp(kv, "api_key_env"))
            snprintf(keyvar, keycap, "%s", v);
        else if (!strcmp(kv, "timeout") && !qg_parse_i64(v, 1, 86400, &iv))
            h->timeout = (double)iv;
        else if (!strcmp(kv, "retries") && !qg_parse_i64(v, 0, 100, &iv))
            h->retries = (int)iv;
        else if (!strcmp(kv, "ctx") && !qg_parse_i64(v, 2, 1 << 24, &iv))
            h->n_ctx = (int)iv, h->ctx_user = 1;
        else if (!strcmp(kv, "concurrency") && !qg_parse_i64(v, 1, 256, &iv))
            h->concurrency = (int)iv;
        else if (!strcmp(kv, "chat") && !qg_parse_i64(v, 0, 1, &iv))
            h->chat = (int)iv;
        else if (!strcmp(kv, "chat_reserve") && !qg_parse_i64(v, 0, 1 << 20, &iv))
            h->chat_reserve = (int)iv;
        else if (!strcmp(kv, "api") &&
                 (!strcmp(v, "openai") || !strcmp(v, "sglang") || !strcmp(v, "tgi")))
            h->api = !strcmp(v, "sglang") ? HP_API_SGLANG
                     : !strcmp(v, "tgi")  ? HP_API_TGI
                                          : 0,
            h->api_set = 1;
        else
            rc = qg_errf(err, errlen, QG_ERR_USAGE,
                         "%s: bad query parameter '%s=%s' (known: model, tokenizer=PATH.gguf, "
                         "api_key_env=VAR, timeout=SECONDS, "
                         "retries=N, ctx=N, concurrency=N, chat=0|1, chat_reserve=N, "
                         "api=openai|sglang|tgi)",
                         h->base, kv, v);
    }
    free(query);
    return rc;
}

/* Setup: the spec, the local tokenizer (when given), the key, curl. */
static int open_setup(struct http *h, const char *spec, char *tokpath, size_t tplen, char *err,
                      size_t errlen)
{
    char keyvar[128] = "";
    int rc = parse_spec(h, spec, tokpath, tplen, keyvar, sizeof keyvar, err, errlen);
    if (!rc && *tokpath) {
        struct gguf *g;
        rc = gguf_open(tokpath, &g, err, errlen);
        if (!rc) {
            rc = tok_load(g, tokpath, &h->tok, err, errlen);
            gguf_close(g);
        }
    }
    if (!rc && h->tok && (rc = hp_build_pieces(h))) qg_errf(err, errlen, rc, "out of memory");
    const char *key = NULL;
    if (!rc) rc = hp_api_key(h, keyvar, &key, err, errlen);
    if (!rc) rc = hp_open_curl(h, key, err, errlen);
    return rc;
}

static int http_open(const char *spec, const struct backend_open_params *bp, void **impl, char *err,
                     size_t errlen)
{
    *impl = NULL;
    struct http *h = calloc(1, sizeof *h);
    if (!h) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    h->retries = 8;
    h->chat_reserve = -1;
    h->timeout = 600;
    h->concurrency = 8;
    h->rng = (uint64_t)time(NULL) ^ (uint64_t)getpid();
    if (bp && bp->cache && bp->cache->get && bp->cache->put) h->cache = *bp->cache;
    sbuf_init(&h->reply.body, HTTP_MAX_RESPONSE);
    char tokpath[4096] = "";
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    int rc = open_setup(h, spec, tokpath, sizeof tokpath, err, errlen);
    if (!rc) rc = hp_probe_models(h, tokpath, err, errlen);
    if (!rc) hp_probe_context(h);
    if (!h->n_ctx) h->n_ctx = 2048;
    if (!rc) rc = hp_check_tokenizer(h, tokpath, &ids, &n_ids, err, errlen);
    if (!rc) rc = hp_probe_scoring(h, ids, n_ids, err, errlen);
    if (!rc) hp_chat_overhead(h, hp_open_sample);
    if (!rc && !(h->prov = hp_provenance(h)))
        rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    free(ids);
    if (rc) {
        http_close(h);
        return rc;
    }
    *impl = h;
    return QG_OK;
}

static int http_info(void *impl, struct backend_info *o)
{
    struct http *h = impl;
    memset(o, 0, sizeof *o);
    o->n_vocab = h->tok ? tok_n_vocab(h->tok) : h->n_vocab;
    o->provenance = h->prov;
    o->n_ctx_train = h->chat && h->chat_reserve > 0 && h->n_ctx > h->chat_reserve + 1
                         ? h->n_ctx - h->chat_reserve
                         : h->n_ctx;
    o->bos = h->tok ? tok_bos(h->tok) : h->bos;
    o->eos = h->tok ? tok_eos(h->tok) : h->eos;
    o->add_bos = h->tok ? tok_add_bos(h->tok) : h->add_bos;
    o->arch = "http";
    o->caps = BACKEND_CAP_TOKENIZE | BACKEND_CAP_GENERATE |
              (h->can_score ? BACKEND_CAP_SCORE | BACKEND_CAP_TOP_K : 0);
    return QG_OK;
}

static const char *http_errmsg(void *impl)
{
    return ((struct http *)impl)->err;
}

static int http_tokenize(void *impl, const char *text, size_t n, int add_special, int32_t **ids,
                         int64_t *n_ids)
{
    struct http *h = impl;
    long status;
    if (!h->tok)
        return hp_server_tokenize(h, text, n, add_special & BACKEND_TOK_ADD_SPECIAL, 0, ids, n_ids,
                                  &status);
    return tok_encode(h->tok, text, n, add_special & BACKEND_TOK_ADD_SPECIAL,
                      (add_special & BACKEND_TOK_PARSE_SPECIAL) != 0, ids, n_ids);
}

/* the local tokenizer's entry (tokenizer=PATH.gguf); NULL without one */
static const char *http_vocab_text(void *impl, int32_t id)
{
    struct http *h = impl;
    return h->tok ? tok_text(h->tok, id) : NULL;
}

static char *http_detokenize(void *impl, const int32_t *ids, int64_t n)
{
    struct http *h = impl;
    return h->tok ? tok_decode(h->tok, ids, n, 0) : hp_server_detokenize(h, ids, n);
}

int hp_http_piece(void *impl, int32_t id, char *buf, size_t cap)
{
    struct http *h = impl;
    return h->tok ? tok_piece(h->tok, id, 0, buf, cap) : hp_server_piece(h, id, buf, cap);
}

static int http_score(void *impl, struct backend_score *r)
{
    struct http *h = impl;
    if (r->argmax)
        return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                       "%s: top-1 predictions need full rows, which an HTTP endpoint does not give",
                       h->base);
    if (!h->can_score)
        return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                       "%s: this endpoint returns no log-probs for prompt tokens, so it cannot run "
                       "log-likelihood tasks",
                       h->base);
    if (r->n_tokens < 2 || r->from < 1 || r->from >= r->n_tokens)
        return qg_errf(h->err, sizeof h->err, QG_ERR_USAGE, "score: bad window (%d tokens from %d)",
                       r->n_tokens, r->from);
    return score_many(h, r, 1);
}

static int http_score_many(void *impl, struct backend_score *reqs, int n)
{
    struct http *h = impl;
    if (!h->can_score)
        return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                       "%s: this endpoint returns no log-probs for prompt tokens, so it cannot run "
                       "log-likelihood tasks",
                       h->base);
    for (int i = 0; i < n; i++)
        if (reqs[i].argmax || reqs[i].n_tokens < 2 || reqs[i].from < 1 ||
            reqs[i].from >= reqs[i].n_tokens)
            return qg_errf(h->err, sizeof h->err, QG_ERR_USAGE,
                           "score: request %d is not a window an endpoint can score", i);
    return score_many(h, reqs, n);
}

static int http_generate(void *impl, const int32_t *prompt, int64_t n_prompt,
                         const struct backend_gen_params *p, char **text, int32_t **ids,
                         int64_t *n_ids)
{
    struct http *h = impl;
    *text = NULL;
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", h->model);
    if (h->chat) { /* one user message: the prompt's text (the server applies its template) */
        char *text_in = http_detokenize(h, prompt, n_prompt);
        cJSON *msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "role", "user");
        cJSON_AddStringToObject(msg, "content", text_in ? text_in : "");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "messages"), msg);
        free(text_in);
    } else {
        cJSON *pa = cJSON_AddArrayToObject(req, "prompt");
        for (int64_t i = 0; i < n_prompt; i++)
            cJSON_AddItemToArray(pa, cJSON_CreateNumber(prompt[i]));
    }
    cJSON_AddNumberToObject(req, "max_tokens", p->max_tokens);
    cJSON_AddNumberToObject(req, "temperature", p->temperature);
    cJSON_AddNumberToObject(req, "top_p", p->top_p);
    cJSON_AddNumberToObject(req, "seed", (double)p->seed);
    if (p->n_bias) { /* {"id": bias} */
        cJSON *lb = cJSON_AddObjectToObject(req, "logit_bias");
        for (int i = 0; i < p->n_bias; i++) {
            char key[16];
            snprintf(key, sizeof key, "%d", (int)p->bias_ids[i]);
            cJSON_AddNumberToObject(lb, key, p->bias[i]);
        }
    }
    if (p->n_stop) {
        cJSON *st = cJSON_AddArrayToObject(req, "stop");
        for (int i = 0; i < p->n_stop; i++)
            cJSON_AddItemToArray(st, cJSON_CreateString(p->stop[i]));
    }
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!body) return qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
    char url[1100];
    snprintf(url, sizeof url, "%s/%s", h->base, h->chat ? "chat/completions" : "completions");
    cJSON *r;
    long status;
    int rc = hp_request(h, url, body, &r, &status);
    free(body);
    if (rc) return rc;
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "choices"), 0);
    const cJSON *t = h->chat ? cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "message"), "content")
                             : cJSON_GetObjectItem(ch, "text");
    const cJSON *pt = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "usage"), "prompt_tokens");
    hp_note_fingerprint(h, r);
    if (!h->chat && cJSON_IsNumber(pt) && pt->valuedouble != (double)n_prompt)
        /* the server read another prompt than the one sent: cut, or its context shifted */
        rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                     "%s: the server counted %.0f prompt tokens of the %lld sent: it truncated "
                     "the prompt or shifted its context (llama-server gives each slot -c / -np "
                     "positions; qgate fits prompts to %d). The answer is not used; give a larger "
                     "server context or ctx=N in the model spec",
                     url, pt->valuedouble, (long long)n_prompt, h->n_ctx);
    else if (!cJSON_IsString(t))
        rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA, "%s: the answer has no %s", url,
                     h->chat ? "choices[0].message.content" : "choices[0].text");
    else if (!(*text = qg_strdup(t->valuestring)))
        rc = QG_ERR_NOMEM;
    if (!rc && ids && n_ids) rc = http_tokenize(h, *text, strlen(*text), 0, ids, n_ids);
    cJSON_Delete(r);
    return rc;
}

int hp_tokenize(struct http *h, const char *text, size_t n, int add_special, int32_t **ids,
                int64_t *n_ids)
{
    return http_tokenize(h, text, n, add_special, ids, n_ids);
}

char *hp_prompt_text(struct http *h, const int32_t *ids, int n)
{
    struct backend_info bi;
    http_info(h, &bi);
    int skip = n > 0 && bi.add_bos && ids[0] == bi.bos;
    return http_detokenize(h, ids + skip, n - skip);
}

const struct backend_ops backend_http_ops = {
    .version = BACKEND_API_VERSION,
    .name = "http",
    .caps = BACKEND_CAP_TOKENIZE | BACKEND_CAP_SCORE | BACKEND_CAP_GENERATE | BACKEND_CAP_TOP_K,
    .open = http_open,
    .close = http_close,
    .info = http_info,
    .errmsg = http_errmsg,
    .tokenize = http_tokenize,
    .detokenize = http_detokenize,
    .piece = hp_http_piece,
    .score = http_score,
    .generate = http_generate,
    .score_many = http_score_many,
    .vocab_text = http_vocab_text,
};

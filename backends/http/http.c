/* http — a model behind an OpenAI-compatible server (vLLM, SGLang, TGI,
 * llama.cpp's server, `qgate serve`), over libcurl.
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

#define HTTP_MAX_RESPONSE ((size_t)256 << 20)

/* An answer being read: its body (capped), and the server's Retry-After. */
struct reply {
    struct sbuf body;
    int too_big;
    double retry_after; /* seconds; < 0 when not given */
};

struct http {
    CURL *curl;      /* single requests (models, tokenize, generate) */
    CURLM *multi;    /* scoring: many in flight, sharing connections */
    CURL *idle[256]; /* scoring handles between requests, reused */
    int n_idle;
    int concurrency;
    int chat;                   /* generate through /chat/completions */
    struct backend_cache cache; /* .get NULL: none */
    struct curl_slist *headers;
    char *key; /* the API key, only to redact it from what a server echoes; zeroed at close */
    char fp[HASH_HEX_LEN + 1]; /* the server's fingerprint: model list + live probe log-probs */
    char *models_json;         /* the model list as answered at open (for the fingerprint) */
    char base[1024];           /* ...../v1 */
    char root[1024];           /* base without /v1, for /tokenize */
    char model[256];
    struct tokenizer *tok; /* NULL: the server tokenizes */
    /* the server's tokenizer: vocabulary size (0: unknown), specials, and
     * each id's text as learnt (NULL until then) */
    int n_vocab, add_bos;
    int32_t bos, eos;
    struct spiece {
        char *text;
        int len;
    } * spc;
    int n_spc;
    int32_t pair_a;  /* the fixed token detokenized before an unknown one */
    char *pair_text; /* its text alone (NULL: not yet known) */
    int plp;         /* score through vLLM's prompt_logprobs */
    int text_prompt; /* the server takes no token ids: prompts go as text */
    /* decoded piece text -> id, sorted by text, for reading top_logprobs
     * (keyed by text); an id of -1 marks text that several ids share */
    struct piece_id {
        char *text;
        int32_t id;
    } * pieces;
    int n_pieces;
    int n_ctx, retries, max_tokens_one, can_score;
    int chat_reserve; /* chat=1: positions the template takes (-1: measure at open) */
    double timeout;
    uint64_t rng;
    char err[QG_ERRMSG_MAX];
    struct reply reply; /* of the single-request handle */
};

static void reply_reset(struct reply *r)
{
    sbuf_release(&r->body);
    sbuf_init(&r->body, HTTP_MAX_RESPONSE);
    r->too_big = 0;
    r->retry_after = -1;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct reply *r = ud;
    if (sbuf_append(&r->body, p, size * n)) {
        r->too_big = 1;
        return 0;
    }
    return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct reply *r = ud;
    size_t len = size * n;
    if (len > 12 && !strncasecmp(p, "Retry-After:", 12)) {
        char buf[32]; /* the header line is not NUL-terminated */
        size_t k = len - 12 < sizeof buf - 1 ? len - 12 : sizeof buf - 1;
        memcpy(buf, p + 12, k);
        buf[k] = '\0';
        double v = strtod(buf, NULL);
        if (v >= 0 && v < 3600) r->retry_after = v;
    }
    return len;
}

static double jitter(struct http *h)
{
    h->rng = h->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(h->rng >> 11) / 9007199254740992.0;
}

/* Seconds to wait before retry number attempt (1, 2, ...): exponential with
 * jitter, capped at 2 s, and at least what the server asked for. */
static double backoff(struct http *h, int attempt, double retry_after)
{
    double wait = fmin(2.0, 0.05 * (double)(1 << (attempt < 6 ? attempt : 6))) * (0.5 + jitter(h));
    return retry_after >= 0 ? fmax(wait * 0.1, retry_after) : wait;
}

enum { TRY_AGAIN = 1 };

/* 1 when an error message says that a parameter or feature is not
 * supported: an answer about what the server can do, whatever the status
 * (llama-server answers "Unsupported param: echo" with HTTP 500). */
static int says_unsupported(const char *m)
{
    static const char *const marks[] = {"unsupported",
                                        "not supported",
                                        "not implemented",
                                        "unknown parameter",
                                        "unrecognized",
                                        "extra inputs are not permitted",
                                        "extra fields not permitted",
                                        "is not allowed"};
    for (size_t i = 0; i < sizeof marks / sizeof *marks; i++)
        if (strcasestr(m, marks[i])) return 1;
    return 0;
}

/* Judges a finished transfer: QG_OK with *ans (HTTP 200 with JSON);
 * TRY_AGAIN with the reason in last (a transport error or timeout, 408,
 * 429, 500 without a message saying what is unsupported, 502, 503, 504, a
 * 200 body that is not complete JSON); QG_ERR_UNSUPPORTED for an answer
 * that a parameter is unsupported (any status, and 501), never retried;
 * else a refusal, in h->err. */
/* The lowest log-prob qgate accepts from a server (nats): below it (or
 * above 0, or not finite) the number is impossible, not a rare token. */
#define HTTP_LOGPROB_FLOOR (-1e4)

static int sane_logprob(double v)
{
    return isfinite(v) && v <= 0 && v >= HTTP_LOGPROB_FLOOR;
}

/* Replaces every occurrence of the API key in s by "[redacted]": a server
 * may echo the Authorization header in an error body. */
static void redact_key(const struct http *h, char *s, size_t cap)
{
    size_t kl = h->key ? strlen(h->key) : 0;
    if (kl < 4) return;
    for (char *p = strstr(s, h->key); p; p = strstr(p, h->key)) {
        static const char mark[] = "[redacted]";
        size_t at = (size_t)(p - s), tail = strlen(p + kl), ml = sizeof mark - 1;
        if (at + ml + 1 > cap) { /* no room for the mark: cut the text here */
            *p = '\0';
            break;
        }
        if (at + ml + tail + 1 > cap) tail = cap - 1 - at - ml;
        memmove(p + ml, p + kl, tail);
        memcpy(p, mark, ml);
        p[ml + tail] = '\0';
        p += ml;
    }
}

static int judge(struct http *h, const char *url, CURLcode cc, long code, const struct reply *r,
                 cJSON **ans, char *last, size_t lastlen)
{
    *ans = NULL;
    if (r->too_big)
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA, "%s: response larger than %zu bytes",
                       url, HTTP_MAX_RESPONSE);
    if (cc != CURLE_OK) {
        snprintf(last, lastlen, "%s", curl_easy_strerror(cc));
        return TRY_AGAIN;
    }
    cJSON *j = r->body.len ? cJSON_ParseWithLength(r->body.data, r->body.len) : NULL;
    if (code == 200) {
        if (j) {
            *ans = j;
            return QG_OK;
        }
        snprintf(last, lastlen, "HTTP 200 with a body that is not complete JSON (%zu bytes)",
                 r->body.len);
        return TRY_AGAIN;
    }
    const cJSON *e = cJSON_GetObjectItem(j, "error"), *em = cJSON_GetObjectItem(e, "message");
    if (!e) em = cJSON_GetObjectItem(j, "message");       /* vLLM: {"object": "error", "message"} */
    if (!e && !em) em = cJSON_GetObjectItem(j, "detail"); /* FastAPI */
    const char *m = cJSON_IsString(em) ? em->valuestring : cJSON_IsString(e) ? e->valuestring : "";
    snprintf(last, lastlen, "HTTP %ld%s%.300s", code, *m ? ": " : "", m);
    redact_key(h, last, lastlen);
    cJSON_Delete(j);
    if (code == 501 || says_unsupported(last)) /* m went with j: last holds it */
        return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED, "%s: %s", url, last);
    if (code == 408 || code == 429 || code == 500 || code == 502 || code == 503 || code == 504)
        return TRY_AGAIN;
    int rc = code == 401 || code == 403 ? QG_ERR_UNAVAILABLE : QG_ERR_DATA;
    return qg_errf(h->err, sizeof h->err, rc, "%s: %s", url, last);
}

/* POSTs body (or GETs when body is NULL) to url and parses the JSON answer.
 * Retries what is worth retrying. QG_OK with *out, else an error in h->err
 * (QG_ERR_UNAVAILABLE after the retries, QG_ERR_DATA / QG_ERR_USAGE for a
 * refusal, with *status the last HTTP status). */
static int request(struct http *h, const char *url, const char *body, cJSON **out, long *status)
{
    *out = NULL;
    *status = 0;
    char last[512] = "";
    for (int attempt = 0; attempt <= h->retries; attempt++) {
        if (attempt) usleep((useconds_t)(backoff(h, attempt, h->reply.retry_after) * 1e6));
        reply_reset(&h->reply);
        curl_easy_setopt(h->curl, CURLOPT_URL, url);
        if (body) {
            curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        } else {
            curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
        }
        CURLcode cc = curl_easy_perform(h->curl);
        long code = 0;
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &code);
        *status = code;
        int v = judge(h, url, cc, code, &h->reply, out, last, sizeof last);
        if (v != TRY_AGAIN) return v;
    }
    qg_errf(h->err, sizeof h->err, QG_ERR_UNAVAILABLE, "%s: no answer after %d attempts; last: %s",
            url, h->retries + 1, last);
    return QG_ERR_UNAVAILABLE;
}

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
static int http_piece(void *impl, int32_t id, char *buf, size_t cap);

/* The body of a request scoring ids (malloc'd; NULL with h->err). As text,
 * a leading BOS is left to the server, which adds it to a text prompt. */
static char *score_body(struct http *h, const int32_t *ids, int n, int top_k)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", h->model);
    if (h->text_prompt) {
        struct backend_info bi;
        http_info(h, &bi);
        int skip = n > 0 && bi.add_bos && ids[0] == bi.bos;
        char *text = http_detokenize(h, ids + skip, n - skip);
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

static int cmp_piece(const void *a, const void *b)
{
    return strcmp(((const struct piece_id *)a)->text, ((const struct piece_id *)b)->text);
}

/* the id whose decoded text is text; -1 when none or several */
static int32_t piece_lookup(const struct http *h, const char *text)
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

static int build_pieces(struct http *h)
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

/* A log-prob from an answer as a float (out-of-range values saturate:
 * converting them is undefined). */
static float lp_float(double d)
{
    return d < -3.0e38 ? -INFINITY : d > 3.0e38 ? INFINITY : (float)d;
}

/* Inserts (id, v) into the top-K lists ids/lp (most likely first), keeping
 * k entries. */
static void top_insert(int32_t *ids, float *lp, int k, int32_t id, float v)
{
    int j = k - 1;
    if (!(v > lp[j])) return;
    while (j > 0 && lp[j - 1] < v)
        lp[j] = lp[j - 1], ids[j] = ids[j - 1], j--;
    lp[j] = v, ids[j] = id;
}

/* A log-prob of vLLM's prompt_logprobs: {"logprob": x, ...} or a bare x. */
static const cJSON *plp_value(const cJSON *e)
{
    return cJSON_IsObject(e) ? cJSON_GetObjectItem(e, "logprob") : e;
}

/* Reads vLLM's choices[0].prompt_logprobs: [null, {"ID": {"logprob": x,
 * "rank": r, ...}, ...}, ...], one entry per prompt token, each holding the
 * token sent and the top-K. */
static int parse_plp(struct http *h, const char *url, const cJSON *plp,
                     const struct backend_score *r)
{
    int n = r->n_tokens, m = cJSON_GetArraySize(plp);
    if (m != n)
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: sent %d prompt ids, got %d prompt_logprobs back: the endpoint "
                       "re-tokenized the prompt",
                       url, n, m);
    int i = 0;
    const cJSON *pos;
    cJSON_ArrayForEach(pos, plp)
    {
        if (i < r->from) {
            i++;
            continue;
        }
        char key[16];
        snprintf(key, sizeof key, "%d", (int)r->tokens[i]);
        const cJSON *v = plp_value(cJSON_GetObjectItemCaseSensitive(pos, key));
        if (!cJSON_IsObject(pos))
            return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                           "%s: no prompt_logprobs for prompt token %d: this endpoint cannot score "
                           "prompts, so it cannot run "
                           "log-likelihood tasks",
                           url, i);
        if (!cJSON_IsNumber(v) || !sane_logprob(v->valuedouble))
            return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                           "%s: prompt_logprobs[%d] has no possible log-prob for the token sent "
                           "(id %s)",
                           url, i, key);
        r->logprob[i - r->from] = v->valuedouble;
        if (r->top_k > 0) {
            int32_t *ids_out = r->top_ids + (size_t)(i - r->from) * (size_t)r->top_k;
            float *lp_out = r->top_lp + (size_t)(i - r->from) * (size_t)r->top_k;
            for (int k = 0; k < r->top_k; k++)
                ids_out[k] = -1, lp_out[k] = -INFINITY;
            const cJSON *e;
            cJSON_ArrayForEach(e, pos)
            {
                const cJSON *ev = plp_value(e);
                char *end;
                long id = e->string ? strtol(e->string, &end, 10) : -1;
                if (!e->string || *end || id < 0 ||
                    (h->n_vocab > 0 ? id >= h->n_vocab : id >= 2147483647L) ||
                    !cJSON_IsNumber(ev) || !sane_logprob(ev->valuedouble))
                    return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                                   "%s: prompt_logprobs[%d] lists an impossible entry (%s: %g)",
                                   url, i, e->string ? e->string : "?",
                                   cJSON_IsNumber(ev) ? ev->valuedouble : NAN);
                /* the token sent is listed even when outside the top-K; as
                 * the least likely entry it falls off the list */
                top_insert(ids_out, lp_out, r->top_k, (int32_t)id, lp_float(ev->valuedouble));
            }
        }
        i++;
    }
    return QG_OK;
}

/* Walks a cJSON array by increasing index in O(1) a step (cJSON's
 * GetArrayItem walks from the start: quadratic over a 2048-token window). */
struct cursor {
    const cJSON *at;
    int i;
};

static struct cursor cursor_of(const cJSON *a)
{
    return (struct cursor){cJSON_IsArray(a) ? a->child : NULL, 0};
}

/* item i (>= the last asked), or NULL past the end */
static const cJSON *cursor_get(struct cursor *c, int i)
{
    while (c->at && c->i < i)
        c->at = c->at->next, c->i++;
    return c->i == i ? c->at : NULL;
}

/* Reads a scoring answer into r->logprob. QG_OK, or the error in h->err. */
/* The answer scored the ids sent: its token_ids match, or (a text prompt
 * without token_ids back) each token's text is the text of the id meant
 * (after the first; pieces that are not UTF-8 on their own cannot be
 * compared). */
static int check_prompt_ids(struct http *h, const char *url, const cJSON *lpo, const cJSON *tid,
                            const int32_t *ids, int n)
{
    int rc = QG_OK;
    struct cursor c_tid = cursor_of(tid), c_texts;
    for (int i = 0; i < n && !rc && cJSON_IsArray(tid); i++) {
        const cJSON *v = cursor_get(&c_tid, i);
        if (!cJSON_IsNumber(v) || v->valuedouble != (double)ids[i])
            rc = qg_errf(
                h->err, sizeof h->err, QG_ERR_DATA, "%s: token %d scored as id %g, sent %d%s", url,
                i, cJSON_IsNumber(v) ? v->valuedouble : -1.0, ids[i],
                h->text_prompt
                    ? " (the server takes text prompts only, and re-tokenized this one differently)"
                    : "");
    }
    c_texts = cursor_of(cJSON_GetObjectItem(lpo, "tokens"));
    for (int i = 1; i < n && !rc && h->text_prompt && !cJSON_IsArray(tid); i++) {
        const cJSON *t = cursor_get(&c_texts, i);
        char buf[512];
        int len = http_piece(h, ids[i], buf, sizeof buf - 1);
        size_t bad;
        if (len < 0 || len >= (int)sizeof buf - 1) continue;
        buf[len] = '\0';
        if (!utf8_valid(buf, (size_t)len, &bad) || strlen(buf) != (size_t)len) continue;
        if (!cJSON_IsString(t) || strcmp(t->valuestring, buf))
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                         "%s: token %d came back as '%.40s', sent '%.40s': the server takes text "
                         "prompts only, and re-tokenized "
                         "this one differently",
                         url, i, cJSON_IsString(t) ? t->valuestring : "?", buf);
    }
    return rc;
}

/* The top-K of every scored position into r->top_ids / r->top_lp. */
static int parse_top_k(struct http *h, const char *url, const cJSON *lpo,
                       const struct backend_score *r)
{
    /* top-K: qgate serve's top_token_ids ([[id, logprob], ...], exact), else
     * top_logprobs[i], text -> log-prob, mapped to ids through the local
     * tokenizer's pieces (texts several ids share stay unknown) */
    struct cursor c_top = cursor_of(cJSON_GetObjectItem(lpo, "top_logprobs"));
    struct cursor c_topid = cursor_of(cJSON_GetObjectItem(lpo, "top_token_ids"));
    int rc = QG_OK, n = r->n_tokens;
    for (int i = r->from; i < n && !rc; i++) {
        int32_t *ids_out = r->top_ids + (size_t)(i - r->from) * (size_t)r->top_k;
        float *lp_out = r->top_lp + (size_t)(i - r->from) * (size_t)r->top_k;
        for (int k = 0; k < r->top_k; k++)
            ids_out[k] = -1, lp_out[k] = -INFINITY;
        const cJSON *pairs = cursor_get(&c_topid, i), *pr;
        if (cJSON_IsArray(pairs)) {
            int k = 0;
            cJSON_ArrayForEach(pr, pairs)
            {
                const cJSON *pid = cJSON_GetArrayItem(pr, 0), *plp = cJSON_GetArrayItem(pr, 1);
                if (k == r->top_k) break; /* at most top_k, most likely first */
                if (!cJSON_IsNumber(pid) || !cJSON_IsNumber(plp) ||
                    !sane_logprob(plp->valuedouble) || pid->valuedouble < 0 ||
                    pid->valuedouble != floor(pid->valuedouble) ||
                    (h->n_vocab > 0 ? pid->valuedouble >= h->n_vocab
                                    : pid->valuedouble >= 2147483647.0) ||
                    (k && plp->valuedouble > lp_out[k - 1]))
                    return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                                   "%s: top token %d of prompt token %d is impossible (id %g, "
                                   "log-prob %g; vocabulary %d, most likely first)",
                                   url, k, i, cJSON_IsNumber(pid) ? pid->valuedouble : -1.0,
                                   cJSON_IsNumber(plp) ? plp->valuedouble : NAN, h->n_vocab);
                ids_out[k] = (int32_t)pid->valuedouble, lp_out[k] = lp_float(plp->valuedouble), k++;
            }
            continue;
        }
        const cJSON *o = cursor_get(&c_top, i), *e;
        if (!cJSON_IsObject(o)) {
            rc =
                qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                        "%s: no top_logprobs for prompt token %d (asked for %d)", url, i, r->top_k);
            break;
        }
        if (!h->pieces) {
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                         "%s: the server names its top tokens by text only; give "
                         "?tokenizer=PATH.gguf so qgate can map them to ids",
                         url);
            break;
        }
        cJSON_ArrayForEach(e, o)
        {
            if (!cJSON_IsNumber(e) || !(e->valuedouble <= 0) || !e->string) continue;
            /* unknown texts keep -1 but still take their place, so the
             * order stays the server's */
            top_insert(ids_out, lp_out, r->top_k, piece_lookup(h, e->string),
                       lp_float(e->valuedouble));
        }
    }
    return rc;
}

static int parse_score(struct http *h, const char *url, const cJSON *ans,
                       const struct backend_score *r)
{
    const cJSON *e = cJSON_GetObjectItem(ans, "error");
    if (e) { /* an error body with status 200: say what the server said */
        const cJSON *em = cJSON_GetObjectItem(e, "message");
        char m[320];
        snprintf(m, sizeof m, "%.300s",
                 cJSON_IsString(em)  ? em->valuestring
                 : cJSON_IsString(e) ? e->valuestring
                                     : "?");
        redact_key(h, m, sizeof m);
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: the server answered 200 with an error: %s", url, m);
    }
    const int32_t *ids = r->tokens;
    int n = r->n_tokens, from = r->from, rc = QG_OK;
    const cJSON *ch0 = cJSON_GetArrayItem(cJSON_GetObjectItem(ans, "choices"), 0);
    const cJSON *vllm = cJSON_GetObjectItem(ch0, "prompt_logprobs");
    if (cJSON_IsArray(vllm)) return parse_plp(h, url, vllm, r);
    const cJSON *lpo = cJSON_GetObjectItem(ch0, "logprobs");
    const cJSON *tl = cJSON_GetObjectItem(lpo, "token_logprobs"),
                *tid = cJSON_GetObjectItem(lpo, "token_ids");
    int m = cJSON_GetArraySize(tl);
    if (h->text_prompt && cJSON_IsArray(tl) && (m < n || m > n + h->max_tokens_one))
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: sent %d prompt ids as text, the server tokenized it into %d: this "
                       "endpoint takes text prompts only, "
                       "and a window that starts inside a text does not re-tokenize to the same "
                       "ids (run perplexity tasks "
                       "against a server that takes token ids)",
                       url, n, m - h->max_tokens_one);
    if (!cJSON_IsArray(tl) || m < n || m > n + h->max_tokens_one)
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: sent %d prompt ids, got %d token log-probs back: the endpoint "
                       "re-tokenized the prompt or cannot "
                       "score prompts (echo with logprobs)",
                       url, n, cJSON_IsArray(tl) ? m : -1);
    struct cursor c_tl = cursor_of(tl);
    rc = check_prompt_ids(h, url, lpo, tid, ids, n);
    for (int i = from; i < n && !rc; i++) {
        const cJSON *v = cursor_get(&c_tl, i);
        if (cJSON_IsNumber(v) && !sane_logprob(v->valuedouble))
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                         "%s: the server's log-prob for prompt token %d is %g, which no "
                         "probability has: refusing its numbers",
                         url, i, v->valuedouble);
        else if (!cJSON_IsNumber(v))
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                         "%s: no log-prob for prompt token %d: this endpoint cannot score prompts, "
                         "so it cannot run "
                         "log-likelihood tasks",
                         url, i);
        else
            r->logprob[i - from] = v->valuedouble;
    }
    if (!rc && r->top_k > 0) rc = parse_top_k(h, url, lpo, r);
    return rc;
}

int http_parse_score(const char *json, size_t n, int extra_tokens, struct backend_score *r,
                     char *err, size_t errlen)
{
    struct http h;
    memset(&h, 0, sizeof h);
    h.max_tokens_one = extra_tokens;
    cJSON *ans = cJSON_ParseWithLength(json, n);
    int rc = ans ? parse_score(&h, "answer", ans, r)
                 : qg_errf(h.err, sizeof h.err, QG_ERR_DATA, "answer: not JSON");
    cJSON_Delete(ans);
    if (rc) snprintf(err, errlen, "%s", h.err);
    return rc;
}

/* The cache key of a request: sha256 of the request-format version, the
 * endpoint, the served model and the body. */
static void cache_key(const struct http *h, const char *url, const char *body,
                      char key[HASH_HEX_LEN + 1])
{
    struct sbuf k;
    sbuf_init(&k, (size_t)1 << 30);
    sbuf_printf(&k, "qgate-http/2\n%s\n%s\n%s\n%s", url, h->model, h->fp, body);
    hash_sha256_mem(k.data, k.len, key);
    sbuf_release(&k);
}

/* One scoring transfer of score_many. */
struct xfer {
    CURL *e;
    char *body;
    struct reply reply;
    int active, done, attempts;
    double not_before;
    char last[512];
};

static int x_start(struct http *h, CURLM *m, struct xfer *x, const char *url)
{
    reply_reset(&x->reply);
    if (!x->e) x->e = h->n_idle ? h->idle[--h->n_idle] : curl_easy_init();
    if (!x->e) return QG_ERR_NOMEM;
    curl_easy_setopt(x->e, CURLOPT_URL, url);
    curl_easy_setopt(x->e, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(x->e, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(x->e, CURLOPT_POSTFIELDSIZE, (long)strlen(x->body));
    curl_easy_setopt(x->e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(x->e, CURLOPT_WRITEDATA, &x->reply);
    curl_easy_setopt(x->e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->e, CURLOPT_HEADERDATA, &x->reply);
    curl_easy_setopt(x->e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->e, CURLOPT_TIMEOUT_MS, (long)(h->timeout * 1000));
    curl_easy_setopt(x->e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(x->e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(x->e, CURLOPT_SSL_VERIFYHOST, 2L);
    if (curl_multi_add_handle(m, x->e) != CURLM_OK) return QG_ERR_INTERNAL;
    x->active = 1;
    return QG_OK;
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
        if (!(x[j].body = score_body(h, reqs[j].tokens, reqs[j].n_tokens, reqs[j].top_k))) {
            if (h->err[0])
                return QG_ERR_UNAVAILABLE; /* the server could not detokenize a text prompt */
            return qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
        }
        if (!keys) continue;
        cache_key(h, url, x[j].body, keys[j]);
        char *hit = h->cache.get(h->cache.ud, keys[j]);
        cJSON *ans = hit ? cJSON_Parse(hit) : NULL;
        if (ans && parse_score(h, url, ans, &reqs[j]) == QG_OK) x[j].done = 1, (*finished)++;
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
    int v = judge(h, url, cc, code, &t->reply, &ans, t->last, sizeof t->last);
    if (v == QG_OK) {
        if (!(rc = parse_score(h, url, ans, &reqs[j]))) {
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
        t->not_before = qg_now_s() + backoff(h, t->attempts, t->reply.retry_after);
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
        int rc = x_start(h, h->multi, &x[j], url);
        if (rc) return qg_errf(h->err, sizeof h->err, rc, "%s: cannot start a request", url);
        (*active)++;
    }
    return QG_OK;
}

static int score_many(struct http *h, struct backend_score *reqs, int n)
{
    char url[1100];
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
static int score_ids(struct http *h, const int32_t *ids, int n, int from, double *lp)
{
    struct backend_score r = {.tokens = ids, .n_tokens = n, .from = from, .logprob = lp};
    return score_many(h, &r, 1);
}

/* ------------------------------------------- the server's tokenizer */

/* POSTs a deterministic request, answered from the cache when it can be;
 * as request() otherwise. */
static int post_cached(struct http *h, const char *url, const char *body, cJSON **out, long *status)
{
    char key[HASH_HEX_LEN + 1] = "";
    *out = NULL;
    *status = 0;
    if (h->cache.get) {
        cache_key(h, url, body, key);
        char *hit = h->cache.get(h->cache.ud, key);
        *out = hit ? cJSON_Parse(hit) : NULL;
        free(hit);
        if (*out) {
            *status = 200;
            return QG_OK;
        }
    }
    int rc = request(h, url, body, out, status);
    if (!rc && h->cache.get)
        h->cache.put(h->cache.ud, key, url, h->model, sbuf_str(&h->reply.body));
    return rc;
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
static int server_tokenize(struct http *h, const char *text, size_t n, int add, int live,
                           int32_t **ids, int64_t *n_ids, long *status)
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
    cJSON_AddStringToObject(req, "prompt", copy);  /* vLLM */
    cJSON_AddBoolToObject(req, "add_special", add);
    cJSON_AddBoolToObject(req, "add_special_tokens", add);
    cJSON_AddTrueToObject(req, "with_pieces");
    free(copy);
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!body) return qg_errf(h->err, sizeof h->err, QG_ERR_NOMEM, "out of memory");
    cJSON *ans;
    int rc = live ? request(h, url, body, &ans, status) : post_cached(h, url, body, &ans, status);
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
    const cJSON *toks = cJSON_GetObjectItem(ans, "tokens"), *t;
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
static char *server_detokenize(struct http *h, const int32_t *ids, int64_t n)
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
    int rc = post_cached(h, url, body, &ans, &status);
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
static int server_piece(struct http *h, int32_t id, char *buf, size_t cap)
{
    if (id < 0 || (h->n_vocab > 0 && id >= h->n_vocab)) return -1;
    if (id >= h->n_spc || !h->spc[id].text) {
        if (!h->pair_text && !(h->pair_text = server_detokenize(h, &h->pair_a, 1)))
            return QG_ERR_UNAVAILABLE;
        int32_t two[2] = {h->pair_a, id};
        char *t = server_detokenize(h, two, 2);
        if (!t) return QG_ERR_UNAVAILABLE;
        size_t pl = strlen(h->pair_text);
        const char *p = t + pl;
        char *alone = NULL;
        if (strncmp(t, h->pair_text, pl)) {
            if (!(alone = server_detokenize(h, &id, 1))) return free(t), QG_ERR_UNAVAILABLE;
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
            h->n_ctx = (int)iv;
        else if (!strcmp(kv, "concurrency") && !qg_parse_i64(v, 1, 256, &iv))
            h->concurrency = (int)iv;
        else if (!strcmp(kv, "chat") && !qg_parse_i64(v, 0, 1, &iv))
            h->chat = (int)iv;
        else if (!strcmp(kv, "chat_reserve") && !qg_parse_i64(v, 0, 1 << 20, &iv))
            h->chat_reserve = (int)iv;
        else
            rc = qg_errf(err, errlen, QG_ERR_USAGE,
                         "%s: bad query parameter '%s=%s' (known: model, tokenizer=PATH.gguf, "
                         "api_key_env=VAR, timeout=SECONDS, "
                         "retries=N, ctx=N, concurrency=N, chat=0|1, chat_reserve=N)",
                         h->base, kv, v);
    }
    free(query);
    return rc;
}

/* The API key: from keyvar when the spec names one (which must be set),
 * else QGATE_API_KEY or OPENAI_API_KEY; *key NULL when none. */
static int api_key(const struct http *h, const char *keyvar, const char **key, char *err,
                   size_t errlen)
{
    *key = *keyvar ? getenv(keyvar) : getenv("QGATE_API_KEY");
    if (!*keyvar && !*key) *key = getenv("OPENAI_API_KEY");
    if (*keyvar && (!*key || !**key))
        return qg_errf(err, errlen, QG_ERR_USAGE, "%s: api_key_env=%s is unset or empty", h->base,
                       keyvar);
    return QG_OK;
}

/* The curl handles and the options every request shares. */
static int open_curl(struct http *h, const char *key, char *err, size_t errlen)
{
    if (key && *key && !(h->key = qg_strdup(key)))
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    if (!(h->curl = curl_easy_init()) || !(h->multi = curl_multi_init()))
        return qg_errf(err, errlen, QG_ERR_NOMEM, "cannot start libcurl");
    curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)h->concurrency);
    h->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (key && *key) {
        struct sbuf a;
        sbuf_init(&a, 1 << 16);
        sbuf_printf(&a, "Authorization: Bearer %s", key);
        h->headers = curl_slist_append(h->headers, sbuf_str(&a));
        if (a.data) memset(a.data, 0, a.len); /* no copy of the key outlives the list */
        sbuf_release(&a);
    }
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &h->reply);
    curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, &h->reply);
    curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, (long)(h->timeout * 1000));
    curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h->curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h->curl, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h->curl, CURLOPT_TCP_KEEPALIVE, 1L);
    return QG_OK;
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
    if (!rc && h->tok && (rc = build_pieces(h))) qg_errf(err, errlen, rc, "out of memory");
    const char *key = NULL;
    if (!rc) rc = api_key(h, keyvar, &key, err, errlen);
    if (!rc) rc = open_curl(h, key, err, errlen);
    return rc;
}

/* The model list: the id must be served; it may say the context length
 * and the vocabulary size (which must match the local tokenizer's). */
static int probe_models(struct http *h, const char *tokpath, char *err, size_t errlen)
{
    cJSON *r = NULL;
    long status;
    char url[1100];
    snprintf(url, sizeof url, "%s/models", h->base);
    int rc = request(h, url, NULL, &r, &status);
    if (rc) return qg_errf(err, errlen, rc, "%s", h->err);
    const cJSON *m, *found = NULL;
    int n = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(r, "data"))
    {
        const cJSON *id = cJSON_GetObjectItem(m, "id");
        n++;
        if (cJSON_IsString(id) && (!*h->model ? n == 1 : !strcmp(id->valuestring, h->model)))
            found = m;
    }
    h->models_json = cJSON_PrintUnformatted(r);
    if (!*h->model && n != 1)
        rc = qg_errf(err, errlen, QG_ERR_USAGE, "%s serves %d models: name one with ?model=ID",
                     h->base, n);
    else if (!found)
        rc = qg_errf(err, errlen, QG_ERR_USAGE, "%s does not serve model '%s' (see %s/models)",
                     h->base, h->model, h->base);
    else {
        if (!*h->model)
            snprintf(h->model, sizeof h->model, "%s",
                     cJSON_GetObjectItem(found, "id")->valuestring);
        const cJSON *ml = cJSON_GetObjectItem(found, "max_model_len"),
                    *nv = cJSON_GetObjectItem(found, "n_vocab");
        if (!cJSON_IsNumber(nv))
            nv = cJSON_GetObjectItem(cJSON_GetObjectItem(found, "meta"), "n_vocab"); /* llama.cpp */
        if (!cJSON_IsNumber(ml)) /* llama.cpp: the trained context (its -c may be smaller) */
            ml = cJSON_GetObjectItem(cJSON_GetObjectItem(found, "meta"), "n_ctx_train");
        if (!h->n_ctx && cJSON_IsNumber(ml) && ml->valuedouble >= 2 && ml->valuedouble <= (1 << 24))
            h->n_ctx = (int)ml->valuedouble;
        if (cJSON_IsNumber(nv) && nv->valuedouble >= 1 && nv->valuedouble < (1 << 24))
            h->n_vocab = (int)nv->valuedouble;
        if (h->tok && h->n_vocab && h->n_vocab != tok_n_vocab(h->tok))
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "%s: the server's model has %d tokens, the tokenizer %s has %d", h->base,
                         h->n_vocab, tokpath, tok_n_vocab(h->tok));
    }
    cJSON_Delete(r);
    return rc;
}

#define HTTP_CHAT_SLACK 2    /* tokens a merge across the template's edges may add */
#define HTTP_CHAT_RESERVE 32 /* the template's share when it cannot be measured */

/* chat=1: the positions the server's chat template adds to a message. */
static void chat_overhead(struct http *h, const char *sample)
{
    if (!h->chat || h->chat_reserve >= 0) return;
    h->chat_reserve = HTTP_CHAT_RESERVE;
    cJSON *req = cJSON_CreateObject(), *msg = cJSON_CreateObject(), *r = NULL;
    cJSON_AddStringToObject(msg, "role", "user");
    cJSON_AddStringToObject(msg, "content", sample);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "messages"), msg);
    char *body = cJSON_PrintUnformatted(req), url[1100], err[QG_ERRMSG_MAX];
    cJSON_Delete(req);
    snprintf(url, sizeof url, "%s/apply-template", h->root);
    long status;
    int retries = h->retries;
    h->retries = 0; /* one question: a server without the endpoint is no error */
    memcpy(err, h->err, sizeof err);
    if (body && request(h, url, body, &r, &status) == QG_OK) {
        const cJSON *p = cJSON_GetObjectItem(r, "prompt");
        int32_t *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        if (cJSON_IsString(p) &&
            !http_tokenize(h, p->valuestring, strlen(p->valuestring), 1, &a, &na) &&
            !http_tokenize(h, sample, strlen(sample), 1, &b, &nb) && na >= nb)
            h->chat_reserve = (int)(na - nb) + HTTP_CHAT_SLACK;
        free(a), free(b);
    }
    memcpy(h->err, err, sizeof err);
    h->retries = retries;
    cJSON_Delete(r);
    free(body);
}

static const char *const open_sample =
    "Once upon a time, there was a little girl named Lily. She said: \"3 + 4 = 7!\"";

/* BOS without a local tokenizer: what add_special puts in front of ids. */
static int learn_bos(struct http *h, const int32_t *ids, int64_t n_ids, char *err, size_t errlen)
{
    int32_t *plain = NULL;
    int64_t n_plain = 0;
    long status;
    int rc = server_tokenize(h, open_sample, strlen(open_sample), 0, 1, &plain, &n_plain, &status);
    if (rc)
        qg_errf(err, errlen, rc, "%s", h->err);
    else if (n_plain < 1)
        rc = qg_errf(err, errlen, QG_ERR_DATA,
                     "%s: the server's /tokenize gives no tokens for a sentence", h->base);
    else {
        h->add_bos =
            n_ids == n_plain + 1 && !memcmp(ids + 1, plain, (size_t)n_plain * sizeof *plain);
        h->bos = h->add_bos ? ids[0] : -1;
        h->eos = -1;
        h->pair_a = plain[0];
    }
    free(plain);
    return rc;
}

/* The tokenizers agree on a sample (when the server tokenizes); without a
 * local one the server's must work, and says what BOS is. *ids (malloc'd)
 * is the sample's ids, for the scoring probe. */
static int check_tokenizer(struct http *h, const char *tokpath, int32_t **ids, int64_t *n_ids,
                           char *err, size_t errlen)
{
    int32_t *sids = NULL;
    int64_t n_sids = 0;
    long status;
    int rc =
        h->tok ? tok_encode(h->tok, open_sample, strlen(open_sample), 1, 0, ids, n_ids) : QG_OK;
    if (rc) return rc;
    int trc = server_tokenize(h, open_sample, strlen(open_sample), 1, 1, &sids, &n_sids, &status);
    if (trc == QG_OK && h->tok) {
        int same = n_sids == *n_ids;
        for (int64_t i = 0; same && i < *n_ids; i++)
            same = sids[i] == (*ids)[i];
        if (!same)
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "%s: the server tokenizes differently from %s (sample: %lld local ids, "
                         "%lld server ids)",
                         h->base, tokpath, (long long)*n_ids, (long long)n_sids);
    } else if (trc == QG_OK) {
        *ids = sids, *n_ids = n_sids, sids = NULL;
    } else if (!h->tok) {
        rc = qg_errf(
            err, errlen, trc == QG_ERR_DATA ? QG_ERR_DATA : QG_ERR_USAGE,
            "%s: no local tokenizer was given and the server's /tokenize does not work (%s); give "
            "?tokenizer=PATH.gguf",
            h->base, h->err);
    } else if (status != 404 && status != 405) {
        rc = qg_errf(err, errlen, trc, "%s", h->err);
    }
    free(sids);
    if (!rc && !h->tok) rc = learn_bos(h, *ids, *n_ids, err, errlen);
    return rc;
}

/* The server's fingerprint: its model list and the log-probs it gives the
 * probe sample now. Cache keys include it, so a server redeployed with
 * another model at the same address and id is not answered from the cache;
 * a change against the fingerprint stored last time is said. */
static void fingerprint(struct http *h, const double *lp, int n)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 24);
    sbuf_printf(&b, "%s\n", h->models_json ? h->models_json : "");
    for (int i = 0; lp && i < n - 1; i++)
        sbuf_printf(&b, "%.9g,", lp[i]);
    hash_sha256_mem(sbuf_str(&b), b.len, h->fp);
    sbuf_release(&b);
    if (!h->cache.get || !h->cache.put) return;
    char key[HASH_HEX_LEN + 1], *old;
    sbuf_init(&b, 1 << 16);
    sbuf_printf(&b, "qgate-http-fingerprint\n%s\n%s", h->base, h->model);
    hash_sha256_mem(sbuf_str(&b), b.len, key);
    sbuf_release(&b);
    if ((old = h->cache.get(h->cache.ud, key)) && strcmp(old, h->fp))
        qg_warn("%s (model '%s') answers differently from the last run that used this database: "
                "its cached answers are not used",
                h->base, h->model);
    free(old);
    h->cache.put(h->cache.ud, key, h->base, h->model, h->fp);
}

/* Scoring works: token ids with echo (max_tokens 0, else 1), ids with
 * vLLM's prompt_logprobs, then text prompts with echo (a server that takes
 * no ids; each answer is checked against the ids meant). The first that
 * scores every prompt token is kept. A server that answers but gives no
 * prompt log-probs is refused for scoring (not for generation); any other
 * failure fails open with the first error. */
static int probe_scoring(struct http *h, const int32_t *ids, int64_t n_ids, char *err,
                         size_t errlen)
{
    double lp[128];
    int n = n_ids < 128 ? (int)n_ids : 128;
    static const struct {
        int text, max1, plp;
    } tries[] = {{0, 0, 0}, {0, 1, 0}, {0, 1, 1}, {1, 0, 0}, {1, 1, 0}};
    struct backend_cache cache = h->cache; /* the probe asks the live server */
    memset(&h->cache, 0, sizeof h->cache);
    char first[QG_ERRMSG_MAX] = "", unsup[QG_ERRMSG_MAX] = "";
    int src = QG_ERR_DATA, first_rc = QG_OK;
    if (n < 2)
        snprintf(first, sizeof first, "%.300s: the sample is one token", h->base),
            first_rc = QG_ERR_DATA;
    for (size_t t = 0; n >= 2 && t < sizeof tries / sizeof *tries; t++) {
        h->text_prompt = tries[t].text, h->max_tokens_one = tries[t].max1, h->plp = tries[t].plp;
        if ((src = score_ids(h, ids, n, 1, lp)) == QG_OK) break;
        if (!first_rc) first_rc = src, snprintf(first, sizeof first, "%s", h->err);
        if (src == QG_ERR_UNSUPPORTED && !*unsup) snprintf(unsup, sizeof unsup, "%s", h->err);
        if (src == QG_ERR_UNAVAILABLE || src == QG_ERR_NOMEM) break; /* no server to ask */
    }
    if (src != QG_OK) {
        h->text_prompt = 0, h->max_tokens_one = 0, h->plp = 0;
        if (*unsup && first_rc != QG_ERR_UNAVAILABLE)
            src = QG_ERR_UNSUPPORTED, snprintf(h->err, sizeof h->err, "%s", unsup);
        else
            src = first_rc, snprintf(h->err, sizeof h->err, "%s", first);
    }
    h->cache = cache;
    h->can_score = src == QG_OK;
    fingerprint(h, src == QG_OK ? lp : NULL, n);
    return src && src != QG_ERR_UNSUPPORTED ? qg_errf(err, errlen, src, "%s", h->err) : QG_OK;
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
    if (!rc) rc = probe_models(h, tokpath, err, errlen);
    if (!h->n_ctx) h->n_ctx = 2048;
    if (!rc) rc = check_tokenizer(h, tokpath, &ids, &n_ids, err, errlen);
    if (!rc) rc = probe_scoring(h, ids, n_ids, err, errlen);
    if (!rc) chat_overhead(h, open_sample);
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
    if (!h->tok) return server_tokenize(h, text, n, add_special, 0, ids, n_ids, &status);
    return tok_encode(h->tok, text, n, add_special, 0, ids, n_ids);
}

static char *http_detokenize(void *impl, const int32_t *ids, int64_t n)
{
    struct http *h = impl;
    return h->tok ? tok_decode(h->tok, ids, n, 0) : server_detokenize(h, ids, n);
}

static int http_piece(void *impl, int32_t id, char *buf, size_t cap)
{
    struct http *h = impl;
    return h->tok ? tok_piece(h->tok, id, 0, buf, cap) : server_piece(h, id, buf, cap);
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
    int rc = request(h, url, body, &r, &status);
    free(body);
    if (rc) return rc;
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "choices"), 0);
    const cJSON *t = h->chat ? cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "message"), "content")
                             : cJSON_GetObjectItem(ch, "text");
    if (!cJSON_IsString(t))
        rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA, "%s: the answer has no %s", url,
                     h->chat ? "choices[0].message.content" : "choices[0].text");
    else if (!(*text = qg_strdup(t->valuestring)))
        rc = QG_ERR_NOMEM;
    if (!rc && ids && n_ids) rc = http_tokenize(h, *text, strlen(*text), 0, ids, n_ids);
    cJSON_Delete(r);
    return rc;
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
    .piece = http_piece,
    .score = http_score,
    .generate = http_generate,
    .score_many = http_score_many,
};

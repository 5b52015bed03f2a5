/* transport — the HTTP backend's requests: libcurl handles, retries with
 * backoff and jitter, judging answers (what to retry, what says a
 * parameter is unsupported), the API key kept out of messages, and the
 * response cache's keys. */
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
double hp_backoff(struct http *h, int attempt, double retry_after)
{
    double wait = fmin(2.0, 0.05 * (double)(1 << (attempt < 6 ? attempt : 6))) * (0.5 + jitter(h));
    return retry_after >= 0 ? fmax(wait * 0.1, retry_after) : wait;
}

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
int hp_judge(struct http *h, const char *url, CURLcode cc, long code, const struct reply *r,
             cJSON **ans, char *last, size_t lastlen)
{
    *ans = NULL;
    if (r->too_big)
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA, "%s: response larger than %zu bytes",
                       url, HTTP_MAX_RESPONSE);
    if (cc == CURLE_URL_MALFORMAT || cc == CURLE_UNSUPPORTED_PROTOCOL) /* no retry mends it */
        return qg_errf(h->err, sizeof h->err, QG_ERR_USAGE, "%s: %s (check the model spec)", url,
                       curl_easy_strerror(cc));
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
    hp_redact_key(h, last, lastlen);
    cJSON_Delete(j);
    if (code == 501 || says_unsupported(last)) /* m went with j: last holds it */
        return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED, "%s: %s", url, last);
    if (code == 408 || code == 429 || code == 500 || code == 502 || code == 503 || code == 504)
        return TRY_AGAIN;
    int rc = code == 401 || code == 403 ? QG_ERR_UNAVAILABLE : QG_ERR_DATA;
    return qg_errf(h->err, sizeof h->err, rc, "%s: %s", url, last);
}

/* Replaces every occurrence of the API key in s by "[redacted]": a server
 * may echo the Authorization header in an error body. */
void hp_redact_key(const struct http *h, char *s, size_t cap)
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

/* POSTs body (or GETs when body is NULL) to url and parses the JSON answer.
 * Retries what is worth retrying. QG_OK with *out, else an error in h->err
 * (QG_ERR_UNAVAILABLE after the retries, QG_ERR_DATA / QG_ERR_USAGE for a
 * refusal, with *status the last HTTP status). */
int hp_request(struct http *h, const char *url, const char *body, cJSON **out, long *status)
{
    *out = NULL;
    *status = 0;
    char last[512] = "";
    for (int attempt = 0; attempt <= h->retries; attempt++) {
        if (attempt) usleep((useconds_t)(hp_backoff(h, attempt, h->reply.retry_after) * 1e6));
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
        int v = hp_judge(h, url, cc, code, &h->reply, out, last, sizeof last);
        if (v != TRY_AGAIN) return v;
    }
    qg_errf(h->err, sizeof h->err, QG_ERR_UNAVAILABLE, "%s: no answer after %d attempts; last: %s",
            url, h->retries + 1, last);
    return QG_ERR_UNAVAILABLE;
}

/* The cache key of a request: sha256 of the request-format version, the
 * endpoint, the served model and the body. */
void hp_cache_key(const struct http *h, const char *url, const char *body,
                  char key[HASH_HEX_LEN + 1])
{
    struct sbuf k;
    sbuf_init(&k, (size_t)1 << 30);
    sbuf_printf(&k, "qgate-http/2\n%s\n%s\n%s\n%s", url, h->model, h->fp, body);
    hash_sha256_mem(k.data, k.len, key);
    sbuf_release(&k);
}

int hp_x_start(struct http *h, CURLM *m, struct xfer *x, const char *url)
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

/* POSTs a deterministic request, answered from the cache when it can be;
 * as request() otherwise. */
int hp_post_cached(struct http *h, const char *url, const char *body, cJSON **out, long *status)
{
    char key[HASH_HEX_LEN + 1] = "";
    *out = NULL;
    *status = 0;
    if (h->cache.get) {
        hp_cache_key(h, url, body, key);
        char *hit = h->cache.get(h->cache.ud, key);
        *out = hit ? cJSON_Parse(hit) : NULL;
        free(hit);
        if (*out) {
            *status = 200;
            return QG_OK;
        }
    }
    int rc = hp_request(h, url, body, out, status);
    if (!rc && h->cache.get)
        h->cache.put(h->cache.ud, key, url, h->model, sbuf_str(&h->reply.body));
    return rc;
}

/* The API key: from keyvar when the spec names one (which must be set),
 * else QGATE_API_KEY or OPENAI_API_KEY; *key NULL when none. */
int hp_api_key(const struct http *h, const char *keyvar, const char **key, char *err, size_t errlen)
{
    *key = *keyvar ? getenv(keyvar) : getenv("QGATE_API_KEY");
    if (!*keyvar && !*key) *key = getenv("OPENAI_API_KEY");
    if (*keyvar && (!*key || !**key))
        return qg_errf(err, errlen, QG_ERR_USAGE, "%s: api_key_env=%s is unset or empty", h->base,
                       keyvar);
    return QG_OK;
}

/* The curl handles and the options every request shares. */
int hp_open_curl(struct http *h, const char *key, char *err, size_t errlen)
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

/* serve — OpenAI-compatible HTTP server over a backend (see serve.h): the
 * connections, authentication, dispatch, the model list and tokenizer
 * endpoints, and the server's life. */
#include "serve/serve.h"
#include "serve/serve_impl.h"
#include "serve/serve_fmt.h"
#include "datasets/reader.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"
#include "reports/escape.h"
#include "core/rng.h"
#include "core/utf8.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum MHD_Result sv_send_text(struct MHD_Connection *c, unsigned status, const char *body, size_t n,
                             const char *type, const char *retry_after)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result sv_send_json(struct MHD_Connection *c, unsigned status, cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s)
        return sv_send_text(c, 500,
                            "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}",
                            61, "application/json", NULL);
    enum MHD_Result ok = sv_send_text(c, status, s, strlen(s), "application/json", NULL);
    free(s);
    return ok;
}

/* The OpenAI error code of a status: a string clients switch on, or NULL
 * (JSON null) where OpenAI gives none. */
static const char *error_code(unsigned status, const char *msg)
{
    switch (status) {
    case 401:
        return "invalid_api_key";
    case 404:
        return !strncmp(msg, "model ", 6) ? "model_not_found" : "not_found";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_exceeded";
    case 500:
        return "server_error";
    default:
        return NULL;
    }
}

/* An OpenAI-style error body {"error":{"message","type","param","code"}},
 * code a string or null. */
cJSON *sv_error_body(unsigned status, const char *type, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    const char *code = error_code(status, msg);
    if (code)
        cJSON_AddStringToObject(e, "code", code);
    else
        cJSON_AddNullToObject(e, "code");
    return j;
}

enum MHD_Result sv_send_error(struct MHD_Connection *c, unsigned status, const char *type,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cJSON *j = sv_error_body(status, type, fmt, ap);
    va_end(ap);
    return sv_send_json(c, status, j);
}

/* A backend instance no other request is using (waits for one). */
struct backend *sv_acquire(struct server *s)
{
    pthread_mutex_lock(&s->pool_lock);
    for (;;) {
        for (int i = 0; i < s->nb; i++)
            if (!s->busy[i]) {
                s->busy[i] = 1;
                s->held_since[i] = qg_now_s();
                pthread_mutex_unlock(&s->pool_lock);
                return &s->b[i];
            }
        pthread_cond_wait(&s->pool_free, &s->pool_lock);
    }
}

void sv_release(struct server *s, struct backend *b)
{
    pthread_mutex_lock(&s->pool_lock);
    s->busy_seconds += qg_now_s() - s->held_since[b - s->b];
    s->busy[b - s->b] = 0;
    pthread_cond_signal(&s->pool_free);
    pthread_mutex_unlock(&s->pool_lock);
}

/* GET /v1/models (one: NULL) or /v1/models/{one}. */
static enum MHD_Result models(struct server *s, struct MHD_Connection *c, const char *one)
{
    if (one && strcmp(one, s->model_id))
        return sv_send_error(c, 404, "invalid_request_error",
                             "model '%s' is not served here (this server serves '%s')", one,
                             s->model_id);
    cJSON *j = cJSON_CreateObject(), *m = cJSON_CreateObject();
    if (one) {
        cJSON_Delete(j);
        j = m;
    } else {
        cJSON_AddStringToObject(j, "object", "list");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "data"), m);
    }
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->started);
    if (s->llama_server) { /* llama.cpp's form */
        cJSON_AddStringToObject(m, "owned_by", "llamacpp");
        cJSON *meta = cJSON_AddObjectToObject(m, "meta");
        cJSON_AddNumberToObject(meta, "n_vocab", s->info.n_vocab);
        cJSON_AddNumberToObject(meta, "n_ctx_train", s->info.n_ctx_train);
        return sv_send_json(c, 200, j);
    }
    cJSON_AddStringToObject(m, "owned_by", "qgate");
    cJSON_AddNumberToObject(m, "max_model_len", s->info.n_ctx_train);
    cJSON_AddNumberToObject(m, "n_vocab", s->info.n_vocab);
    return sv_send_json(c, 200, j);
}

static enum MHD_Result tokenize(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    const cJSON *t = cJSON_GetObjectItem(req, "content");
    if (!t) t = cJSON_GetObjectItem(req, "prompt");
    if (!cJSON_IsString(t))
        return sv_send_error(c, 400, "invalid_request_error",
                             "\"content\" (or \"prompt\") must be a string");
    const cJSON *sp = cJSON_GetObjectItem(req, "add_special");
    if (!sp) sp = cJSON_GetObjectItem(req, "add_special_tokens");
    int add = sp ? cJSON_IsTrue(sp) : 1;
    int with_pieces = cJSON_IsTrue(cJSON_GetObjectItem(req, "with_pieces")) && !s->plain_tokenize;
    int32_t *ids = NULL;
    int64_t n = 0;
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "tokens");
    struct backend *b = sv_acquire(s);
    int rc = backend_tokenize(b, t->valuestring, strlen(t->valuestring), add, &ids, &n);
    for (int64_t i = 0; !rc && i < n; i++) {
        if (!with_pieces) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
            continue;
        }
        /* llama.cpp's form: {"id", "piece"}, the piece as a string when
         * it is UTF-8, else as its bytes */
        char buf[512];
        int len = backend_piece(b, ids[i], buf, sizeof buf - 1);
        if (len < 0) len = 0;
        if (len > (int)sizeof buf - 1) len = (int)sizeof buf - 1;
        buf[len] = '\0';
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", ids[i]);
        size_t bad;
        if (utf8_valid(buf, (size_t)len, &bad) && strlen(buf) == (size_t)len) {
            cJSON_AddStringToObject(o, "piece", buf);
        } else {
            cJSON *bytes = cJSON_AddArrayToObject(o, "piece");
            for (int k = 0; k < len; k++)
                cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)buf[k]));
        }
        cJSON_AddItemToArray(a, o);
    }
    sv_release(s, b);
    if (rc) {
        cJSON_Delete(j);
        return sv_send_error(c, 400, "invalid_request_error", "cannot tokenize: %s",
                             qg_strerror(rc));
    }
    cJSON_AddNumberToObject(j, "count", (double)n);
    cJSON_AddNumberToObject(j, "max_model_len", s->info.n_ctx_train);
    free(ids);
    return sv_send_json(c, 200, j);
}

static enum MHD_Result detokenize(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    const cJSON *a = cJSON_GetObjectItem(req, "tokens"), *v;
    if (!cJSON_IsArray(a))
        return sv_send_error(c, 400, "invalid_request_error",
                             "\"tokens\" must be an array of token ids");
    int64_t n = cJSON_GetArraySize(a), i = 0;
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return sv_send_error(c, 500, "server_error", "out of memory");
    cJSON_ArrayForEach(v, a)
    {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= s->info.n_vocab ||
            v->valuedouble != floor(v->valuedouble)) {
            free(ids);
            return sv_send_error(c, 400, "invalid_request_error",
                                 "token %lld is not a token id in [0, %d)", (long long)i,
                                 s->info.n_vocab);
        }
        ids[i++] = (int32_t)v->valuedouble;
    }
    struct backend *b = sv_acquire(s);
    char *text = backend_detokenize(b, ids, n);
    sv_release(s, b);
    free(ids);
    char *clean = utf8_sanitize(text ? text : "");
    free(text);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "content", clean ? clean : "");
    cJSON_AddStringToObject(j, "prompt", clean ? clean : "");
    free(clean);
    return sv_send_json(c, 200, j);
}

/* Endpoints open without the API key, as llama.cpp's server leaves them:
 * the health check and the model list. */
static int open_endpoint(const char *method, const char *url)
{
    return !strcmp(method, "GET") &&
           (!strcmp(url, "/health") || !strcmp(url, "/v1/health") || !strcmp(url, "/v1/models") ||
            !strncmp(url, "/v1/models/", 11) || !strcmp(url, "/props"));
}

/* GET /props, as llama-server answers it: a slot's context (what a
 * request really gets), the slots, the build. */
static enum MHD_Result props(struct server *s, struct MHD_Connection *c)
{
    cJSON *j = cJSON_CreateObject(), *g = cJSON_AddObjectToObject(j, "default_generation_settings");
    cJSON_AddNumberToObject(g, "n_ctx",
                            s->slot_ctx > 0 && !s->stale_props ? s->slot_ctx : s->info.n_ctx_train);
    cJSON_AddNumberToObject(j, "total_slots", s->nb);
    cJSON_AddStringToObject(j, "build_info",
                            s->llama_server ? SV_LLAMA_BUILD : "qgate " QG_VERSION);
    return sv_send_json(c, 200, j);
}

static int authorized(struct server *s, struct MHD_Connection *c)
{
    if (!s->api_key) return 1;
    const char *h = NULL;
    size_t hl = 0; /* the value's real length: "Bearer KEY\0junk" is not KEY */
    if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND, "Authorization", 13, &h, &hl) !=
            MHD_YES ||
        !h || hl < 7 || strncmp(h, "Bearer ", 7))
        return 0;
    /* compare without an early exit on the first differing byte */
    size_t a = hl - 7, b = strlen(s->api_key);
    unsigned diff = a != b;
    for (size_t i = 0; i < a && i < b; i++)
        diff |= (unsigned char)(h[7 + i] ^ s->api_key[i]);
    return diff == 0;
}

/* A POST to one of the JSON endpoints, with its body read. */
static enum MHD_Result handle_post(struct server *s, struct MHD_Connection *c, const char *url,
                                   const struct conn *k, enum fault f)
{
    if (k->too_big)
        return sv_send_error(c, 413, "invalid_request_error", "request body over %zu bytes",
                             s->max_body);
    if (k->over_total)
        return sv_send_error(c, 503, "server_error",
                             "the server holds %zu bytes of request bodies at most, all "
                             "connections together: retry later",
                             s->max_body_total);
    cJSON *req = cJSON_ParseWithLength(k->body.data ? k->body.data : "", k->body.len);
    if (!cJSON_IsObject(req)) {
        cJSON_Delete(req);
        return sv_send_error(c, 400, "invalid_request_error",
                             "the request body is not a JSON object");
    }
    if (f == F_TRUNCATE || f == F_MALFORMED) {
        cJSON_Delete(req);
        const char *b =
            f == F_TRUNCATE
                ? "{\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"choices\":[{\"text\":\""
                : "<html>not json";
        return sv_send_text(c, 200, b, strlen(b), "application/json", NULL);
    }
    pthread_mutex_lock(&s->lock);
    if (++s->in_flight > s->max_in_flight) s->max_in_flight = s->in_flight;
    pthread_mutex_unlock(&s->lock);
    if (s->min_latency_ms > 0) usleep((useconds_t)s->min_latency_ms * 1000);
    enum MHD_Result out = !strcmp(url, "/v1/completions")        ? sv_completions(s, c, req)
                          : !strcmp(url, "/v1/chat/completions") ? sv_chat(s, c, req)
                          : !strcmp(url, "/generate")            ? sv_native_generate(s, c, req)
                          : !strcmp(url, "/tokenize") && s->native == SV_NATIVE_TGI
                              ? sv_native_tokenize(s, c, req)
                          : !strcmp(url, "/tokenize")       ? tokenize(s, c, req)
                          : !strcmp(url, "/apply-template") ? sv_apply_template(s, c, req)
                                                            : detokenize(s, c, req);
    pthread_mutex_lock(&s->lock);
    s->in_flight--;
    pthread_mutex_unlock(&s->lock);
    cJSON_Delete(req);
    return out;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    struct server *s = cls;
    struct conn *k = *con_cls;
    if (!k) {
        /* the key before the body: a keyless client's upload is never read */
        if (!open_endpoint(method, url) && !authorized(s, c)) {
            pthread_mutex_lock(&s->lock);
            s->requests++;
            pthread_mutex_unlock(&s->lock);
            return sv_send_error(c, 401, "authentication_error",
                                 "missing or wrong API key (Authorization: Bearer ...)");
        }
        k = calloc(1, sizeof *k);
        if (!k) return MHD_NO;
        sbuf_init(&k->body, s->max_body);
        k->t0 = qg_now_s();
        *con_cls = k;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!k->too_big && !k->over_total) { /* within the server's total first */
            pthread_mutex_lock(&s->lock);
            int fits = s->body_total + *upload_size <= s->max_body_total;
            if (fits) s->body_total += *upload_size, k->held += *upload_size;
            pthread_mutex_unlock(&s->lock);
            if (!fits) k->over_total = 1, sbuf_release(&k->body);
        }
        if (!k->too_big && !k->over_total && sbuf_append(&k->body, upload, *upload_size))
            k->too_big = 1;
        k->got += *upload_size;
        *upload_size = 0;
        /* a body trickled in slowly holds a connection for nothing: cut off */
        double dt = qg_now_s() - k->t0;
        if (dt > s->body_grace_s && (double)k->got < dt * s->body_min_rate) return MHD_NO;
        return MHD_YES;
    }
    pthread_mutex_lock(&s->lock);
    s->requests++;
    enum fault f = strcmp(method, "POST") ? F_NONE : sv_draw_fault(s);
    if (f) s->faults++;
    pthread_mutex_unlock(&s->lock);
    int injected = sv_inject_fault(s, c, f);
    if (injected >= 0) return (enum MHD_Result)injected;
    if (!open_endpoint(method, url) && !authorized(s, c))
        return sv_send_error(c, 401, "authentication_error",
                             "missing or wrong API key (Authorization: Bearer ...)");
    if (!strcmp(method, "GET") && (!strcmp(url, "/health") || !strcmp(url, "/v1/health")))
        return sv_send_text(c, 200, "{\"status\":\"ok\"}", 15, "application/json", NULL);
    if (!strcmp(method, "GET") && !strcmp(url, "/v1/models")) return models(s, c, NULL);
    if (!strcmp(method, "GET") && !strcmp(url, "/props") && !s->native) return props(s, c);
    if (!strcmp(method, "GET") && s->native &&
        !strcmp(url, s->native == SV_NATIVE_TGI ? "/info" : "/get_model_info"))
        return sv_native_info(s, c);
    if (!strcmp(method, "GET") && !strncmp(url, "/v1/models/", 11)) return models(s, c, url + 11);
    if (!strcmp(method, "POST") &&
        (!strcmp(url, "/v1/completions") || !strcmp(url, "/v1/chat/completions") ||
         !strcmp(url, "/tokenize") || !strcmp(url, "/detokenize") ||
         !strcmp(url, "/apply-template") || (s->native && !strcmp(url, "/generate"))))
        return handle_post(s, c, url, k, f);
    return sv_send_error(c, 404, "invalid_request_error", "no endpoint %s %s", method, url);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct conn *k = *con_cls;
    if (!k) return;
    struct server *s = cls;
    pthread_mutex_lock(&s->lock);
    s->body_total -= k->held;
    pthread_mutex_unlock(&s->lock);
    sbuf_release(&k->body);
    free(k);
    *con_cls = NULL;
}

/* Frees s and what it owns (its daemon stopped, or never started). */
static void server_free(struct server *s)
{
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->pool_lock);
    pthread_cond_destroy(&s->pool_free);
    free(s->busy);
    free(s->held_since);
    free(s->api_key);
    for (int i = 0; s->piece && i < s->n_piece; i++)
        free(s->piece[i]);
    free(s->piece);
    free(s->piece_chars);
    free(s);
}

/* Every token's text (valid UTF-8) and character count, read once: the
 * requests share them read-only. */
static void load_pieces(struct server *s, const struct backend *b)
{
    s->n_piece = s->info.n_vocab > 0 ? s->info.n_vocab : 0;
    s->piece = calloc((size_t)(s->n_piece ? s->n_piece : 1), sizeof *s->piece);
    s->piece_chars = calloc((size_t)(s->n_piece ? s->n_piece : 1), sizeof *s->piece_chars);
    for (int32_t id = 0; s->piece && s->piece_chars && id < s->n_piece; id++) {
        char buf[512];
        int len = backend_piece(b, id, buf, sizeof buf);
        if (len < 0) len = 0;
        if ((size_t)len >= sizeof buf) len = sizeof buf - 1;
        buf[len] = '\0';
        s->piece[id] = utf8_sanitize(buf);
        for (int k = 0; k < len; k++) /* lead bytes: a character split over tokens counts once */
            s->piece_chars[id] += ((unsigned char)buf[k] & 0xC0) != 0x80;
    }
}

int serve_start(struct backend *b, int n_backends, const struct serve_params *p,
                struct server **out, int *bound_port, char *err, size_t errlen)
{
    *out = NULL;
    struct server *s = calloc(1, sizeof *s);
    if (!s || n_backends < 1 || !(s->busy = calloc((size_t)n_backends, 1)) ||
        !(s->held_since = calloc((size_t)n_backends, sizeof *s->held_since))) {
        if (s) free(s->busy), free(s);
        return qg_errf(err, errlen, n_backends < 1 ? QG_ERR_USAGE : QG_ERR_NOMEM,
                       n_backends < 1 ? "no backend to serve" : "out of memory");
    }
    s->b = b;
    s->nb = n_backends;
    s->started = time(NULL);
    pthread_mutex_init(&s->pool_lock, NULL);
    pthread_cond_init(&s->pool_free, NULL);
    backend_info(b, &s->info);
    load_pieces(s, b);
    snprintf(s->model_id, sizeof s->model_id, "%s",
             p->model_id && *p->model_id ? p->model_id : "qgate");
    s->api_key = p->api_key ? qg_strdup(p->api_key) : NULL;
    s->max_body = p->max_body ? p->max_body : (size_t)16 << 20;
    s->max_body_total = p->max_body_total ? p->max_body_total : (size_t)256 << 20;
    s->stall_ms = p->testing.stall_ms > 0 ? p->testing.stall_ms : 5000;
    s->min_latency_ms = p->testing.min_latency_ms;
    s->idle_timeout_s = p->idle_timeout_s > 0 ? p->idle_timeout_s : 30;
    s->body_grace_s = p->body_grace_s > 0 ? p->body_grace_s : 10;
    s->body_min_rate = p->body_min_rate > 0 ? p->body_min_rate : 1024;
    s->no_prompt_logprobs = p->testing.no_prompt_logprobs;
    s->no_vllm_prompt_logprobs = p->testing.no_vllm_prompt_logprobs;
    s->plain_tokenize = p->testing.plain_tokenize;
    s->text_prompts_only = p->testing.text_prompts_only;
    s->rng = p->testing.fault_seed ^ 0x5EED5EEDull;
    pthread_mutex_init(&s->lock, NULL);
    int rc = p->testing.faults ? sv_parse_faults(s, p->testing.faults, err, errlen) : QG_OK;
    if (!rc && (!s->piece || !s->piece_chars))
        rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory (the token table)");
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
    const char *host = p->host ? p->host : "127.0.0.1";
    if (!rc && inet_pton(AF_INET, host, &sin.sin_addr) != 1)
        rc = qg_errf(err, errlen, QG_ERR_USAGE, "--host '%s' is not an IPv4 address", host);
    unsigned pool = (unsigned)(p->threads > 0 ? p->threads : 4);
    unsigned per_ip = SERVE_MAX_CONNECTIONS / pool / 2;
    if (!rc) {
        /* MHD_USE_AUTO: epoll here; select() would refuse every socket
         * numbered over 1023, which a busy server (or one in a process
         * with many files open) reaches */
        s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, (uint16_t)p->port,
                                NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, &sin,
                                MHD_OPTION_THREAD_POOL_SIZE, pool, MHD_OPTION_NOTIFY_COMPLETED,
                                completed, s,
                                /* a silent connection (headers or body not coming) is closed */
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->idle_timeout_s,
                                /* bounded: an exposed server cannot be held open by idle or
                                 * slow clients (per address, and in all). The total is split
                                 * among the pool's threads, so one address gets at most half
                                 * of one thread's share: it can never fill a thread. */
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVE_MAX_CONNECTIONS,
                                MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                                /* strict HTTP: a NUL or a bare CR in a header is a 400 */
                                MHD_OPTION_STRICT_FOR_CLIENT, 1, MHD_OPTION_END);
        if (!s->d)
            rc = qg_errf(err, errlen, QG_ERR_UNAVAILABLE,
                         "cannot listen on %s:%d (in use, or not allowed)", host, p->port);
    }
    if (rc) {
        server_free(s);
        return rc;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    if (bound_port) *bound_port = di ? di->port : p->port;
    *out = s;
    return QG_OK;
}

void serve_stop(struct server *s)
{
    if (!s) return;
    MHD_stop_daemon(s->d);
    server_free(s);
}

double serve_busy_seconds(struct server *s)
{
    pthread_mutex_lock(&s->pool_lock);
    double b = s->busy_seconds;
    pthread_mutex_unlock(&s->pool_lock);
    return b;
}

void serve_counts(struct server *s, int64_t *requests, int64_t *faults)
{
    pthread_mutex_lock(&s->lock);
    if (requests) *requests = s->requests;
    if (faults) *faults = s->faults;
    pthread_mutex_unlock(&s->lock);
}

int64_t serve_max_in_flight(struct server *s)
{
    pthread_mutex_lock(&s->lock);
    int64_t m = s->max_in_flight;
    pthread_mutex_unlock(&s->lock);
    return m;
}

/* serve — OpenAI-compatible HTTP server over a backend (see serve.h). */
#include "serve/serve.h"
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

enum fault { F_NONE, F_500, F_429, F_RESET, F_STALL, F_TRUNCATE, F_MALFORMED, F_COUNT };
static const char *const fault_names[F_COUNT] = {"",      "500",      "429",      "reset",
                                                 "stall", "truncate", "malformed"};

struct server {
    struct MHD_Daemon *d;
    struct backend *b; /* [nb] instances of the same model */
    int nb;
    unsigned char *busy;
    double *held_since, busy_seconds; /* under pool_lock */
    pthread_mutex_t pool_lock;
    pthread_cond_t pool_free;
    struct backend_info info;
    char model_id[256];
    char *api_key;
    size_t max_body;
    int idle_timeout_s;
    double body_grace_s, body_min_rate;
    int stall_ms, min_latency_ms, no_prompt_logprobs, no_vllm_prompt_logprobs, plain_tokenize,
        text_prompts_only;
    int llama_server; /* answer as llama.cpp's llama-server (serve.h) */
    time_t started;   /* "created" of the model object */
    char *
        *piece; /* [n_piece]: each token's text, valid UTF-8 (read-only: shared by all requests) */
    int32_t *piece_chars; /* [n_piece]: the characters of each token's raw bytes */
    int n_piece;
    double rate[F_COUNT];
    uint64_t rng;
    pthread_mutex_t lock; /* the fault generator, the counters and ids */
    int64_t requests, faults, next_id, in_flight, max_in_flight;
};

struct conn {
    struct sbuf body;
    int too_big;
    double t0;  /* when the headers were complete */
    size_t got; /* body bytes so far */
};

/* ------------------------------------------------------------ responses */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *body,
                                 size_t n, const char *type, const char *retry_after)
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

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s)
        return send_text(c, 500,
                         "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}",
                         61, "application/json", NULL);
    enum MHD_Result ok = send_text(c, status, s, strlen(s), "application/json", NULL);
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
__attribute__((format(printf, 3, 0))) static cJSON *error_body(unsigned status, const char *type,
                                                               const char *fmt, va_list ap)
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

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *type,
                                  const char *fmt, ...) QG_PRINTF(4, 5);
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *type,
                                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cJSON *j = error_body(status, type, fmt, ap);
    va_end(ap);
    return send_json(c, status, j);
}

/* ------------------------------------------------------------ helpers */

static enum fault draw_fault(struct server *s)
{
    double u = (double)(rng_next(&s->rng) >> 11) / 9007199254740992.0, acc = 0;
    for (int f = 1; f < F_COUNT; f++) {
        acc += s->rate[f];
        if (u < acc) return (enum fault)f;
    }
    return F_NONE;
}

/* A backend instance no other request is using (waits for one). */
static struct backend *acquire(struct server *s)
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

static void release(struct server *s, struct backend *b)
{
    pthread_mutex_lock(&s->pool_lock);
    s->busy_seconds += qg_now_s() - s->held_since[b - s->b];
    s->busy[b - s->b] = 0;
    pthread_cond_signal(&s->pool_free);
    pthread_mutex_unlock(&s->pool_lock);
}

/* The prompt as token ids: a string (tokenized with BOS), an array of ids,
 * or a one-element array of either. 0 or an HTTP status with msg. */
static unsigned prompt_ids(struct server *s, struct backend *b, const cJSON *p, int32_t **ids,
                           int64_t *n, char **text, char *msg, size_t msglen)
{
    *ids = NULL, *n = 0, *text = NULL;
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && !cJSON_IsNumber(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p)) {
        int rc = backend_tokenize(b, p->valuestring, strlen(p->valuestring), 1, ids, n);
        if (rc)
            return snprintf(msg, msglen, "cannot tokenize the prompt: %s", qg_strerror(rc)), 400;
        *text = qg_strdup(p->valuestring);
        return 0;
    }
    if (s->text_prompts_only) return snprintf(msg, msglen, "\"prompt\" must be a string"), 400;
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0)
        return snprintf(msg, msglen,
                        "\"prompt\" must be a string or a non-empty array of token ids (one prompt "
                        "per request)"),
               400;
    int64_t k = cJSON_GetArraySize(p), i = 0;
    *ids = malloc((size_t)k * sizeof **ids);
    if (!*ids) return snprintf(msg, msglen, "out of memory"), 500;
    const cJSON *v;
    cJSON_ArrayForEach(v, p)
    {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
            v->valuedouble >= s->info.n_vocab) {
            free(*ids), *ids = NULL;
            return snprintf(msg, msglen, "prompt token %lld is not a token id in [0, %d)",
                            (long long)i, s->info.n_vocab),
                   400;
        }
        (*ids)[i++] = (int32_t)v->valuedouble;
    }
    *n = k;
    *text = backend_detokenize(b, *ids, k);
    if (!*text) *text = qg_strdup("");
    return 0;
}

static const char *piece_of(const struct server *s, int32_t id)
{
    return s->piece && id >= 0 && id < s->n_piece && s->piece[id] ? s->piece[id] : "";
}

/* Scores seq (n tokens) from its second token: lp[n-1], and the rows of
 * log-probs rows[n-1][V] when want_rows (malloc'd). Runs while the request
 * holds b. */
static int score_seq(struct server *s, struct backend *b, const int32_t *seq, int64_t n,
                     int want_rows, double **lp, float **rows)
{
    int64_t m = n - 1; /* scored positions: tokens 1..n-1 */
    *lp = NULL, *rows = NULL;
    if (m <= 0) return QG_OK;
    *lp = malloc((size_t)m * sizeof **lp);
    if (want_rows) *rows = malloc((size_t)m * (size_t)s->info.n_vocab * sizeof **rows);
    if (!*lp || (want_rows && !*rows)) return QG_ERR_NOMEM;
    struct backend_score req = {
        .tokens = seq, .n_tokens = (int)n, .from = 1, .logprob = *lp, .rows = *rows};
    return backend_score(b, &req);
}

/* The logprobs object of seq[first..n-1] from score_seq's lp and rows
 * (seq[0] gets null when included). Needs no backend: pieces come from the
 * server's table, so it runs after the request gave its instance back. */
static cJSON *logprobs_json(struct server *s, const int32_t *seq, int64_t n, int64_t n_prompt,
                            int64_t first, int top_k, const double *lp, const float *rows,
                            const int64_t *offsets)
{
    int V = s->info.n_vocab;
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens"),
          *ids = cJSON_AddArrayToObject(o, "token_ids"),
          *tlp = cJSON_AddArrayToObject(o, "token_logprobs"),
          *top = cJSON_AddArrayToObject(o, "top_logprobs"),
          *off = cJSON_AddArrayToObject(o, "text_offset"),
          *topid = cJSON_AddArrayToObject(o, "top_token_ids");
    int64_t offset = 0;
    for (int64_t i = first; i < n; i++) {
        const char *pc = piece_of(s, seq[i]);
        cJSON_AddItemToArray(toks, cJSON_CreateString(pc));
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(seq[i]));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(offsets ? offsets[i] : offset)));
        offset += (int64_t)strlen(pc);
        if (i == 0 || (s->no_prompt_logprobs && i < n_prompt)) {
            cJSON_AddItemToArray(tlp, cJSON_CreateNull());
            cJSON_AddItemToArray(top, cJSON_CreateNull());
            cJSON_AddItemToArray(topid, cJSON_CreateNull());
            continue;
        }
        cJSON_AddItemToArray(tlp, cJSON_CreateNumber(lp[i - 1]));
        if (top_k <= 0) {
            cJSON_AddItemToArray(top, cJSON_CreateNull());
            cJSON_AddItemToArray(topid, cJSON_CreateNull());
            continue;
        }
        cJSON *pairs = cJSON_CreateArray();
        cJSON_AddItemToArray(topid, pairs);
        /* the top_k entries of the row, by selection */
        const float *row = rows + (size_t)(i - 1) * (size_t)V;
        cJSON *t = cJSON_CreateObject();
        int32_t chosen[32];
        int k = top_k < 32 ? top_k : 32;
        if (k > V) k = V;
        for (int j = 0; j < k; j++) {
            int32_t best = -1;
            for (int32_t v = 0; v < V; v++) {
                int taken = 0;
                for (int q = 0; q < j && !taken; q++)
                    taken = chosen[q] == v;
                if (!taken && (best < 0 || row[v] > row[best])) best = v;
            }
            chosen[j] = best;
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(best));
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(row[best]));
            cJSON_AddItemToArray(pairs, pair);
            /* two ids with the same piece text keep the larger probability */
            const char *bp = piece_of(s, best);
            if (!cJSON_GetObjectItemCaseSensitive(t, bp)) cJSON_AddNumberToObject(t, bp, row[best]);
        }
        cJSON_AddItemToArray(top, t);
    }
    if (s->text_prompts_only) { /* a plain OpenAI-style answer: no id extensions */
        cJSON_DeleteItemFromObject(o, "token_ids");
        cJSON_DeleteItemFromObject(o, "top_token_ids");
    }
    return o;
}

/* vLLM's prompt_logprobs for the n prompt tokens of seq: null for the
 * first, then per token an object keyed by token id (as a string) holding
 * {"logprob", "rank", "decoded_token"} for the token itself and the k most
 * likely. */
static cJSON *vllm_prompt_logprobs(struct server *s, const int32_t *seq, int64_t n, int k,
                                   const double *lp, const float *rows)
{
    int V = s->info.n_vocab;
    if (k > V) k = V;
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; i < n; i++) {
        if (i == 0) {
            cJSON_AddItemToArray(a, cJSON_CreateNull());
            continue;
        }
        const float *row = rows + (size_t)(i - 1) * (size_t)V;
        cJSON *o = cJSON_CreateObject();
        int32_t chosen[21];
        int n_chosen = 0;
        for (int j = 0; j < k && j < 20; j++) { /* the j-th most likely, by selection */
            int32_t best = -1;
            for (int32_t v = 0; v < V; v++) {
                int taken = 0;
                for (int q = 0; q < n_chosen && !taken; q++)
                    taken = chosen[q] == v;
                if (!taken && (best < 0 || row[v] > row[best])) best = v;
            }
            chosen[n_chosen++] = best;
        }
        int has_self = 0;
        for (int q = 0; q < n_chosen; q++)
            has_self |= chosen[q] == seq[i];
        if (!has_self) chosen[n_chosen++] = seq[i];
        for (int q = 0; q < n_chosen; q++) {
            int32_t id = chosen[q];
            double v = id == seq[i] ? lp[i - 1] : (double)row[id];
            int rank = 1;
            for (int32_t u = 0; u < V; u++)
                rank += row[u] > row[id];
            char key[16];
            snprintf(key, sizeof key, "%d", (int)id);
            cJSON *e = cJSON_AddObjectToObject(o, key);
            cJSON_AddNumberToObject(e, "logprob", v);
            cJSON_AddNumberToObject(e, "rank", rank);
            cJSON_AddStringToObject(e, "decoded_token", piece_of(s, id));
        }
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* ------------------------------------------------------------ endpoints */

static unsigned fail(cJSON **out, unsigned status, const char *type, const char *fmt, ...)
    QG_PRINTF(4, 5);
static unsigned fail(cJSON **out, unsigned status, const char *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    *out = error_body(status, type, fmt, ap);
    va_end(ap);
    return status;
}

/* A completion: the status and the response body (a result or an error). */
/* A completion request, parsed and range-checked. */
#define SERVE_MAX_BIAS 300 /* logit_bias entries, as OpenAI allows */
struct completion_req {
    int echo, top_k, plp_k, max_tokens; /* top_k -1: no logprobs; plp_k -1: no prompt_logprobs */
    int stream, include_usage;
    struct backend_gen_params gp;
    const char *stops[4];
    int32_t bias_ids[SERVE_MAX_BIAS];
    float bias[SERVE_MAX_BIAS];
};

/* A completion's results; owned, freed by completion_out_release. */
struct completion_out {
    int32_t *ids, *gen, *seq;
    int64_t *offsets; /* [n + n_gen]: each token's text_offset, in characters */
    int64_t n, n_gen;
    char *ptext, *gtext;
    cJSON *lpo, *plpo;
};

static void completion_out_release(struct completion_out *o)
{
    cJSON_Delete(o->lpo);
    cJSON_Delete(o->plpo);
    free(o->ids), free(o->gen), free(o->seq), free(o->ptext), free(o->gtext), free(o->offsets);
}

/* An optional integer member k in [0, hi]; *v untouched when absent or null. */
static int opt_int(const cJSON *req, const char *k, double hi, int *v)
{
    const cJSON *j = cJSON_GetObjectItem(req, k);
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > hi) return -1;
    *v = (int)j->valuedouble;
    return 0;
}

/* Sampling: ranges checked before any conversion (an out-of-range one is undefined). */
static unsigned parse_sampling(const cJSON *req, struct completion_req *q, cJSON **out)
{
    const cJSON *v;
    if ((v = cJSON_GetObjectItem(req, "temperature")) && cJSON_IsNumber(v)) {
        if (!(v->valuedouble >= 0 && v->valuedouble <= 100))
            return fail(out, 400, "invalid_request_error", "\"temperature\" must be in [0, 100]");
        q->gp.temperature = (float)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItem(req, "top_p")) && cJSON_IsNumber(v)) {
        if (!(v->valuedouble > 0 && v->valuedouble <= 1))
            return fail(out, 400, "invalid_request_error", "\"top_p\" must be in (0, 1]");
        q->gp.top_p = (float)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItem(req, "seed")) &&
        cJSON_IsNumber(v)) { /* an integer; a negative one as its 64-bit pattern */
        double d = v->valuedouble;
        if (d != floor(d) || d < -9223372036854775808.0 || d >= 18446744073709551616.0)
            return fail(out, 400, "invalid_request_error", "\"seed\" must be an integer");
        q->gp.seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    }
    const cJSON *st = cJSON_GetObjectItem(req, "stop");
    if (cJSON_IsString(st))
        q->stops[q->gp.n_stop++] = st->valuestring;
    else if (cJSON_IsArray(st)) {
        cJSON_ArrayForEach(v, st)
        {
            if (!cJSON_IsString(v) || q->gp.n_stop == 4)
                return fail(out, 400, "invalid_request_error",
                            "\"stop\" must be a string or up to 4 strings");
            q->stops[q->gp.n_stop++] = v->valuestring;
        }
    }
    q->gp.stop = q->stops;
    return 0;
}

/* logit_bias {"ID": bias in [-100, 100]} into q. 0 or the error's status. */
static unsigned parse_bias(struct server *s, const cJSON *lb, struct completion_req *q, cJSON **out)
{
    const cJSON *e;
    if (!lb || cJSON_IsNull(lb)) return 0;
    if (!cJSON_IsObject(lb))
        return fail(out, 400, "invalid_request_error",
                    "\"logit_bias\" must be an object of token id -> bias");
    cJSON_ArrayForEach(e, lb)
    {
        int64_t id;
        if (q->gp.n_bias == SERVE_MAX_BIAS)
            return fail(out, 400, "invalid_request_error", "\"logit_bias\" holds at most %d tokens",
                        SERVE_MAX_BIAS);
        if (qg_parse_i64(e->string, 0, s->info.n_vocab - 1, &id))
            return fail(out, 400, "invalid_request_error",
                        "\"logit_bias\": '%s' is not a token id in [0, %d)", e->string,
                        s->info.n_vocab);
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= -100 && e->valuedouble <= 100))
            return fail(out, 400, "invalid_request_error",
                        "\"logit_bias\": the bias of token %lld must be a number in [-100, 100]",
                        (long long)id);
        q->bias_ids[q->gp.n_bias] = (int32_t)id;
        q->bias[q->gp.n_bias++] = (float)e->valuedouble;
    }
    q->gp.bias_ids = q->bias_ids;
    q->gp.bias = q->bias;
    return 0;
}

/* What OpenAI's API has beyond the basics: suffix and best_of (refused,
 * not ignored), logit_bias, stream and stream_options. */
static unsigned parse_extras(struct server *s, const cJSON *req, struct completion_req *q,
                             cJSON **out)
{
    const cJSON *v = cJSON_GetObjectItem(req, "suffix");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !*v->valuestring))
        return fail(out, 400, "invalid_request_error",
                    "\"suffix\" (insertion) is not supported by this server");
    v = cJSON_GetObjectItem(req, "best_of");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 1))
        return fail(out, 400, "invalid_request_error", "only \"best_of\": 1 is supported");
    q->stream = cJSON_IsTrue(cJSON_GetObjectItem(req, "stream"));
    q->include_usage = cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(req, "stream_options"), "include_usage"));
    return parse_bias(s, cJSON_GetObjectItem(req, "logit_bias"), q, out);
}

/* 0 with *q filled, or the HTTP status of the error written to *out. */
static unsigned parse_completion(struct server *s, const cJSON *req, struct completion_req *q,
                                 cJSON **out)
{
    memset(q, 0, sizeof *q);
    static const char *const llama_unsupported[] = {"best_of", "echo", "suffix"};
    for (int i = 0; s->llama_server && i < 3; i++)
        if (cJSON_GetObjectItem(req, llama_unsupported[i])) { /* its form: a numeric code */
            fail(out, 500, "server_error", "Unsupported param: %s", llama_unsupported[i]);
            cJSON_ReplaceItemInObject(cJSON_GetObjectItem(*out, "error"), "code",
                                      cJSON_CreateNumber(500));
            return 500;
        }
    const cJSON *model = cJSON_GetObjectItem(req, "model");
    if (model && (!cJSON_IsString(model) || strcmp(model->valuestring, s->model_id)))
        return fail(out, 404, "invalid_request_error",
                    "model '%s' is not served here (this server serves '%s')",
                    cJSON_IsString(model) ? model->valuestring : "?", s->model_id);
    const cJSON *n_choices = cJSON_GetObjectItem(req, "n");
    if (n_choices && (!cJSON_IsNumber(n_choices) || n_choices->valuedouble != 1))
        return fail(out, 400, "invalid_request_error", "only \"n\": 1 is supported");
    q->echo = cJSON_IsTrue(cJSON_GetObjectItem(req, "echo"));
    q->top_k = q->plp_k = -1;
    q->max_tokens = 16;
    if (opt_int(req, "logprobs", 20, &q->top_k))
        return fail(out, 400, "invalid_request_error", "\"logprobs\" must be an integer 0..20");
    const cJSON *jp = s->llama_server ? NULL : cJSON_GetObjectItem(req, "prompt_logprobs");
    if (jp && !cJSON_IsNull(jp) && s->no_vllm_prompt_logprobs)
        return fail(out, 400, "invalid_request_error", "unknown parameter \"prompt_logprobs\"");
    if (jp && opt_int(req, "prompt_logprobs", 20, &q->plp_k))
        return fail(out, 400, "invalid_request_error",
                    "\"prompt_logprobs\" must be an integer 0..20");
    if (opt_int(req, "max_tokens", 1e6, &q->max_tokens))
        return fail(out, 400, "invalid_request_error",
                    "\"max_tokens\" must be a non-negative integer");
    q->gp = (struct backend_gen_params){
        .max_tokens = q->max_tokens, .temperature = 1.0f, .top_p = 1.0f, .seed = 0};
    unsigned st = parse_extras(s, req, q, out);
    return st ? st : parse_sampling(req, q, out);
}

/* Each token's text_offset in the text the answer returns (the prompt's
 * text when echoed, then the generated text), in characters: the
 * characters of the pieces before it (piece_chars, so a character split
 * over byte tokens counts once), SentencePiece's leading space of the first
 * word not counted. malloc'd [n], NULL on no memory. */
static int64_t *text_offsets(const struct server *s, const int32_t *seq, int64_t n_prompt,
                             int64_t n, int echo, const char *ptext)
{
    int64_t *off = malloc((size_t)(n ? n : 1) * sizeof *off);
    int64_t pchars = echo ? serve_chars(ptext) : 0, run = 0, base = 0, lead = -1;
    for (int64_t i = 0; off && i < n; i++) {
        if (i == n_prompt) base = run;
        if (i < n_prompt) {
            int64_t c = run - (lead > 0 ? lead : 0);
            off[i] = c < 0 ? 0 : c < pchars ? c : pchars;
        } else {
            off[i] = pchars + run - base;
        }
        int32_t id = seq[i];
        int64_t c = id >= 0 && id < s->n_piece ? s->piece_chars[id] : 0;
        /* the first word's space, which the prompt's text lacks */
        if (lead < 0 && c > 0)
            lead = i < n_prompt && piece_of(s, id)[0] == ' ' && ptext && ptext[0] != ' ';
        run += c;
    }
    return off;
}

/* Runs the request on a model instance: tokens, generation, log-probs.
 * 0 or an HTTP status with msg. */
static unsigned run_completion(struct server *s, const cJSON *req, const struct completion_req *q,
                               struct completion_out *o, char *msg, size_t msglen)
{
    int rc = QG_OK;
    struct backend *b = acquire(s);
    unsigned status = prompt_ids(s, b, cJSON_GetObjectItem(req, "prompt"), &o->ids, &o->n,
                                 &o->ptext, msg, msglen);
    /* n prompt tokens and max_tokens new ones take n + max_tokens - 1
     * evaluated positions (the last token is only a target) */
    if (!status && o->n + q->max_tokens - 1 > s->info.n_ctx_train && s->info.n_ctx_train > 0) {
        status = 400;
        snprintf(msg, msglen,
                 "prompt (%lld tokens) plus max_tokens (%d) needs %lld positions, over the context "
                 "length %d",
                 (long long)o->n, q->max_tokens, (long long)o->n + q->max_tokens - 1,
                 s->info.n_ctx_train);
    }
    if (!status && q->max_tokens > 0)
        rc = backend_generate(b, o->ids, o->n, &q->gp, &o->gtext, &o->gen, &o->n_gen);
    double *lp = NULL;
    float *rows = NULL;
    int64_t n = o->n, n_gen = o->n_gen;
    if (!status && !rc && ((q->top_k >= 0 && (q->echo || n_gen > 0)) || q->plp_k >= 0)) {
        o->seq = malloc((size_t)(n + n_gen) * sizeof *o->seq);
        if (!o->seq)
            rc = QG_ERR_NOMEM;
        else {
            memcpy(o->seq, o->ids, (size_t)n * sizeof *o->seq);
            if (n_gen) memcpy(o->seq + n, o->gen, (size_t)n_gen * sizeof *o->seq);
            /* the generated tokens only when their log-probs are asked for:
             * prompt_logprobs alone scores the prompt as echo does, in one
             * batch of the same size, so the numbers are the same */
            int64_t n_scored = q->top_k >= 0 ? n + n_gen : n;
            rc = score_seq(s, b, o->seq, n_scored, q->top_k > 0 || q->plp_k >= 0, &lp, &rows);
            if (!rc && q->top_k >= 0 &&
                !(o->offsets = text_offsets(s, o->seq, n, n + n_gen, q->echo, o->ptext)))
                rc = QG_ERR_NOMEM;
        }
    }
    release(s, b);
    if (!status && !rc && o->seq && q->top_k >= 0 &&
        !(o->lpo = logprobs_json(s, o->seq, n + n_gen, n, q->echo ? 0 : n, q->top_k, lp, rows,
                                 o->offsets)))
        rc = QG_ERR_NOMEM;
    if (!status && !rc && o->seq && q->plp_k >= 0 &&
        !(o->plpo = vllm_prompt_logprobs(s, o->seq, n, q->plp_k, lp, rows)))
        rc = QG_ERR_NOMEM;
    free(lp), free(rows);
    if (!status && rc) status = 500, snprintf(msg, msglen, "the model failed: %s", qg_strerror(rc));
    return status;
}

/* Appends text to the array a as valid UTF-8. */
static void add_clean(cJSON *a, const char *text)
{
    char *c = utf8_sanitize(text);
    cJSON_AddItemToArray(a, cJSON_CreateString(c ? c : ""));
    free(c);
}

/* The OpenAI text_completion object (takes o's log-prob objects). */
static cJSON *completion_json(struct server *s, int64_t id, const struct completion_req *q,
                              struct completion_out *o)
{
    struct sbuf text;
    sbuf_init(&text, (size_t)1 << 30);
    if (q->echo) sbuf_append(&text, o->ptext, strlen(o->ptext));
    if (o->gtext) sbuf_append(&text, o->gtext, strlen(o->gtext));
    char *clean = utf8_sanitize(text.data ? text.data : "");
    sbuf_release(&text);
    cJSON *j = cJSON_CreateObject();
    char cid[48];
    snprintf(cid, sizeof cid, "cmpl-qgate-%lld", (long long)id);
    cJSON_AddStringToObject(j, "id", cid);
    cJSON_AddStringToObject(j, "object", "text_completion");
    cJSON_AddNumberToObject(j, "created", (double)time(NULL));
    cJSON_AddStringToObject(j, "model", s->model_id);
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "choices"), ch);
    cJSON_AddNumberToObject(ch, "index", 0);
    cJSON_AddStringToObject(ch, "text", clean ? clean : "");
    if (o->lpo)
        cJSON_AddItemToObject(ch, "logprobs", o->lpo), o->lpo = NULL;
    else
        cJSON_AddNullToObject(ch, "logprobs");
    if (o->plpo) cJSON_AddItemToObject(ch, "prompt_logprobs", o->plpo), o->plpo = NULL;
    cJSON_AddStringToObject(ch, "finish_reason",
                            q->max_tokens > 0 && o->n_gen >= q->max_tokens ? "length" : "stop");
    if (q->stream) { /* the pieces the stream is cut into (serve_fmt.h) */
        const char **pc = malloc((size_t)(o->n_gen + 1) * sizeof *pc);
        for (int64_t i = 0; pc && i < o->n_gen; i++)
            pc[i] = piece_of(s, o->gen[i]);
        cJSON *chunks = cJSON_AddArrayToObject(j, "_chunks");
        if (q->echo && o->ptext && *o->ptext) add_clean(chunks, o->ptext);
        cJSON *g = pc ? serve_chunks(o->gtext ? o->gtext : "", pc, o->n_gen) : NULL, *k;
        cJSON_ArrayForEach(k, g) add_clean(chunks, k->valuestring);
        cJSON_Delete(g);
        free(pc);
    }
    cJSON *u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)o->n);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)o->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(o->n + o->n_gen));
    free(clean);
    return j;
}

static unsigned completion(struct server *s, const cJSON *req, cJSON **out)
{
    struct completion_req q;
    unsigned status = parse_completion(s, req, &q, out);
    if (status) return status;
    char msg[512];
    struct completion_out o = {0};
    status = run_completion(s, req, &q, &o, msg, sizeof msg);
    pthread_mutex_lock(&s->lock);
    int64_t id = ++s->next_id;
    pthread_mutex_unlock(&s->lock);
    if (status) {
        fail(out, status, status == 500 ? "server_error" : "invalid_request_error", "%s", msg);
    } else {
        *out = completion_json(s, id, &q, &o);
        status = 200;
    }
    completion_out_release(&o);
    return status;
}

/* A finished completion (chat: a chat.completion) as the client asked
 * for it: one JSON body, or server-sent events when "stream" is true. */
static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, cJSON *body,
                              const cJSON *req, int chat)
{
    int stream = cJSON_IsTrue(cJSON_GetObjectItem(req, "stream"));
    if (status != 200 || !stream) {
        cJSON_DeleteItemFromObject(body, "_chunks");
        return send_json(c, status, body);
    }
    char *sse = serve_sse(body, chat,
                          cJSON_IsTrue(cJSON_GetObjectItem(
                              cJSON_GetObjectItem(req, "stream_options"), "include_usage")));
    cJSON_Delete(body);
    if (!sse) return send_error(c, 500, "server_error", "out of memory");
    enum MHD_Result ok = send_text(c, 200, sse, strlen(sse), "text/event-stream", NULL);
    free(sse);
    return ok;
}

/* A prompt list ["a", "b"] or [[ids], [ids]]: more than one prompt. */
static int is_batch(const cJSON *p)
{
    const cJSON *first = cJSON_GetArrayItem(p, 0);
    return cJSON_IsArray(p) && cJSON_GetArraySize(p) > 1 &&
           (cJSON_IsString(first) || cJSON_IsArray(first));
}

/* Several prompts: one completion each, their choices indexed in order and
 * their usage summed. The first error answers for the request. */
static unsigned completion_batch(struct server *s, const cJSON *req, cJSON **out)
{
    const cJSON *p = cJSON_GetObjectItem(req, "prompt"), *e;
    if (cJSON_IsTrue(cJSON_GetObjectItem(req, "stream")))
        return fail(out, 400, "invalid_request_error",
                    "\"stream\" takes one prompt per request, not a list");
    cJSON *all = NULL, *choices = NULL;
    double usage[3] = {0};
    static const char *const uk[3] = {"prompt_tokens", "completion_tokens", "total_tokens"};
    int i = 0;
    cJSON_ArrayForEach(e, p)
    {
        cJSON *one = cJSON_Duplicate(req, 1), *body = NULL;
        cJSON_ReplaceItemInObject(one, "prompt", cJSON_Duplicate(e, 1));
        unsigned st = completion(s, one, &body);
        cJSON_Delete(one);
        if (st != 200) {
            cJSON_Delete(all);
            *out = body;
            return st;
        }
        cJSON *ch = cJSON_DetachItemFromArray(cJSON_GetObjectItem(body, "choices"), 0);
        cJSON_ReplaceItemInObject(ch, "index", cJSON_CreateNumber(i++));
        for (int k = 0; k < 3; k++)
            usage[k] += json_num(cJSON_GetObjectItem(body, "usage"), uk[k], 0);
        if (!all) {
            all = body;
            choices = cJSON_GetObjectItem(all, "choices");
        } else {
            cJSON_Delete(body);
        }
        cJSON_AddItemToArray(choices, ch);
    }
    cJSON *u = cJSON_GetObjectItem(all, "usage");
    for (int k = 0; k < 3; k++)
        cJSON_ReplaceItemInObject(u, uk[k], cJSON_CreateNumber(usage[k]));
    *out = all;
    return 200;
}

static enum MHD_Result completions(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    cJSON *body = NULL;
    unsigned status = is_batch(cJSON_GetObjectItem(req, "prompt")) ? completion_batch(s, req, &body)
                                                                   : completion(s, req, &body);
    return answer(c, status, body, req, 0);
}

/* The chat template (documented in serve.h): each message as "Role: text"
 * followed by a blank line, then "Assistant:". 0 with the prompt in p, or
 * 400 with msg. */
static unsigned render_messages(const cJSON *msgs, struct sbuf *p, char *msg, size_t msglen)
{
    const cJSON *m;
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return snprintf(msg, msglen, "\"messages\" must be a non-empty array"), 400;
    cJSON_ArrayForEach(m, msgs)
    {
        const cJSON *role = cJSON_GetObjectItem(m, "role"),
                    *content = cJSON_GetObjectItem(m, "content"), *part;
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        const char *name = !strcmp(r, "system") || !strcmp(r, "developer") ? "System"
                           : !strcmp(r, "user")                            ? "User"
                           : !strcmp(r, "assistant")                       ? "Assistant"
                                                                           : NULL;
        if (!name || !(cJSON_IsString(content) || cJSON_IsArray(content)))
            return snprintf(msg, msglen,
                            "each message needs \"role\" (system, developer, user or assistant) "
                            "and \"content\" (a string or an array of text parts)"),
                   400;
        sbuf_printf(p, "%s: ", name);
        if (cJSON_IsString(content)) sbuf_printf(p, "%s", content->valuestring);
        int k = 0;
        const cJSON *parts = cJSON_IsArray(content) ? content : NULL;
        cJSON_ArrayForEach(part, parts)
        {
            const cJSON *text = cJSON_GetObjectItem(part, "text");
            if (strcmp(json_str(part, "type", ""), "text") || !cJSON_IsString(text))
                return snprintf(msg, msglen,
                                "content parts must be {\"type\": \"text\", \"text\": ...}: "
                                "this server takes text only"),
                       400;
            sbuf_printf(p, "%s%s", k++ ? "\n" : "", text->valuestring);
        }
        sbuf_printf(p, "\n\n");
    }
    sbuf_printf(p, "Assistant:");
    return p->failed ? (snprintf(msg, msglen, "the messages are too long"), 400) : 0;
}

/* The request's "messages" rendered into p: 1, or 0 with the error sent
 * (*sent) and p released. */
static int render_request(struct server *s, struct MHD_Connection *c, const cJSON *req,
                          struct sbuf *p, enum MHD_Result *sent)
{
    char msg[256];
    sbuf_init(p, s->max_body);
    unsigned st = render_messages(cJSON_GetObjectItem(req, "messages"), p, msg, sizeof msg);
    if (!st) return 1;
    sbuf_release(p);
    *sent = send_error(c, st, "invalid_request_error", "%s", msg);
    return 0;
}

/* POST /apply-template: the prompt the chat template makes of "messages". */
static enum MHD_Result apply_template(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    struct sbuf p;
    enum MHD_Result sent;
    if (!render_request(s, c, req, &p, &sent)) return sent;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "prompt", p.data ? p.data : "");
    sbuf_release(&p);
    return send_json(c, 200, j);
}

/* Chat's own options into the completion request creq: max_completion_tokens
 * (the current name of max_tokens), logprobs true with top_logprobs K. 0 or
 * the status of the error in *out. */
static unsigned chat_options(const cJSON *req, cJSON *creq, cJSON **out)
{
    const cJSON *mct = cJSON_GetObjectItem(req, "max_completion_tokens");
    if (mct && !cJSON_IsNull(mct)) {
        cJSON_DeleteItemFromObject(creq, "max_tokens");
        cJSON_DeleteItemFromObject(creq, "max_completion_tokens");
        cJSON_AddItemToObject(creq, "max_tokens", cJSON_Duplicate(mct, 1));
    }
    const cJSON *lp = cJSON_GetObjectItem(req, "logprobs"),
                *top = cJSON_GetObjectItem(req, "top_logprobs");
    if (lp && !cJSON_IsNull(lp) && !cJSON_IsBool(lp))
        return fail(out, 400, "invalid_request_error", "\"logprobs\" must be true or false");
    if (top && !cJSON_IsNull(top) &&
        (!cJSON_IsNumber(top) || top->valuedouble < 0 || top->valuedouble > 20 ||
         top->valuedouble != floor(top->valuedouble)))
        return fail(out, 400, "invalid_request_error", "\"top_logprobs\" must be an integer 0..20");
    if (top && cJSON_IsNumber(top) && !cJSON_IsTrue(lp))
        return fail(out, 400, "invalid_request_error", "\"top_logprobs\" needs \"logprobs\": true");
    if (cJSON_IsTrue(lp))
        cJSON_AddNumberToObject(creq, "logprobs", cJSON_IsNumber(top) ? top->valuedouble : 0);
    return 0;
}

/* text_completion -> chat.completion: the message (its leading spaces, of
 * "Assistant: hello", dropped, from the stream's chunks too) and chat
 * log-probs. */
static void chat_answer(cJSON *body, const cJSON *req)
{
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(body, "choices"), 0);
    const cJSON *t = cJSON_GetObjectItem(ch, "text");
    const char *text = cJSON_IsString(t) ? t->valuestring : "";
    while (*text == ' ')
        text++;
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON_AddStringToObject(msg, "content", text);
    cJSON_AddNullToObject(msg, "refusal");
    cJSON_AddItemToObject(ch, "message", msg);
    cJSON_DeleteItemFromObject(ch, "text");
    cJSON *lp = cJSON_DetachItemFromObject(ch, "logprobs");
    const cJSON *top = cJSON_GetObjectItem(req, "top_logprobs");
    cJSON *clp = cJSON_IsObject(lp)
                     ? serve_chat_logprobs(lp, cJSON_IsNumber(top) ? (int)top->valuedouble : 0)
                     : NULL;
    cJSON_Delete(lp);
    if (clp)
        cJSON_AddItemToObject(ch, "logprobs", clp);
    else
        cJSON_AddNullToObject(ch, "logprobs");
    cJSON_ReplaceItemInObject(body, "object", cJSON_CreateString("chat.completion"));
    cJSON *chunks = cJSON_GetObjectItem(body, "_chunks"), *k;
    while ((k = cJSON_GetArrayItem(chunks, 0)) && cJSON_IsString(k)) {
        const char *v = k->valuestring;
        while (*v == ' ')
            v++;
        if (*v) {
            cJSON_ReplaceItemInArray(chunks, 0, cJSON_CreateString(v));
            break;
        }
        cJSON_DeleteItemFromArray(chunks, 0);
    }
}

/* Chat: the rendered messages completed; generation also stops at
 * "\nUser:". */
static enum MHD_Result chat(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    struct sbuf p;
    enum MHD_Result sent;
    if (!render_request(s, c, req, &p, &sent)) return sent;
    cJSON *creq = cJSON_Duplicate(req, 1), *body_err = NULL;
    cJSON_DeleteItemFromObject(creq, "messages");
    cJSON_DeleteItemFromObject(creq, "logprobs");
    cJSON_DeleteItemFromObject(creq, "top_logprobs");
    cJSON_DeleteItemFromObject(creq, "echo");
    cJSON_AddStringToObject(creq, "prompt", p.data ? p.data : "");
    sbuf_release(&p);
    cJSON *st = cJSON_GetObjectItem(creq, "stop");
    if (!st)
        cJSON_AddItemToObject(creq, "stop", cJSON_CreateString("\nUser:"));
    else if (cJSON_IsString(st)) {
        cJSON *arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, cJSON_CreateString(st->valuestring));
        cJSON_AddItemToArray(arr, cJSON_CreateString("\nUser:"));
        cJSON_ReplaceItemInObject(creq, "stop", arr);
    } else if (cJSON_IsArray(st) && cJSON_GetArraySize(st) < 4) {
        cJSON_AddItemToArray(st, cJSON_CreateString("\nUser:"));
    }
    unsigned bad2 = chat_options(req, creq, &body_err);
    cJSON *body = body_err;
    unsigned status = bad2 ? bad2 : completion(s, creq, &body);
    cJSON_Delete(creq);
    if (status == 200) chat_answer(body, req);
    return answer(c, status, body, req, 1);
}

static enum MHD_Result tokenize(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    const cJSON *t = cJSON_GetObjectItem(req, "content");
    if (!t) t = cJSON_GetObjectItem(req, "prompt");
    if (!cJSON_IsString(t))
        return send_error(c, 400, "invalid_request_error",
                          "\"content\" (or \"prompt\") must be a string");
    const cJSON *sp = cJSON_GetObjectItem(req, "add_special");
    if (!sp) sp = cJSON_GetObjectItem(req, "add_special_tokens");
    int add = sp ? cJSON_IsTrue(sp) : 1;
    int with_pieces = cJSON_IsTrue(cJSON_GetObjectItem(req, "with_pieces")) && !s->plain_tokenize;
    int32_t *ids = NULL;
    int64_t n = 0;
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "tokens");
    struct backend *b = acquire(s);
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
    release(s, b);
    if (rc) {
        cJSON_Delete(j);
        return send_error(c, 400, "invalid_request_error", "cannot tokenize: %s", qg_strerror(rc));
    }
    cJSON_AddNumberToObject(j, "count", (double)n);
    cJSON_AddNumberToObject(j, "max_model_len", s->info.n_ctx_train);
    free(ids);
    return send_json(c, 200, j);
}

static enum MHD_Result detokenize(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    const cJSON *a = cJSON_GetObjectItem(req, "tokens"), *v;
    if (!cJSON_IsArray(a))
        return send_error(c, 400, "invalid_request_error",
                          "\"tokens\" must be an array of token ids");
    int64_t n = cJSON_GetArraySize(a), i = 0;
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return send_error(c, 500, "server_error", "out of memory");
    cJSON_ArrayForEach(v, a)
    {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= s->info.n_vocab ||
            v->valuedouble != floor(v->valuedouble)) {
            free(ids);
            return send_error(c, 400, "invalid_request_error",
                              "token %lld is not a token id in [0, %d)", (long long)i,
                              s->info.n_vocab);
        }
        ids[i++] = (int32_t)v->valuedouble;
    }
    struct backend *b = acquire(s);
    char *text = backend_detokenize(b, ids, n);
    release(s, b);
    free(ids);
    char *clean = utf8_sanitize(text ? text : "");
    free(text);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "content", clean ? clean : "");
    cJSON_AddStringToObject(j, "prompt", clean ? clean : "");
    free(clean);
    return send_json(c, 200, j);
}

/* GET /v1/models (one: NULL) or /v1/models/{one}. */
static enum MHD_Result models(struct server *s, struct MHD_Connection *c, const char *one)
{
    if (one && strcmp(one, s->model_id))
        return send_error(c, 404, "invalid_request_error",
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
        return send_json(c, 200, j);
    }
    cJSON_AddStringToObject(m, "owned_by", "qgate");
    cJSON_AddNumberToObject(m, "max_model_len", s->info.n_ctx_train);
    cJSON_AddNumberToObject(m, "n_vocab", s->info.n_vocab);
    return send_json(c, 200, j);
}

/* ------------------------------------------------------------ dispatch */

/* Endpoints open without the API key, as llama.cpp's server leaves them:
 * the health check and the model list. */
static int open_endpoint(const char *method, const char *url)
{
    return !strcmp(method, "GET") &&
           (!strcmp(url, "/health") || !strcmp(url, "/v1/health") || !strcmp(url, "/v1/models") ||
            !strncmp(url, "/v1/models/", 11));
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

/* An injected fault that answers for the request (MHD_YES/MHD_NO), or -1
 * to go on (a stall has then been served). */
static int inject_fault(struct server *s, struct MHD_Connection *c, enum fault f)
{
    switch (f) {
    case F_500:
        return send_error(c, 500, "server_error", "injected fault: internal error");
    case F_429: {
        const char *b = "{\"error\":{\"message\":\"injected fault: rate "
                        "limited\",\"type\":\"rate_limit_error\",\"code\":429}}";
        return send_text(c, 429, b, strlen(b), "application/json", "0");
    }
    case F_RESET:
        return MHD_NO; /* closes the connection without a response */
    case F_STALL:
        usleep((useconds_t)s->stall_ms * 1000);
        return -1;
    default:
        return -1;
    }
}

/* A POST to one of the JSON endpoints, with its body read. */
static enum MHD_Result handle_post(struct server *s, struct MHD_Connection *c, const char *url,
                                   const struct conn *k, enum fault f)
{
    if (k->too_big)
        return send_error(c, 413, "invalid_request_error", "request body over %zu bytes",
                          s->max_body);
    cJSON *req = cJSON_ParseWithLength(k->body.data ? k->body.data : "", k->body.len);
    if (!cJSON_IsObject(req)) {
        cJSON_Delete(req);
        return send_error(c, 400, "invalid_request_error", "the request body is not a JSON object");
    }
    if (f == F_TRUNCATE || f == F_MALFORMED) {
        cJSON_Delete(req);
        const char *b =
            f == F_TRUNCATE
                ? "{\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"choices\":[{\"text\":\""
                : "<html>not json";
        return send_text(c, 200, b, strlen(b), "application/json", NULL);
    }
    pthread_mutex_lock(&s->lock);
    if (++s->in_flight > s->max_in_flight) s->max_in_flight = s->in_flight;
    pthread_mutex_unlock(&s->lock);
    if (s->min_latency_ms > 0) usleep((useconds_t)s->min_latency_ms * 1000);
    enum MHD_Result out = !strcmp(url, "/v1/completions")        ? completions(s, c, req)
                          : !strcmp(url, "/v1/chat/completions") ? chat(s, c, req)
                          : !strcmp(url, "/tokenize")            ? tokenize(s, c, req)
                          : !strcmp(url, "/apply-template")      ? apply_template(s, c, req)
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
            return send_error(c, 401, "authentication_error",
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
        if (!k->too_big && sbuf_append(&k->body, upload, *upload_size)) k->too_big = 1;
        k->got += *upload_size;
        *upload_size = 0;
        /* a body trickled in slowly holds a connection for nothing: cut off */
        double dt = qg_now_s() - k->t0;
        if (dt > s->body_grace_s && (double)k->got < dt * s->body_min_rate) return MHD_NO;
        return MHD_YES;
    }
    pthread_mutex_lock(&s->lock);
    s->requests++;
    enum fault f = strcmp(method, "POST") ? F_NONE : draw_fault(s);
    if (f) s->faults++;
    pthread_mutex_unlock(&s->lock);
    int injected = inject_fault(s, c, f);
    if (injected >= 0) return (enum MHD_Result)injected;
    if (!open_endpoint(method, url) && !authorized(s, c))
        return send_error(c, 401, "authentication_error",
                          "missing or wrong API key (Authorization: Bearer ...)");
    if (!strcmp(method, "GET") && (!strcmp(url, "/health") || !strcmp(url, "/v1/health")))
        return send_text(c, 200, "{\"status\":\"ok\"}", 15, "application/json", NULL);
    if (!strcmp(method, "GET") && !strcmp(url, "/v1/models")) return models(s, c, NULL);
    if (!strcmp(method, "GET") && !strncmp(url, "/v1/models/", 11)) return models(s, c, url + 11);
    if (!strcmp(method, "POST") &&
        (!strcmp(url, "/v1/completions") || !strcmp(url, "/v1/chat/completions") ||
         !strcmp(url, "/tokenize") || !strcmp(url, "/detokenize") ||
         !strcmp(url, "/apply-template")))
        return handle_post(s, c, url, k, f);
    return send_error(c, 404, "invalid_request_error", "no endpoint %s %s", method, url);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct conn *k = *con_cls;
    if (!k) return;
    sbuf_release(&k->body);
    free(k);
    *con_cls = NULL;
}

static int parse_faults(struct server *s, const char *spec, char *err, size_t errlen)
{
    char *copy = qg_strdup(spec), *save = NULL;
    if (!copy) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    double total = 0;
    int rc = QG_OK;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        double r;
        int f = 0;
        if (!strcmp(tok, "llama-server")) {
            s->llama_server = 1;
            continue;
        }
        if (colon) {
            *colon = '\0';
            for (int i = 1; i < F_COUNT && !f; i++)
                if (!strcmp(tok, fault_names[i])) f = i;
        }
        if (!colon || !f || qg_parse_f64(colon + 1, &r) || !(r >= 0 && r <= 1))
            rc = qg_errf(err, errlen, QG_ERR_USAGE,
                         "bad fault '%s': want KIND:RATE with KIND 500, 429, reset, stall, "
                         "truncate or malformed and RATE in [0, 1], or llama-server",
                         tok);
        else
            s->rate[f] += r, total += r;
    }
    if (!rc && total > 1)
        rc = qg_errf(err, errlen, QG_ERR_USAGE, "fault rates add up to %g, more than 1", total);
    free(copy);
    return rc;
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
    s->stall_ms = p->stall_ms > 0 ? p->stall_ms : 5000;
    s->min_latency_ms = p->min_latency_ms;
    s->idle_timeout_s = p->idle_timeout_s > 0 ? p->idle_timeout_s : 30;
    s->body_grace_s = p->body_grace_s > 0 ? p->body_grace_s : 10;
    s->body_min_rate = p->body_min_rate > 0 ? p->body_min_rate : 1024;
    s->no_prompt_logprobs = p->no_prompt_logprobs;
    s->no_vllm_prompt_logprobs = p->no_vllm_prompt_logprobs;
    s->plain_tokenize = p->plain_tokenize;
    s->text_prompts_only = p->text_prompts_only;
    s->rng = p->fault_seed ^ 0x5EED5EEDull;
    pthread_mutex_init(&s->lock, NULL);
    int rc = p->faults ? parse_faults(s, p->faults, err, errlen) : QG_OK;
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

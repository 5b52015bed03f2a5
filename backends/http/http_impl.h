/* http_impl — what the HTTP backend's files share (folder-private): the
 * backend's state, a reply being read, a transfer in flight, and the
 * helpers one file defines for the others (hp_ names). */
#ifndef QG_HTTP_IMPL_H
#define QG_HTTP_IMPL_H

#include "backends/backend.h"
#include "backends/tokenizer.h"
#include "core/util.h"
#include "datasets/hash.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

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
    int chat_reserve;              /* chat=1: positions the template takes (-1: measure at open) */
    int ctx_user, ctx_from_models; /* n_ctx was ctx=N / /v1/models' */
    int api, api_set;              /* HP_API_*: the scoring route's dialect; api= given */
    char ctx_source[96];           /* where n_ctx came from */
    char server[160];              /* "llama-server b4748-c392e5094", "" unknown */
    char sys_fp[128];              /* the answers' system_fingerprint, "" none */
    char *prov;                    /* provenance JSON (backend_info), built at open */
    double timeout;
    uint64_t rng;
    char err[QG_ERRMSG_MAX];
    struct reply reply; /* of the single-request handle */
};

enum { TRY_AGAIN = 1 };

/* Scoring dialects: OpenAI completions (echo / prompt_logprobs), SGLang's
 * native /generate (input_token_logprobs), TGI's /generate
 * (details.prefill). */
enum { HP_API_OPENAI = 0, HP_API_SGLANG = 1, HP_API_TGI = 2 };

/* native.c: a native /generate body scoring ids[from..n-1] (malloc'd;
 * NULL with h->err), and its answer parsed into r (QG_OK, or the error in
 * h->err: QG_ERR_UNSUPPORTED when the server gives no prompt log-probs). */
char *hp_native_body(struct http *h, const int32_t *ids, int n, int from, int top_k);
int hp_native_parse(struct http *h, const char *url, const cJSON *ans,
                    const struct backend_score *r);

/* Keeps an answer's system_fingerprint (the first seen) for the record. */
void hp_note_fingerprint(struct http *h, const cJSON *ans);

/* The lowest log-prob qgate accepts from a server (nats): below it (or
 * above 0, or not finite) the number is impossible, not a rare token. */
#define HTTP_LOGPROB_FLOOR (-1e4)

/* One scoring transfer of score_many. */
struct xfer {
    CURL *e;
    char *body;
    struct reply reply;
    int active, done, attempts;
    double not_before;
    char last[512];
};

#define HTTP_CHAT_SLACK 2 /* tokens a merge across the template's edges may add */

#define HTTP_CHAT_RESERVE 32 /* the template's share when it cannot be measured */

/* Seconds to wait before retry number attempt (1, 2, ...): exponential with
 * jitter, capped at 2 s, and at least what the server asked for. */
double hp_backoff(struct http *h, int attempt, double retry_after);

/* Replaces every occurrence of the API key in s by "[redacted]": a server
 * may echo the Authorization header in an error body. */
void hp_redact_key(const struct http *h, char *s, size_t cap);

/* Judges a finished transfer: QG_OK with *ans (HTTP 200 with JSON);
 * TRY_AGAIN with the reason in last (a transport error or timeout, 408,
 * 429, 500 without a message saying what is unsupported, 502, 503, 504, a
 * 200 body that is not complete JSON); QG_ERR_UNSUPPORTED for an answer
 * that a parameter is unsupported (any status, and 501), never retried;
 * else a refusal, in h->err. */
int hp_judge(struct http *h, const char *url, CURLcode cc, long code, const struct reply *r,
             cJSON **ans, char *last, size_t lastlen);

/* POSTs body (or GETs when body is NULL) to url and parses the JSON answer.
 * Retries what is worth retrying. QG_OK with *out, else an error in h->err
 * (QG_ERR_UNAVAILABLE after the retries, QG_ERR_DATA / QG_ERR_USAGE for a
 * refusal, with *status the last HTTP status). */
int hp_request(struct http *h, const char *url, const char *body, cJSON **out, long *status);

/* the id whose decoded text is text; -1 when none or several */
int32_t hp_piece_lookup(const struct http *h, const char *text);

int hp_build_pieces(struct http *h);

int hp_parse_score(struct http *h, const char *url, const cJSON *ans,
                   const struct backend_score *r);

/* The cache key of a request: sha256 of the request-format version, the
 * endpoint, the served model and the body. */
void hp_cache_key(const struct http *h, const char *url, const char *body,
                  char key[HASH_HEX_LEN + 1]);

int hp_x_start(struct http *h, CURLM *m, struct xfer *x, const char *url);

/* POSTs a deterministic request, answered from the cache when it can be;
 * as request() otherwise. */
int hp_post_cached(struct http *h, const char *url, const char *body, cJSON **out, long *status);

/* Tokenizes text (n bytes) on the server, through the cache unless live
 * (open()'s checks ask the server itself). *status: the last HTTP status
 * (404 or 405: no /tokenize). */
int hp_server_tokenize(struct http *h, const char *text, size_t n, int add, int live, int32_t **ids,
                       int64_t *n_ids, long *status);

/* Detokenizes ids on the server: a malloc'd string, or NULL with h->err. */
char *hp_server_detokenize(struct http *h, const int32_t *ids, int64_t n);

/* The text of id from the server: remembered, or learnt by detokenizing
 * [pair_a, id] and removing pair_a's own text (a lone SentencePiece piece
 * would lose its leading space); [id] alone when that does not fit. */
int hp_server_piece(struct http *h, int32_t id, char *buf, size_t cap);

/* The API key: from keyvar when the spec names one (which must be set),
 * else QGATE_API_KEY or OPENAI_API_KEY; *key NULL when none. */
int hp_api_key(const struct http *h, const char *keyvar, const char **key, char *err,
               size_t errlen);

/* The curl handles and the options every request shares. */
int hp_open_curl(struct http *h, const char *key, char *err, size_t errlen);

/* http.c's tokenizer and scoring of one id sequence (log-probs
 * of ids[from..n-1]), for probe.c. */
int hp_tokenize(struct http *h, const char *text, size_t n, int add_special, int32_t **ids,
                int64_t *n_ids);
/* A prompt as text for a server that takes text only: ids detokenized, a
 * leading BOS left out (the server adds it). malloc'd; NULL with h->err. */
char *hp_prompt_text(struct http *h, const int32_t *ids, int n);
int hp_score_ids(struct http *h, const int32_t *ids, int n, int from, double *lp);

/* probe.c: what open learns, in order. The model list (the id served; its
 * context and vocabulary, checked against tokpath's); the context a request
 * gets; the tokenizer (*ids: the sample's ids); the scoring route; the chat
 * template's overhead; the record (JSON, malloc'd). */
extern const char *const hp_open_sample;
int hp_probe_models(struct http *h, const char *tokpath, char *err, size_t errlen);
void hp_probe_context(struct http *h);
int hp_check_tokenizer(struct http *h, const char *tokpath, int32_t **ids, int64_t *n_ids,
                       char *err, size_t errlen);
int hp_probe_scoring(struct http *h, const int32_t *ids, int64_t n_ids, char *err, size_t errlen);
void hp_chat_overhead(struct http *h, const char *sample);
char *hp_provenance(const struct http *h);

int hp_http_piece(void *impl, int32_t id, char *buf, size_t cap);

#endif

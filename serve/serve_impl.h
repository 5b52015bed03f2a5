/* serve_impl — what the server's files share (folder-private): the server
 * and connection state, a completion request, and the helpers one file
 * defines for the others (sv_ names). */
#ifndef QG_SERVE_IMPL_H
#define QG_SERVE_IMPL_H

#include "serve/serve.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>

/* The build llama-server emulation reports (/props build_info and every
 * answer's system_fingerprint): the February 2025 server it answers as. */
#define SV_LLAMA_BUILD "b4748-c392e5094"

enum fault { F_NONE, F_500, F_429, F_RESET, F_STALL, F_TRUNCATE, F_MALFORMED, F_COUNT };

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
    size_t max_body, max_body_total;
    size_t body_total; /* request body bytes held now, all connections (under lock) */
    int idle_timeout_s;
    double body_grace_s, body_min_rate;
    int stall_ms, min_latency_ms, no_prompt_logprobs, no_vllm_prompt_logprobs, plain_tokenize,
        text_prompts_only;
    int llama_server; /* answer as llama.cpp's llama-server (serve.h) */
    int slot_ctx;     /* > 0: a slot's context, as llama-server -c N: longer prompts are cut
                       * from the left (usage.prompt_tokens says so), as it does */
    int stale_props;  /* /props reports the trained context instead of the slot's */
    int native;       /* SV_NATIVE_*: also answer as SGLang's or TGI's native API */
    int no_prefill;   /* TGI started without --enable-prefill-logprobs: prefill [] */
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
    int over_total; /* the server held too many bodies: 503, this one not buffered */
    size_t held;    /* this body's bytes counted in server.body_total */
    double t0;      /* when the headers were complete */
    size_t got;     /* body bytes so far */
};

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

enum MHD_Result sv_send_text(struct MHD_Connection *c, unsigned status, const char *body, size_t n,
                             const char *type, const char *retry_after);
enum MHD_Result sv_send_json(struct MHD_Connection *c, unsigned status, cJSON *j);
/* An OpenAI-style error body {"error":{"message","type","param","code"}},
 * code a string or null. */
cJSON *sv_error_body(unsigned status, const char *type, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
enum MHD_Result sv_send_error(struct MHD_Connection *c, unsigned status, const char *type,
                              const char *fmt, ...) QG_PRINTF(4, 5);
enum fault sv_draw_fault(struct server *s);
/* A backend instance no other request is using (waits for one). */
struct backend *sv_acquire(struct server *s);
void sv_release(struct server *s, struct backend *b);
/* *out = an error body; returns status. */
unsigned sv_fail(cJSON **out, unsigned status, const char *type, const char *fmt, ...)
    QG_PRINTF(4, 5);
unsigned sv_completion(struct server *s, const cJSON *req, cJSON **out);
/* native.c: SGLang's and TGI's own endpoints (POST /generate, GET /info or
 * /get_model_info, TGI's POST /tokenize), in their shapes. */
enum { SV_NATIVE_NONE, SV_NATIVE_SGLANG, SV_NATIVE_TGI };
enum MHD_Result sv_native_generate(struct server *s, struct MHD_Connection *c, const cJSON *req);
enum MHD_Result sv_native_tokenize(struct server *s, struct MHD_Connection *c, const cJSON *req);
enum MHD_Result sv_native_info(struct server *s, struct MHD_Connection *c);
/* A finished completion (chat: a chat.completion) as the client asked
 * for it: one JSON body, or server-sent events when "stream" is true. */
enum MHD_Result sv_answer(struct MHD_Connection *c, unsigned status, cJSON *body, const cJSON *req,
                          int chat);
enum MHD_Result sv_completions(struct server *s, struct MHD_Connection *c, const cJSON *req);
/* POST /apply-template: the prompt the chat template makes of "messages". */
enum MHD_Result sv_apply_template(struct server *s, struct MHD_Connection *c, const cJSON *req);
/* Chat: the rendered messages completed; generation also stops at
 * "\nUser:". */
enum MHD_Result sv_chat(struct server *s, struct MHD_Connection *c, const cJSON *req);
/* An injected fault that answers for the request (MHD_YES/MHD_NO), or -1
 * to go on (a stall has then been served). */
int sv_inject_fault(struct server *s, struct MHD_Connection *c, enum fault f);
int sv_parse_faults(struct server *s, const char *spec, char *err, size_t errlen);

#endif

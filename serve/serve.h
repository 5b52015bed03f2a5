/* serve — an OpenAI-compatible HTTP server over any backend (libmicrohttpd),
 * for `qgate serve` and for testing the HTTP backend against a real server.
 *
 * Endpoints: GET /health and GET /v1/models[/ID] (open without the API
 * key, as llama.cpp's server leaves them), POST /v1/completions (prompt as
 * text, token ids, or a list of either answered as one choice each; echo;
 * logprobs with top-K and text_offset in characters of the returned text;
 * max_tokens; temperature, top_p, seed, stop, logit_bias; suffix and
 * best_of refused; stream as server-sent events with
 * stream_options.include_usage), POST /v1/chat/completions (system,
 * developer, user and assistant messages, content as a string or text
 * parts; max_completion_tokens; logprobs with top_logprobs in
 * choices[].logprobs.content; stream), POST /tokenize, POST /detokenize,
 * POST /apply-template. A stream is sent when the answer is complete, one
 * event per generated token (serve_fmt.h). Error codes are strings
 * ("invalid_api_key", "model_not_found", ...) or null.
 *
 * Chat template (a model without its own): every message becomes
 * "System: ...", "User: ..." or "Assistant: ..." followed by a blank line,
 * then "Assistant:" is appended; generation also stops at "\nUser:", and the
 * reply's leading spaces are dropped. Errors are
 * OpenAI-style bodies {"error":{"message","type","code"}}. Requests are
 * served concurrently by a thread pool; each takes a backend instance of its
 * own from a pool, so concurrent requests never see one another's state.
 *
 * Extensions: completions' logprobs carry "token_ids" next to "tokens", so a
 * client can check that the server scored exactly the ids it sent, and
 * "top_token_ids" next to "top_logprobs": per position [[id, logprob], ...],
 * exact where texts are ambiguous (a byte token and a word can decode to the
 * same text). As vLLM does, "prompt_logprobs": K (0..20) adds
 * choices[0].prompt_logprobs: null for the first prompt token, then per
 * token {"ID": {"logprob", "rank", "decoded_token"}} for the token itself
 * and the K most likely. As llama.cpp's server does, /tokenize with
 * "with_pieces": true lists tokens as {"id", "piece"}, the piece a string
 * when it is UTF-8 and an array of its bytes otherwise.
 *
 * POST /apply-template {"messages"} answers {"prompt"}: the messages as the
 * chat template renders them (llama.cpp's server has it too), so a client
 * can count the template's tokens.
 *
 * Fault injection (testing only): faults is a comma list KIND:RATE with
 * KIND one of 500, 429 (with Retry-After: 0), reset (connection closed
 * without a response), stall (the response waits stall_ms), truncate (half
 * the JSON body), malformed (a body that is not JSON). Each POST draws once
 * from a seeded generator; at most one fault applies. The item
 * "llama-server" instead answers as llama.cpp's llama-server (February
 * 2025 build) does: a completion naming "echo", "best_of" or "suffix" gets
 * HTTP 500 {"error":{"code":500,"message":"Unsupported param: echo",
 * "type":"server_error"}}; "prompt_logprobs" is ignored; log-probs cover
 * generated tokens only; /v1/models gives "meta" {"n_vocab",
 * "n_ctx_train"} instead of max_model_len; answers carry its
 * "system_fingerprint". "slot-ctx:N" gives a request N positions, as
 * llama-server -c N (-np slots share it): a longer prompt is cut from the
 * left ("input truncated"), which only usage.prompt_tokens shows; /props
 * says N ("stale-props": says the trained context instead). Every server
 * answers GET /props (default_generation_settings.n_ctx, total_slots,
 * build_info).
 */
#ifndef QG_SERVE_H
#define QG_SERVE_H

#include "backends/backend.h"

#include <stddef.h>
#include <stdint.h>

#define SERVE_MAX_CONNECTIONS 1024 /* open at once, in all (one address: see serve.c) */

struct serve_params {
    const char *host;      /* default 127.0.0.1 */
    int port;              /* 0: any free port (see *bound_port) */
    const char *model_id;  /* the id /v1/models lists and requests must name */
    const char *api_key;   /* NULL: no authentication; else Bearer KEY required */
    int threads;           /* connection threads (default 4) */
    size_t max_body;       /* request body limit in bytes (default 16 MiB) */
    size_t max_body_total; /* request bodies held at once, all connections (default 256 MiB):
                            * past it a request is answered 503, never buffered */
    int idle_timeout_s;    /* a connection silent this long is closed (default 30) */
    double body_grace_s;   /* a body still arriving after this long ... (default 10) */
    double body_min_rate;  /* ... at under this many bytes/s on average is cut off (default 1024) */
    /* testing only (serve/faults.c): injected faults, and answers as other
     * servers give them, for the HTTP backend's tests and `qgate serve
     * --inject-faults` */
    struct serve_testing {
        const char *faults; /* NULL or "500:0.1,429:0.05,...[,llama-server]" */
        uint64_t fault_seed;
        int stall_ms;                /* default 5000 */
        int no_prompt_logprobs;      /* log-probs of generated tokens only (null for every echoed
                                      * prompt token) */
        int no_vllm_prompt_logprobs; /* refuse "prompt_logprobs" (400), as a server without it */
        int plain_tokenize;          /* ignore "with_pieces" (ids only, as vLLM) */
        int text_prompts_only;       /* refuse token-id prompts (400) and answer without the id
                                      * extensions, as a server that takes text only */
        int min_latency_ms;          /* every POST takes at least this long (counted in flight while
                                      * it waits), as a remote server's round trip */
    } testing;
};

struct server;

/* Starts serving b[0..n_backends-1], instances of one model (borrowed: they
 * must outlive the server); each request uses one instance no other request
 * holds, so n_backends requests are computed at once. QG_OK, or
 * QG_ERR_USAGE (bad faults spec) / QG_ERR_UNAVAILABLE (cannot listen) with
 * err filled. */
int serve_start(struct backend *b, int n_backends, const struct serve_params *p,
                struct server **out, int *bound_port, char *err, size_t errlen);
/* Stops accepting, finishes the requests in flight and frees s. */
void serve_stop(struct server *s);
/* Requests answered so far (all endpoints), and faults injected. */
void serve_counts(struct server *s, int64_t *requests, int64_t *faults);
/* The most POST requests (completions, tokenize, ...) handled at once so
 * far: computing, or waiting for a model instance. */
int64_t serve_max_in_flight(struct server *s);
/* Seconds model instances have been held by requests so far, summed over
 * instances: busy / (instances x wall time) is how saturated the server
 * was. */
double serve_busy_seconds(struct server *s);

#endif

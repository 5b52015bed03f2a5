/* backend — the one interface every model backend implements (cpu/,
 * cuda/ and http/), and the inline wrappers callers use.
 *
 * A backend is a constant `struct backend_ops` (versioned, capability bits,
 * designated initialisers) plus an opaque instance. Required slots: open,
 * close, info, errmsg. Optional slots (NULL when not provided; the wrappers
 * then return QG_ERR_UNSUPPORTED): tokenize, detokenize, score, generate;
 * score_many (the wrapper falls back to score).
 *
 * How to add a backend: write backends/NAME/NAME.c defining
 * `const struct backend_ops backend_NAME_ops`, declare it below, add it to
 * the registry in backends/backend.c (under #ifdef when it has an optional
 * dependency), and give it a model-spec prefix ("cuda:", "http://").
 */
#ifndef QG_BACKEND_H
#define QG_BACKEND_H

#include "core/status.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BACKEND_API_VERSION 1

enum backend_caps {
    BACKEND_CAP_TOKENIZE = 1 << 0,
    BACKEND_CAP_SCORE = 1 << 1,     /* log-prob of each actual next token */
    BACKEND_CAP_FULL_ROWS = 1 << 2, /* full-vocabulary log-softmax rows */
    BACKEND_CAP_GENERATE = 1 << 3,
    BACKEND_CAP_TOP_K = 1 << 4, /* the top-K tokens per position without full rows (remote) */
};

/* A cache of deterministic remote responses (the store's http_cache). get
 * returns a malloc'd value or NULL; put stores one (errors ignored: a cache
 * miss costs a request, never a wrong number). */
struct backend_cache {
    void *ud;
    char *(*get)(void *ud, const char *key);
    void (*put)(void *ud, const char *key, const char *endpoint, const char *model,
                const char *value);
};

struct backend_open_params {
    int n_ctx;     /* largest window that will be evaluated (0 = model's own) */
    int n_threads; /* 0 = library default */
    int perturb;   /* != 0: a benign numerical perturbation, for measuring the noise floor:
                    * each window evaluated in two batches, and the residual stream rounded
                    * at its last bit by a hash seeded with this value (llama.h) */
    const struct backend_cache *cache; /* remote backends: NULL for none */
    int tokenizer_only; /* local backends: load the tokenizer alone (a vocab-only file opens);
                         * score and generate then answer QG_ERR_UNSUPPORTED */
};

/* The flags of backend_tokenize's add_special: BOS/EOS as the model says,
 * and control-token text such as "<s>" read as that token (local
 * tokenizers; a server's /tokenize decides for itself). */
enum { BACKEND_TOK_ADD_SPECIAL = 1 << 0, BACKEND_TOK_PARSE_SPECIAL = 1 << 1 };

struct backend_info {
    int n_vocab, n_ctx_train;
    int32_t bos, eos; /* -1 when none */
    int add_bos;
    const char *arch;       /* borrowed */
    size_t weight_bytes;    /* memory the weights take (local backends) */
    unsigned caps;          /* BACKEND_CAP_* this instance has (an endpoint may lack scoring);
                             * 0 from the backend: its ops' caps, filled in by backend_info */
    const char *provenance; /* a remote model: what was detected at open, as a JSON object
                             * (endpoint, model, server, fingerprint, route, capabilities,
                             * context and its source); NULL for a local one. Borrowed. */
};

/* One scoring request over a window evaluated from an empty context. */
struct backend_score {
    const int32_t *tokens;
    int n_tokens;
    int from;         /* score tokens[from..n_tokens-1]; 1 <= from < n_tokens. The
                       * last token is only a target: n_tokens - 1 positions are
                       * evaluated, so a window of n_ctx + 1 tokens fits n_ctx. */
    double *logprob;  /* out, [n_tokens - from]: log p(tokens[i] | tokens[<i]) */
    float *rows;      /* optional out, [(n_tokens - from) x n_vocab] log-softmax rows */
    int32_t *argmax;  /* optional out, [n_tokens - from]: the top-1 prediction */
    int top_k;        /* optional: > 0 asks for each position's top_k tokens (BACKEND_CAP_TOP_K) */
    int32_t *top_ids; /* out, [(n_tokens - from) x top_k], most likely first; -1 where unknown */
    float *top_lp;    /* out, the same layout: their log-probs */
};

struct backend_gen_params {
    int max_tokens;
    float temperature; /* 0 = greedy */
    float top_p;       /* 1 = off */
    uint64_t seed;
    const char *const *stop; /* stop strings (not included in the output) */
    int n_stop;
    const int32_t *bias_ids; /* logit_bias: bias[i] added to the logit of bias_ids[i] */
    const float *bias;
    int n_bias;
};

struct backend_ops {
    int version; /* BACKEND_API_VERSION */
    const char *name;
    unsigned caps;
    /* required */
    int (*open)(const char *target, const struct backend_open_params *p, void **impl, char *err,
                size_t errlen);
    void (*close)(void *impl);
    int (*info)(void *impl, struct backend_info *out);
    const char *(*errmsg)(void *impl);
    /* optional */
    int (*tokenize)(void *impl, const char *text, size_t n, int add_special, int32_t **ids,
                    int64_t *n_ids);
    char *(*detokenize)(void *impl, const int32_t *ids, int64_t n);
    /* The bytes token id stands for (see tok_piece); returns the length. */
    int (*piece)(void *impl, int32_t id, char *buf, size_t cap);
    int (*score)(void *impl, struct backend_score *req);
    /* Continues prompt; returns the generated text (malloc'd, stop string
     * removed) and, optionally, the generated ids. */
    int (*generate)(void *impl, const int32_t *prompt, int64_t n_prompt,
                    const struct backend_gen_params *p, char **text, int32_t **ids, int64_t *n_ids);
    /* Scores n independent requests, possibly concurrently (a remote
     * backend keeps many in flight). QG_OK when every one succeeded. */
    int (*score_many)(void *impl, struct backend_score *reqs, int n);
    /* The vocabulary's entry for id as the model file stores it
     * (SentencePiece's U+2581 kept; borrowed); NULL when unknown. */
    const char *(*vocab_text)(void *impl, int32_t id);
};

extern const struct backend_ops backend_cpu_ops;
extern const struct backend_ops backend_http_ops;
extern const struct backend_ops backend_cuda_ops; /* only with -DQG_CUDA=ON (QG_HAVE_CUDA) */

struct backend {
    const struct backend_ops *ops;
    void *impl;
};

/* Opens a model spec: "PATH.gguf" or "cpu:PATH.gguf" (cpu), or
 * "http(s)://HOST:PORT/v1?model=ID&tokenizer=PATH.gguf..." (backends/http). On failure err
 * says why; statuses as the backend's open. */
int backend_open(const char *spec, const struct backend_open_params *p, struct backend *out,
                 char *err, size_t errlen);
void backend_close(struct backend *b);

/* What a model spec names, read without loading it: for a local file the
 * sha256 of its bytes, architecture, parameter count, size, training
 * context and layers, and the tensor types actually stored; for a remote
 * model only what the spec says (sha256 "", counts -1). What the runner
 * records as a model's identity, and the CLI sizes a suite by. */
struct backend_identity {
    char sha256[65]; /* "" when remote, unreadable, or not asked for */
    char arch[64];   /* "" when unknown */
    int64_t n_params, file_bytes, n_ctx_train, n_layers; /* -1 when unknown */
    char *types_json; /* malloc'd JSON [{"type","count","bytes"}]; NULL when unknown */
};

/* Fills *id for spec (a local spec's ?query is ignored). hash: 1 to compute
 * the file's sha256 (a full read), 0 to leave it "". QG_OK, or
 * QG_ERR_NOINPUT / QG_ERR_DATA with err naming the file when a local file
 * cannot be read as GGUF (*id then holds what is known). Release with
 * backend_identity_release. */
/* sha256 of a model: the file's, or for a Hugging Face checkpoint
 * directory the hash over its files (hf_model.h). QG_OK or the reader's
 * error with err naming the file. */
int backend_model_sha256(const char *file, char sha[65], char *err, size_t errlen);

int backend_identify(const char *spec, int hash, struct backend_identity *id, char *err,
                     size_t errlen);
void backend_identity_release(struct backend_identity *id);

/* The backend's BACKEND_CAP_* bits. */
static inline unsigned backend_caps(const struct backend *b)
{
    return b->ops->caps;
}

static inline int backend_info(const struct backend *b, struct backend_info *out)
{
    memset(out, 0, sizeof *out);
    int rc = b->ops->info(b->impl, out);
    if (!out->caps) out->caps = b->ops->caps;
    return rc;
}

static inline const char *backend_errmsg(const struct backend *b)
{
    return b->ops->errmsg(b->impl);
}

static inline int backend_tokenize(const struct backend *b, const char *text, size_t n,
                                   int add_special, int32_t **ids, int64_t *n_ids)
{
    return b->ops->tokenize ? b->ops->tokenize(b->impl, text, n, add_special, ids, n_ids)
                            : QG_ERR_UNSUPPORTED;
}

static inline const char *backend_vocab_text(const struct backend *b, int32_t id)
{
    return b->ops->vocab_text ? b->ops->vocab_text(b->impl, id) : NULL;
}

static inline char *backend_detokenize(const struct backend *b, const int32_t *ids, int64_t n)
{
    return b->ops->detokenize ? b->ops->detokenize(b->impl, ids, n) : NULL;
}

static inline int backend_piece(const struct backend *b, int32_t id, char *buf, size_t cap)
{
    return b->ops->piece ? b->ops->piece(b->impl, id, buf, cap) : QG_ERR_UNSUPPORTED;
}

static inline int backend_score(const struct backend *b, struct backend_score *req)
{
    if (!b->ops->score) return QG_ERR_UNSUPPORTED;
    if (req->rows && !(b->ops->caps & BACKEND_CAP_FULL_ROWS)) return QG_ERR_UNSUPPORTED;
    if (req->top_k > 0 && !(b->ops->caps & BACKEND_CAP_TOP_K)) return QG_ERR_UNSUPPORTED;
    return b->ops->score(b->impl, req);
}

/* Scores n independent requests: through the backend's score_many when it
 * has one, else one after another. */
static inline int backend_score_many(const struct backend *b, struct backend_score *reqs, int n)
{
    if (!b->ops->score) return QG_ERR_UNSUPPORTED;
    for (int i = 0; i < n; i++)
        if ((reqs[i].rows && !(b->ops->caps & BACKEND_CAP_FULL_ROWS)) ||
            (reqs[i].top_k > 0 && !(b->ops->caps & BACKEND_CAP_TOP_K)))
            return QG_ERR_UNSUPPORTED;
    if (b->ops->score_many) return b->ops->score_many(b->impl, reqs, n);
    for (int i = 0; i < n; i++) {
        int rc = b->ops->score(b->impl, &reqs[i]);
        if (rc) return rc;
    }
    return QG_OK;
}

static inline int backend_generate(const struct backend *b, const int32_t *prompt, int64_t n,
                                   const struct backend_gen_params *p, char **text, int32_t **ids,
                                   int64_t *n_ids)
{
    return b->ops->generate ? b->ops->generate(b->impl, prompt, n, p, text, ids, n_ids)
                            : QG_ERR_UNSUPPORTED;
}

#endif

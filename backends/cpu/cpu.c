/* cpu — the local CPU backend: GGUF weights dequantised to f32, OpenBLAS. */
#include "backends/backend.h"
#include "backends/generate.h"
#include "backends/gguf.h"
#include "backends/hf_model.h"
#include "backends/llama.h"
#include "backends/local.h"
#include "backends/parallel.h"
#include "backends/simfmt.h"
#include "backends/tokenizer.h"
#include "backends/vecmath.h"
#include "core/status.h"
#include "core/util.h"
#include "core/rng.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LOGIT_ROWS = 128 };

struct cpu {
    struct tokenizer *tok;
    struct llama_model *model;
    struct llama_ctx *ctx;
    int n_ctx, n_threads, perturb;
    int ctx_set;   /* 1: ctx=N in the spec: n_ctx is the window reported */
    int pack;      /* 1: decode's copies are to be made at the first generation */
    float *logits; /* [LOGIT_ROWS][n_vocab]: output rows are computed in chunks */
    char err[QG_ERRMSG_MAX];
};

static void cpu_close(void *impl)
{
    struct cpu *c = impl;
    if (!c) return;
    llama_ctx_free(c->ctx);
    llama_free(c->model);
    tok_free(c->tok);
    free(c->logits);
    free(c);
}

/* A local spec's query (PATH.gguf?w=FORMAT&keep=GLOBS): what to simulate. */
struct sim_spec {
    struct simfmt w, a, kv;
    int act;      /* enum llama_act */
    int act_none; /* a=none: not even a checkpoint's declared activations */
    char keep[1024];
    int64_t ctx;   /* > 0: ctx=N, the context window instead of the file's */
    int no_repack; /* repack=0: as llama.cpp's --no-repack (no decode copies, vec_dot's order) */
    int repack_set;
};

static int parse_query(const char *spec, const char *q, struct sim_spec *s, char *err,
                       size_t errlen)
{
    memset(s, 0, sizeof *s);
    char key[64], val[1024], e2[256];
    int dev;
    while (local_query_next(&q, key, sizeof key, val, sizeof val)) {
        if (!strcmp(key, "w")) {
            if (simfmt_parse(val, &s->w, e2, sizeof e2))
                return qg_errf(err, errlen, QG_ERR_USAGE, "%s: w=: %s", spec, e2);
        } else if (!strcmp(key, "keep")) {
            snprintf(s->keep, sizeof s->keep, "%s", val);
        } else if (!strcmp(key, "a") && !strcmp(val, "none")) {
            s->act_none = 1;
        } else if (!strcmp(key, "a")) {
            s->act = !strcmp(val, "llamacpp") ? LLAMA_ACT_LLAMACPP : LLAMA_ACT_FORMAT;
            if (s->act == LLAMA_ACT_FORMAT && simfmt_parse(val, &s->a, e2, sizeof e2))
                return qg_errf(err, errlen, QG_ERR_USAGE, "%s: a=: %s (or a=llamacpp)", spec, e2);
        } else if (!strcmp(key, "device") && local_device(val, &dev) == 0) {
            /* device=cpu: this backend */
        } else if (!strcmp(key, "ctx")) {
            if (qg_parse_i64(val, 8, 1 << 20, &s->ctx))
                return qg_errf(err, errlen, QG_ERR_USAGE,
                               "%s: ctx= takes a window of 8..1048576 tokens, got '%s'", spec, val);
        } else if (!strcmp(key, "repack")) {
            if (strcmp(val, "0") && strcmp(val, "1"))
                return qg_errf(err, errlen, QG_ERR_USAGE,
                               "%s: repack= takes 0 (as llama.cpp's --no-repack: no decode "
                               "copies, ggml's vec_dot order) or 1 (the default: as llama.cpp "
                               "repacks), got '%s'",
                               spec, val);
            s->no_repack = !strcmp(val, "0"), s->repack_set = 1;
        } else if (!strcmp(key, "kv")) {
            if (simfmt_parse(val, &s->kv, e2, sizeof e2))
                return qg_errf(err, errlen, QG_ERR_USAGE, "%s: kv=: %s", spec, e2);
        } else {
            return qg_errf(err, errlen, QG_ERR_USAGE,
                           "%s: unknown key '%s' in the model spec (known: w=FORMAT, "
                           "a=FORMAT|llamacpp|none, kv=FORMAT, keep=GLOB,..., ctx=N, repack=0|1)",
                           spec, key);
        }
    }
    if (s->keep[0] && s->w.kind == SIMFMT_NONE)
        return qg_errf(err, errlen, QG_ERR_USAGE, "%s: keep= needs w=FORMAT", spec);
    if (s->repack_set && s->act != LLAMA_ACT_LLAMACPP)
        return qg_errf(err, errlen, QG_ERR_USAGE, "%s: repack= needs a=llamacpp", spec);
    return QG_OK;
}

static int cpu_open(const char *spec, const struct backend_open_params *p, void **impl, char *err,
                    size_t errlen)
{
    *impl = NULL;
    char path[4096];
    const char *q = strchr(spec, '?');
    qg_spec_file(spec, path, sizeof path);
    struct sim_spec sim;
    int rc = parse_query(spec, q ? q + 1 : "", &sim, err, errlen);
    if (rc) return rc;
    struct cpu *c = calloc(1, sizeof *c);
    if (!c) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    if (p && p->tokenizer_only) { /* no weights: a vocab-only file opens */
        struct gguf *g;
        if (!(rc = model_open(path, &g, err, errlen))) {
            rc = tok_load(g, path, &c->tok, err, errlen);
            gguf_close(g);
        }
        if (rc) cpu_close(c);
        *impl = rc ? NULL : c;
        return rc;
    }
    rc = local_load(path, &c->tok, &c->model, err, errlen);
    if (!rc) c->n_ctx = p && p->n_ctx > 0 ? p->n_ctx : llama_hparams(c->model)->ctx_train;
    if (!rc && sim.ctx > 0) c->n_ctx = (int)sim.ctx, c->ctx_set = 1;
    int n_sim = 0;
    if (!rc && sim.w.kind != SIMFMT_NONE)
        rc = llama_simulate_weights(c->model, &sim.w, sim.keep, &n_sim, err, errlen);
    /* decode's copies (llama_pack_decode) pay only where there is decode:
     * they are made at the first generation, not for scoring, which reads
     * the file as fast (repack=0: never) */
    c->pack = sim.act == LLAMA_ACT_LLAMACPP && !sim.no_repack;
    if (!rc && sim.no_repack && llama_no_repack(c->model)) /* as llama.cpp's --no-repack */
        rc = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", path);
    if (!rc) rc = llama_ctx_new(c->model, c->n_ctx, &c->ctx);
    const char *declared = rc ? NULL : llama_declared_act(c->model);
    if (!rc && !sim.act && !sim.act_none && declared) { /* as the checkpoint is deployed */
        char e2[256];
        if (simfmt_parse(declared, &sim.a, e2, sizeof e2) == QG_OK) {
            sim.act = LLAMA_ACT_FORMAT;
            llama_ctx_set_act_output(c->ctx, 0);
            llama_ctx_set_act_static(c->ctx, 1); /* ModelOpt's calibrated input scales */
        }
    }
    if (!rc && sim.act) rc = llama_ctx_set_act(c->ctx, sim.act, &sim.a);
    if (!rc && sim.kv.kind != SIMFMT_NONE) llama_ctx_set_kv(c->ctx, &sim.kv);
    if (!rc) {
        size_t V = (size_t)llama_hparams(c->model)->n_vocab;
        c->logits = malloc((size_t)LOGIT_ROWS * V * sizeof(float));
        if (!c->logits) rc = QG_ERR_NOMEM;
    }
    if (rc) {
        if (rc == QG_ERR_NOMEM)
            qg_errf(err, errlen, rc, "%s: out of memory (context %d)", path, c->n_ctx);
        cpu_close(c);
        return rc;
    }
    c->n_threads = p && p->n_threads > 0 ? p->n_threads : parallel_cpus();
    c->perturb = p && p->perturb;
    if (c->perturb) llama_ctx_set_perturb(c->ctx, 0x5eedull * (uint64_t)p->perturb);
    if (p && p->n_threads > 0) llama_ctx_set_threads(c->ctx, p->n_threads);
    *impl = c;
    return QG_OK;
}

static int cpu_info(void *impl, struct backend_info *o)
{
    struct cpu *c = impl;
    if (!c->model) { /* opened for its tokenizer only */
        o->n_vocab = tok_n_vocab(c->tok);
        o->bos = tok_bos(c->tok);
        o->eos = tok_eos(c->tok);
        o->add_bos = tok_add_bos(c->tok);
        o->arch = "";
        o->caps = BACKEND_CAP_TOKENIZE;
        return QG_OK;
    }
    local_info(c->tok, c->model, o);
    if (c->ctx_set) o->n_ctx_train = c->n_ctx; /* the window asked for */
    return QG_OK;
}

/* score and generate need the weights */
static int need_model(struct cpu *c, const char *what)
{
    return c->model ? QG_OK
                    : qg_errf(c->err, sizeof c->err, QG_ERR_UNSUPPORTED,
                              "%s: the model was opened for its tokenizer only", what);
}

static const char *cpu_errmsg(void *impl)
{
    return ((struct cpu *)impl)->err;
}

static int cpu_tokenize(void *impl, const char *text, size_t n, int add_special, int32_t **ids,
                        int64_t *n_ids)
{
    return tok_encode(((struct cpu *)impl)->tok, text, n, add_special & BACKEND_TOK_ADD_SPECIAL,
                      (add_special & BACKEND_TOK_PARSE_SPECIAL) != 0, ids, n_ids);
}

static const char *cpu_vocab_text(void *impl, int32_t id)
{
    return tok_text(((struct cpu *)impl)->tok, id);
}

static char *cpu_detokenize(void *impl, const int32_t *ids, int64_t n)
{
    return tok_decode(((struct cpu *)impl)->tok, ids, n, 0);
}

static int cpu_piece(void *impl, int32_t id, char *buf, size_t cap)
{
    return tok_piece(((struct cpu *)impl)->tok, id, 0, buf, cap);
}

/* log-softmax of one row as llama-perplexity: float max, double sum of
 * expf in index order. The exps are taken a vector at a time, EXP_CHUNK
 * ahead of the sum (the same values; the sum keeps its order) */
enum { EXP_CHUNK = 256 };
static double log_softmax_at(const float *row, int V, int32_t tok, float *out_row, int32_t *argmax)
{
    const float mx = vm_max(row, V, row[0]);
    double sum = 0;
    for (int i = 0; i < V; i += EXP_CHUNK) {
        float e[EXP_CHUNK];
        int n = V - i < EXP_CHUNK ? V - i : EXP_CHUNK;
        vm_exp_shifted(e, row + i, mx, n);
        for (int k = 0; k < n; k++)
            sum += e[k];
    }
    double lse = log(sum);
    if (out_row)
        for (int i = 0; i < V; i++)
            out_row[i] = (float)((double)(row[i] - mx) - lse);
    if (argmax) { /* the first maximum; 0 when row[0] is NaN (mx then is) */
        int32_t am = 0;
        while (am < V && !(row[am] == mx))
            am++;
        *argmax = am < V ? am : 0;
    }
    return (double)(row[tok] - mx) - lse;
}

struct lsm_job {
    const float *logits;
    int V, p0, from;
    struct backend_score *r;
};

/* log-softmax of rows [b, e) of one chunk of logits */
static void lsm_rows(void *arg, int64_t b, int64_t e, int thread)
{
    const struct lsm_job *j = arg;
    (void)thread;
    for (int64_t q = b; q < e; q++) {
        int k = j->p0 + (int)q + 1 - j->from;
        struct backend_score *r = j->r;
        r->logprob[k] = log_softmax_at(j->logits + (size_t)q * j->V, j->V, r->tokens[j->p0 + q + 1],
                                       r->rows ? r->rows + (size_t)k * j->V : NULL,
                                       r->argmax ? &r->argmax[k] : NULL);
    }
}

/* The message of a failed llama_eval: a non-finite result names the
 * tensor that holds a NaN or Inf, or says the activations overflowed. */
static int eval_error(struct cpu *c, int rc, const char *what)
{
    if (rc != QG_ERR_DATA)
        return qg_errf(c->err, sizeof c->err, rc, "%s: evaluation failed (%s)", what,
                       qg_strerror(rc));
    char e[QG_ERRMSG_MAX];
    int frc = llama_find_nonfinite(c->model, e, sizeof e);
    if (frc) return qg_errf(c->err, sizeof c->err, frc, "%s", e);
    return qg_errf(c->err, sizeof c->err, QG_ERR_DATA,
                   "%s: the model's activations became non-finite (an overflow: its weights are "
                   "all finite)",
                   what);
}

static int cpu_score(void *impl, struct backend_score *r)
{
    struct cpu *c = impl;
    if (need_model(c, "score")) return QG_ERR_UNSUPPORTED;
    int V = llama_hparams(c->model)->n_vocab;
    if (r->from < 1 || r->from >= r->n_tokens)
        return qg_errf(c->err, sizeof c->err, QG_ERR_USAGE, "score: from %d outside 1..%d", r->from,
                       r->n_tokens - 1);
    if (r->n_tokens - 1 > c->n_ctx)
        return qg_errf(c->err, sizeof c->err, QG_ERR_USAGE,
                       "score: window of %d tokens exceeds the context %d", r->n_tokens, c->n_ctx);
    for (int i = r->from; i < r->n_tokens; i++)
        if (r->tokens[i] < 0 || r->tokens[i] >= V)
            return qg_errf(c->err, sizeof c->err, QG_ERR_USAGE, "score: token %d out of range",
                           r->tokens[i]);
    llama_ctx_reset(c->ctx);
    /* one batch, or two (perturb) through the KV cache; position i-1
     * predicts token i; output rows in chunks of LOGIT_ROWS */
    int npos = r->n_tokens - 1, split = c->perturb && npos >= 2 ? npos / 2 : npos;
    for (int b0 = 0; b0 < npos; b0 = split, split = npos) {
        int rc = llama_eval(c->ctx, r->tokens + b0, split - b0, split - b0, NULL);
        if (rc) return eval_error(c, rc, "score");
        int first = r->from - 1 > b0 ? r->from - 1 : b0;
        for (int p0 = first; p0 < split; p0 += LOGIT_ROWS) {
            int cnt = split - p0 < LOGIT_ROWS ? split - p0 : LOGIT_ROWS;
            if ((rc = llama_output(c->ctx, p0 - b0, cnt, c->logits)))
                return eval_error(c, rc, "score");
            struct lsm_job j = {c->logits, V, p0, r->from, r};
            parallel_for(parallel_threads_for(c->n_threads, 20.0 * cnt * V), cnt, lsm_rows, &j);
        }
    }
    return QG_OK;
}

/* generate_loop's engine: the CPU context */
static int cpu_gen_eval(void *ud, const int32_t *t, int n, int fresh, float *logits)
{
    struct cpu *c = ud;
    if (fresh) llama_ctx_reset(c->ctx);
    int rc = llama_eval(c->ctx, t, n, n - 1, logits);
    return rc ? eval_error(c, rc, "generate") : QG_OK;
}

static int cpu_generate(void *impl, const int32_t *prompt, int64_t np,
                        const struct backend_gen_params *p, char **text, int32_t **ids_out,
                        int64_t *n_out)
{
    struct cpu *c = impl;
    if (need_model(c, "generate")) return QG_ERR_UNSUPPORTED;
    if (c->pack) { /* without memory for the copies none is made and decode reads the
                    * file: the same bits */
        c->pack = 0;
        (void)llama_pack_decode(c->model, c->n_threads);
    }
    struct gen_engine e = {c,        cpu_gen_eval, c->tok, llama_hparams(c->model)->n_vocab,
                           c->n_ctx, c->logits,    c->err, sizeof c->err};
    return generate_loop(&e, prompt, np, p, text, ids_out, n_out);
}

const struct backend_ops backend_cpu_ops = {
    .version = BACKEND_API_VERSION,
    .name = "cpu",
    .caps = BACKEND_CAP_TOKENIZE | BACKEND_CAP_SCORE | BACKEND_CAP_FULL_ROWS | BACKEND_CAP_GENERATE,
    .open = cpu_open,
    .close = cpu_close,
    .info = cpu_info,
    .errmsg = cpu_errmsg,
    .tokenize = cpu_tokenize,
    .detokenize = cpu_detokenize,
    .piece = cpu_piece,
    .score = cpu_score,
    .generate = cpu_generate,
    .vocab_text = cpu_vocab_text,
};

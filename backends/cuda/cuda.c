/* cuda — the CUDA backend: a local GGUF model on an NVIDIA GPU.
 *
 * Spec: cuda:PATH.gguf or PATH.gguf?device=cuda[:N], with
 * &precision=fp32|tf32|bf16 (default fp32, for numbers comparable with the
 * CPU backend). Tokenization stays on the host (the same tokenizer as
 * cpu). Weights go to the device in their stored formats (kernels.h); a
 * tensor type the GPU code does not decode (backends/cuda/blocks.h) is
 * refused by name, never run on the CPU behind the user's back.
 */
#include "backends/backend.h"
#include "backends/cuda/blocks.h"
#include "backends/cuda/kernels.h"
#include "backends/dequant.h"
#include "backends/generate.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/llama.h"
#include "backends/local.h"
#include "backends/matmul.h"
#include "backends/tokenizer.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda {
    struct tokenizer *tok;
    struct llama_model *model;
    struct qcu_model *dev;
    int device, precision, n_ctx, pos;
    float *logits; /* [n_vocab]: the last row, for generation */
    char err[QG_ERRMSG_MAX];
};

static const char *const precision_names[] = {"fp32", "tf32", "bf16"};

static void cuda_close(void *impl)
{
    struct cuda *c = impl;
    if (!c) return;
    qcu_model_free(c->dev);
    llama_free(c->model);
    tok_free(c->tok);
    free(c->logits);
    free(c);
}

/* device=cuda[:N] and precision=... of the spec's query. */
static int parse_query(const char *spec, const char *q, struct cuda *c, char *err, size_t errlen)
{
    char key[64], val[64];
    while (local_query_next(&q, key, sizeof key, val, sizeof val)) {
        if (!strcmp(key, "device")) {
            if (local_device(val, &c->device) != 1)
                return qg_errf(err, errlen, QG_ERR_USAGE,
                               "%s: device=%s: want cuda or cuda:N (N = 0, 1, ...)", spec, val);
        } else if (!strcmp(key, "precision")) {
            int k = 0;
            while (k < 3 && strcmp(val, precision_names[k]))
                k++;
            if (k == 3)
                return qg_errf(err, errlen, QG_ERR_USAGE,
                               "%s: precision=%s: want fp32, tf32 or bf16", spec, val);
            c->precision = k;
        } else {
            return qg_errf(err, errlen, QG_ERR_USAGE,
                           "%s: the CUDA backend does not know '%s' (known: device=cuda[:N], "
                           "precision=fp32|tf32|bf16; simulated formats run on the CPU)",
                           spec, key);
        }
    }
    return QG_OK;
}

static struct qcu_mat mat_of(const struct wmat *w)
{
    return (struct qcu_mat){w->name, w->type, w->data, w->in, w->out, w->row_bytes};
}

/* A checkpoint directory's matrices in qgate's own block types (kept as
 * stored for the CPU) decoded to f32 copies for the upload, which the GPU
 * decodes as F32; the copies in *tmp (n_tmp of them) until the upload. */
static int decode_internal(struct qcu_model_desc *d, float ***tmp, int *n_tmp)
{
    int cap = 2 + 7 * d->n_layers;
    *tmp = calloc((size_t)cap, sizeof **tmp);
    *n_tmp = 0;
    if (!*tmp) return QG_ERR_NOMEM;
    for (int l = -1; l < d->n_layers; l++) {
        struct qcu_layer *y = l >= 0 ? (struct qcu_layer *)&d->layers[l] : NULL;
        struct qcu_mat *m[7] = {&d->tok_embd, &d->output};
        if (y) {
            struct qcu_mat *ys[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->gate, &y->up, &y->down};
            memcpy(m, ys, sizeof ys);
        }
        for (int k = 0; k < (y ? 7 : 2); k++) {
            if (!ggml_type_internal(m[k]->type)) continue;
            float *f = malloc((size_t)(m[k]->in * m[k]->out) * sizeof *f);
            if (!f) return QG_ERR_NOMEM;
            (*tmp)[(*n_tmp)++] = f;
            dequant_row(m[k]->type, m[k]->data, f, m[k]->in * m[k]->out);
            m[k]->type = GGML_F32, m[k]->data = (const uint8_t *)f;
            m[k]->row_bytes = (size_t)m[k]->in * sizeof *f;
        }
    }
    return QG_OK;
}

/* Every matrix the GPU must decode is a type blocks.h knows. */
static int check_types(const struct qcu_model_desc *d, const char *path, char *err, size_t errlen)
{
    if (d->unsupported)
        return qg_errf(err, errlen, QG_ERR_UNSUPPORTED,
                       "%s: the CUDA backend runs the llama/qwen2 forward pass only; this model "
                       "uses %s: run it on the CPU (cpu:%s)",
                       path, d->unsupported, path);
    for (int l = -1; l < d->n_layers; l++) {
        const struct qcu_layer *y = l >= 0 ? &d->layers[l] : NULL;
        const struct qcu_mat *mats[7] = {&d->tok_embd, &d->output};
        int n = 2;
        if (y) {
            const struct qcu_mat *ys[7] = {&y->wq,   &y->wk, &y->wv,  &y->wo,
                                           &y->gate, &y->up, &y->down};
            memcpy(mats, ys, sizeof ys);
            n = 7;
        }
        for (int k = 0; k < n; k++)
            if (!blk_supported(mats[k]->type))
                return qg_errf(err, errlen, QG_ERR_UNSUPPORTED,
                               "%s: tensor %s is %s, which the CUDA backend does not decode (it "
                               "decodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, "
                               "IQ4_NL, IQ4_XS); run this file on the CPU",
                               path, mats[k]->name, ggml_type_name(mats[k]->type));
    }
    return QG_OK;
}

/* The model's tensors as the upload wants them; layers malloc'd. */
static int describe(const struct llama_model *m, struct qcu_model_desc *d, struct qcu_layer **ls)
{
    const struct llama_hparams *h = llama_hparams(m);
    *d = (struct qcu_model_desc){.n_vocab = h->n_vocab,
                                 .dim = h->dim,
                                 .n_layers = h->n_layers,
                                 .n_heads = h->n_heads,
                                 .n_kv_heads = h->n_kv_heads,
                                 .head_dim = h->head_dim,
                                 .ffn = h->ffn,
                                 .rope_dims = h->rope_dims,
                                 .rope_neox = h->rope_neox,
                                 .rms_eps = h->rms_eps,
                                 .rope_theta = h->rope_theta,
                                 .tok_embd = mat_of(llama_tok_embd(m)),
                                 .output = mat_of(llama_output_mat(m)),
                                 .out_norm = llama_out_norm(m)};
    if (!llama_is_basic(m, &d->unsupported) && !d->unsupported) d->unsupported = "?";
    if (!d->unsupported && llama_declared_act(m))
        d->unsupported = "a checkpoint's declared FP8 activations";
    *ls = calloc((size_t)h->n_layers, sizeof **ls);
    if (!*ls) return QG_ERR_NOMEM;
    for (int l = 0; l < h->n_layers; l++) {
        struct llama_layer_view v;
        llama_layer_view(m, l, &v);
        (*ls)[l] =
            (struct qcu_layer){v.attn_norm,  v.ffn_norm,       v.bq,           v.bk,
                               v.bv,         mat_of(v.wq),     mat_of(v.wk),   mat_of(v.wv),
                               mat_of(v.wo), mat_of(v.w_gate), mat_of(v.w_up), mat_of(v.w_down)};
    }
    d->layers = *ls;
    return QG_OK;
}

static int load_model(struct cuda *c, const char *path, const struct backend_open_params *p,
                      char *err, size_t errlen)
{
    int rc = local_load(path, &c->tok, &c->model, err, errlen);
    if (rc) return rc;
    const struct llama_hparams *h = llama_hparams(c->model);
    c->n_ctx = p && p->n_ctx > 0 ? p->n_ctx : h->ctx_train;
    c->logits = malloc((size_t)h->n_vocab * sizeof *c->logits);
    return c->logits ? QG_OK : qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
}

static int cuda_open(const char *spec, const struct backend_open_params *p, void **impl, char *err,
                     size_t errlen)
{
    *impl = NULL;
    struct cuda *c = calloc(1, sizeof *c);
    if (!c) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    char path[4096];
    const char *q = strchr(spec, '?');
    qg_spec_file(spec, path, sizeof path);
    int rc = parse_query(spec, q ? q + 1 : "", c, err, errlen);
    if (!rc) rc = load_model(c, path, p, err, errlen);
    struct qcu_model_desc d;
    struct qcu_layer *ls = NULL;
    if (!rc && describe(c->model, &d, &ls))
        rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    float **tmp = NULL;
    int n_tmp = 0;
    if (!rc && d.unsupported) rc = check_types(&d, path, err, errlen); /* before any decoding */
    if (!rc && decode_internal(&d, &tmp, &n_tmp))
        rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    if (!rc) rc = check_types(&d, path, err, errlen);
    if (!rc && c->device >= qcu_device_count())
        rc = qg_errf(err, errlen, QG_ERR_UNAVAILABLE,
                     "%s: CUDA device %d asked for, %d present (no GPU, or no driver)", spec,
                     c->device, qcu_device_count());
    if (!rc) rc = qcu_model_upload(&d, c->device, c->precision, c->n_ctx, &c->dev, err, errlen);
    for (int i = 0; i < n_tmp; i++)
        free(tmp[i]);
    free(tmp);
    free(ls);
    if (rc) {
        cuda_close(c);
        return rc;
    }
    *impl = c;
    return QG_OK;
}

static int cuda_info(void *impl, struct backend_info *o)
{
    struct cuda *c = impl;
    local_info(c->tok, c->model, o);
    return QG_OK;
}

static const char *cuda_errmsg(void *impl)
{
    return ((struct cuda *)impl)->err;
}

static int cuda_tokenize(void *impl, const char *text, size_t n, int add_special, int32_t **ids,
                         int64_t *n_ids)
{
    return tok_encode(((struct cuda *)impl)->tok, text, n, add_special & BACKEND_TOK_ADD_SPECIAL,
                      (add_special & BACKEND_TOK_PARSE_SPECIAL) != 0, ids, n_ids);
}

static const char *cuda_vocab_text(void *impl, int32_t id)
{
    return tok_text(((struct cuda *)impl)->tok, id);
}

static char *cuda_detokenize(void *impl, const int32_t *ids, int64_t n)
{
    return tok_decode(((struct cuda *)impl)->tok, ids, n, 0);
}

static int cuda_piece(void *impl, int32_t id, char *buf, size_t cap)
{
    return tok_piece(((struct cuda *)impl)->tok, id, 0, buf, cap);
}

static int cuda_score(void *impl, struct backend_score *r)
{
    struct cuda *c = impl;
    int V = llama_hparams(c->model)->n_vocab;
    if (r->from < 1 || r->from >= r->n_tokens || r->n_tokens - 1 > c->n_ctx)
        return qg_errf(c->err, sizeof c->err, QG_ERR_USAGE,
                       "score: window of %d tokens from %d does not fit the context %d",
                       r->n_tokens, r->from, c->n_ctx);
    for (int i = 0; i < r->n_tokens; i++)
        if (r->tokens[i] < 0 || r->tokens[i] >= V)
            return qg_errf(c->err, sizeof c->err, QG_ERR_USAGE, "score: token %d out of range",
                           r->tokens[i]);
    c->pos = 0;
    int rc = qcu_eval(c->dev, r->tokens, r->n_tokens - 1, r->n_tokens, 0, r->from - 1, r->logprob,
                      r->rows, r->argmax, c->err, sizeof c->err);
    /* a NaN or Inf in the weights (the output layer: the hidden states
     * stay finite) shows as a non-finite log-prob: never scored */
    for (int i = 0; !rc && r->logprob && i < r->n_tokens - r->from; i++)
        if (!isfinite(r->logprob[i])) {
            rc = llama_find_nonfinite(c->model, c->err, sizeof c->err);
            if (!rc)
                rc = qg_errf(c->err, sizeof c->err, QG_ERR_DATA,
                             "score: the model's log-probs became non-finite (an overflow: its "
                             "weights are all finite)");
        }
    return rc;
}

/* generate_loop's engine: positions appended on the device */
static int cuda_gen_eval(void *ud, const int32_t *t, int n, int fresh, float *logits)
{
    struct cuda *c = ud;
    if (fresh) c->pos = 0;
    int rc = qcu_eval(c->dev, t, n, n, c->pos, n - 1, NULL, NULL, NULL, c->err, sizeof c->err);
    if (!rc) rc = qcu_last_logits(c->dev, logits, c->err, sizeof c->err);
    if (!rc) c->pos += n;
    return rc;
}

static int cuda_generate(void *impl, const int32_t *prompt, int64_t np,
                         const struct backend_gen_params *p, char **text, int32_t **ids_out,
                         int64_t *n_out)
{
    struct cuda *c = impl;
    struct gen_engine e = {c,        cuda_gen_eval, c->tok, llama_hparams(c->model)->n_vocab,
                           c->n_ctx, c->logits,     c->err, sizeof c->err};
    return generate_loop(&e, prompt, np, p, text, ids_out, n_out);
}

const struct backend_ops backend_cuda_ops = {
    .version = BACKEND_API_VERSION,
    .name = "cuda",
    .caps = BACKEND_CAP_TOKENIZE | BACKEND_CAP_SCORE | BACKEND_CAP_FULL_ROWS | BACKEND_CAP_GENERATE,
    .open = cuda_open,
    .close = cuda_close,
    .info = cuda_info,
    .errmsg = cuda_errmsg,
    .tokenize = cuda_tokenize,
    .detokenize = cuda_detokenize,
    .vocab_text = cuda_vocab_text,
    .piece = cuda_piece,
    .score = cuda_score,
    .generate = cuda_generate,
};

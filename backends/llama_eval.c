/* llama_eval — the fast forward pass: contexts and their KV cache, norms,
 * products through matmul.h, RoPE, attention across threads, SwiGLU, and
 * the simulated formats of activations and cache. */
#include "backends/llama.h"
#include "backends/llama_impl.h"
#include "backends/simfmt.h"
#include "backends/quant.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/util.h"
#include "backends/matmul.h"
#include "backends/parallel.h"
#include "backends/vecmath.h"

#include <cblas.h>
#include <math.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llama_ctx_new(const struct llama_model *m, int n_ctx, struct llama_ctx **out)
{
    *out = NULL;
    const struct llama_hparams *h = &m->hp;
    if (n_ctx <= 0) return QG_ERR_USAGE;
    struct llama_ctx *c = calloc(1, sizeof *c);
    if (!c) return QG_ERR_NOMEM;
    size_t N = (size_t)n_ctx, kvd = (size_t)h->n_kv_heads * h->head_dim,
           qd = (size_t)h->n_heads * h->head_dim;
    c->m = m;
    c->n_ctx = n_ctx;
    c->k = qg_alloc_aligned((size_t)h->n_layers * N * kvd * sizeof(float));
    c->v = qg_alloc_aligned((size_t)h->n_layers * N * kvd * sizeof(float));
    c->x = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
    c->xn = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
    c->q = qg_alloc_aligned(N * qd * sizeof(float));
    c->att = qg_alloc_aligned(N * qd * sizeof(float));
    c->gate = qg_alloc_aligned(N * (size_t)h->ffn * sizeof(float));
    c->up = qg_alloc_aligned(N * (size_t)h->ffn * sizeof(float));
    c->n_threads = parallel_cpus();
    /* buffers 64-byte aligned: the kernels' 64-byte loads of x then never
     * straddle two cache lines; all threading is ours (see matmul): BLAS runs single-threaded */
    openblas_set_num_threads(1);
    c->scores = qg_alloc_aligned((size_t)c->n_threads * ATT_BLOCK * N * sizeof(float));
    c->scratch =
        qg_alloc_aligned((size_t)c->n_threads * matmul_scratch_floats(m->max_in) * sizeof(float));
    if (!c->k || !c->v || !c->x || !c->xn || !c->q || !c->att || !c->gate || !c->up || !c->scores ||
        !c->scratch) {
        llama_ctx_free(c);
        return QG_ERR_NOMEM;
    }
    *out = c;
    return QG_OK;
}

void llama_ctx_free(struct llama_ctx *c)
{
    if (!c) return;
    free(c->aq);
    free(c->k);
    free(c->v);
    free(c->x);
    free(c->xn);
    free(c->q);
    free(c->att);
    free(c->gate);
    free(c->up);
    free(c->scores);
    free(c->scratch);
    free(c);
}

void llama_ctx_reset(struct llama_ctx *c)
{
    c->pos = 0;
}

void llama_ctx_set_perturb(struct llama_ctx *c, uint64_t seed)
{
    c->perturb = seed;
}

/* Moves every residual value of the batch by one ulp up or down, chosen
 * by a hash of (seed, position, sublayer, element): randomized rounding at
 * the last bit, as a different reduction order on another device would
 * round. Deterministic for a seed. */
static void perturb_rows(const struct llama_ctx *c, int n, int dim, int pos0, int sublayer)
{
    for (int i = 0; i < n; i++) {
        uint64_t st = c->perturb ^ ((uint64_t)(pos0 + i) << 20) ^ ((uint64_t)sublayer << 52);
        float *x = c->x + (size_t)i * dim;
        for (int j = 0; j < dim; j += 64) {
            uint64_t bits = rng_next(&st);
            for (int k = j; k < dim && k < j + 64; k++)
                x[k] = nextafterf(x[k], (bits >> (k - j)) & 1 ? INFINITY : -INFINITY);
        }
    }
}

void llama_ctx_set_threads(struct llama_ctx *c, int n)
{
    if (n > 0 && n <= parallel_cpus()) c->n_threads = n;
}

int llama_ctx_pos(const struct llama_ctx *c)
{
    return c->pos;
}

/* y[n][w] = rmsnorm(x[n][w]) * weight; the sum of squares in double as ggml */
static void rmsnorm(float *y, const float *x, const float *weight, int n, int w, float eps)
{
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * w;
        double sum = 0;
        for (int j = 0; j < w; j++)
            sum += (double)(xi[j] * xi[j]);
        float scale = 1.0f / sqrtf((float)(sum / w) + eps);
        float *yi = y + (size_t)i * w;
        for (int j = 0; j < w; j++)
            yi[j] = xi[j] * scale * weight[j];
    }
}

/* y[n][out] = x[n][in] . W^T (+ bias) (+ beta y), weights as stored */
static void matmul(const struct llama_ctx *c, float *y, const float *x, const struct wmat *W,
                   const float *bias, float beta, int n)
{
    if (c->act != LLAMA_ACT_NONE) { /* the input as the simulated arithmetic rounds it */
        memcpy(c->aq, x, (size_t)n * (size_t)W->in * sizeof *x);
        if (c->act == LLAMA_ACT_LLAMACPP)
            simfmt_llamacpp_act(W->type, c->aq, n, W->in);
        else
            simfmt_apply_act(&c->act_fmt, c->aq, n, W->in);
        x = c->aq;
    }
    matmul_w(y, x, W, bias, n, beta, c->n_threads, c->scratch);
}

/* the k products of one x (Q, K, V; gate, up): one fork-join in a decode
 * step, unless the simulated arithmetic rounds x by each matrix's type */
static void matmul_group(const struct llama_ctx *c, const struct matmul_part *parts, int k,
                         const float *x, int n)
{
    if (c->act != LLAMA_ACT_NONE) {
        for (int i = 0; i < k; i++)
            matmul(c, parts[i].y, x, parts[i].W, parts[i].bias, parts[i].beta, n);
        return;
    }
    matmul_w_group(parts, k, x, n, c->n_threads, c->scratch);
}

void llama_ctx_set_kv(struct llama_ctx *c, const struct simfmt *f)
{
    c->kv_fmt = *f;
}

int llama_ctx_set_act(struct llama_ctx *c, int mode, const struct simfmt *f)
{
    if (mode != LLAMA_ACT_NONE && !c->aq) {
        int64_t rows = c->n_ctx > LLAMA_MAX_ROWS_HINT ? c->n_ctx : LLAMA_MAX_ROWS_HINT;
        c->aq = malloc((size_t)rows * (size_t)c->m->max_in * sizeof *c->aq);
        if (!c->aq) return QG_ERR_NOMEM;
    }
    c->act = mode;
    if (f) c->act_fmt = *f;
    return QG_OK;
}

/* Rotates n rows of `heads` heads (row stride `stride`) at positions pos0.. */
static void rope(float *x, int n, int stride, int heads, int hd, int pos0,
                 const struct llama_hparams *h)
{
    const int nd = h->rope_dims;
    const float theta_scale = powf(h->rope_theta, -2.0f / (float)nd);
    for (int i = 0; i < n; i++) {
        float cs[2048], sn[2048]; /* nd/2 <= 2048: head size is capped at 4096 */
        float theta = (float)(pos0 + i);
        for (int k = 0; k < nd / 2; k++) {
            cs[k] = cosf(theta);
            sn[k] = sinf(theta);
            theta *= theta_scale;
        }
        for (int hh = 0; hh < heads; hh++) {
            float *v = x + (size_t)i * stride + (size_t)hh * hd;
            for (int k = 0; k < nd / 2; k++) {
                int a = h->rope_neox ? k : 2 * k, b = h->rope_neox ? k + nd / 2 : 2 * k + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs[k] - x1 * sn[k];
                v[b] = x0 * sn[k] + x1 * cs[k];
            }
        }
    }
}

struct att_job {
    struct llama_ctx *c;
    int l, n, pos0;
};

/* softmax of each of `rows` rows of s (row stride T), row i causal over
 * keys 0..last0 + i, the keys past it zero */
static void softmax_causal(const struct llama_ctx *c, float *scores, int rows, int T, int last0)
{
    for (int i = 0; i < rows; i++) {
        float *s = scores + (size_t)i * T;
        int last = last0 + i;
        float mx = vm_max(s, last + 1, -INFINITY);
        vm_exp_shifted(s, s, mx, last + 1);
        double sum = 0;
        for (int k = 0; k <= last; k++)
            sum += s[k];
        vm_scale(s, (float)(1.0 / sum), last + 1);
        for (int k = last + 1; k < T; k++)
            s[k] = 0.0f;
        if (c->act == LLAMA_ACT_LLAMACPP) quant_round_f16(s, last + 1); /* meets V in f16 */
    }
}

/* heads [h0, h1) of one layer; `thread` picks the scores buffer. One query
 * row (a decode step) takes dot products and sums of V's rows: sgemm's
 * packing would cost more than the product */
static void attention_heads(void *arg, int64_t h0, int64_t h1, int thread)
{
    const struct att_job *j = arg;
    struct llama_ctx *c = j->c;
    const struct llama_hparams *h = &c->m->hp;
    const int hd = h->head_dim, qd = h->n_heads * hd, kvd = h->n_kv_heads * hd, n = j->n,
              pos0 = j->pos0;
    const int group = h->n_heads / h->n_kv_heads;
    const float *K = c->k + (size_t)j->l * c->n_ctx * kvd,
                *V = c->v + (size_t)j->l * c->n_ctx * kvd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *scores = c->scores + (size_t)thread * ATT_BLOCK * c->n_ctx;
    for (int64_t hh = h0; hh < h1; hh++) {
        int kh = (int)hh / group;
        for (int r0 = 0; r0 < n; r0 += ATT_BLOCK) {
            int rows = n - r0 < ATT_BLOCK ? n - r0 : ATT_BLOCK, T = pos0 + r0 + rows;
            const float *Q = c->q + (size_t)r0 * qd + (size_t)hh * hd, *Kh = K + (size_t)kh * hd,
                        *Vh = V + (size_t)kh * hd;
            float *O = c->att + (size_t)r0 * qd + (size_t)hh * hd;
            /* S[rows][T] = Q_h[r0..][hd] . K_h[T][hd]^T * scale */
            if (rows == 1)
                for (int t = 0; t < T; t++)
                    scores[t] = scale * matmul_dot(Q, Kh + (size_t)t * kvd, hd);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, T, hd, scale, Q, qd, Kh,
                            kvd, 0.0f, scores, T);
            softmax_causal(c, scores, rows, T, pos0 + r0);
            /* O_h[r0..][hd] = S[rows][T] . V_h[T][hd] */
            if (rows == 1) {
                vm_weighted_rows(O, scores, Vh, T, kvd, hd);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, T, 1.0f, scores, T,
                            Vh, kvd, 0.0f, O, qd);
            }
        }
    }
}

/* Heads run on our threads, each with single-threaded BLAS calls. */
static void attention(struct llama_ctx *c, int l, int n, int pos0)
{
    struct att_job j = {c, l, n, pos0};
    const struct llama_hparams *h = &c->m->hp;
    double work = 4.0 * h->n_heads * h->head_dim * (double)n * (pos0 + n);
    parallel_for(parallel_threads_for(c->n_threads, work), h->n_heads, attention_heads, &j);
}

struct swiglu_job {
    float *gate;
    const float *up;
};

static void swiglu(void *arg, int64_t b, int64_t e, int thread)
{
    const struct swiglu_job *j = arg;
    (void)thread;
    vm_swiglu(j->gate + b, j->up + b, e - b);
}

int llama_eval(struct llama_ctx *c, const int32_t *tokens, int n, int logits_from, float *logits)
{
    const struct llama_model *m = c->m;
    const struct llama_hparams *h = &m->hp;
    if (n <= 0 || c->pos + n > c->n_ctx || logits_from < 0 || logits_from > n) return QG_ERR_USAGE;
    c->last_n = 0;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= h->n_vocab) return QG_ERR_USAGE;
    const int dim = h->dim, hd = h->head_dim, qd = h->n_heads * hd, kvd = h->n_kv_heads * hd;
    const int pos0 = c->pos;
    for (int i = 0; i < n; i++)
        dequant_row(m->tok_embd.type, m->tok_embd.data + (size_t)tokens[i] * m->tok_embd.row_bytes,
                    c->x + (size_t)i * dim, dim);
    for (int l = 0; l < h->n_layers; l++) {
        const struct layer *L = &m->layers[l];
        float *Kl = c->k + ((size_t)l * c->n_ctx + pos0) * kvd,
              *Vl = c->v + ((size_t)l * c->n_ctx + pos0) * kvd;
        rmsnorm(c->xn, c->x, L->attn_norm, n, dim, h->rms_eps);
        const struct matmul_part qkv[] = {
            {c->q, &L->wq, L->bq, 0.0f}, {Kl, &L->wk, L->bk, 0.0f}, {Vl, &L->wv, L->bv, 0.0f}};
        matmul_group(c, qkv, 3, c->xn, n);
        rope(c->q, n, qd, h->n_heads, hd, pos0, h);
        rope(Kl, n, kvd, h->n_kv_heads, hd, pos0, h);
        if (c->act == LLAMA_ACT_LLAMACPP) { /* llama.cpp's f16 cache; Q meets it in f16 */
            quant_round_f16(c->q, (int64_t)n * qd);
            quant_round_f16(Kl, (int64_t)n * kvd);
            quant_round_f16(Vl, (int64_t)n * kvd);
        }
        if (c->kv_fmt.kind != SIMFMT_NONE) { /* K and V as a simulated cache stores them */
            simfmt_apply_kv(&c->kv_fmt, Kl, n, kvd, hd);
            simfmt_apply_kv(&c->kv_fmt, Vl, n, kvd, hd);
        }
        attention(c, l, n, pos0);
        matmul(c, c->x, c->att, &L->wo, NULL, 1.0f, n); /* x += att . Wo^T */
        if (c->perturb) perturb_rows(c, n, dim, pos0, 2 * l);
        rmsnorm(c->xn, c->x, L->ffn_norm, n, dim, h->rms_eps);
        const struct matmul_part ffn[] = {{c->gate, &L->w_gate, NULL, 0.0f},
                                          {c->up, &L->w_up, NULL, 0.0f}};
        matmul_group(c, ffn, 2, c->xn, n);
        struct swiglu_job sj = {c->gate, c->up};
        parallel_for(parallel_threads_for(c->n_threads, 20.0 * n * h->ffn), (int64_t)n * h->ffn,
                     swiglu, &sj);
        matmul(c, c->x, c->gate, &L->w_down, NULL, 1.0f, n); /* x += ffn */
        if (c->perturb) perturb_rows(c, n, dim, pos0, 2 * l + 1);
    }
    c->pos += n;
    c->last_n = n;
    /* a non-finite weight or an overflow: llama_find_nonfinite says which */
    if (lm_first_nonfinite(c->x, (int64_t)n * dim) >= 0) return QG_ERR_DATA;
    return n > logits_from ? llama_output(c, logits_from, n - logits_from, logits) : QG_OK;
}

int llama_output(struct llama_ctx *c, int first, int count, float *logits)
{
    const struct llama_model *m = c->m;
    const struct llama_hparams *h = &m->hp;
    if (first < 0 || count <= 0 || first + count > c->last_n) return QG_ERR_USAGE;
    rmsnorm(c->xn, c->x + (size_t)first * h->dim, m->out_norm, count, h->dim, h->rms_eps);
    matmul(c, logits, c->xn, &m->output, NULL, 0.0f, count);
    /* a NaN or Inf in the output layer shows only here: never scored */
    if (lm_first_nonfinite(logits, (int64_t)count * h->n_vocab) >= 0) return QG_ERR_DATA;
    return QG_OK;
}

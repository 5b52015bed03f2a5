/* llama_eval — the fast forward pass: contexts and their KV cache, norms
 * (RMS, LayerNorm), products through matmul.h, RoPE (scaled), attention
 * across threads (windows, soft caps), and the simulated formats of
 * activations and cache; llama_ffn.c computes the FFN half. */
#include "backends/llama.h"
#include "backends/llama_impl.h"
#include "backends/simfmt.h"
#include "backends/flash_f16.h"
#include "backends/quant.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/util.h"
#include "backends/matmul.h"
#include "backends/gemm_q8.h"
#include "backends/parallel.h"
#include "backends/vecmath.h"
#include "backends/kernel_set.h"

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
    c->rope_div = lm_rope_factors(m, n_ctx);
    c->act_output = 1;
    c->k = qg_alloc_aligned((size_t)h->n_layers * N * kvd * sizeof(float));
    c->v = qg_alloc_aligned((size_t)h->n_layers * N * kvd * sizeof(float));
    c->x = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
    c->xn = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
    c->q = qg_alloc_aligned(N * qd * sizeof(float));
    c->att = qg_alloc_aligned(N * qd * sizeof(float));
    size_t ffw = (size_t)h->ffn;
    if ((size_t)h->expert_ffn > ffw) ffw = (size_t)h->expert_ffn;
    if ((size_t)h->shexp_ffn > ffw) ffw = (size_t)h->shexp_ffn;
    c->gate = qg_alloc_aligned(N * ffw * sizeof(float));
    c->up = qg_alloc_aligned(N * ffw * sizeof(float));
    c->tmp = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
    int moe_ok = 1;
    if (h->n_expert) {
        size_t ne = (size_t)h->n_expert, k = (size_t)h->n_expert_used;
        c->moe_x = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
        c->moe_y = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
        c->moe_w = malloc(N * ne * sizeof(float));
        c->moe_sw = malloc(N * k * sizeof(float));
        c->moe_sel = malloc(N * k * sizeof(int));
        c->moe_rows = malloc(N * k * sizeof(int));
        moe_ok = c->moe_x && c->moe_y && c->moe_w && c->moe_sw && c->moe_sel && c->moe_rows;
    }
    c->n_threads = parallel_cpus();
    /* buffers 64-byte aligned: the kernels' 64-byte loads of x then never
     * straddle two cache lines; all threading is ours (see matmul): BLAS runs single-threaded */
    kernel_set_blas_one_thread();
    c->scores = qg_alloc_aligned((size_t)c->n_threads * ATT_BLOCK * N * sizeof(float));
    c->scratch =
        qg_alloc_aligned((size_t)c->n_threads * /* with room for matmul_w_minima's columns */
                         matmul_scratch_floats(m->max_in + m->max_in / 32) * sizeof(float));
    if (!c->k || !c->v || !c->x || !c->xn || !c->q || !c->att || !c->gate || !c->up || !c->scores ||
        !c->scratch || !c->tmp || !moe_ok) {
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
    free(c->a8);
    free(c->a8_figs);
    free(c->a8_rows);
    free(c->k);
    free(c->v);
    free(c->k16);
    free(c->v16);
    free(c->x);
    free(c->xn);
    free(c->q);
    free(c->att);
    free(c->gate);
    free(c->up);
    free(c->tmp);
    free(c->moe_x);
    free(c->moe_y);
    free(c->moe_w);
    free(c->moe_sw);
    free(c->moe_sel);
    free(c->moe_rows);
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

/* y[n][w] = layernorm(x[n][w]) * weight + bias, as ggml_norm: the mean and
 * the variance summed in double */
static void layernorm(float *y, const float *x, const float *weight, const float *bias, int n,
                      int w, float eps)
{
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * w;
        float *yi = y + (size_t)i * w;
        double sum = 0, sum2 = 0;
        for (int j = 0; j < w; j++)
            sum += (double)xi[j];
        float mean = (float)(sum / w);
        for (int j = 0; j < w; j++) {
            float v = xi[j] - mean;
            yi[j] = v;
            sum2 += (double)(v * v);
        }
        float scale = 1.0f / sqrtf((float)(sum2 / w) + eps);
        for (int j = 0; j < w; j++)
            yi[j] = yi[j] * scale * weight[j] + bias[j];
    }
}

/* the family's norm of n rows of the residual width */
static void norm(const struct llama_ctx *c, float *y, const float *x, const float *w,
                 const float *b, int n)
{
    const struct llama_hparams *h = &c->m->hp;
    if (h->norm == LLAMA_NORM_LAYER)
        layernorm(y, x, w, b, n, h->dim, h->rms_eps);
    else
        rmsnorm(y, x, w, n, h->dim, h->rms_eps);
}

/* what rounding an input to W gets: products whose inputs round alike
 * share one rounding (llama.cpp's vec_dot type; a calibrated scale) */
static uint32_t act_key(const struct llama_ctx *c, const struct wmat *W)
{
    if (c->act == LLAMA_ACT_LLAMACPP) return simfmt_llamacpp_act_class(W->type);
    if (!c->act_static || !(W->in_scale > 0)) return 0;
    uint32_t u;
    memcpy(&u, &W->in_scale, sizeof u);
    return u;
}

struct act_job {
    const struct llama_ctx *c;
    const struct wmat *W;
    const float *x;
};

/* rows [r0, r1) of x rounded into c->aq as the simulated arithmetic rounds
 * the input to W */
static void act_rows(void *arg, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const struct act_job *j = arg;
    const struct llama_ctx *c = j->c;
    const struct wmat *W = j->W;
    const int n = (int)(r1 - r0);
    float *aq = c->aq + (size_t)r0 * (size_t)W->in;
    memcpy(aq, j->x + (size_t)r0 * (size_t)W->in, (size_t)n * (size_t)W->in * sizeof *aq);
    if (c->act == LLAMA_ACT_LLAMACPP)
        simfmt_llamacpp_act(W->type, aq, n, W->in);
    else if (c->act_static && W->in_scale > 0) /* a checkpoint's calibrated scale */
        simfmt_apply_act_static(&c->act_fmt, aq, n, W->in, W->in_scale);
    else
        simfmt_apply_act(&c->act_fmt, aq, n, W->in);
}

/* x's n rows rounded for W into c->aq: across the pool where each row
 * rounds on its own; dynamic NVFP4 in one piece (its tensor scale is the
 * largest value of all n rows, so a split would give each piece its own) */
static const float *act_round(const struct llama_ctx *c, const struct wmat *W, const float *x,
                              int n)
{
    struct act_job j = {c, W, x};
    if (c->act != LLAMA_ACT_LLAMACPP && !(c->act_static && W->in_scale > 0) &&
        c->act_fmt.kind == SIMFMT_NVFP4)
        act_rows(&j, 0, n, 0);
    else
        parallel_for(c->n_threads, n, act_rows, &j);
    return c->aq;
}

/* row t's codes and figures in c->a8 and c->a8_figs (simfmt_codes) */
static struct simfmt_codes row_codes(const struct llama_ctx *c, int64_t in, int t)
{
    int8_t *q = c->a8 + (size_t)t * (size_t)in;
    float *figs = (float *)c->a8_figs + (size_t)t * A8_FIGS((size_t)in);
    return (struct simfmt_codes){q, figs, (int32_t *)(void *)(figs + in / 32),
                                 figs + in / 32 + in / 16};
}

struct codes_job {
    const struct llama_ctx *c;
    const struct wmat *W;
    const float *x;
    int bad;
};

/* rows [t0, t1) of x rounded into c->aq and their codes into c->a8_rows */
static void codes_rows(void *arg, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    struct codes_job *j = arg;
    const int64_t in = j->W->in;
    const uint32_t kind = simfmt_llamacpp_act_class(j->W->type);
    for (int64_t t = t0; t < t1; t++) {
        float *aq = j->c->aq + (size_t)t * (size_t)in;
        struct simfmt_codes cd = row_codes(j->c, in, (int)t);
        memcpy(aq, j->x + (size_t)t * (size_t)in, (size_t)in * sizeof *aq);
        if (simfmt_llamacpp_codes(j->W->type, aq, in, &cd))
            __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED); /* not finite */
        j->c->a8_rows[t] = (struct matmul_q8){kind, cd.q, cd.d, cd.sum16, cd.s};
    }
}

/* a=llamacpp's prefill (n > 1) of k parts whose inputs round alike (the
 * same `in` and act_key: the callers check) through the int8 product
 * (gemm_q8) where the kernel set runs it for every part: 0 when done, -1 when nothing was
 * written (the caller's float path then runs: another kernel set or type,
 * more rows than a8 holds, or a row without codes, an Inf in it or a NaN
 * under Q8_0). A part gemm_q8 refuses (no memory; it writes nothing) is
 * computed by the float path on its own, so that each part is computed
 * once. */
static int gemm_products(const struct llama_ctx *c, const struct matmul_part *parts, int k,
                         const float *x, int n)
{
    if (c->act != LLAMA_ACT_LLAMACPP || n < 2 || !c->a8_rows || n > c->a8_n) return -1;
    for (int i = 0; i < k; i++)
        if (!gemm_q8_fast(parts[i].W)) return -1;
    struct codes_job j = {c, parts[0].W, x, 0};
    parallel_for(c->n_threads, n, codes_rows, &j);
    if (j.bad) return -1;
    for (int i = 0; i < k; i++) {
        const struct matmul_part *p = &parts[i];
        if (gemm_q8(p->y, p->W, p->bias, p->beta, c->a8_rows, n, c->n_threads, c->scratch)) {
            matmul_w(p->y, act_round(c, p->W, x, n), p->W, p->bias, n, p->beta, c->n_threads,
                     c->scratch);
            lm_q81_correct(c, p->y, x, p->W, n);
        }
    }
    return 0;
}

/* y[n][out] = x[n][in] . W^T (+ bias) (+ beta y), weights as stored */
void lm_matmul(const struct llama_ctx *c, float *y, const float *x, const struct wmat *W,
               const float *bias, float beta, int n)
{
    struct matmul_part p = {y, W, bias, beta};
    if (c->act == LLAMA_ACT_LLAMACPP && n == 1) { /* a decode step: maybe integer */
        lm_matmul_group(c, &p, 1, x, n);
        return;
    }
    if (!gemm_products(c, &p, 1, x, n)) return;
    if (lm_q81_products(c, &p, 1, x, n)) return; /* Q4_1/Q5_1 under a=llamacpp: one sgemm */
    const float *xr = c->act != LLAMA_ACT_NONE ? act_round(c, W, x, n) : x;
    matmul_w(y, xr, W, bias, n, beta, c->n_threads, c->scratch);
    lm_q81_correct(c, y, x, W, n);
}

/* A decode step's input (n == 1) in llama.cpp's 8-bit blocks for the k
 * parts, when the kernel set has an integer kernel for one of them: x
 * rounded into c->aq and its codes into *a (the figures in c->a8_figs).
 * 0, or -1 to take the float path (which rounds x itself). */
static int act_codes(const struct llama_ctx *c, const struct matmul_part *parts, int k,
                     const float *x, struct matmul_q8 *a)
{
    const struct wmat *W = parts[0].W;
    const uint32_t kind = simfmt_llamacpp_act_class(W->type);
    int any = 0;
    for (int i = 0; i < k; i++)
        any |= matmul_has_q8(parts[i].W->type, kind);
    if (!any || !c->a8) return -1;
    const size_t in = (size_t)W->in;
    struct simfmt_codes codes = row_codes(c, W->in, 0);
    memcpy(c->aq, x, in * sizeof *x);
    if (simfmt_llamacpp_codes(W->type, c->aq, W->in, &codes)) return -1; /* not finite */
    *a =
        (struct matmul_q8){kind, codes.q, codes.d, codes.sum16, kind == GGML_Q8_0 ? codes.s : NULL};
    return 0;
}

/* the k products of one x (Q, K, V; gate, up): one fork-join in a decode
 * step, and under simulated arithmetic one rounding of x when the
 * products' inputs round alike (else each its own); a=llamacpp's decode
 * steps through the integer kernels where the set has them */
void lm_matmul_group(const struct llama_ctx *c, const struct matmul_part *parts, int k,
                     const float *x, int n)
{
    const float *xr = x;
    if (c->act != LLAMA_ACT_NONE) {
        int alike = 1;
        for (int i = 1; i < k; i++)
            alike &= act_key(c, parts[i].W) == act_key(c, parts[0].W) &&
                     parts[i].W->in == parts[0].W->in;
        if (!alike) {
            for (int i = 0; i < k; i++)
                lm_matmul(c, parts[i].y, x, parts[i].W, parts[i].bias, parts[i].beta, n);
            return;
        }
        if (!gemm_products(c, parts, k, x, n)) return;
        if (lm_q81_products(c, parts, k, x, n)) return;
        struct matmul_q8 a;
        if (c->act == LLAMA_ACT_LLAMACPP && n == 1 && !act_codes(c, parts, k, x, &a)) {
            matmul_w_group_q8(parts, k, c->aq, &a, c->n_threads, c->scratch);
            for (int i = 0; i < k; i++)
                if (!matmul_has_q8(parts[i].W->type, a.kind))
                    lm_q81_correct(c, parts[i].y, x, parts[i].W, n);
            return;
        }
        xr = act_round(c, parts[0].W, x, n);
    }
    matmul_w_group(parts, k, xr, n, c->n_threads, c->scratch);
    for (int i = 0; i < k; i++)
        lm_q81_correct(c, parts[i].y, x, parts[i].W, n);
}

void llama_ctx_set_act_output(struct llama_ctx *c, int round)
{
    c->act_output = round;
}

void llama_ctx_set_act_static(struct llama_ctx *c, int on)
{
    c->act_static = on;
}

void llama_ctx_set_kv(struct llama_ctx *c, const struct simfmt *f)
{
    c->kv_fmt = *f;
}

int llama_ctx_set_act(struct llama_ctx *c, int mode, const struct simfmt *f)
{
    if (mode != LLAMA_ACT_NONE && !c->aq) {
        int64_t rows = c->n_ctx > LLAMA_MAX_ROWS_HINT ? c->n_ctx : LLAMA_MAX_ROWS_HINT;
        /* rows of max_in, and of max_in / 32 more for lm_q81_products */
        c->aq = malloc((size_t)rows * (size_t)(c->m->max_in + c->m->max_in / 32) * sizeof *c->aq);
        if (!c->aq) return QG_ERR_NOMEM;
    }
    if (mode == LLAMA_ACT_LLAMACPP && !c->a8) { /* the codes of a product's rows */
        size_t in = (size_t)c->m->max_in,
               rows = (size_t)(c->n_ctx > LLAMA_MAX_ROWS_HINT ? c->n_ctx : LLAMA_MAX_ROWS_HINT);
        c->a8 = malloc(rows * in);
        c->a8_figs = malloc(rows * A8_FIGS(in) * sizeof(float));
        c->a8_rows = malloc(rows * sizeof *c->a8_rows);
        if (!c->a8 || !c->a8_figs || !c->a8_rows) { /* all or none: a retry allocates again */
            free(c->a8);
            free(c->a8_figs);
            free(c->a8_rows);
            c->a8 = NULL, c->a8_figs = NULL, c->a8_rows = NULL;
            return QG_ERR_NOMEM;
        }
        c->a8_n = (int)rows;
    }
    if (mode == LLAMA_ACT_LLAMACPP && !c->k16) { /* optional: without it decode reads f32 */
        const struct llama_hparams *h = &c->m->hp;
        size_t halves =
            (size_t)h->n_layers * (size_t)c->n_ctx * (size_t)h->n_kv_heads * (size_t)h->head_dim;
        c->k16 = qg_alloc_aligned(halves * sizeof *c->k16);
        c->v16 = qg_alloc_aligned(halves * sizeof *c->v16);
        if (!c->k16 || !c->v16) {
            free(c->k16);
            free(c->v16);
            c->k16 = c->v16 = NULL;
        }
    }
    c->act = mode;
    if (f) c->act_fmt = *f;
    return QG_OK;
}

/* whether a batch of n rows attends as ggml's flash attention computes
 * short batches (attn_row_f16): a=llamacpp, fewer than FA_TILE_ROWS */
static int flash_rows(const struct llama_ctx *c, int n)
{
    return c->act == LLAMA_ACT_LLAMACPP && n < FA_TILE_ROWS;
}

/* whether K and V are written to, and decode reads, the fp16 cache: under
 * a=llamacpp, where every value is an f16 (no simulated cache format) */
static int kv16_on(const struct llama_ctx *c)
{
    return c->k16 && !c->kv16_off && c->act == LLAMA_ACT_LLAMACPP && c->kv_fmt.kind == SIMFMT_NONE;
}

void llama_ctx_set_kv16(struct llama_ctx *c, int on)
{
    c->kv16_off = !on;
}

/* Rotates n rows of `heads` heads (row stride `stride`) at positions pos0..;
 * angles as ggml's rope cache: pos * base^(-2k/d), divided by the pair's
 * factor (Llama 3's rope_freqs), times the linear scale */
static void rope(float *x, int n, int stride, int heads, int hd, int pos0,
                 const struct llama_hparams *h, int l, const float *factors)
{
    const float ms = h->rope_mscale;
    const int nd = h->rope_dims;
    float base, fs;
    llama_layer_rope(h, l, &base, &fs);
    const float theta_scale = powf(base, -2.0f / (float)nd);
    for (int i = 0; i < n; i++) {
        float cs[2048], sn[2048]; /* nd/2 <= 2048: head size is capped at 4096 */
        float theta = (float)(pos0 + i);
        for (int k = 0; k < nd / 2; k++) {
            float t = fs * (factors ? theta / factors[k] : theta);
            cs[k] = cosf(t) * ms;
            sn[k] = sinf(t) * ms;
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
    float scale; /* q.k times this */
};

/* softmax of each of `rows` rows of s (row stride T), row i over keys
 * first..last0 + i (first: 0, or the sliding window's start), the others
 * zero; soft-capped first where the family caps */
static void softmax_causal(const struct llama_ctx *c, float *scores, int rows, int T, int last0,
                           int window)
{
    const float cap = c->m->hp.attn_softcap;
    for (int i = 0; i < rows; i++) {
        float *s = scores + (size_t)i * T;
        int last = last0 + i, first = window && last - window + 1 > 0 ? last - window + 1 : 0;
        if (cap > 0)
            for (int k = first; k <= last; k++)
                s[k] = cap * tanhf(s[k] * (1.0f / cap));
        float mx = vm_max(s + first, last + 1 - first, -INFINITY);
        vm_exp_shifted(s + first, s + first, mx, last + 1 - first);
        double sum = 0;
        for (int k = first; k <= last; k++)
            sum += s[k];
        vm_scale(s + first, (float)(1.0 / sum), last + 1 - first);
        for (int k = 0; k < first; k++)
            s[k] = 0.0f;
        for (int k = last + 1; k < T; k++)
            s[k] = 0.0f;
    }
}

/* one query row as ggml's CPU flash attention computes a batch of fewer than
 * FA_TILE_ROWS queries (flash_f16.h): Q (already rounded to f16) against
 * keys first..last in order */
static void attn_row_f16(const struct llama_ctx *c, float *o, const float *q, size_t at, int first,
                         int last, int kvd, float scale, float *scores)
{
    const int hd = c->m->hp.head_dim, T = last - first + 1;
    const size_t from = at + (size_t)first * kvd;
    if (kv16_on(c) && last < c->kv16_upto) { /* the same bits from half the bytes */
        matmul_dots_f16(scores, q, c->k16 + from, T, kvd, hd, scale);
        flash_f16_row_h(o, scores, c->v16 + from, T, kvd, hd, c->m->hp.attn_softcap);
        return;
    }
    matmul_dots(scores, q, c->k + from, T, kvd, hd, scale);
    flash_f16_row(o, scores, c->v + from, T, kvd, hd, c->m->hp.attn_softcap);
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
    const float scale = j->scale;
    const int window = llama_layer_swa(h, j->l) ? h->swa_window : 0;
    float *scores = c->scores + (size_t)thread * ATT_BLOCK * c->n_ctx;
    for (int64_t hh = h0; hh < h1; hh++) {
        int kh = (int)hh / group;
        if (flash_rows(c, n)) {
            for (int i = 0; i < n; i++) {
                int last = pos0 + i,
                    first = window && last - window + 1 > 0 ? last - window + 1 : 0;
                attn_row_f16(c, c->att + (size_t)i * qd + (size_t)hh * hd,
                             c->q + (size_t)i * qd + (size_t)hh * hd,
                             (size_t)j->l * c->n_ctx * kvd + (size_t)kh * hd, first, last, kvd,
                             scale, scores);
            }
            continue;
        }
        for (int r0 = 0; r0 < n; r0 += ATT_BLOCK) {
            int rows = n - r0 < ATT_BLOCK ? n - r0 : ATT_BLOCK, T = pos0 + r0 + rows;
            const float *Q = c->q + (size_t)r0 * qd + (size_t)hh * hd, *Kh = K + (size_t)kh * hd,
                        *Vh = V + (size_t)kh * hd;
            float *O = c->att + (size_t)r0 * qd + (size_t)hh * hd;
            /* S[rows][T] = Q_h[r0..][hd] . K_h[T][hd]^T * scale */
            if (rows == 1)
                matmul_dots(scores, Q, Kh, T, kvd, hd, scale);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, T, hd, scale, Q, qd, Kh,
                            kvd, 0.0f, scores, T);
            softmax_causal(c, scores, rows, T, pos0 + r0, window);
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
static void attention(struct llama_ctx *c, int l, int n, int pos0, float scale)
{
    struct att_job j = {c, l, n, pos0, scale};
    const struct llama_hparams *h = &c->m->hp;
    double work = 4.0 * h->n_heads * h->head_dim * (double)n * (pos0 + n);
    /* a=llamacpp's short batches: each key also costs an exp and a chain
     * of fp16 roundings per head (flash_f16_row), some 4x the time of its
     * flops; so a decode step splits its heads from ~20 keys on, not ~85
     * (134M, 128 tokens: 1-3 % more tokens/s) */
    if (flash_rows(c, n)) work *= 4.0;
    parallel_for(parallel_threads_for(c->n_threads, work), h->n_heads, attention_heads, &j);
}

static void add_to(float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* the attention half of layer l: x += attention(norm(x)) (post-normed
 * where the family says) */
static void attention_sublayer(struct llama_ctx *c, int l, int n, int pos0)
{
    const struct llama_model *m = c->m;
    const struct llama_hparams *h = &m->hp;
    const struct layer *L = &m->layers[l];
    const int dim = h->dim, hd = h->head_dim, qd = h->n_heads * hd, kvd = h->n_kv_heads * hd;
    float *Kl = c->k + ((size_t)l * c->n_ctx + pos0) * kvd,
          *Vl = c->v + ((size_t)l * c->n_ctx + pos0) * kvd;
    norm(c, c->xn, c->x, L->attn_norm, L->attn_norm_b, n);
    const struct matmul_part qkv[] = {
        {c->q, &L->wq, L->bq, 0.0f}, {Kl, &L->wk, L->bk, 0.0f}, {Vl, &L->wv, L->bv, 0.0f}};
    lm_matmul_group(c, qkv, 3, c->xn, n);
    if (h->qk_norm) { /* per head, before RoPE */
        rmsnorm(c->q, c->q, L->q_norm, n * h->n_heads, hd, h->rms_eps);
        rmsnorm(Kl, Kl, L->k_norm, n * h->n_kv_heads, hd, h->rms_eps);
    }
    rope(c->q, n, qd, h->n_heads, hd, pos0, h, l, c->rope_div);
    rope(Kl, n, kvd, h->n_kv_heads, hd, pos0, h, l, c->rope_div);
    float scale = h->attn_scale;
    if (c->act == LLAMA_ACT_LLAMACPP) { /* llama.cpp's f16 cache */
        if (h->q_prescale) {            /* llama.cpp scales Q itself */
            vm_scale(c->q, scale, (int64_t)n * qd);
            scale = 1.0f;
        }
        /* short batches: Q meets K in f16 (larger ones keep it in f32) */
        if (flash_rows(c, n)) quant_round_f16(c->q, (int64_t)n * qd);
        quant_round_f16(Kl, (int64_t)n * kvd);
        quant_round_f16(Vl, (int64_t)n * kvd);
    }
    if (c->kv_fmt.kind != SIMFMT_NONE) { /* K and V as a simulated cache stores them */
        simfmt_apply_kv(&c->kv_fmt, Kl, n, kvd, hd);
        simfmt_apply_kv(&c->kv_fmt, Vl, n, kvd, hd);
    }
    if (kv16_on(c)) {
        const size_t at = ((size_t)l * c->n_ctx + pos0) * kvd;
        quant_f32_to_f16_row(Kl, c->k16 + at, (int64_t)n * kvd);
        quant_f32_to_f16_row(Vl, c->v16 + at, (int64_t)n * kvd);
    }
    attention(c, l, n, pos0, scale);
    if (!h->post_norms) {
        lm_matmul(c, c->x, c->att, &L->wo, L->bo, 1.0f, n); /* x += att . Wo^T */
        return;
    }
    lm_matmul(c, c->tmp, c->att, &L->wo, L->bo, 0.0f, n);
    rmsnorm(c->tmp, c->tmp, L->post_attn_norm, n, dim, h->rms_eps);
    add_to(c->x, c->tmp, (int64_t)n * dim);
}

/* the FFN half: x += ffn(norm(x)) (post-normed where the family says) */
static void ffn_sublayer(struct llama_ctx *c, int l, int n)
{
    const struct llama_hparams *h = &c->m->hp;
    const struct layer *L = &c->m->layers[l];
    norm(c, c->xn, c->x, L->ffn_norm, L->ffn_norm_b, n);
    if (!h->post_norms) {
        lm_ffn(c, L, c->x, 1.0f, n);
        return;
    }
    lm_ffn(c, L, c->tmp, 0.0f, n);
    rmsnorm(c->tmp, c->tmp, L->post_ffn_norm, n, h->dim, h->rms_eps);
    add_to(c->x, c->tmp, (int64_t)n * h->dim);
}

int llama_eval(struct llama_ctx *c, const int32_t *tokens, int n, int logits_from, float *logits)
{
    const struct llama_model *m = c->m;
    const struct llama_hparams *h = &m->hp;
    if (n <= 0 || c->pos + n > c->n_ctx || logits_from < 0 || logits_from > n) return QG_ERR_USAGE;
    c->last_n = 0;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= h->n_vocab) return QG_ERR_USAGE;
    const int dim = h->dim;
    const int pos0 = c->pos;
    for (int i = 0; i < n; i++) {
        float *xi = c->x + (size_t)i * dim;
        /* a tied embedding with decode's copy: the row from the copy (its
         * file pages were let go), gathered in scratch, free before the products */
        dequant_row(m->tok_embd.type, matmul_row(&m->tok_embd, tokens[i], (uint8_t *)c->scratch),
                    xi, dim);
        if (h->embd_scale != 1.0f) vm_scale(xi, h->embd_scale, dim);
    }
    /* what the fp16 cache holds after this batch: each layer writes the
     * batch's rows before its attention reads them; positions written
     * while it was not kept (another mode, a cache format) end it there */
    if (kv16_on(c)) {
        if (pos0 <= c->kv16_upto) c->kv16_upto = pos0 + n;
    } else if (pos0 < c->kv16_upto) {
        c->kv16_upto = pos0;
    }
    for (int l = 0; l < h->n_layers; l++) {
        attention_sublayer(c, l, n, pos0);
        if (c->perturb) perturb_rows(c, n, dim, pos0, 2 * l);
        ffn_sublayer(c, l, n);
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
    norm(c, c->xn, c->x + (size_t)first * h->dim, m->out_norm, m->out_norm_b, count);
    if (c->act_output)
        lm_matmul(c, logits, c->xn, &m->output, NULL, 0.0f, count);
    else /* a checkpoint's declared activations: not lm_head's */
        matmul_w(logits, c->xn, &m->output, NULL, count, 0.0f, c->n_threads, c->scratch);
    if (h->final_softcap > 0) { /* gemma2 */
        const float cap = h->final_softcap;
        for (size_t i = 0; i < (size_t)count * h->n_vocab; i++)
            logits[i] = cap * tanhf(logits[i] * (1.0f / cap));
    }
    /* a NaN or Inf in the output layer shows only here: never scored */
    if (lm_first_nonfinite(logits, (int64_t)count * h->n_vocab) >= 0) return QG_ERR_DATA;
    return QG_OK;
}

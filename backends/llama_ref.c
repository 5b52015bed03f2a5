/* llama_ref — the plain reference forward (loops, double everywhere) that
 * tests hold the fast one to, for every family: written from the
 * families' definitions, not from llama_eval.c. */
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

static void ref_rmsnorm(double *y, const double *x, const float *w, int n, double eps)
{
    double ss = 0;
    for (int j = 0; j < n; j++)
        ss += x[j] * x[j];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int j = 0; j < n; j++)
        y[j] = x[j] * s * w[j];
}

/* the family's norm: RMS, or LayerNorm with its bias */
static void ref_norm(double *y, const double *x, const float *w, const float *b,
                     const struct llama_hparams *h)
{
    int n = h->dim;
    if (h->norm != LLAMA_NORM_LAYER) {
        ref_rmsnorm(y, x, w, n, h->rms_eps);
        return;
    }
    double mean = 0, var = 0;
    for (int j = 0; j < n; j++)
        mean += x[j] / n;
    for (int j = 0; j < n; j++)
        var += (x[j] - mean) * (x[j] - mean) / n;
    double s = 1.0 / sqrt(var + h->rms_eps);
    for (int j = 0; j < n; j++)
        y[j] = (x[j] - mean) * s * w[j] + b[j];
}

/* y[out] = W[out][in] . x[in] + b, row by row through a decoded row */
static void ref_matvec(double *y, const struct wmat *W, const float *b, const double *x, float *row)
{
    for (int64_t r = 0; r < W->out; r++) {
        double acc = b ? b[r] : 0.0;
        dequant_row(W->type, W->data + (size_t)r * W->row_bytes, row, W->in);
        for (int64_t k = 0; k < W->in; k++)
            acc += (double)row[k] * x[k];
        y[r] = acc;
    }
}

static void ref_rope(double *v, int heads, int hd, int pos, const struct llama_hparams *h, int l,
                     const float *factors)
{
    int nd = h->rope_dims;
    float base, fs;
    llama_layer_rope(h, l, &base, &fs);
    for (int hh = 0; hh < heads; hh++)
        for (int k = 0; k < nd / 2; k++) {
            double theta = pos * pow((double)base, -2.0 * k / nd) * fs;
            if (factors) theta /= factors[k];
            int a = h->rope_neox ? k : 2 * k, b = h->rope_neox ? k + nd / 2 : 2 * k + 1;
            double x0 = v[hh * hd + a], x1 = v[hh * hd + b];
            double c = cos(theta) * h->rope_mscale, s = sin(theta) * h->rope_mscale;
            v[hh * hd + a] = x0 * c - x1 * s;
            v[hh * hd + b] = x0 * s + x1 * c;
        }
}

/* o = causal attention of query position i over K/V rows first..i (one
 * layer; first > 0 in a sliding window), soft-capped where set */
static void ref_attention(double *o, const double *q, const double *K, const double *V, double *s,
                          int i, int first, const struct llama_hparams *h)
{
    const int hd = h->head_dim, kvd = h->n_kv_heads * hd, group = h->n_heads / h->n_kv_heads;
    for (int hh = 0; hh < h->n_heads; hh++) {
        int kh = hh / group;
        double mx = -INFINITY, sum = 0;
        for (int j = first; j <= i; j++) {
            double d = 0;
            for (int k = 0; k < hd; k++)
                d += q[hh * hd + k] * K[(size_t)j * kvd + kh * hd + k];
            s[j] = d * h->attn_scale;
            if (h->attn_softcap > 0) s[j] = h->attn_softcap * tanh(s[j] / h->attn_softcap);
            if (s[j] > mx) mx = s[j];
        }
        for (int j = first; j <= i; j++)
            sum += (s[j] = exp(s[j] - mx));
        for (int k = 0; k < hd; k++) {
            double acc = 0;
            for (int j = first; j <= i; j++)
                acc += s[j] / sum * V[(size_t)j * kvd + kh * hd + k];
            o[hh * hd + k] = acc;
        }
    }
}

static double ref_gelu(double x)
{
    return 0.5 * x *
           (1.0 + tanh(0.79788456080286535587989211986876 * x * (1.0 + 0.044715 * x * x)));
}

struct ref_buf {
    double *x, *xn, *q, *o, *tmp, *g, *u, *K, *V, *s, *lg, *acc, *p;
    float *row;
};

/* y = down(act(gate . x, up . x)) of one dense FFN (gate NULL: act(up . x)) */
static void ref_dense(double *y, const struct wmat *wg, const struct wmat *wu,
                      const struct wmat *wd, const float *bg, const float *bu, const float *bd,
                      int act, const double *x, struct ref_buf *b)
{
    int64_t ff = wu->out;
    ref_matvec(b->u, wu, bu, x, b->row);
    if (wg && wg->data) ref_matvec(b->g, wg, bg, x, b->row);
    for (int64_t j = 0; j < ff; j++) {
        if (act == LLAMA_FFN_GELU)
            b->g[j] = ref_gelu(b->u[j]);
        else if (act == LLAMA_FFN_GEGLU)
            b->g[j] = ref_gelu(b->g[j]) * b->u[j];
        else
            b->g[j] = b->g[j] / (1.0 + exp(-b->g[j])) * b->u[j];
    }
    ref_matvec(y, wd, bd, b->g, b->row);
}

/* y = the layer's FFN of x: dense, or softmax-routed top-k experts plus a
 * sigmoid-gated shared expert */
static void ref_ffn(double *y, const struct layer *L, const struct llama_hparams *h,
                    const double *x, struct ref_buf *b)
{
    if (!h->n_expert) {
        ref_dense(y, &L->w_gate, &L->w_up, &L->w_down, L->b_gate, L->b_up, L->b_down, h->ffn_act, x,
                  b);
        return;
    }
    const int ne = h->n_expert, dim = h->dim;
    ref_matvec(b->p, &L->router, NULL, x, b->row);
    double mx = -INFINITY, sum = 0, wsum = 0;
    for (int e = 0; e < ne; e++)
        mx = b->p[e] > mx ? b->p[e] : mx;
    for (int e = 0; e < ne; e++)
        sum += (b->p[e] = exp(b->p[e] - mx));
    int sel[64];
    double w[64];
    for (int j = 0; j < h->n_expert_used && j < 64; j++) {
        int best = -1;
        for (int e = 0; e < ne; e++) {
            int taken = 0;
            for (int q = 0; q < j; q++)
                taken |= sel[q] == e;
            if (!taken && (best < 0 || b->p[e] > b->p[best])) best = e;
        }
        sel[j] = best;
        wsum += (w[j] = b->p[best] / sum);
    }
    for (int d = 0; d < dim; d++)
        y[d] = 0;
    for (int j = 0; j < h->n_expert_used && j < 64; j++) {
        double wj = (h->moe_norm_w ? w[j] / wsum : w[j]) * h->moe_w_scale;
        int e = sel[j];
        ref_dense(b->acc, &L->gate_exps[e], &L->up_exps[e], &L->down_exps[e], NULL, NULL, NULL,
                  LLAMA_FFN_SWIGLU, x, b);
        for (int d = 0; d < dim; d++)
            y[d] += wj * b->acc[d];
    }
    if (!L->shexp_gate) return;
    double gs = 0;
    for (int d = 0; d < dim; d++)
        gs += x[d] * L->shexp_gate[d];
    ref_dense(b->acc, &L->sh_gate, &L->sh_up, &L->sh_down, NULL, NULL, NULL, LLAMA_FFN_SWIGLU, x,
              b);
    for (int d = 0; d < dim; d++)
        y[d] += b->acc[d] / (1.0 + exp(-gs));
}

/* one layer of position i: attention then FFN, into b->x */
static void ref_layer(const struct llama_model *m, int l, int i, int n, struct ref_buf *b)
{
    const struct llama_hparams *h = &m->hp;
    const struct layer *W = &m->layers[l];
    const int dim = h->dim, hd = h->head_dim, kvd = h->n_kv_heads * hd;
    double *Ki = b->K + ((size_t)l * n + i) * kvd, *Vi = b->V + ((size_t)l * n + i) * kvd;
    ref_norm(b->xn, b->x, W->attn_norm, W->attn_norm_b, h);
    ref_matvec(b->q, &W->wq, W->bq, b->xn, b->row);
    ref_matvec(Ki, &W->wk, W->bk, b->xn, b->row);
    ref_matvec(Vi, &W->wv, W->bv, b->xn, b->row);
    for (int hh = 0; W->q_norm && hh < h->n_heads; hh++)
        ref_rmsnorm(b->q + hh * hd, b->q + hh * hd, W->q_norm, hd, h->rms_eps);
    for (int hh = 0; W->k_norm && hh < h->n_kv_heads; hh++)
        ref_rmsnorm(Ki + hh * hd, Ki + hh * hd, W->k_norm, hd, h->rms_eps);
    ref_rope(b->q, h->n_heads, hd, i, h, l, lm_rope_factors(m, n));
    ref_rope(Ki, h->n_kv_heads, hd, i, h, l, lm_rope_factors(m, n));
    int first = llama_layer_swa(h, l) && i - h->swa_window + 1 > 0 ? i - h->swa_window + 1 : 0;
    ref_attention(b->o, b->q, b->K + (size_t)l * n * kvd, b->V + (size_t)l * n * kvd, b->s, i,
                  first, h);
    ref_matvec(b->tmp, &W->wo, W->bo, b->o, b->row);
    if (W->post_attn_norm) ref_rmsnorm(b->tmp, b->tmp, W->post_attn_norm, dim, h->rms_eps);
    for (int j = 0; j < dim; j++)
        b->x[j] += b->tmp[j];
    ref_norm(b->xn, b->x, W->ffn_norm, W->ffn_norm_b, h);
    ref_ffn(b->tmp, W, h, b->xn, b);
    if (W->post_ffn_norm) ref_rmsnorm(b->tmp, b->tmp, W->post_ffn_norm, dim, h->rms_eps);
    for (int j = 0; j < dim; j++)
        b->x[j] += b->tmp[j];
}

int llama_eval_ref(const struct llama_model *m, const int32_t *tokens, int n, float *logits)
{
    const struct llama_hparams *h = &m->hp;
    const int dim = h->dim, qd = h->n_heads * h->head_dim, kvd = h->n_kv_heads * h->head_dim;
    int ff = h->ffn > h->expert_ffn ? h->ffn : h->expert_ffn;
    ff = ff > h->shexp_ffn ? ff : h->shexp_ffn;
    size_t wide = (size_t)(dim > ff ? dim : ff) + (size_t)h->n_expert;
    struct ref_buf b = {0};
    double **all[] = {&b.x, &b.xn, &b.q, &b.o, &b.tmp, &b.g, &b.u, &b.acc, &b.p};
    size_t sizes[] = {wide, wide, (size_t)qd, (size_t)qd, wide, wide, wide, wide, wide};
    int rc = QG_OK;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!(*all[i] = malloc(sizes[i] * sizeof(double)))) rc = QG_ERR_NOMEM;
    b.K = malloc(sizeof(double) * (size_t)h->n_layers * n * kvd);
    b.V = malloc(sizeof(double) * (size_t)h->n_layers * n * kvd);
    b.s = malloc(sizeof(double) * (size_t)n);
    b.lg = malloc(sizeof(double) * (size_t)h->n_vocab);
    b.row = malloc(sizeof(float) * (size_t)m->max_in);
    if (!b.K || !b.V || !b.s || !b.lg || !b.row) rc = QG_ERR_NOMEM;
    for (int i = 0; i < n && !rc; i++) {
        if (tokens[i] < 0 || tokens[i] >= h->n_vocab) {
            rc = QG_ERR_USAGE;
            break;
        }
        dequant_row(m->tok_embd.type, m->tok_embd.data + (size_t)tokens[i] * m->tok_embd.row_bytes,
                    b.row, dim);
        for (int j = 0; j < dim; j++)
            b.x[j] = (double)b.row[j] * h->embd_scale;
        for (int l = 0; l < h->n_layers; l++)
            ref_layer(m, l, i, n, &b);
        ref_norm(b.xn, b.x, m->out_norm, m->out_norm_b, h);
        ref_matvec(b.lg, &m->output, NULL, b.xn, b.row);
        for (int j = 0; j < h->n_vocab; j++) {
            double v = b.lg[j];
            if (h->final_softcap > 0) v = h->final_softcap * tanh(v / h->final_softcap);
            logits[(size_t)i * h->n_vocab + j] = (float)v;
        }
    }
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(*all[i]);
    free(b.K);
    free(b.V);
    free(b.s);
    free(b.lg);
    free(b.row);
    return rc;
}

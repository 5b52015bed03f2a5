/* llama_ref — the plain reference forward (loops, double everywhere) that
 * tests hold the fast one to. */
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

static void ref_rope(double *v, int heads, int hd, int pos, const struct llama_hparams *h)
{
    int nd = h->rope_dims;
    for (int hh = 0; hh < heads; hh++)
        for (int k = 0; k < nd / 2; k++) {
            double theta = pos * pow((double)h->rope_theta, -2.0 * k / nd);
            int a = h->rope_neox ? k : 2 * k, b = h->rope_neox ? k + nd / 2 : 2 * k + 1;
            double x0 = v[hh * hd + a], x1 = v[hh * hd + b];
            v[hh * hd + a] = x0 * cos(theta) - x1 * sin(theta);
            v[hh * hd + b] = x0 * sin(theta) + x1 * cos(theta);
        }
}

/* o = causal attention of query position i over K/V rows 0..i (one layer) */
static void ref_attention(double *o, const double *q, const double *K, const double *V, double *s,
                          int i, const struct llama_hparams *h)
{
    const int hd = h->head_dim, kvd = h->n_kv_heads * hd, group = h->n_heads / h->n_kv_heads;
    for (int hh = 0; hh < h->n_heads; hh++) {
        int kh = hh / group;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j <= i; j++) {
            double d = 0;
            for (int k = 0; k < hd; k++)
                d += q[hh * hd + k] * K[(size_t)j * kvd + kh * hd + k];
            s[j] = d / sqrt((double)hd);
            if (s[j] > mx) mx = s[j];
        }
        for (int j = 0; j <= i; j++)
            sum += (s[j] = exp(s[j] - mx));
        for (int k = 0; k < hd; k++) {
            double acc = 0;
            for (int j = 0; j <= i; j++)
                acc += s[j] / sum * V[(size_t)j * kvd + kh * hd + k];
            o[hh * hd + k] = acc;
        }
    }
}

int llama_eval_ref(const struct llama_model *m, const int32_t *tokens, int n, float *logits)
{
    const struct llama_hparams *h = &m->hp;
    const int dim = h->dim, hd = h->head_dim, qd = h->n_heads * hd, kvd = h->n_kv_heads * hd;
    const int L = h->n_layers;
    double *x = malloc(sizeof(double) * (size_t)dim), *xn = malloc(sizeof(double) * (size_t)dim);
    double *q = malloc(sizeof(double) * (size_t)qd), *o = malloc(sizeof(double) * (size_t)qd);
    double *tmp = malloc(sizeof(double) * (size_t)(dim > h->ffn ? dim : h->ffn));
    double *g = malloc(sizeof(double) * (size_t)h->ffn),
           *u = malloc(sizeof(double) * (size_t)h->ffn);
    double *K = malloc(sizeof(double) * (size_t)L * n * kvd),
           *V = malloc(sizeof(double) * (size_t)L * n * kvd);
    double *s = malloc(sizeof(double) * (size_t)n),
           *lg = malloc(sizeof(double) * (size_t)h->n_vocab);
    float *row = malloc(sizeof(float) * (size_t)m->max_in);
    int rc = x && xn && q && o && tmp && g && u && K && V && s && lg && row ? QG_OK : QG_ERR_NOMEM;
    for (int i = 0; i < n && !rc; i++) {
        if (tokens[i] < 0 || tokens[i] >= h->n_vocab) {
            rc = QG_ERR_USAGE;
            break;
        }
        dequant_row(m->tok_embd.type, m->tok_embd.data + (size_t)tokens[i] * m->tok_embd.row_bytes,
                    row, dim);
        for (int j = 0; j < dim; j++)
            x[j] = row[j];
        for (int l = 0; l < L; l++) {
            const struct layer *W = &m->layers[l];
            double *Ki = K + ((size_t)l * n + i) * kvd, *Vi = V + ((size_t)l * n + i) * kvd;
            ref_rmsnorm(xn, x, W->attn_norm, dim, h->rms_eps);
            ref_matvec(q, &W->wq, W->bq, xn, row);
            ref_matvec(Ki, &W->wk, W->bk, xn, row);
            ref_matvec(Vi, &W->wv, W->bv, xn, row);
            ref_rope(q, h->n_heads, hd, i, h);
            ref_rope(Ki, h->n_kv_heads, hd, i, h);
            ref_attention(o, q, K + (size_t)l * n * kvd, V + (size_t)l * n * kvd, s, i, h);
            ref_matvec(tmp, &W->wo, NULL, o, row);
            for (int j = 0; j < dim; j++)
                x[j] += tmp[j];
            ref_rmsnorm(xn, x, W->ffn_norm, dim, h->rms_eps);
            ref_matvec(g, &W->w_gate, NULL, xn, row);
            ref_matvec(u, &W->w_up, NULL, xn, row);
            for (int j = 0; j < h->ffn; j++)
                g[j] = g[j] / (1.0 + exp(-g[j])) * u[j];
            ref_matvec(tmp, &W->w_down, NULL, g, row);
            for (int j = 0; j < dim; j++)
                x[j] += tmp[j];
        }
        ref_rmsnorm(xn, x, m->out_norm, dim, h->rms_eps);
        ref_matvec(lg, &m->output, NULL, xn, row);
        for (int j = 0; j < h->n_vocab; j++)
            logits[(size_t)i * h->n_vocab + j] = (float)lg[j];
    }
    free(x);
    free(xn);
    free(q);
    free(o);
    free(tmp);
    free(g);
    free(u);
    free(K);
    free(V);
    free(s);
    free(lg);
    free(row);
    return rc;
}

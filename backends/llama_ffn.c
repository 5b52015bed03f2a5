/* llama_ffn — the feed-forward half of a layer for every family: SwiGLU,
 * GELU-gated, a plain GELU MLP, and mixtures of experts (softmax router,
 * top-k, each expert run over the rows routed to it, a gated shared
 * expert), as llama.cpp's build_ffn and build_moe_ffn compute them. On an
 * exact tie of router probabilities the lower expert index wins: qgate's
 * choice (ggml's top-k does not promise an order). */
#include "backends/llama_impl.h"
#include "backends/parallel.h"
#include "backends/quant.h"
#include "backends/vecmath.h"

#include <math.h>
#include <string.h>

float lm_gelu(float x, int llamacpp)
{
    if (llamacpp) { /* ggml's table: the input and the result in f16 */
        if (x <= -10.0f) return 0.0f;
        if (x >= 10.0f) return x;
        x = quant_f16_to_f32(quant_f32_to_f16(x));
    }
    float y = 0.5f * x *
              (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
    return llamacpp ? quant_f16_to_f32(quant_f32_to_f16(y)) : y;
}

struct act_job {
    float *gate;     /* [n][width]: the result */
    const float *up; /* [n][width], or NULL (plain GELU of gate) */
    int act, llamacpp;
};

static void act_rows(void *arg, int64_t b, int64_t e, int thread)
{
    const struct act_job *j = arg;
    (void)thread;
    if (j->act == LLAMA_FFN_SWIGLU) {
        vm_swiglu(j->gate + b, j->up + b, e - b);
        return;
    }
    for (int64_t i = b; i < e; i++) {
        float g = lm_gelu(j->gate[i], j->llamacpp);
        j->gate[i] = j->up ? g * j->up[i] : g;
    }
}

/* gate[n][w] = act(gate) (* up) */
static void activate(const struct llama_ctx *c, float *gate, const float *up, int n, int w, int act)
{
    struct act_job j = {gate, up, act, c->act == LLAMA_ACT_LLAMACPP};
    parallel_for(parallel_threads_for(c->n_threads, 20.0 * n * w), (int64_t)n * w, act_rows, &j);
}

/* out[n][dim] = down(act(gate(x), up(x))) + beta out, x = rows of xn */
static void dense(const struct llama_ctx *c, const float *x, const struct wmat *wg,
                  const struct wmat *wu, const struct wmat *wd, const float *bg, const float *bu,
                  const float *bd, int act, float *out, float beta, int n)
{
    if (act == LLAMA_FFN_GELU) { /* up, GELU, down */
        lm_matmul(c, c->gate, x, wu, bu, 0.0f, n);
        activate(c, c->gate, NULL, n, (int)wu->out, act);
    } else {
        const struct matmul_part p[] = {{c->gate, wg, bg, 0.0f}, {c->up, wu, bu, 0.0f}};
        lm_matmul_group(c, p, 2, x, n);
        activate(c, c->gate, c->up, n, (int)wu->out, act);
    }
    lm_matmul(c, out, c->gate, wd, bd, beta, n);
}

/* the router: per row, softmax over the experts, the top n_used kept
 * (sel, sw), their weights renormalised and scaled as the family says */
static void route(struct llama_ctx *c, const struct layer *L, int n)
{
    const struct llama_hparams *h = &c->m->hp;
    const int ne = h->n_expert, k = h->n_expert_used;
    lm_matmul(c, c->moe_w, c->xn, &L->router, NULL, 0.0f, n);
    for (int i = 0; i < n; i++) {
        float *p = c->moe_w + (size_t)i * ne;
        float mx = p[0];
        for (int e = 1; e < ne; e++)
            mx = p[e] > mx ? p[e] : mx;
        double sum = 0;
        for (int e = 0; e < ne; e++)
            sum += (p[e] = expf(p[e] - mx));
        for (int e = 0; e < ne; e++)
            p[e] = (float)(p[e] * (1.0 / sum));
        int *sel = c->moe_sel + (size_t)i * k;
        float *sw = c->moe_sw + (size_t)i * k, wsum = 0;
        for (int j = 0; j < k; j++) { /* the j-th largest; the lower index on ties */
            int best = -1;
            for (int e = 0; e < ne; e++) {
                int taken = 0;
                for (int q = 0; q < j; q++)
                    taken |= sel[q] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            sel[j] = best;
            wsum += (sw[j] = p[best]);
        }
        if (h->moe_norm_w)
            for (int j = 0; j < k; j++)
                sw[j] /= wsum > 6.103515625e-5f ? wsum : 6.103515625e-5f;
        if (h->moe_w_scale != 1.0f)
            for (int j = 0; j < k; j++)
                sw[j] *= h->moe_w_scale;
    }
}

/* out[n][dim] (zeroed first) = the weighted sum of the chosen experts,
 * each expert computed once over the rows routed to it */
static void experts(struct llama_ctx *c, const struct layer *L, float *out, int n)
{
    const struct llama_hparams *h = &c->m->hp;
    const int k = h->n_expert_used, dim = h->dim;
    memset(out, 0, (size_t)n * (size_t)dim * sizeof *out);
    for (int e = 0; e < h->n_expert; e++) {
        int cnt = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < k; j++)
                if (c->moe_sel[(size_t)i * k + j] == e) {
                    c->moe_rows[cnt] = i * k + j;
                    memcpy(c->moe_x + (size_t)cnt * dim, c->xn + (size_t)i * dim,
                           (size_t)dim * sizeof *c->xn);
                    cnt++;
                }
        if (!cnt) continue;
        dense(c, c->moe_x, &L->gate_exps[e], &L->up_exps[e], &L->down_exps[e], NULL, NULL, NULL,
              LLAMA_FFN_SWIGLU, c->moe_y, 0.0f, cnt);
        for (int r = 0; r < cnt; r++) {
            int i = c->moe_rows[r] / k;
            float w = c->moe_sw[c->moe_rows[r]];
            const float *y = c->moe_y + (size_t)r * dim;
            float *o = out + (size_t)i * dim;
            for (int d = 0; d < dim; d++)
                o[d] += w * y[d];
        }
    }
}

/* out += sigmoid(x . shexp_gate) * shared_expert(x) */
static void shared_expert(struct llama_ctx *c, const struct layer *L, float *out, int n)
{
    const int dim = c->m->hp.dim;
    dense(c, c->xn, &L->sh_gate, &L->sh_up, &L->sh_down, NULL, NULL, NULL, LLAMA_FFN_SWIGLU,
          c->moe_y, 0.0f, n);
    for (int i = 0; i < n; i++) {
        const float *x = c->xn + (size_t)i * dim, *y = c->moe_y + (size_t)i * dim;
        double g = 0;
        for (int d = 0; d < dim; d++)
            g += (double)x[d] * L->shexp_gate[d];
        float s = 1.0f / (1.0f + expf(-(float)g));
        float *o = out + (size_t)i * dim;
        for (int d = 0; d < dim; d++)
            o[d] += y[d] * s;
    }
}

void lm_ffn(struct llama_ctx *c, const struct layer *L, float *out, float beta, int n)
{
    const struct llama_hparams *h = &c->m->hp;
    if (!h->n_expert) {
        dense(c, c->xn, &L->w_gate, &L->w_up, &L->w_down, L->b_gate, L->b_up, L->b_down, h->ffn_act,
              out, beta, n);
        return;
    }
    route(c, L, n);
    experts(c, L, c->tmp, n);
    if (L->shexp_gate) shared_expert(c, L, c->tmp, n);
    const int dim = h->dim;
    for (size_t i = 0; i < (size_t)n * dim; i++)
        out[i] = c->tmp[i] + beta * out[i];
}

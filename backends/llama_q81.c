/* llama_q81 — llama.cpp's Q8_1 block sums for Q4_1 and Q5_1 products
 * under a=llamacpp.
 *
 * llama.cpp multiplies Q4_1/Q5_1 weights by Q8_1 activations whose block
 * sum enters as s = fp16(d * sum(q)) times the weight block's minimum m;
 * the rounded activations alone give m * fp16(d) * sum(q). The difference,
 * delta = s - fp16(d) * sum(q) per row and block, times m is what a
 * product on the rounded activations misses. A prompt's products take it
 * as extra columns of one sgemm (the rounded rows with their deltas
 * appended, the weights' panels with their minima: lm_q81_products); the
 * rest add it after the product (lm_q81_correct).
 */
#include "backends/llama_impl.h"
#include "backends/ggml_types.h"
#include "backends/matmul.h"
#include "backends/parallel.h"
#include "backends/quant.h"
#include "backends/simfmt.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the correction's deltas held at once, and its rows per pass */
enum { Q81_DELTAS = 8192, Q81_ROWS = 512 };

/* a pass of the Q8_1 correction (lm_q81_correct) */
struct q81_job {
    float *y;
    const struct wmat *W;
    const float *delta; /* rows x nb */
    int rows;
    int64_t nb;
    size_t bsz;
};

/* outputs [o0, o1) of the correction for the job's rows: the block
 * minima of as many outputs as Q81_DELTAS holds converted at once, then
 * y += delta . minima^T */
static void q81_outputs(void *arg, int64_t o0, int64_t o1, int thread)
{
    (void)thread;
    const struct q81_job *j = arg;
    const int64_t nb = j->nb, per = Q81_DELTAS / nb;
    float m[Q81_DELTAS];
    for (int64_t o = o0; o < o1; o += per) {
        const int64_t no = o1 - o < per ? o1 - o : per;
        for (int64_t i = 0; i < no; i++) {
            const uint8_t *row = j->W->data + (size_t)(o + i) * j->W->row_bytes;
            quant_f16_gather(row + 2, j->bsz, nb, m + i * nb);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->rows, (int)no, (int)nb, 1.0f,
                    j->delta, (int)nb, m, (int)nb, 1.0f, j->y + o, (int)j->W->out);
    }
}

/* row xr's per-block delta, s - fp16(d) sum(q), into delta[0..nb) */
static void q81_delta(const float *xr, int64_t nb, float *delta)
{
    for (int64_t b = 0; b < nb; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fabsf(xr[b * 32 + j]) > amax ? fabsf(xr[b * 32 + j]) : amax;
        float d = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
        float dh = quant_f16_to_f32(quant_f32_to_f16(d));
        delta[b] = 0;
        if (!isfinite(amax) || !isfinite(id)) continue; /* NaN, Inf, or a scale past float */
        int sum = 0, bad = 0;
        for (int j = 0; j < 32; j++) {
            const float q = nearbyintf(xr[b * 32 + j] * id);
            bad |= isnan(q); /* a NaN input (amax skips it): the result says so already */
            sum += bad ? 0 : (int)q;
        }
        if (bad) continue;
        delta[b] = quant_f16_to_f32(quant_f32_to_f16((float)sum * d)) - dh * (float)sum;
    }
}

struct q81_dj {
    const float *x;
    int64_t in, nb;
    float *delta;
    int inputs; /* 1: delta's rows are in + nb long, x's rounding and then the deltas */
};

/* the deltas of rows [r0, r1): from the rounding's codes (simfmt, in
 * vector code) where a row has them, else block by block (q81_delta) */
static void q81_deltas(void *arg, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const struct q81_dj *j = arg;
    const size_t in = (size_t)j->in, nb = (size_t)j->nb, stride = j->inputs ? in + nb : nb;
    float *t = malloc((in + 4 * nb) * sizeof *t + in); /* the row, d, sum16, s; the codes */
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = j->x + (size_t)r * in;
        float *out = j->delta + (size_t)r * stride, *delta = j->inputs ? out + in : out;
        float *row = j->inputs ? out : t; /* where x's rounding goes */
        if (t) {
            struct simfmt_codes c = {(int8_t *)(void *)(t + in + 4 * nb), t + in,
                                     (int32_t *)(void *)(t + in + nb), t + in + 3 * nb};
            if (!simfmt_llamacpp_codes(GGML_Q8_0, memcpy(row, xr, in * sizeof *xr), j->in, &c)) {
                for (size_t b = 0; b < nb; b++)
                    delta[b] = c.s[b] - c.d[b] * (float)(c.sum16[2 * b] + c.sum16[2 * b + 1]);
                continue;
            }
        } else if (j->inputs) { /* no scratch for the codes: rounded, deltas block by block */
            simfmt_llamacpp_act(GGML_Q8_0, memcpy(row, xr, in * sizeof *xr), 1, j->in);
        }
        q81_delta(xr, j->nb, delta);
    }
    free(t);
}

/* whether W's products under c need llama.cpp's Q8_1 block sums */
static int q81_needed(const struct llama_ctx *c, const struct wmat *W)
{
    return c->act == LLAMA_ACT_LLAMACPP && (W->type == GGML_Q4_1 || W->type == GGML_Q5_1);
}

/* y += m * delta for each of x's n rows and W's blocks */
void lm_q81_correct(const struct llama_ctx *c, float *y, const float *x, const struct wmat *W,
                    int n)
{
    const int64_t nb = W->in / 32;
    if (!q81_needed(c, W) || nb > Q81_DELTAS) return; /* rows of up to 262144 inputs */
    float delta[Q81_DELTAS];
    const int per = (int)(Q81_DELTAS / nb < Q81_ROWS ? Q81_DELTAS / nb : Q81_ROWS);
    for (int r0 = 0; r0 < n; r0 += per) {
        struct q81_job j = {
            y + (size_t)r0 * (size_t)W->out,  W, delta, n - r0 < per ? n - r0 : per, nb,
            ggml_type_get(W->type)->type_size}; /* a block: d, m (fp16), the codes */
        struct q81_dj dj = {x + (size_t)r0 * (size_t)W->in, W->in, nb, delta, 0};
        parallel_for(c->n_threads, j.rows, q81_deltas, &dj);
        parallel_for(c->n_threads, W->out, q81_outputs, &j);
    }
}

int lm_q81_products(const struct llama_ctx *c, const struct matmul_part *parts, int k,
                    const float *x, int n)
{
    if (n < 2 || !c->aq) return 0;
    const int64_t in = parts[0].W->in;
    for (int i = 0; i < k; i++)
        if (!q81_needed(c, parts[i].W) || !matmul_w_minima_ok(parts[i].W) || parts[i].W->in != in)
            return 0;
    struct q81_dj dj = {x, in, in / 32, c->aq, 1}; /* c->aq holds n rows of in + in / 32 */
    parallel_for(c->n_threads, n, q81_deltas, &dj);
    for (int i = 0; i < k; i++)
        matmul_w_minima(parts[i].y, c->aq, parts[i].W, parts[i].bias, n, parts[i].beta,
                        c->n_threads, c->scratch);
    return 1;
}

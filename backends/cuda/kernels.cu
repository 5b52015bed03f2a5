/* kernels — a Llama-family forward pass on one CUDA device (kernels.h). */
#include "backends/cuda/kernels.h"
#include "backends/cuda/blocks.h"
#include "core/status.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PANEL_ELEMS ((size_t)16 << 20) /* one dequantized tile: 64 MiB of f32 */
#define LOGIT_ROWS 256                 /* output rows computed at once */
#define MAX_HEAD_DIM 256               /* 8 values per lane of a warp */
#define THREADS 256

struct dmat {
    uint32_t type;
    uint8_t *d;
    int64_t in, out;
    size_t row_bytes;
};

struct dlayer {
    float *attn_norm, *ffn_norm, *bq, *bk, *bv;
    struct dmat wq, wk, wv, wo, gate, up, down;
};

struct qcu_model {
    int device, precision, n_ctx;
    int V, dim, L, H, KVH, hd, ffn, rope_dims, rope_neox;
    float eps, theta;
    struct dmat tok_embd, output;
    float *out_norm;
    struct dlayer *layers;
    float *k, *v;                        /* [L][n_ctx][kv_dim] */
    float *x, *xn, *q, *att, *gate, *up; /* [n_ctx][width] */
    float *logits;                       /* [LOGIT_ROWS][V] */
    void *panel;                         /* PANEL_ELEMS of f32 or bf16 */
    __nv_bfloat16 *xb;                   /* a matrix input in bf16 */
    int32_t *tok;                        /* [n_ctx + 1] */
    double *lp;                          /* [LOGIT_ROWS] */
    int32_t *am;                         /* [LOGIT_ROWS] */
    int last_row;                        /* of logits: the last evaluated position */
    cublasHandle_t blas;
    size_t bytes;
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return fail(err, errlen, QG_ERR_IO, "CUDA: %s: %s", #call, cudaGetErrorString(e_));    \
    } while (0)

#define CB(call)                                                                                   \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return fail(err, errlen, QG_ERR_IO, "cuBLAS: %s: status %d", #call, (int)s_);          \
    } while (0)

static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

/* ------------------------------------------------------------ kernels */

__global__ void k_dequant_f32(uint32_t type, const uint8_t *w, size_t row_bytes, int64_t in,
                              int64_t r0, int64_t rows, float *panel)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * in;
         i += (int64_t)gridDim.x * blockDim.x)
        panel[i] = blk_value(type, w + (size_t)(r0 + i / in) * row_bytes, i % in);
}

__global__ void k_dequant_bf16(uint32_t type, const uint8_t *w, size_t row_bytes, int64_t in,
                               int64_t r0, int64_t rows, __nv_bfloat16 *panel)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * in;
         i += (int64_t)gridDim.x * blockDim.x)
        panel[i] = __float2bfloat16(blk_value(type, w + (size_t)(r0 + i / in) * row_bytes, i % in));
}

__global__ void k_to_bf16(const float *x, __nv_bfloat16 *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16(x[i]);
}

__global__ void k_embed(uint32_t type, const uint8_t *w, size_t row_bytes, int dim,
                        const int32_t *tok, int n, float *x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (int64_t)n * dim;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = blk_value(type, w + (size_t)tok[i / dim] * row_bytes, i % dim);
}

/* one block per row: y = x / sqrt(mean(x^2) + eps) * w, the sum in double */
__global__ void k_rmsnorm(const float *x, const float *w, float *y, int dim, float eps)
{
    __shared__ double part[THREADS];
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *yr = y + (size_t)blockIdx.x * dim;
    double s = 0;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        s += (double)(xr[j] * xr[j]);
    part[threadIdx.x] = s;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    float scale = 1.0f / sqrtf((float)(part[0] / dim) + eps);
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        yr[j] = xr[j] * scale * w[j];
}

__global__ void k_add_bias(float *y, const float *b, int64_t n, int out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * out;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] += b[i % out];
}

/* RoPE on n rows of `heads` heads (row stride `stride`) at positions pos0..,
 * the angles built as the CPU builds them (theta *= scale per pair, scale =
 * powf(base, -2 / nd) computed on the host as the CPU computes it) */
__global__ void k_rope(float *x, int n, int stride, int heads, int hd, int pos0, int nd, int neox,
                       float scale)
{
    int half = nd / 2;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < (int64_t)n * heads * half;
         t += (int64_t)gridDim.x * blockDim.x) {
        int k = (int)(t % half), hh = (int)((t / half) % heads), i = (int)(t / half / heads);
        float theta = (float)(pos0 + i);
        for (int s = 0; s < k; s++)
            theta *= scale;
        float c = cosf(theta), sn = sinf(theta);
        float *v = x + (size_t)i * stride + (size_t)hh * hd;
        int a = neox ? k : 2 * k, b = neox ? k + half : 2 * k + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * sn;
        v[b] = x0 * sn + x1 * c;
    }
}

/* one warp, query row i, head h: causal attention over keys 0..pos0+i
 * with an online softmax; head_dim <= MAX_HEAD_DIM */
__device__ static void attend_one(const float *q, const float *K, const float *V, float *out, int i,
                                  int h, int lane, int pos0, int H, int KVH, int hd, float scale)
{
    int kh = h / (H / KVH), qd = H * hd, kvd = KVH * hd;
    const float *qi = q + (size_t)i * qd + (size_t)h * hd;
    float m = -INFINITY, l = 0, acc[MAX_HEAD_DIM / 32];
    for (int c = 0; c < MAX_HEAD_DIM / 32; c++)
        acc[c] = 0;
    for (int t = 0; t <= pos0 + i; t++) {
        const float *kt = K + (size_t)t * kvd + (size_t)kh * hd,
                    *vt = V + (size_t)t * kvd + (size_t)kh * hd;
        float s = 0;
        for (int d = lane; d < hd; d += 32)
            s += qi[d] * kt[d];
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        s *= scale;
        float mn = fmaxf(m, s), corr = expf(m - mn), p = expf(s - mn);
        l = l * corr + p;
        for (int c = 0; c < MAX_HEAD_DIM / 32; c++) {
            int d = lane + 32 * c;
            if (d < hd) acc[c] = acc[c] * corr + p * vt[d];
        }
        m = mn;
    }
    float *oi = out + (size_t)i * qd + (size_t)h * hd;
    for (int c = 0; c < MAX_HEAD_DIM / 32; c++) {
        int d = lane + 32 * c;
        if (d < hd) oi[d] = acc[c] / l;
    }
}

__global__ void k_attention(const float *q, const float *K, const float *V, float *out, int n,
                            int pos0, int H, int KVH, int hd, float scale)
{
    /* a grid-stride loop over whole warps: every lane of a warp takes the
     * same iterations (blockDim is a multiple of 32) */
    int lane = threadIdx.x % 32;
    for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < (int64_t)n * H;
         w += (int64_t)gridDim.x * blockDim.x / 32)
        attend_one(q, K, V, out, (int)(w / H), (int)(w % H), lane, pos0, H, KVH, hd, scale);
}

__global__ void k_swiglu(float *gate, const float *up, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* one block per logits row r: the log-softmax (in place when `rows`), the
 * log-prob of target[r] (< 0: none) and the top-1 */
__global__ void k_log_softmax(float *logits, int V, const int32_t *target, double *lp, int32_t *am,
                              int rows)
{
    __shared__ float mx[THREADS];
    __shared__ int ix[THREADS];
    __shared__ double sm[THREADS];
    float *L = logits + (size_t)blockIdx.x * V;
    float best = -INFINITY;
    int at = 0;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        if (L[j] > best) best = L[j], at = j;
    mx[threadIdx.x] = best, ix[threadIdx.x] = at;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h &&
            (mx[threadIdx.x + h] > mx[threadIdx.x] ||
             (mx[threadIdx.x + h] == mx[threadIdx.x] && ix[threadIdx.x + h] < ix[threadIdx.x])))
            mx[threadIdx.x] = mx[threadIdx.x + h], ix[threadIdx.x] = ix[threadIdx.x + h];
        __syncthreads();
    }
    float top = mx[0];
    double s = 0;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        s += (double)expf(L[j] - top);
    sm[threadIdx.x] = s;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) sm[threadIdx.x] += sm[threadIdx.x + h];
        __syncthreads();
    }
    double lse = (double)top + log(sm[0]);
    if (threadIdx.x == 0) {
        int t = target[blockIdx.x];
        lp[blockIdx.x] = t >= 0 ? (double)L[t] - lse : 0.0;
        am[blockIdx.x] = ix[0];
    }
    __syncthreads();
    if (rows)
        for (int j = threadIdx.x; j < V; j += blockDim.x)
            L[j] = (float)((double)L[j] - lse);
}

/* ------------------------------------------------------------ upload */

static int up_bytes(struct qcu_model *m, void **dst, const void *src, size_t n, char *err,
                    size_t errlen)
{
    cudaError_t e = cudaMalloc(dst, n ? n : 1);
    if (e != cudaSuccess) {
        *dst = NULL;
        cudaGetLastError(); /* not left for a later check to report */
        return fail(err, errlen, e == cudaErrorMemoryAllocation ? QG_ERR_NOMEM : QG_ERR_IO,
                    "CUDA: cannot allocate %.1f MiB: %s", n / 1048576.0, cudaGetErrorString(e));
    }
    if (src) CK(cudaMemcpy(*dst, src, n, cudaMemcpyHostToDevice));
    m->bytes += n;
    return QG_OK;
}

static int up_mat(struct qcu_model *m, struct dmat *d, const struct qcu_mat *s, char *err,
                  size_t errlen)
{
    d->type = s->type, d->in = s->in, d->out = s->out, d->row_bytes = s->row_bytes;
    return up_bytes(m, (void **)&d->d, s->data, s->row_bytes * (size_t)s->out, err, errlen);
}

static int up_vec(struct qcu_model *m, float **d, const float *s, int n, char *err, size_t errlen)
{
    *d = NULL;
    return s ? up_bytes(m, (void **)d, s, (size_t)n * sizeof(float), err, errlen) : QG_OK;
}

static size_t mat_bytes(const struct qcu_mat *w)
{
    return w->row_bytes * (size_t)w->out;
}

#define BLAS_MARGIN ((size_t)64 << 20) /* cuBLAS's workspace and allocation rounding */

/* Device bytes the model will take: what qcu_model_upload and
 * alloc_buffers allocate, plus BLAS_MARGIN. */
static size_t plan_bytes(const struct qcu_model_desc *d, int n_ctx)
{
    size_t kvd = (size_t)d->n_kv_heads * d->head_dim, qd = (size_t)d->n_heads * d->head_dim,
           n = (size_t)n_ctx;
    size_t b = mat_bytes(&d->tok_embd) + 4 * (size_t)d->dim;
    if (d->output.data != d->tok_embd.data) b += mat_bytes(&d->output);
    for (int l = 0; l < d->n_layers; l++) {
        const struct qcu_layer *y = &d->layers[l];
        b += mat_bytes(&y->wq) + mat_bytes(&y->wk) + mat_bytes(&y->wv) + mat_bytes(&y->wo) +
             mat_bytes(&y->gate) + mat_bytes(&y->up) + mat_bytes(&y->down) + 8 * (size_t)d->dim;
        b += 4 * ((y->bq ? qd : 0) + (y->bk ? kvd : 0) + (y->bv ? kvd : 0));
    }
    size_t wide = (size_t)d->ffn > qd ? (size_t)d->ffn : qd;
    if ((size_t)d->dim > wide) wide = (size_t)d->dim;
    b += 2 * (size_t)d->n_layers * n * kvd * 4;                                /* KV cache */
    b += n * (2 * (size_t)d->dim + 2 * qd + 2 * (size_t)d->ffn) * 4;           /* activations */
    b += (size_t)LOGIT_ROWS * d->n_vocab * 4 + PANEL_ELEMS * 4 + n * wide * 2; /* logits, panel */
    b += (n + 1) * 4 + LOGIT_ROWS * (sizeof(double) + 4); /* tokens, lp, argmax */
    return b + BLAS_MARGIN;
}

static int upload_layers(struct qcu_model *m, const struct qcu_model_desc *d, char *err,
                         size_t errlen)
{
    int rc = QG_OK;
    for (int l = 0; l < d->n_layers && !rc; l++) {
        const struct qcu_layer *s = &d->layers[l];
        struct dlayer *y = &m->layers[l];
        int kvd = d->n_kv_heads * d->head_dim, qd = d->n_heads * d->head_dim;
        rc = up_vec(m, &y->attn_norm, s->attn_norm, d->dim, err, errlen);
        if (!rc) rc = up_vec(m, &y->ffn_norm, s->ffn_norm, d->dim, err, errlen);
        if (!rc) rc = up_vec(m, &y->bq, s->bq, qd, err, errlen);
        if (!rc) rc = up_vec(m, &y->bk, s->bk, kvd, err, errlen);
        if (!rc) rc = up_vec(m, &y->bv, s->bv, kvd, err, errlen);
        const struct qcu_mat *src[7] = {&s->wq, &s->wk, &s->wv, &s->wo, &s->gate, &s->up, &s->down};
        struct dmat *dst[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->gate, &y->up, &y->down};
        for (int k = 0; k < 7 && !rc; k++)
            rc = up_mat(m, dst[k], src[k], err, errlen);
    }
    return rc;
}

static int alloc_buffers(struct qcu_model *m, char *err, size_t errlen)
{
    size_t n = (size_t)m->n_ctx, qd = (size_t)m->H * m->hd, kvd = (size_t)m->KVH * m->hd;
    size_t wide = (size_t)m->ffn > qd ? (size_t)m->ffn : qd;
    int rc = up_bytes(m, (void **)&m->k, NULL, (size_t)m->L * n * kvd * 4, err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->v, NULL, (size_t)m->L * n * kvd * 4, err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->x, NULL, n * m->dim * 4, err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->xn, NULL, n * m->dim * 4, err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->q, NULL, n * qd * 4, err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->att, NULL, n * qd * 4, err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->gate, NULL, n * m->ffn * 4, err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->up, NULL, n * m->ffn * 4, err, errlen);
    if (!rc)
        rc = up_bytes(m, (void **)&m->logits, NULL, (size_t)LOGIT_ROWS * m->V * 4, err, errlen);
    if (!rc) rc = up_bytes(m, &m->panel, NULL, PANEL_ELEMS * 4, err, errlen);
    if (!rc)
        rc = up_bytes(m, (void **)&m->xb, NULL, n * (wide > (size_t)m->dim ? wide : m->dim) * 2,
                      err, errlen); /* bf16 */
    if (!rc) rc = up_bytes(m, (void **)&m->tok, NULL, (n + 1) * 4, err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->lp, NULL, LOGIT_ROWS * sizeof(double), err, errlen);
    if (!rc) rc = up_bytes(m, (void **)&m->am, NULL, LOGIT_ROWS * 4, err, errlen);
    return rc;
}

extern "C" int qcu_device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

extern "C" int qcu_device_describe(int device, char *buf, size_t n)
{
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return QG_ERR_UNAVAILABLE;
    snprintf(buf, n, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return QG_OK;
}

extern "C" int qcu_model_upload(const struct qcu_model_desc *d, int device, int precision,
                                int n_ctx, struct qcu_model **out, char *err, size_t errlen)
{
    *out = NULL;
    if (d->head_dim > MAX_HEAD_DIM || d->n_heads % d->n_kv_heads || d->ffn > (int)PANEL_ELEMS ||
        d->dim > (int)PANEL_ELEMS)
        return fail(err, errlen, QG_ERR_UNSUPPORTED,
                    "CUDA: head size %d (at most %d), %d heads over %d KV heads or rows of "
                    "%d/%d values not supported",
                    d->head_dim, MAX_HEAD_DIM, d->n_heads, d->n_kv_heads, d->dim, d->ffn);
    CK(cudaSetDevice(device));
    size_t free_b = 0, total_b = 0, need = plan_bytes(d, n_ctx);
    CK(cudaMemGetInfo(&free_b, &total_b));
    if (need > free_b)
        return fail(err, errlen, QG_ERR_NOMEM,
                    "CUDA device %d: the model needs %.1f MiB (weights as stored, a KV cache of "
                    "%d positions, buffers) and %.1f MiB of %.1f MiB are free",
                    device, need / 1048576.0, n_ctx, free_b / 1048576.0, total_b / 1048576.0);
    struct qcu_model *m = (struct qcu_model *)calloc(1, sizeof *m);
    if (!m) return fail(err, errlen, QG_ERR_NOMEM, "out of memory");
    m->device = device, m->precision = precision, m->n_ctx = n_ctx;
    m->V = d->n_vocab, m->dim = d->dim, m->L = d->n_layers, m->H = d->n_heads;
    m->KVH = d->n_kv_heads, m->hd = d->head_dim, m->ffn = d->ffn, m->rope_dims = d->rope_dims;
    m->rope_neox = d->rope_neox, m->eps = d->rms_eps, m->theta = d->rope_theta;
    m->layers = (struct dlayer *)calloc((size_t)d->n_layers, sizeof *m->layers);
    int rc = m->layers ? QG_OK : fail(err, errlen, QG_ERR_NOMEM, "out of memory");
    if (!rc && cublasCreate(&m->blas) != CUBLAS_STATUS_SUCCESS)
        rc = fail(err, errlen, QG_ERR_IO, "cuBLAS: cannot create a handle on device %d", device);
    if (!rc && precision == QCU_TF32 &&
        cublasSetMathMode(m->blas, CUBLAS_TF32_TENSOR_OP_MATH) != CUBLAS_STATUS_SUCCESS)
        rc = fail(err, errlen, QG_ERR_IO, "cuBLAS: cannot enable TF32");
    if (!rc) rc = up_mat(m, &m->tok_embd, &d->tok_embd, err, errlen);
    if (!rc && d->output.data == d->tok_embd.data)
        m->output = m->tok_embd; /* tied: one copy on the device */
    else if (!rc)
        rc = up_mat(m, &m->output, &d->output, err, errlen);
    if (!rc) rc = up_vec(m, &m->out_norm, d->out_norm, d->dim, err, errlen);
    if (!rc) rc = upload_layers(m, d, err, errlen);
    if (!rc) rc = alloc_buffers(m, err, errlen);
    if (rc) {
        qcu_model_free(m);
        return rc;
    }
    *out = m;
    return QG_OK;
}

extern "C" void qcu_model_free(struct qcu_model *m)
{
    if (!m) return;
    cudaSetDevice(m->device);
    for (int l = 0; m->layers && l < m->L; l++) {
        struct dlayer *y = &m->layers[l];
        void *p[] = {y->attn_norm, y->ffn_norm, y->bq,   y->bk,     y->bv,   y->wq.d,
                     y->wk.d,      y->wv.d,     y->wo.d, y->gate.d, y->up.d, y->down.d};
        for (size_t k = 0; k < sizeof p / sizeof *p; k++)
            cudaFree(p[k]);
    }
    void *p[] = {m->tok_embd.d, m->output.d == m->tok_embd.d ? NULL : m->output.d,
                 m->out_norm,   m->k,
                 m->v,          m->x,
                 m->xn,         m->q,
                 m->att,        m->gate,
                 m->up,         m->logits,
                 m->panel,      m->xb,
                 m->tok,        m->lp,
                 m->am};
    for (size_t k = 0; k < sizeof p / sizeof *p; k++)
        cudaFree(p[k]);
    if (m->blas) cublasDestroy(m->blas);
    free(m->layers);
    free(m);
}

extern "C" size_t qcu_model_bytes(const struct qcu_model *m)
{
    return m->bytes;
}

/* ------------------------------------------------------------ forward */

/* y[n][out] = x[n][in] . W^T (+ beta y): W dequantized a tile of rows at a
 * time into the panel, then one GEMM per tile. */
static int matmul(struct qcu_model *m, float *y, const float *x, const struct dmat *w, int n,
                  float beta, char *err, size_t errlen)
{
    const float alpha = 1.0f;
    int64_t tile = (int64_t)(PANEL_ELEMS / (size_t)w->in);
    if (tile > w->out) tile = w->out;
    if (tile < 1) /* a row wider than the panel: refused at upload, never here */
        return fail(err, errlen, QG_ERR_UNSUPPORTED, "CUDA: a row of %lld values",
                    (long long)w->in);
    if (m->precision == QCU_BF16) {
        k_to_bf16<<<blocks_for((int64_t)n * w->in), THREADS>>>(x, m->xb, (int64_t)n * w->in);
        CK(cudaGetLastError());
    }
    for (int64_t r0 = 0; r0 < w->out; r0 += tile) {
        int64_t rows = w->out - r0 < tile ? w->out - r0 : tile;
        if (m->precision == QCU_BF16) {
            k_dequant_bf16<<<blocks_for(rows * w->in), THREADS>>>(
                w->type, w->d, w->row_bytes, w->in, r0, rows, (__nv_bfloat16 *)m->panel);
            CK(cudaGetLastError());
            CB(cublasGemmEx(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, n, (int)w->in, &alpha,
                            m->panel, CUDA_R_16BF, (int)w->in, m->xb, CUDA_R_16BF, (int)w->in,
                            &beta, y + r0, CUDA_R_32F, (int)w->out, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
        } else {
            k_dequant_f32<<<blocks_for(rows * w->in), THREADS>>>(w->type, w->d, w->row_bytes, w->in,
                                                                 r0, rows, (float *)m->panel);
            CK(cudaGetLastError());
            CB(cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, n, (int)w->in, &alpha,
                           (const float *)m->panel, (int)w->in, x, (int)w->in, &beta, y + r0,
                           (int)w->out));
        }
    }
    return QG_OK;
}

static int project(struct qcu_model *m, float *y, const float *x, const struct dmat *w,
                   const float *bias, int n, char *err, size_t errlen)
{
    int rc = matmul(m, y, x, w, n, 0.0f, err, errlen);
    if (!rc && bias) {
        k_add_bias<<<blocks_for((int64_t)n * w->out), THREADS>>>(y, bias, n, (int)w->out);
        CK(cudaGetLastError());
    }
    return rc;
}

static int layer(struct qcu_model *m, int l, int n, int pos0, char *err, size_t errlen)
{
    const struct dlayer *y = &m->layers[l];
    int qd = m->H * m->hd, kvd = m->KVH * m->hd;
    float *Kl = m->k + ((size_t)l * m->n_ctx + pos0) * kvd,
          *Vl = m->v + ((size_t)l * m->n_ctx + pos0) * kvd;
    k_rmsnorm<<<n, THREADS>>>(m->x, y->attn_norm, m->xn, m->dim, m->eps);
    CK(cudaGetLastError());
    int rc = project(m, m->q, m->xn, &y->wq, y->bq, n, err, errlen);
    if (!rc) rc = project(m, Kl, m->xn, &y->wk, y->bk, n, err, errlen);
    if (!rc) rc = project(m, Vl, m->xn, &y->wv, y->bv, n, err, errlen);
    if (rc) return rc;
    int half = m->rope_dims / 2;
    float rs = powf(m->theta, -2.0f / (float)m->rope_dims);
    k_rope<<<blocks_for((int64_t)n * m->H * half), THREADS>>>(m->q, n, qd, m->H, m->hd, pos0,
                                                              m->rope_dims, m->rope_neox, rs);
    k_rope<<<blocks_for((int64_t)n * m->KVH * half), THREADS>>>(Kl, n, kvd, m->KVH, m->hd, pos0,
                                                                m->rope_dims, m->rope_neox, rs);
    int64_t warps = (int64_t)n * m->H;
    k_attention<<<blocks_for(warps * 32), THREADS>>>(
        m->q, m->k + (size_t)l * m->n_ctx * kvd, m->v + (size_t)l * m->n_ctx * kvd, m->att, n, pos0,
        m->H, m->KVH, m->hd, 1.0f / sqrtf((float)m->hd));
    CK(cudaGetLastError());
    rc = matmul(m, m->x, m->att, &y->wo, n, 1.0f, err, errlen);
    if (rc) return rc;
    k_rmsnorm<<<n, THREADS>>>(m->x, y->ffn_norm, m->xn, m->dim, m->eps);
    CK(cudaGetLastError());
    rc = project(m, m->gate, m->xn, &y->gate, NULL, n, err, errlen);
    if (!rc) rc = project(m, m->up, m->xn, &y->up, NULL, n, err, errlen);
    if (rc) return rc;
    k_swiglu<<<blocks_for((int64_t)n * m->ffn), THREADS>>>(m->gate, m->up, (int64_t)n * m->ffn);
    CK(cudaGetLastError());
    return matmul(m, m->x, m->gate, &y->down, n, 1.0f, err, errlen);
}

/* Output rows [r0, r0 + cnt) of the batch: logits, log-softmax, targets. */
static int output_rows(struct qcu_model *m, int r0, int cnt, const int32_t *targets, double *lp,
                       float *rows, int32_t *argmax, char *err, size_t errlen)
{
    k_rmsnorm<<<cnt, THREADS>>>(m->x + (size_t)r0 * m->dim, m->out_norm, m->xn, m->dim, m->eps);
    CK(cudaGetLastError());
    int rc = matmul(m, m->logits, m->xn, &m->output, cnt, 0.0f, err, errlen);
    if (rc) return rc;
    CK(cudaMemcpy(m->tok, targets, (size_t)cnt * 4, cudaMemcpyHostToDevice));
    k_log_softmax<<<cnt, THREADS>>>(m->logits, m->V, m->tok, m->lp, m->am, rows != NULL);
    CK(cudaGetLastError());
    if (lp) CK(cudaMemcpy(lp, m->lp, (size_t)cnt * sizeof(double), cudaMemcpyDeviceToHost));
    if (argmax) CK(cudaMemcpy(argmax, m->am, (size_t)cnt * 4, cudaMemcpyDeviceToHost));
    if (rows) CK(cudaMemcpy(rows, m->logits, (size_t)cnt * m->V * 4, cudaMemcpyDeviceToHost));
    m->last_row = cnt - 1;
    return QG_OK;
}

extern "C" int qcu_eval(struct qcu_model *m, const int32_t *tokens, int n, int n_targets, int pos0,
                        int from, double *lp, float *rows, int32_t *argmax, char *err,
                        size_t errlen)
{
    if (n <= 0 || pos0 + n > m->n_ctx || from < 0 || from >= n)
        return fail(err, errlen, QG_ERR_USAGE, "CUDA: %d tokens at %d in a context of %d (from %d)",
                    n, pos0, m->n_ctx, from);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->V)
            return fail(err, errlen, QG_ERR_USAGE, "CUDA: token %d at %d is not in [0, %d)",
                        (int)tokens[i], i, m->V);
    CK(cudaSetDevice(m->device));
    CK(cudaMemcpy(m->tok, tokens, (size_t)n * 4, cudaMemcpyHostToDevice));
    k_embed<<<blocks_for((int64_t)n * m->dim), THREADS>>>(
        m->tok_embd.type, m->tok_embd.d, m->tok_embd.row_bytes, m->dim, m->tok, n, m->x);
    CK(cudaGetLastError());
    for (int l = 0; l < m->L; l++) {
        int rc = layer(m, l, n, pos0, err, errlen);
        if (rc) return rc;
    }
    int32_t targets[LOGIT_ROWS];
    for (int r0 = from; r0 < n; r0 += LOGIT_ROWS) {
        int cnt = n - r0 < LOGIT_ROWS ? n - r0 : LOGIT_ROWS;
        for (int i = 0; i < cnt; i++)
            targets[i] = r0 + i + 1 < n_targets ? tokens[r0 + i + 1] : -1;
        int rc = output_rows(m, r0, cnt, targets, lp ? lp + (r0 - from) : NULL,
                             rows ? rows + (size_t)(r0 - from) * m->V : NULL,
                             argmax ? argmax + (r0 - from) : NULL, err, errlen);
        if (rc) return rc;
    }
    CK(cudaDeviceSynchronize());
    return QG_OK;
}

extern "C" int qcu_last_logits(struct qcu_model *m, float *logits, char *err, size_t errlen)
{
    CK(cudaMemcpy(logits, m->logits + (size_t)m->last_row * m->V, (size_t)m->V * 4,
                  cudaMemcpyDeviceToHost));
    return QG_OK;
}

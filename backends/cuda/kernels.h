/* kernels — the CUDA side of the cuda backend (kernels.cu): a Llama-family
 * model's weights on one device in their stored block formats, and its
 * forward pass there. Plain C API; every function returns a QG_* status
 * and fills err on failure.
 *
 * Weight matrices are uploaded as stored (backends/cuda/blocks.h decodes
 * them) and dequantized one tile of rows at a time into a device panel
 * (f32, or bf16 at precision bf16) just before each cuBLAS GEMM. RMSNorm
 * (sum of squares in double, as ggml), RoPE (normal and NeoX), causal
 * attention with grouped-query heads over an f32 KV cache (online softmax,
 * one warp per query and head), SiLU-gated FFN and the log-softmax of the
 * output rows run as kernels; the per-token log-probs (and, when asked,
 * full rows and the top-1) are what comes back to the host.
 */
#ifndef QG_CUDA_KERNELS_H
#define QG_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum qcu_precision { QCU_FP32 = 0, QCU_TF32 = 1, QCU_BF16 = 2 };

/* A matrix as the file stores it: ne0 = in, ne1 = out (row-major [out][in]). */
struct qcu_mat {
    const char *name;
    uint32_t type;
    const void *data; /* host bytes, row_bytes x out */
    int64_t in, out;
    size_t row_bytes;
};

struct qcu_layer {
    const float *attn_norm, *ffn_norm; /* [dim] */
    const float *bq, *bk, *bv;         /* biases (qwen2) or NULL */
    struct qcu_mat wq, wk, wv, wo, gate, up, down;
};

struct qcu_model_desc {
    int n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn, rope_dims, rope_neox;
    float rms_eps, rope_theta;
    struct qcu_mat tok_embd, output;
    const float *out_norm;
    const struct qcu_layer *layers; /* [n_layers] */
    const char *unsupported;        /* NULL, or the first feature the GPU path lacks */
};

struct qcu_model;

/* CUDA devices present (0 when none, or no driver). */
int qcu_device_count(void);
/* The device's name and memory into buf. QG_OK or QG_ERR_UNAVAILABLE. */
int qcu_device_describe(int device, char *buf, size_t n);

/* Uploads d's weights to device (every matrix type blk_supported: the
 * caller checks) with a KV cache of n_ctx positions. QG_ERR_NOMEM with err
 * giving the bytes needed and free when they do not fit. */
int qcu_model_upload(const struct qcu_model_desc *d, int device, int precision, int n_ctx,
                     struct qcu_model **out, char *err, size_t errlen);
void qcu_model_free(struct qcu_model *m); /* accepts NULL */
/* Device bytes the model holds: weights, KV cache, buffers. */
size_t qcu_model_bytes(const struct qcu_model *m);

/* Evaluates tokens[0..n) at positions pos0.. (the cache holds pos0
 * earlier ones), then for the rows from..n-1: lp[i - from] = log p(
 * tokens[i + 1]) when i + 1 < n_targets (targets: the token array, whose
 * length n_targets may exceed n by one), rows (optional, host,
 * [n - from][n_vocab]) the log-softmax rows, argmax (optional) the top-1.
 * QG_OK, QG_ERR_USAGE (context full), QG_ERR_IO (a CUDA error, named). */
int qcu_eval(struct qcu_model *m, const int32_t *tokens, int n, int n_targets, int pos0, int from,
             double *lp, float *rows, int32_t *argmax, char *err, size_t errlen);

/* The logits of the last evaluated row into host logits[n_vocab]: raw
 * after a qcu_eval without rows, the log-softmax after one with rows. */
int qcu_last_logits(struct qcu_model *m, float *logits, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif

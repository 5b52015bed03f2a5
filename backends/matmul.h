/* matmul — products with weight matrices kept in their stored format.
 *
 * A weight matrix is the GGUF tensor as stored (the mapped file): `out` rows
 * of `in` elements in any block format dequant.h decodes. Nothing is
 * converted at load.
 *
 * Prefill (n > 1 rows of activations): the output rows are cut into
 * panels of matmul_panel_rows(in, out) rows; a thread dequantizes a panel
 * into its own f32 buffer just before one sgemm over all n positions, so
 * the dequantization is amortized over the window. F32 panels go to sgemm
 * directly from the mapping. The values sgemm sees are exactly those of a
 * full dequantization. OpenBLAS's rounding depends on the shape of each
 * call, so the panels depend on the matrix alone: results are the same
 * bits for every thread count.
 *
 * Decode (n == 1): a fused matrix-vector product reads the stored blocks
 * row by row, decodes each block into registers or an L1-resident buffer
 * and multiplies it with x at once (matmul_kernel_name() says which kernel
 * runs: AVX-512, AVX2 or portable C, picked at run time). The weights
 * stream through memory once per token at their stored size.
 *
 * Scratch: a panel per thread (matmul_scratch_floats).
 */
#ifndef QG_MATMUL_H
#define QG_MATMUL_H

#include <stddef.h>
#include <stdint.h>

/* Rows of an out x in matrix per sgemm in prefill (dequantized into one
 * panel): 256, halved while the matrix would have fewer than 4 panels or a
 * panel would pass 8 MiB, never under 16. Each sgemm call packs all n
 * positions of x again, so wider panels spread that cost over more rows. */
int matmul_panel_rows(int64_t in, int64_t out);

struct wmat {
    const char *name; /* the tensor's name (borrowed) */
    uint32_t type;    /* ggml type id */
    const uint8_t *data;
    int64_t in, out; /* ne0, ne1 */
    size_t row_bytes;
    float in_scale;      /* a checkpoint's static input scale (ModelOpt), 0: none; not used here */
    const uint8_t *copy; /* NULL, or decode's copy (matmul_copy), borrowed */
    int flags;           /* WMAT_NO_REPACK, WMAT_EXPERT */
};

/* struct wmat's flags: how llama.cpp would hold and multiply the matrix.
 * WMAT_NO_REPACK: as its --no-repack leaves it (matmul_q8_blockwise 0).
 * WMAT_EXPERT: one expert of a MoE tensor, which llama.cpp multiplies
 * (MUL_MAT_ID) one routed input at a time: its repacked gemv's order
 * for every input of a batch, never its GEMM's (gemm_q8). */
enum { WMAT_NO_REPACK = 1, WMAT_EXPERT = 2 };

/* 1 when W is Q4_0, IQ4_NL, MXFP4, Q4_K or Q2_K with a multiple of 8
 * rows and not WMAT_NO_REPACK: the matrices llama.cpp repacks at load on an
 * AVX2 machine (CPU_REPACK; Q2_K under AVX-512) and multiplies a token by
 * with its repacked kernels (ggml_gemv_*_8x8_q8_0, _q8_K), whose order
 * a=llamacpp's integer decode then follows: per row, from acc = 0, block
 * after block acc = fmaf((float)I, d_w * d_x, acc), I the block's exact
 * integer sum of products (the 32-blocks: gemm_q8's order for prefill);
 * Q4_K and Q2_K with I their sub-blocks' sums times their integer scales
 * and a second sum accm = fmaf((float)M, dmin_w * d_x, accm) of the
 * minima times the input's sums, the product acc - accm. 0 for the
 * others, whose products follow ggml's vec_dot, as llama.cpp's do without
 * repacking (its --no-repack: WMAT_NO_REPACK, a model spec's repack=0). */
int matmul_q8_blockwise(const struct wmat *W);

/* Decode's copy of W, in one of two layouts by type, made under
 * avx512vnni, where a=llamacpp's integer kernels read it:
 * - columns (Q4_0, IQ4_NL, MXFP4, Q4_K, Q2_K where matmul_q8_blockwise:
 *   cols_copy.h): rows in groups of 16, block i of the group's 16 rows
 *   together, their 4-byte runs of nibbles (or 2-bit codes) side by side,
 *   then their scales (one vpdpbusd adds four products to each of 16
 *   rows' sums); the rows past the last whole group are not in it. The
 *   stored bytes moved (Q4_K: its scales unpacked, 148 bytes a row per
 *   block, not 144). Also, with 16 rows or more, the formats whose
 *   kernels keep vec_dot's order (cols_lanes8): IQ4_XS, Q3_K (scales
 *   unpacked: 138 and 114 bytes a row per block, not 136 and 110), Q4_1,
 *   Q5_0, Q5_1, TQ2_0 (their size), TQ1_0 (as TQ2_0: 66, not 54) and the
 *   grid formats, their grid entries looked up once, as 2-bit codes (and
 *   sign and IQ3's level bits, the scales): IQ1_S 74, IQ1_M 86, IQ2_XXS
 *   106, IQ2_XS and IQ2_S 114, IQ3 138 (file: 50, 56, 66, 74, 82, 98,
 *   110); the grid lookups were what held these kernels to a sixth (IQ1)
 *   to a half (IQ3) of the memory's speed;
 * - interleaved (Q4_0, IQ4_NL, MXFP4 otherwise): rows in groups of four,
 *   block i of the group's four rows side by side, then block i + 1 (one
 *   stream feeds four independent sums); the rows past the last whole
 *   group are not in it.
 * The kernels read the copy's rows with the same bits as from W->data;
 * the rows it lacks, and the other kernels, read W->data.
 * matmul_copy_bytes: the copy's size, 0 when the kernel set in use has no
 * kernel for it or the type none; matmul_copy_rows: the rows it holds
 * (rows 0 .. that - 1); matmul_copy writes it (dst: that many bytes) on
 * up to n_threads threads. */
size_t matmul_copy_bytes(const struct wmat *W);
int64_t matmul_copy_rows(const struct wmat *W);
void matmul_copy(const struct wmat *W, uint8_t *dst, int n_threads);

/* Row r of W as stored (W->row_bytes bytes): at W->data, or, where W has
 * a columns or interleaved copy and it holds row r, rebuilt
 * from the copy into buf (W->row_bytes bytes, the stored bytes exactly)
 * and returned there (the decoded types: from W->data, whose
 * pages are then read back in). The embedding's lookup reads rows this
 * way, so that once the copy is made the file's pages of those rows are
 * read no more where it can be (llama_pack_decode lets them go). */
const uint8_t *matmul_row(const struct wmat *W, int64_t r, uint8_t *buf);

/* Row r of W as qcodes_row (qcodes.h) gives it from the stored row:
 * through matmul_row, or, from a decoded copy, read from the copy as
 * such (the same codes, scales and minima); buf as matmul_row's. */
void matmul_row_codes(const struct wmat *W, int64_t r, uint8_t *buf, int8_t *code, float *s,
                      float *m);

/* Floats of scratch one thread needs for matrices of up to max_in inputs. */
size_t matmul_scratch_floats(int64_t max_in);

/* y[n][out] = x[n][in] . W^T (+ bias[out]) (+ beta y), on up to n_threads
 * threads, thread t using scratch + t * matmul_scratch_floats(W->in).
 * Kernels read x and scratch 64 bytes at a time: both are best 64-byte
 * aligned (qg_alloc_aligned). */
void matmul_w(float *y, const float *x, const struct wmat *W, const float *bias, int n, float beta,
              int n_threads, float *scratch);

/* As matmul_w for n > 1, with W's per-block minima as extra inputs: for
 * W of type Q4_1 or Q5_1 (which matmul_w_minima_ok says), each row of x
 * holds in + in / 32 values, the inputs and then one factor per block, and
 * y[i][o] = sum_k x[i][k] w[o][k] + sum_b x[i][in + b] min[o][b], in one
 * sgemm per panel (K = in + in / 32). Scratch as matmul_w's with
 * in + in / 32 for in. Returns QG_OK, or QG_ERR_USAGE (nothing written)
 * when W's type has no minima or n < 2. */
int matmul_w_minima(float *y, const float *x, const struct wmat *W, const float *bias, int n,
                    float beta, int n_threads, float *scratch);

/* whether matmul_w_minima takes W (Q4_1, Q5_1) */
int matmul_w_minima_ok(const struct wmat *W);

/* One product of a group (matmul_w_group): y = x . W^T (+ bias) (+ beta y),
 * as matmul_w's arguments. */
struct matmul_part {
    float *y;
    const struct wmat *W;
    const float *bias; /* or NULL */
    float beta;
};

enum { MATMUL_GROUP_MAX = 3 };

/* The k products parts[0..k) of one x (matrices of the same `in`; outputs
 * that do not overlap x or each other; nothing when k <= 0; more than
 * MATMUL_GROUP_MAX run one after another): the same bits as
 * k matmul_w calls, but a decode step (n == 1) runs all their rows in one
 * fork-join, so that Q, K and V (or gate and up) cost one wake-up of the
 * threads, and parts of one type share x's preparation. Scratch as
 * matmul_w. */
void matmul_w_group(const struct matmul_part *parts, int k, const float *x, int n, int n_threads,
                    float *scratch);

/* y[i] = dot(row i of W, x) for rows [r0, r1), by the fused kernel, with
 * row a buffer of W->in floats (used by the portable path). */
void matmul_rows_fused(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                       float *row);

/* One input in llama.cpp's 8-bit blocks (a=llamacpp): x[j] = d[j / B] *
 * q[j] exactly, B = 32 (Q8_0, Q8_1) or 256 (Q8_K). Borrowed arrays of
 * `in` codes and their per-block figures. */
struct matmul_q8 {
    uint32_t kind;        /* GGML_Q8_0 or GGML_Q8_K */
    const int8_t *q;      /* the codes */
    const float *d;       /* a scale per block (Q8_0: the fp16 scale, as f32) */
    const int32_t *sum16; /* the sum of each 16 codes */
    const float *s;       /* Q8_0 kind: Q8_1's fp16(d' * sum of the block's codes), d'
                           * the scale before its fp16 rounding; NULL for Q8_K */
};

/* The k products (n == 1) of x as matmul_w_group computes them, where the
 * kernel set has an integer kernel for the part's type (matmul_has_q8)
 * with a's codes, as llama.cpp's CPU kernels multiply them, to the bit:
 * per block exact integer sums of weight codes times input codes, times
 * both scales, in ggml's order of float operations, Q4_1 and Q5_1 with
 * their minima times a->s (Q8_1's block sums); elsewhere with x, which
 * must be a's values (d q), and no Q8_1 sums (the caller adds them). a->kind
 * must be the kind simfmt_llamacpp_act_class gives every part's type. */
void matmul_w_group_q8(const struct matmul_part *parts, int k, const float *x,
                       const struct matmul_q8 *a, int n_threads, float *scratch);

/* 1 when the kernel set in use has an integer kernel for weights of
 * `type` with inputs of kind `kind` (matmul_w_group_q8), else 0. */
int matmul_has_q8(uint32_t type, uint32_t kind);

/* 1 when the kernel set in use multiplies rows of `type` (`in` inputs)
 * by a fused kernel of its own (F32: the set's dot product), 0 when they
 * decode through the generic path (a decoded chunk, then a dot product). */
int matmul_has_fused(uint32_t type, int64_t in);

/* The same with the portable C kernel only (tests compare the two). */
void matmul_rows_portable(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                          float *row);

/* dot(a, b) over n floats, by the f32 dot product of the kernel set this
 * CPU runs (the order of its sums is that set's). */
float matmul_dot(const float *a, const float *b, int64_t n);

/* out[t] = matmul_dot(a, b + t stride, n) * scale for t < T, to the bit
 * (attention's scores of one query against T keys), without a call per t */
void matmul_dots(float *out, const float *a, const float *b, int64_t T, int64_t stride, int64_t n,
                 float scale);

/* The same with b's rows held as fp16 (llama.cpp's K cache): the bits of
 * matmul_dots on their f32 values, reading half the bytes. */
void matmul_dots_f16(float *out, const float *a, const uint16_t *b, int64_t T, int64_t stride,
                     int64_t n, float scale);

/* "avx512vnni", "avx512", "avx2" or "portable": the decode kernel set in use (by
 * default the best this CPU runs). */
const char *matmul_kernel_name(void);

/* Uses the kernel set `name` ("avx512vnni", "avx512", "avx2", "portable") from now on,
 * process-wide (tests and benchmarks compare them; not to be called while
 * products run). Returns QG_OK, or QG_ERR_USAGE when the name is unknown or
 * this CPU lacks the set. */
int matmul_use_kernel(const char *name);

/* Makes `name` the best set from now on, process-wide, and uses it: this
 * CPU then computes as one with only that set (matmul_use_kernel, and
 * this, refuse the sets above it from then on). Returns QG_OK, or
 * QG_ERR_USAGE as matmul_use_kernel. backends/kernel_set.h calls it. */
int matmul_cap_kernel(const char *name);

#endif

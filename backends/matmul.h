/* matmul — products with weight matrices kept in their stored format.
 *
 * A weight matrix is the GGUF tensor as stored (the mapped file): `out` rows
 * of `in` elements in any block format dequant.h decodes. Nothing is
 * converted at load.
 *
 * Prefill (n > 1 rows of activations): each thread takes a range of output
 * rows and, MATMUL_PANEL rows at a time, dequantizes them into its own f32
 * panel just before one sgemm over all n positions, so the dequantization
 * is amortized over the window. F32 matrices go to sgemm directly from the
 * mapping. The values sgemm sees are exactly those a full dequantization
 * would give, and OpenBLAS computes each output element by the same
 * sequence of operations whatever the column range, so results equal those
 * of dequantizing the whole matrix first.
 *
 * Decode (n == 1): a fused matrix-vector product reads the stored blocks
 * row by row, decodes each block into registers or an L1-resident buffer
 * and multiplies it with x at once (matmul_kernel_name() says which kernel
 * runs: AVX-512, AVX2 or portable C, picked at run time). The weights
 * stream through memory once per token at their stored size.
 *
 * Scratch: MATMUL_PANEL x in floats per thread (matmul_scratch_floats).
 */
#ifndef QG_MATMUL_H
#define QG_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#define MATMUL_PANEL 64 /* rows dequantized per sgemm in prefill (a multiple of 16) */

struct wmat {
    const char *name; /* the tensor's name (borrowed) */
    uint32_t type;    /* ggml type id */
    const uint8_t *data;
    int64_t in, out; /* ne0, ne1 */
    size_t row_bytes;
};

/* Floats of scratch one thread needs for matrices of up to max_in inputs. */
size_t matmul_scratch_floats(int64_t max_in);

/* y[n][out] = x[n][in] . W^T (+ bias[out]) (+ beta y), on up to n_threads
 * threads, thread t using scratch + t * matmul_scratch_floats(W->in). */
void matmul_w(float *y, const float *x, const struct wmat *W, const float *bias, int n, float beta,
              int n_threads, float *scratch);

/* y[i] = dot(row i of W, x) for rows [r0, r1), by the fused kernel, with
 * row a buffer of W->in floats (used by the portable path). */
void matmul_rows_fused(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                       float *row);

/* The same with the portable C kernel only (tests compare the two). */
void matmul_rows_portable(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                          float *row);

/* "avx512", "avx2" or "portable": the decode kernel this CPU runs. */
const char *matmul_kernel_name(void);

#endif

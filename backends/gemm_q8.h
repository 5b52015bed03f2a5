/* gemm_q8 — a=llamacpp's prefill product: weights as 8-bit codes
 * (qcodes.h) times inputs in llama.cpp's 8-bit blocks, in integers.
 *
 * For output row r and input row t, with the weights' chunks c (16 or 32
 * elements: qcodes_chunk) and the input's codes q, scale d per block and
 * sums of 16 codes:
 *     I     = sum over the chunk of code_j q_j       (exact, int32)
 *     acc   = fmaf((float)I, s[r][c] * d[t][c], acc)   chunk after chunk
 *     acc   = fmaf(m[r][c], mx[t][c], acc)             (types with minima)
 * from acc = 0, where d[t][c] is the scale of the input block holding the
 * chunk and mx[t][c] is Q8_1's block sum for Q4_1 and Q5_1 (a->s), else
 * d[t][c] * (float)(the chunk's sum of q). Then y = acc (beta 0) or
 * beta y + acc, plus bias[r]. Each (r, t) is this sequence of f32
 * operations whatever the tiling, the thread count or the kernel set: the
 * avx512vnni set runs it with vpdpbusd 16 rows by up to 8 inputs at a
 * time, the others as plain C (the reference the tests hold it to, to the
 * bit; too slow for use, so matmul's callers take sgemm there:
 * gemm_q8_fast). */
#ifndef QG_GEMM_Q8_H
#define QG_GEMM_Q8_H

#include "backends/matmul.h"

#include <stdint.h>

/* 1 when gemm_q8 takes W (a type with codes, in a multiple of 256 or of
 * its block) and the kernel set in use runs it with integer instructions
 * (avx512vnni), else 0. */
int gemm_q8_fast(const struct wmat *W);

/* y[t][out] = the product above of W with the n inputs a[0..n) (each of
 * W->in codes, of the kind simfmt_llamacpp_act_class(W->type) gives, Q4_1
 * and Q5_1 with their Q8_1 sums in s) (+ beta y) (+ bias), on up to
 * n_threads threads, thread i using scratch + i * matmul_scratch_floats(
 * W->in) floats. Returns QG_OK; QG_ERR_UNSUPPORTED (nothing written) when
 * W's type has no codes, in is not a multiple of its chunk and block, or
 * a's kind is not W's; QG_ERR_NOMEM (nothing written). */
int gemm_q8(float *y, const struct wmat *W, const float *bias, float beta,
            const struct matmul_q8 *a, int n, int n_threads, float *scratch);

#endif

/* gemm_q8 — a=llamacpp's prefill product: weights as 8-bit codes
 * (qcodes.h) times inputs in llama.cpp's 8-bit blocks, in integers.
 *
 * For output row r and input row t, with the weights' chunks c (16 or 32
 * elements: qcodes_chunk) and the input's codes q, scale d per block and
 * sums of 16 codes, each chunk gives the exact integer
 *     I = sum over the chunk of code_j q_j                   (int32)
 * and, from acc = 0 (and z = 0), chunk after chunk:
 *   Q8_0 inputs (the 32-element formats), d[t][c] the scale of the
 *   input's block of 32:
 *     acc = fmaf((float)I, s[r][c] * d[t][c], acc)
 *     acc = fmaf(m[r][c], mx[t][c], acc)      (Q4_1, Q5_1: mx = a->s, Q8_1's
 *                                              block sum)
 *   (for Q4_0, IQ4_NL and MXFP4 the order of llama.cpp's repacked GEMM
 *   and gemv as well: matmul_q8_blockwise)
 *   Q8_K inputs (the K-quants, IQ and TQ formats), once per 256 the
 *   input's one scale, as ggml's kernels scale once per super-block:
 *     z   = fmaf((float)I, s[r][c], z)
 *     z   = fmaf(m[r][c], (float)(sum of the chunk's q), z)   (Q2_K, Q4_K, Q5_K)
 *     acc = fmaf(z, d[t][256-block], acc), z = 0   after the 256's last chunk
 *   Q4_K and Q2_K where llama.cpp repacks them (matmul_q8_blockwise), its
 *   repacked kernels' order instead: the chunks' integer scales sc and
 *   minima mn (the 6- or 4-bit fields), over each step of P values
 *     I = sum of sc[c] I_c,  M = sum of mn[c] (sum of the chunk's q)   (int32)
 *     acc  = fmaf((float)I, d_w[r] * d[t], acc)
 *     accm = fmaf((float)M, dmin_w[r] * d[t], accm)
 *   and acc - accm: P is its GEMM's (Q4_K 64, Q2_K 128) for the inputs
 *   in whole groups of 4 (t < n - n % 4, as llama.cpp multiplies a batch)
 *   and its gemv's, 256, for the rest, and for every input of an expert
 *   (WMAT_EXPERT: llama.cpp's MUL_MAT_ID runs its gemv input by input).
 * Then y = acc (beta 0) or beta y + acc, plus bias[r]. Each (r, t) is
 * this sequence of f32 operations whatever the tiling, the thread count
 * or the kernel set: the avx512vnni set runs it with vpdpbusd 16 rows by
 * 8 inputs at a time, the others as plain C (the reference the tests hold
 * it to, to the bit; too slow for use, so matmul's callers take sgemm
 * there:  * gemm_q8_fast). */
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
 * W->in) floats (scratch 64-byte aligned: qg_alloc_aligned). Returns QG_OK; QG_ERR_UNSUPPORTED
 * (nothing written) when W's type has no codes, in is not a multiple of its chunk and block, or a's
 * kind is not W's; QG_ERR_NOMEM (nothing written). */
int gemm_q8(float *y, const struct wmat *W, const float *bias, float beta,
            const struct matmul_q8 *a, int n, int n_threads, float *scratch);

#endif

/* act8 — llama.cpp's 8-bit activation blocks: a row rounded in place as
 * ggml's quantize_row_q8_0 (and _q8_1) or quantize_row_q8_K round it, with
 * its codes and per-block figures when asked (struct simfmt_codes).
 *
 * Vector code where the kernel set has it (avx2 and up: AVX2), C in the
 * portable set; every set gives the same bits (the same IEEE operations,
 * element by element: test_simfmt's act8_sets_agree holds them to it on
 * ordinary, tied, tiny, NaN and Inf inputs).
 */
#ifndef QG_ACT8_H
#define QG_ACT8_H

#include <stdint.h>

#include "backends/simfmt.h"

/* Q8_0 blocks of x[0..n) (whole blocks of 32; a tail is left as it is), in
 * place: d = max|x| / 127 kept in fp16, codes round(x * 127 / max|x|) to
 * nearest even, x = code * fp16(d). With c (may be NULL): per block the
 * codes (c->q), fp16(d) (c->d), the sums of each 16 codes (c->sum16) and
 * Q8_1's s = fp16(d * sum of the block's codes) (c->s). Returns 0, or -1
 * when a code is not finite (a NaN or Inf input, or a largest |x| so small
 * that 127 / it overflows): x is rounded all the same, c's contents are
 * then unspecified. */
int act8_q8_0(float *x, int64_t n, const struct simfmt_codes *c);

/* Q8_K blocks of x[0..n) (whole blocks of 256), in place: iscale = -127 /
 * (the first value of largest magnitude, sign kept), codes nearest(iscale
 * x) capped at 127 (a NaN input gives 127, as llama.cpp's), x = code / iscale;
 * a block of zeros (or NaNs only) gives zeros. With c: the codes, d = 1 /
 * iscale and the sums of 16 (no s). Returns 0, or -1 where a block holds
 * an Inf or iscale overflows (c's contents then unspecified). */
int act8_q8_k(float *x, int64_t n, const struct simfmt_codes *c);

#endif

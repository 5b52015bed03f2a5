/* dequant_iq — ggml's grid-based formats and MXFP4 to f32 (for dequant.c).
 *
 * Block layouts (bytes, little-endian, "h" = fp16; QK_K = 256 elements):
 *   IQ2_XXS h d, 32 x u16 qs (per 32 elements: 4 grid bytes, then a u32 of
 *           4 x 7 sign bits and a 4-bit scale in bits 28..31)
 *   IQ2_XS  h d, 32 x u16 qs (9-bit grid index, 7-bit sign index), 8 scales
 *   IQ2_S   h d, 32 grid lows, 32 sign bytes, 8 qh (2 high bits per index), 8 scales
 *   IQ3_XXS h d, 64 grid bytes, 8 x u32 (4 x 7 sign bits, 4-bit scale)
 *   IQ3_S   h d, 64 grid lows, 8 qh (9th bits), 32 sign bytes, 4 scales
 *   IQ1_S   h d, 32 grid lows, 8 x u16 qh (3 x 3 high bits, 3-bit scale, delta sign)
 *   IQ1_M   32 grid lows, 16 qh (3 high bits + delta sign per index), 8 scale
 *           bytes (3-bit sub-scales; the fp16 block scale in their top nibbles)
 *   MXFP4   e8m0 scale, 16 qs: 32 E2M1 elements (element j in the low nibble
 *           of qs[j], element j + 16 in its high nibble), value = E2M1 x
 *           2^(e - 127); e = 255 is NaN (OCP Microscaling Formats v1.0).
 * Each function decodes nb blocks from b into y; the arithmetic is ggml's,
 * operation for operation, so the values are bit-identical to ggml's
 * to_float (checked on every tensor of the shared files and on random
 * blocks). Two MXFP4 codes differ from ggml on purpose, per the OCP spec:
 * scale byte 255 gives NaN (ggml: 2^128; a loaded model with it is refused
 * as non-finite), and -0 is +0 as in ggml.
 */
#ifndef QG_DEQUANT_IQ_H
#define QG_DEQUANT_IQ_H

#include <stdint.h>

void dequant_iq2_xxs(const uint8_t *b, float *y, int64_t nb);
void dequant_iq2_xs(const uint8_t *b, float *y, int64_t nb);
void dequant_iq2_s(const uint8_t *b, float *y, int64_t nb);
void dequant_iq3_xxs(const uint8_t *b, float *y, int64_t nb);
void dequant_iq3_s(const uint8_t *b, float *y, int64_t nb);
void dequant_iq1_s(const uint8_t *b, float *y, int64_t nb);
void dequant_iq1_m(const uint8_t *b, float *y, int64_t nb);
void dequant_mxfp4(const uint8_t *b, float *y, int64_t nb);

#endif

/* quant — scalar conversions and reference quantisers for ggml block formats.
 *
 * The fp16 conversions are ggml's (round to nearest even, NaN kept); the
 * quantisers are ggml's *_ref functions, used to generate test fixtures and
 * synthetic models. Dequantisation of every format lives beside them once
 * the CPU backend needs it.
 */
#ifndef QG_QUANT_H
#define QG_QUANT_H

#include <stddef.h>
#include <stdint.h>

uint16_t quant_f32_to_f16(float f);
float quant_f16_to_f32(uint16_t h);

/* Rounds each of x[0..n) to the nearest fp16 value and back to f32, as
 * quant_f16_to_f32(quant_f32_to_f16(v)) does (NaN stays NaN), eight at a
 * time with F16C where the CPU has it. */
void quant_round_f16(float *x, int64_t n);

/* h[i] = quant_f32_to_f16(x[i]) and y[i] = quant_f16_to_f32(h[i]) for
 * i < n: rows of halves, eight at a time with F16C where the CPU has it
 * (the same values; a NaN stays a NaN). */
void quant_f32_to_f16_row(const float *x, uint16_t *h, int64_t n);
void quant_f16_to_f32_row(const uint16_t *h, float *y, int64_t n);

/* y[i] = the fp16 value (little-endian) at base + i stride, i < n, as
 * quant_f16_to_f32 converts it; reads no byte outside the n values. */
void quant_f16_gather(const uint8_t *base, size_t stride, int64_t n, float *y);

/* 1 when the CPU converts fp16 in hardware (x86 F16C, CPUID leaf 1, ECX
 * bit 29, with AVX2), else 0; asked once and cached. */
int quant_has_f16c(void);

/* Quantises n floats (n a multiple of 32) into n/32 Q8_0 blocks of 34 bytes
 * (fp16 scale d = max|x|/127, 32 int8 = round(x/d)) at out. */
void quant_row_q8_0(const float *x, void *out, int64_t n);

/* Q4_0 as ggml's reference: d = (value of largest magnitude) / -8,
 * q = min(15, trunc(x/d + 8.5)). n a multiple of 32; 18 bytes per block. */
void quant_row_q4_0(const float *x, void *out, int64_t n);

/* Q4_K (n a multiple of 256; 144 bytes per block): per 32-value sub-block an
 * affine range [min, max] (min <= 0), its scale and min quantised to 6 bits
 * against the block's fp16 d and dmin, values to 4 bits. A plain
 * range-based quantiser (not ggml's iterative search); the blocks decode
 * with the standard Q4_K layout. */
void quant_row_q4_k(const float *x, void *out, int64_t n);

/* Quantises a row into the given type (F32, F16, Q8_0, Q4_0 or Q4_K) at out, which must
 * hold the type's stored size for n elements. QG_OK, or QG_ERR_UNSUPPORTED
 * for other types. */
int quant_row(uint32_t type, const float *x, void *out, int64_t n);

#endif

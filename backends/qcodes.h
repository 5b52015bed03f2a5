/* qcodes — weight blocks as 8-bit integer codes with a scale (and a minimum)
 * per chunk of 16 or 32 elements, the form an int8 product multiplies.
 *
 * For a type qcodes_chunk() accepts, every element j of a row is
 *     w_j = s[c] * code_j + m[c],   c = j / chunk,
 * with code_j an 8-bit integer (-128 only where a file's Q8_0 byte is) and m[c] = 0 for the types
 * without minima (qcodes_has_min() is 0). The codes are the format's own
 * integers (Q4_0's q - 8, Q4_K's q, IQ4_NL's table values, the grid
 * formats' signed grid bytes; IQ1's grid value times 8 plus its delta's
 * sign, with its scale over 8), the scales and minima the format's factors
 * in f32 (Q4_K: d * sc and -dmin * m). s[c] * code_j + m[c] equals
 * dequant.h's value within f32 rounding (the same operations where the
 * format has one factor: Q4_0, Q8_0, IQ4_NL, ...).
 *
 * Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q4_K, Q5_K, IQ4_XS,
 * IQ2_XXS, IQ3_XXS, IQ3_S, IQ1_S, TQ1_0, TQ2_0 in chunks of 32; Q2_K,
 * Q3_K, Q6_K, IQ2_XS, IQ2_S, IQ1_M in chunks of 16 (their scales change
 * every 16 elements). */
#ifndef QG_QCODES_H
#define QG_QCODES_H

#include <stdint.h>

/* 16 or 32: the chunk length of type's codes; 0 when the type has none
 * (F32, F16, BF16, NVFP4, anything else). */
int qcodes_chunk(uint32_t type);

/* 1 when type's chunks have minima (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), else 0. */
int qcodes_has_min(uint32_t type);

/* One stored row of `in` elements (a multiple of the type's block size)
 * into code[in], s[in / chunk] and m[in / chunk] (zeros for types without
 * minima). Returns 0, or -1 (nothing written) when qcodes_chunk(type) is 0
 * or in is not a multiple of the block. */
int qcodes_row(uint32_t type, const uint8_t *row, int64_t in, int8_t *code, float *s, float *m);

/* The same by the portable C decoders alone (qcodes_row looks the table
 * formats' values up with SSSE3 where the CPU has it; the tests compare
 * the two). */
int qcodes_row_c(uint32_t type, const uint8_t *row, int64_t in, int8_t *code, float *s, float *m);

#endif

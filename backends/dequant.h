/* dequant — block formats to f32, exactly as ggml defines them.
 *
 * Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, and (dequant_iq.h) IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, MXFP4. Other ggml types (Q8_1,
 * Q8_K, the integer types) are refused.
 * Block layouts (bytes, little-endian, "h" = fp16):
 *   Q4_0  h d, 16 qs            Q4_1  h d, h m, 16 qs
 *   Q5_0  h d, 4 qh, 16 qs      Q5_1  h d, h m, 4 qh, 16 qs      Q8_0 h d, 32 i8
 *   Q2_K  16 scales, 64 qs, h d, h dmin
 *   Q3_K  32 hmask, 64 qs, 12 scales, h d
 *   Q4_K  h d, h dmin, 12 scales, 128 qs
 *   Q5_K  h d, h dmin, 12 scales, 32 qh, 128 qs
 *   Q6_K  128 ql, 64 qh, 16 i8 scales, h d
 *   IQ4_NL h d, 16 qs           IQ4_XS h d, u16 scales_h, 4 scales_l, 128 qs
 *   TQ1_0 48 qs, 4 qh, h d      TQ2_0 64 qs, h d
 */
#ifndef QG_DEQUANT_H
#define QG_DEQUANT_H

#include <stdint.h>

/* 1 when dequant_row handles the type. */
int dequant_supported(uint32_t type);

/* Dequantises n elements (a multiple of the type's block size) stored at src
 * into dst. QG_OK, or QG_ERR_UNSUPPORTED for types not listed above. */
int dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

/* The 16 values of IQ4_NL's and IQ4_XS's 4-bit codes (ggml's kvalues_iq4nl). */
static const int8_t dequant_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                1,    13,   25,  38,  53,  69,  89,  113};

/* MXFP4's E2M1 values times 2 (integers); code 8, -0, is 0 as in ggml. */
static const int8_t dequant_mxfp4_x2[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

/* 6-bit scale and min j (0..7) of the 12-byte packing shared by Q4_K and
 * Q5_K at q */
static inline void dequant_k4_scale_min(int j, const uint8_t *q, int *d, int *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Ternary digit n (0..4) of a base-3 fixed-point byte (TQ1_0's packing):
 * -1, 0 or 1 */
static inline int dequant_trit(uint8_t byte, int n)
{
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    uint8_t q = (uint8_t)(byte * pow3[n]);
    return (((uint16_t)q * 3) >> 8) - 1;
}

/* Scale j (0..15) of a Q3_K block whose 12 scale bytes are at sc: 6 bits
 * (the low 4 in sc[0..7], two per byte; the high 2 in sc[8..11]) less 32 */
static inline int dequant_q3k_scale(const uint8_t *sc, int j)
{
    int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

#endif

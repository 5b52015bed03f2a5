/* blocks — one element of a GGUF weight row decoded from its stored block
 * format, written once for the GPU's dequantization kernels (nvcc) and the
 * host (C), so that a CPU test compares every format element by element
 * with dequant_row (tests/test_cuda.c) where no GPU is present.
 *
 * Formats: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K, IQ4_NL, IQ4_XS (ggml's layouts). The grid formats (IQ1_*,
 * IQ2_*, IQ3_*), TQ1_0, TQ2_0 and MXFP4 are not here: blk_supported says
 * so and the CUDA backend refuses them by name.
 */
#ifndef QG_CUDA_BLOCKS_H
#define QG_CUDA_BLOCKS_H

#include <stdint.h>

#ifdef __CUDACC__
#define QG_HD __host__ __device__ static inline
#else
#define QG_HD static inline
#endif

enum {
    BLK_F32 = 0,
    BLK_F16 = 1,
    BLK_Q4_0 = 2,
    BLK_Q4_1 = 3,
    BLK_Q5_0 = 6,
    BLK_Q5_1 = 7,
    BLK_Q8_0 = 8,
    BLK_Q2_K = 10,
    BLK_Q3_K = 11,
    BLK_Q4_K = 12,
    BLK_Q5_K = 13,
    BLK_Q6_K = 14,
    BLK_IQ4_NL = 20,
    BLK_IQ4_XS = 23,
    BLK_BF16 = 30
};

/* 1 when blk_value decodes ggml type t. */
QG_HD int blk_supported(uint32_t t)
{
    switch (t) {
    case BLK_F32:
    case BLK_F16:
    case BLK_BF16:
    case BLK_Q4_0:
    case BLK_Q4_1:
    case BLK_Q5_0:
    case BLK_Q5_1:
    case BLK_Q8_0:
    case BLK_Q2_K:
    case BLK_Q3_K:
    case BLK_Q4_K:
    case BLK_Q5_K:
    case BLK_Q6_K:
    case BLK_IQ4_NL:
    case BLK_IQ4_XS:
        return 1;
    default:
        return 0;
    }
}

QG_HD float blk_bits_f32(uint32_t u)
{
    union {
        uint32_t u;
        float f;
    } c;
    c.u = u;
    return c.f;
}

/* IEEE half to float, exactly (subnormals, infinities, NaN). */
QG_HD float blk_f16(const uint8_t *p)
{
    uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8;
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return blk_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e) return blk_bits_f32(sign | ((e + 112) << 23) | (m << 13));
    if (!m) return blk_bits_f32(sign);
    float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
    return sign ? -v : v;
}

QG_HD uint32_t blk_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q4_K / Q5_K: the 6-bit scale (m == 0) or min (m == 1) of sub-block j. */
QG_HD int blk_k4_scale(const uint8_t *q, int j, int m)
{
    if (j < 4) return q[j + 4 * m] & 63;
    return m ? (q[j + 4] >> 4) | ((q[j] >> 6) << 4) : (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
}

/* Q3_K: the signed 6-bit scale k (0..15) from its 12 packed bytes. */
QG_HD int blk_q3_scale(const uint8_t *sc, int k)
{
    int lo = k < 8 ? sc[k & 7] & 0xF : (sc[k - 8] >> 4) & 0xF;
    int hi = (sc[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
    return (lo | hi << 4) - 32;
}

QG_HD float blk_iq4nl(int i)
{
    const int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                           1,    13,   25,  38,  53,  69,  89,  113};
    return (float)kv[i & 15];
}

/* Bytes of one block of type t and the values it holds (0: unknown). */
QG_HD int blk_bytes(uint32_t t, int *values)
{
    switch (t) {
    case BLK_F32:
        return *values = 1, 4;
    case BLK_F16:
    case BLK_BF16:
        return *values = 1, 2;
    case BLK_Q4_0:
    case BLK_IQ4_NL:
        return *values = 32, 18;
    case BLK_Q4_1:
        return *values = 32, 20;
    case BLK_Q5_0:
        return *values = 32, 22;
    case BLK_Q5_1:
        return *values = 32, 24;
    case BLK_Q8_0:
        return *values = 32, 34;
    case BLK_Q2_K:
        return *values = 256, 84;
    case BLK_Q3_K:
        return *values = 256, 110;
    case BLK_Q4_K:
        return *values = 256, 144;
    case BLK_Q5_K:
        return *values = 256, 176;
    case BLK_Q6_K:
        return *values = 256, 210;
    case BLK_IQ4_XS:
        return *values = 256, 136;
    default:
        return *values = 0, 0;
    }
}

/* Element i (0 <= i < values) of one block b of the 32-value formats. */
QG_HD float blk_value32(uint32_t t, const uint8_t *b, int i)
{
    int lo = i < 16, k = i & 15;
    switch (t) {
    case BLK_Q4_0:
        return blk_f16(b) * (float)(((b[2 + k] >> (lo ? 0 : 4)) & 0xF) - 8);
    case BLK_IQ4_NL:
        return blk_f16(b) * blk_iq4nl(b[2 + k] >> (lo ? 0 : 4));
    case BLK_Q4_1:
        return blk_f16(b) * (float)((b[4 + k] >> (lo ? 0 : 4)) & 0xF) + blk_f16(b + 2);
    case BLK_Q5_0: {
        uint32_t qh = blk_u32(b + 2);
        int q = ((b[6 + k] >> (lo ? 0 : 4)) & 0xF) | (int)((qh >> i) & 1) << 4;
        return blk_f16(b) * (float)(q - 16);
    }
    case BLK_Q5_1: {
        uint32_t qh = blk_u32(b + 4);
        int q = ((b[8 + k] >> (lo ? 0 : 4)) & 0xF) | (int)((qh >> i) & 1) << 4;
        return blk_f16(b) * (float)q + blk_f16(b + 2);
    }
    default: /* Q8_0 */
        return blk_f16(b) * (float)(int8_t)b[2 + i];
    }
}

/* Element e (0..255) of one 256-value block b (k-quants, IQ4_XS). */
QG_HD float blk_value256(uint32_t t, const uint8_t *b, int e)
{
    switch (t) {
    case BLK_Q2_K: { /* scales[16] qs[64] d dmin */
        int h = e >> 7, r = e & 127, j = r >> 5, w = r & 31, second = w >> 4, l = w & 15;
        int sc = b[h * 8 + j * 2 + second], q = (b[16 + h * 32 + second * 16 + l] >> (2 * j)) & 3;
        return blk_f16(b + 80) * (float)(sc & 0xF) * (float)q - blk_f16(b + 82) * (float)(sc >> 4);
    }
    case BLK_Q3_K: { /* hmask[32] qs[64] scales[12] d */
        int h = e >> 7, r = e & 127, j = r >> 5, w = r & 31, second = w >> 4, l = w & 15;
        int q = (b[32 + h * 32 + second * 16 + l] >> (2 * j)) & 3;
        int high = b[second * 16 + l] & (1 << (h * 4 + j));
        return blk_f16(b + 108) * (float)blk_q3_scale(b + 96, h * 8 + j * 2 + second) *
               (float)(q - (high ? 0 : 4));
    }
    case BLK_Q4_K: { /* d dmin scales[12] qs[128] */
        int g = e >> 6, hi = (e >> 5) & 1, l = e & 31, is = 2 * g + hi;
        int q = (b[16 + g * 32 + l] >> (4 * hi)) & 0xF;
        return blk_f16(b) * (float)blk_k4_scale(b + 4, is, 0) * (float)q -
               blk_f16(b + 2) * (float)blk_k4_scale(b + 4, is, 1);
    }
    case BLK_Q5_K: { /* d dmin scales[12] qh[32] qs[128] */
        int g = e >> 6, hi = (e >> 5) & 1, l = e & 31, is = 2 * g + hi;
        int q = ((b[48 + g * 32 + l] >> (4 * hi)) & 0xF) + ((b[16 + l] >> is) & 1 ? 16 : 0);
        return blk_f16(b) * (float)blk_k4_scale(b + 4, is, 0) * (float)q -
               blk_f16(b + 2) * (float)blk_k4_scale(b + 4, is, 1);
    }
    case BLK_Q6_K: { /* ql[128] qh[64] scales[16] d */
        int h = e >> 7, r = e & 127, quad = r >> 5, l = r & 31;
        int ql = b[h * 64 + ((quad & 1) ? l + 32 : l)] >> (quad >= 2 ? 4 : 0) & 0xF;
        int qh = (b[128 + h * 32 + l] >> (2 * quad)) & 3;
        int sc = (int8_t)b[192 + h * 8 + l / 16 + 2 * quad];
        return blk_f16(b + 208) * (float)sc * (float)((ql | qh << 4) - 32);
    }
    default: { /* IQ4_XS: d scales_h(u16) scales_l[4] qs[128] */
        int ib = e >> 5, w = e & 31;
        int sh = b[2] | b[3] << 8;
        int ls = ((b[4 + ib / 2] >> (4 * (ib & 1))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
        int q = b[8 + ib * 16 + (w & 15)] >> (w < 16 ? 0 : 4);
        return blk_f16(b) * (float)(ls - 32) * blk_iq4nl(q);
    }
    }
}

/* Element j of a row of type t stored at row (blk_supported(t)). */
QG_HD float blk_value(uint32_t t, const uint8_t *row, int64_t j)
{
    if (t == BLK_F32) return blk_bits_f32(blk_u32(row + 4 * j));
    if (t == BLK_F16) return blk_f16(row + 2 * j);
    if (t == BLK_BF16)
        return blk_bits_f32((uint32_t)row[2 * j] << 16 | (uint32_t)row[2 * j + 1] << 24);
    int values, bytes = blk_bytes(t, &values);
    const uint8_t *b = row + (j / values) * bytes;
    int i = (int)(j % values);
    return values == 32 ? blk_value32(t, b, i) : blk_value256(t, b, i);
}

#endif

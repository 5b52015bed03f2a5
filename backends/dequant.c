/* dequant — scalar reference dequantisation of ggml block formats. */
#include "backends/dequant.h"
#include "backends/dequant_iq.h"
#include "backends/ggml_types.h"
#include "backends/quant.h"
#include "core/status.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QG_NO_IFUNC)
#include <immintrin.h>
/* the decoders run for every weight of every window (panels before each
 * sgemm): AVX2 clones where the CPU has it, picked at load by ifunc */
#define HOT __attribute__((target_clones("avx2", "default")))
#define QG_F16C 1
#else
#define HOT
#endif

static float h2f(const uint8_t *p)
{
    return quant_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

HOT static void q4_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        float d = h2f(b);
#pragma GCC unroll 1 /* kept a loop, so that it vectorises */
        for (int j = 0; j < 16; j++)
            y[j] = (float)((b[2 + j] & 0x0F) - 8) * d;
#pragma GCC unroll 1
        for (int j = 0; j < 16; j++)
            y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

HOT static void q4_1(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 20, y += 32) {
        float d = h2f(b), m = h2f(b + 2);
#pragma GCC unroll 1
        for (int j = 0; j < 16; j++)
            y[j] = (float)(b[4 + j] & 0x0F) * d + m;
#pragma GCC unroll 1
        for (int j = 0; j < 16; j++)
            y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

HOT static void q5_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
        float d = h2f(b);
        uint32_t qh = rd32(b + 2);
        const uint8_t *qs = b + 6;
        for (int j = 0; j < 16; j++) {
            int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            y[j] = (float)(((qs[j] & 0x0F) | h0) - 16) * d;
            y[j + 16] = (float)(((qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

HOT static void q5_1(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 24, y += 32) {
        float d = h2f(b), m = h2f(b + 2);
        uint32_t qh = rd32(b + 4);
        const uint8_t *qs = b + 8;
        for (int j = 0; j < 16; j++) {
            int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            y[j] = (float)((qs[j] & 0x0F) | h0) * d + m;
            y[j + 16] = (float)((qs[j] >> 4) | h1) * d + m;
        }
    }
}

HOT static void q8_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
        float d = h2f(b);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(int8_t)b[2 + j] * d;
    }
}

HOT static void q2_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 84) {
        const uint8_t *scales = b, *q = b + 16;
        float d = h2f(b + 80), dmin = h2f(b + 82);
        /* 16 runs of 16: run r takes bits 2 (r / 2 % 4) of q[32 (r / 8) +
         * 16 (r % 2) + l], with scale byte r */
        for (int r = 0; r < 16; r++, y += 16) {
            const uint8_t *qr = q + 32 * (r / 8) + 16 * (r % 2);
            const int shift = 2 * (r / 2 % 4);
            float dl = d * (float)(scales[r] & 0xF), ml = dmin * (float)(scales[r] >> 4);
#pragma GCC unroll 1 /* kept a loop, so that it vectorises */
            for (int l = 0; l < 16; l++)
                y[l] = dl * (float)((qr[l] >> shift) & 3) - ml;
        }
    }
}

HOT static void q3_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 110) {
        const uint8_t *hm = b, *q = b + 32, *sc = b + 96;
        float d_all = h2f(b + 108);
        int8_t scales[16];
        for (int j = 0; j < 16; j++)
            scales[j] = (int8_t)dequant_q3k_scale(sc, j);
        /* 16 runs of 16 as in Q2_K; run r's high bit is bit r / 2 of hm */
        for (int r = 0; r < 16; r++, y += 16) {
            const int off = 16 * (r % 2), shift = 2 * (r / 2 % 4), hb = r / 2;
            const uint8_t *qr = q + 32 * (r / 8) + off, *hr = hm + off;
            float dl = d_all * (float)scales[r];
#pragma GCC unroll 1
            for (int l = 0; l < 16; l++)
                y[l] = dl * (float)(((qr[l] >> shift) & 3) - (((hr[l] >> hb) & 1) ? 0 : 4));
        }
    }
}

HOT static void q4_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 144) {
        float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *sc = b + 4, *q = b + 16;
        for (int j = 0, is = 0; j < 256; j += 64, q += 32, is += 2) {
            int s1, m1, s2, m2;
            dequant_k4_scale_min(is, sc, &s1, &m1);
            dequant_k4_scale_min(is + 1, sc, &s2, &m2);
            float d1 = d * (float)s1, mm1 = dmin * (float)m1, d2 = d * (float)s2,
                  mm2 = dmin * (float)m2;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)(q[l] & 0xF) - mm1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)(q[l] >> 4) - mm2;
        }
    }
}

HOT static void q5_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 176) {
        float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *sc = b + 4, *qh = b + 16, *ql = b + 48;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < 256; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
            int s1, m1, s2, m2;
            dequant_k4_scale_min(is, sc, &s1, &m1);
            dequant_k4_scale_min(is + 1, sc, &s2, &m2);
            float d1 = d * (float)s1, mm1 = dmin * (float)m1, d2 = d * (float)s2,
                  mm2 = dmin * (float)m2;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - mm1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - mm2;
        }
    }
}

HOT static void q6_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 210) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = h2f(b + 208);
        /* per 128: quarter k takes the low (k < 2) or high nibbles of
         * ql[32 (k % 2) + l] and bits 2k of qh[l]; 16 elements per scale.
         * Contiguous runs of 16, so that the loop vectorises */
        for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
            for (int k = 0; k < 4; k++)
                for (int h = 0; h < 32; h += 16) {
                    const float ds = d * (float)sc[h / 16 + 2 * k];
                    const uint8_t *lo = ql + 32 * (k % 2);
                    const int ns = 4 * (k / 2), hs = 2 * k;
                    for (int l = h; l < h + 16; l++)
                        y[32 * k + l] =
                            ds * (float)((((lo[l] >> ns) & 0xF) | ((qh[l] >> hs) & 3) << 4) - 32);
                }
    }
}

HOT static void iq4_nl(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        float d = h2f(b);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)dequant_iq4nl_values[b[2 + j] & 0xF];
            y[j + 16] = d * (float)dequant_iq4nl_values[b[2 + j] >> 4];
        }
    }
}

HOT static void iq4_xs(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 136) {
        float d = h2f(b);
        unsigned scales_h = (unsigned)(b[2] | b[3] << 8);
        const uint8_t *scales_l = b + 4, *qs = b + 8;
        for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
            int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((scales_h >> 2 * ib) & 3) << 4);
            float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)dequant_iq4nl_values[qs[j] & 0xF];
                y[j + 16] = dl * (float)dequant_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* ternary digit n of a base-3 fixed-point byte, times d */
static float trit(uint8_t byte, int n, float d)
{
    return (float)dequant_trit(byte, n) * d;
}

HOT static void tq1_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 54) {
        const uint8_t *qs = b, *qh = b + 48;
        float d = h2f(b + 52);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 32; m++)
                *y++ = trit(qs[m], n, d);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 16; m++)
                *y++ = trit(qs[32 + m], n, d);
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 4; j++)
                *y++ = trit(qh[j], n, d);
    }
}

HOT static void tq2_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 66) {
        float d = h2f(b + 64);
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++)
                    *y++ = (float)(((b[j + m] >> (l * 2)) & 3) - 1) * d;
    }
}

static void f32(const uint8_t *b, float *y, int64_t n)
{
    memcpy(y, b, (size_t)n * 4);
}

#ifdef QG_F16C
__attribute__((target("avx2,f16c"))) static void f16_f16c(const uint8_t *b, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 2 * i))));
    for (; i < n; i++)
        y[i] = h2f(b + 2 * i);
}
#endif

static void f16(const uint8_t *b, float *y, int64_t n)
{
#ifdef QG_F16C
    if (quant_has_f16c()) {
        f16_f16c(b, y, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        y[i] = h2f(b + 2 * i);
}

HOT static void bf16(const uint8_t *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(b[2 * i] | b[2 * i + 1] << 8) << 16;
        memcpy(&y[i], &u, 4);
    }
}

/* the value of an FP8 E4M3 (FN) code */
static inline float f8_e4m3_value(uint32_t c)
{
    uint32_t e = (c >> 3) & 15, m = c & 7, u;
    float v;
    if (e == 15 && m == 7) return NAN;
    if (!e) return (c & 0x80 ? -1.0f : 1.0f) * (float)m * 0.001953125f; /* m x 2^-9 */
    u = (c & 0x80) << 24 | (e + 120) << 23 | m << 20;                   /* 2^(e-7)(1 + m/8) */
    memcpy(&v, &u, 4);
    return v;
}

/* x rounded as a block's mode byte says: 0 f32, 1 f16, 2 bf16 (to nearest even) */
static float round_mode(int mode, float x)
{
    if (mode == 1) return quant_f16_to_f32(quant_f32_to_f16(x));
    if (mode == 2 && isfinite(x)) {
        uint32_t u;
        memcpy(&u, &x, 4);
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
        memcpy(&x, &u, 4);
    }
    return x;
}

/* qgate's FP8 blocks: an f32 scale, the mode, 32 E4M3 codes: code x scale */
HOT static void f8_e4m3_s32(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 37) {
        float s;
        memcpy(&s, b, 4);
        int mode = b[4] & 3;
        for (int j = 0; j < 32; j++)
            y[32 * i + j] = round_mode(mode, f8_e4m3_value(b[5 + j]) * s);
    }
}

/* qgate's NVFP4 blocks (ggml_types.h) */
static void nvfp4_s16(const uint8_t *b, float *y, int64_t nb)
{
    static const float e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    for (int64_t i = 0; i < nb; i++, b += 14) {
        float g, s = f8_e4m3_value(b[4]), m = 0; /* m: the ModelOpt product */
        memcpy(&g, b, 4);
        int mode = b[5] & 3, mul = (b[5] >> 2) & 1;
        if (mul) m = s * g;
        for (int j = 0; j < 16; j++) {
            float v = e2m1[(b[6 + j / 2] >> (4 * (j & 1))) & 15];
            y[16 * i + j] = round_mode(mode, mul ? v * m : v * s / g);
        }
    }
}

/* qgate's 4-bit integer groups (ggml_types.h) */
static void i4_s32(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 22) {
        float s;
        memcpy(&s, b, 4);
        int z = (int8_t)b[4], mode = b[5] & 3;
        for (int j = 0; j < 32; j++) {
            int u = (b[6 + j / 2] >> (4 * (j & 1))) & 15;
            y[32 * i + j] = round_mode(mode, (float)(u - z) * s);
        }
    }
}

/* each format's decoder of nb blocks (F32/F16/BF16: blocks of one) */
typedef void (*block_fn)(const uint8_t *b, float *y, int64_t nb);
static const block_fn decoders[GGML_TYPE_LIMIT] = {
    [GGML_F32] = f32,
    [GGML_F16] = f16,
    [GGML_BF16] = bf16,
    [GGML_Q4_0] = q4_0,
    [GGML_Q4_1] = q4_1,
    [GGML_Q5_0] = q5_0,
    [GGML_Q5_1] = q5_1,
    [GGML_Q8_0] = q8_0,
    [GGML_Q2_K] = q2_k,
    [GGML_Q3_K] = q3_k,
    [GGML_Q4_K] = q4_k,
    [GGML_Q5_K] = q5_k,
    [GGML_Q6_K] = q6_k,
    [GGML_IQ4_NL] = iq4_nl,
    [GGML_IQ4_XS] = iq4_xs,
    [GGML_TQ1_0] = tq1_0,
    [GGML_TQ2_0] = tq2_0,
    [GGML_IQ2_XXS] = dequant_iq2_xxs,
    [GGML_IQ2_XS] = dequant_iq2_xs,
    [GGML_IQ2_S] = dequant_iq2_s,
    [GGML_IQ3_XXS] = dequant_iq3_xxs,
    [GGML_IQ3_S] = dequant_iq3_s,
    [GGML_IQ1_S] = dequant_iq1_s,
    [GGML_IQ1_M] = dequant_iq1_m,
    [GGML_MXFP4] = dequant_mxfp4,
    [QG_F8_E4M3_S32] = f8_e4m3_s32,
    [QG_NVFP4_S16] = nvfp4_s16,
    [QG_I4_S32] = i4_s32,
};

int dequant_supported(uint32_t type)
{
    return type < GGML_TYPE_LIMIT && decoders[type] != NULL;
}

int dequant_row(uint32_t type, const void *src, float *dst, int64_t n)
{
    const struct ggml_type_info *ti = ggml_type_get(type);
    if (!ti || !dequant_supported(type) || n % ti->block) return QG_ERR_UNSUPPORTED;
    decoders[type](src, dst, n / ti->block);
    return QG_OK;
}

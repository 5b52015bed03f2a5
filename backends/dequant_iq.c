/* dequant_iq — grid-based IQ formats and MXFP4, scalar. */
#include "backends/dequant_iq.h"
#include "backends/iq_grids.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#define IQ1_DELTA 0.125f

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QG_NO_IFUNC)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

static float h2f(const uint8_t *p)
{
    return quant_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* byte j of a packed grid entry */
static int grid_u8(uint64_t g, int j)
{
    return (int)((g >> (8 * j)) & 0xFF);
}

/* The five sign-grid formats put 8 elements at a time: bytes of a grid
 * entry g (8 bytes, or two 4-byte entries as one), times db, negated where
 * the sign byte has bit j: y[j] = db * g_j * (bit j ? -1 : 1), as ggml
 * computes it (a product with -1 is an exact sign flip, so flipping the
 * sign bit gives the same bits). */
typedef void (*put8_fn)(float *y, uint64_t g, unsigned signs, float db);

static int grid_i8(uint64_t g, int j)
{
    return (int)(int8_t)(uint8_t)((g >> (8 * j)) & 0xFF);
}

/* IQ1_S and IQ1_M: signed grid bytes plus a delta, times dl:
 * y[j] = dl * (g_j + delta) */
typedef void (*put8d_fn)(float *y, uint64_t g, float delta, float dl);

static inline void put8d_c(float *y, uint64_t g, float delta, float dl)
{
    for (int j = 0; j < 8; j++)
        y[j] = dl * ((float)grid_i8(g, j) + delta);
}

static inline void put8_c(float *y, uint64_t g, unsigned signs, float db)
{
    for (int j = 0; j < 8; j++)
        y[j] = db * (float)grid_u8(g, j) * ((signs & kmask_iq2xs[j]) ? -1.0f : 1.0f);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QG_IQ_AVX2 1
#define AVX2 __attribute__((target("avx2")))

AVX2 static inline void put8_avx2(float *y, uint64_t g, unsigned signs, float db)
{
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)g)));
    __m256i neg = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)signs), bit), bit);
    v = _mm256_mul_ps(_mm256_set1_ps(db), v);
    _mm256_storeu_ps(y, _mm256_xor_ps(v, _mm256_castsi256_ps(_mm256_slli_epi32(neg, 31))));
}

AVX2 static inline void put8d_avx2(float *y, uint64_t g, float delta, float dl)
{
    __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128((long long)g)));
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_set1_ps(dl), _mm256_add_ps(v, _mm256_set1_ps(delta))));
}

#endif

#define INLINE static inline __attribute__((always_inline))

INLINE void iq2_xxs(const uint8_t *b, float *y, int64_t nb, put8_fn put8)
{
    for (int64_t i = 0; i < nb; i++, b += 66) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            uint32_t aux = rd32(qs + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8)
                put8(y, iq2xxs_grid[qs[l]], ksigns_iq2xs[(aux >> (7 * l)) & 127], db);
        }
    }
}

INLINE void iq2_xs(const uint8_t *b, float *y, int64_t nb, put8_fn put8)
{
    for (int64_t i = 0; i < nb; i++, b += 74) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *scales = b + 66;
        for (int ib = 0; ib < 8; ib++) {
            const float db[2] = {d * (0.5f + (float)(scales[ib] & 0xF)) * 0.25f,
                                 d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                uint16_t q = rd16(qs + 2 * (4 * ib + l));
                put8(y, iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9], db[l / 2]);
            }
        }
    }
}

INLINE void iq2_s(const uint8_t *b, float *y, int64_t nb, put8_fn put8)
{
    for (int64_t i = 0; i < nb; i++, b += 82) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
        for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4) {
            const float db[2] = {d * (0.5f + (float)(scales[ib] & 0xF)) * 0.25f,
                                 d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8)
                put8(y, iq2s_grid[qs[l] | ((qh[ib] << (8 - 2 * l)) & 0x300)], signs[l], db[l / 2]);
        }
    }
}

INLINE void iq3_xxs(const uint8_t *b, float *y, int64_t nb, put8_fn put8)
{
    for (int64_t i = 0; i < nb; i++, b += 98) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *sas = b + 66;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            uint32_t aux = rd32(sas + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                uint64_t g = iq3xxs_grid[qs[2 * l]] | (uint64_t)iq3xxs_grid[qs[2 * l + 1]] << 32;
                put8(y, g, ksigns_iq2xs[(aux >> (7 * l)) & 127], db);
            }
        }
    }
}

INLINE void iq3_s(const uint8_t *b, float *y, int64_t nb, put8_fn put8)
{
    for (int64_t i = 0; i < nb; i++, b += 110) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
            /* 32 elements: 8 grid lows at qs, their 9th bits in qh[ib] */
            const int h = qh[ib];
            const float db = d * (float)(1 + 2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 0xF));
            for (int l = 0; l < 4; l++, y += 8) {
                uint64_t g = iq3s_grid[qs[2 * l] | ((h << (8 - 2 * l)) & 256)] |
                             (uint64_t)iq3s_grid[qs[2 * l + 1] | ((h << (7 - 2 * l)) & 256)] << 32;
                put8(y, g, signs[l], db);
            }
        }
    }
}

INLINE void iq1_s(const uint8_t *b, float *y, int64_t nb, put8d_fn put8)
{
    for (int64_t i = 0; i < nb; i++, b += 50) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *qhp = b + 34;
        for (int ib = 0; ib < 8; ib++, qs += 4) {
            uint16_t qh = rd16(qhp + 2 * ib);
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = (qh & 0x8000) ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++, y += 8)
                put8(y, iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)], delta, dl);
        }
    }
}

INLINE void iq1_m(const uint8_t *b, float *y, int64_t nb, put8d_fn put8)
{
    for (int64_t i = 0; i < nb; i++, b += 56) {
        const uint8_t *qs = b, *qh = b + 32, *scp = b + 48;
        uint16_t sc[4] = {rd16(scp), rd16(scp + 2), rd16(scp + 4), rd16(scp + 6)};
        uint16_t s16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                  ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
        const float d = quant_f16_to_f32(s16);
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
            int sh = 6 * (ib % 2);
            const float dl1 = d * (float)(2 * ((sc[ib / 2] >> sh) & 7) + 1);
            const float dl2 = d * (float)(2 * ((sc[ib / 2] >> (sh + 3)) & 7) + 1);
            int idx[4] = {qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                          qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700)};
            float delta[4] = {
                (qh[0] & 0x08) ? -IQ1_DELTA : IQ1_DELTA, (qh[0] & 0x80) ? -IQ1_DELTA : IQ1_DELTA,
                (qh[1] & 0x08) ? -IQ1_DELTA : IQ1_DELTA, (qh[1] & 0x80) ? -IQ1_DELTA : IQ1_DELTA};
            for (int l = 0; l < 4; l++, y += 8)
                put8(y, iq1s_grid[idx[l]], delta[l], l < 2 ? dl1 : dl2);
        }
    }
}

/* each format: a portable body, and the same body with AVX2's put8 where
 * the CPU has AVX2 */
#ifdef QG_IQ_AVX2
#define IQ_DECODER(name, put_c, put_avx2)                                                          \
    AVX2 static void name##_avx2(const uint8_t *b, float *y, int64_t nb)                           \
    {                                                                                              \
        name(b, y, nb, put_avx2);                                                                  \
    }                                                                                              \
    void dequant_##name(const uint8_t *b, float *y, int64_t nb)                                    \
    {                                                                                              \
        if (quant_has_f16c()) /* AVX2 (with F16C, as every AVX2 CPU has) */                        \
            name##_avx2(b, y, nb);                                                                 \
        else                                                                                       \
            name(b, y, nb, put_c);                                                                 \
    }
#else
#define IQ_DECODER(name, put_c, put_avx2)                                                          \
    void dequant_##name(const uint8_t *b, float *y, int64_t nb)                                    \
    {                                                                                              \
        name(b, y, nb, put_c);                                                                     \
    }
#endif

IQ_DECODER(iq2_xxs, put8_c, put8_avx2)
IQ_DECODER(iq2_xs, put8_c, put8_avx2)
IQ_DECODER(iq2_s, put8_c, put8_avx2)
IQ_DECODER(iq3_xxs, put8_c, put8_avx2)
IQ_DECODER(iq3_s, put8_c, put8_avx2)
IQ_DECODER(iq1_s, put8d_c, put8d_avx2)
IQ_DECODER(iq1_m, put8d_c, put8d_avx2)

/* E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit. Code 8 (-0) decodes
 * to +0 as in ggml, so that values are bit-identical to the runtime's. */
static const float e2m1[16] = {0.0f, 0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                               0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

HOT void dequant_mxfp4(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 17, y += 32) {
        /* E8M0: 2^(e - 127), exact in f32 down to 2^-127 (a subnormal) */
        float s = b[0] == 0xFF ? NAN : ldexpf(1.0f, (int)b[0] - 127);
        for (int j = 0; j < 16; j++) {
            y[j] = e2m1[b[1 + j] & 0x0F] * s;
            y[j + 16] = e2m1[b[1 + j] >> 4] * s;
        }
    }
}

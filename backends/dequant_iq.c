/* dequant_iq — grid-based IQ formats and MXFP4, scalar. */
#include "backends/dequant_iq.h"
#include "backends/iq_blocks_impl.h"
#include "backends/iq_grids.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QG_NO_IFUNC)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

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

/* nb blocks of a grid format through put8 (sign formats) or put8d (IQ1) */
INLINE void iq_decode(uint32_t type, const uint8_t *b, float *y, int64_t nb, put8_fn put8,
                      put8d_fn put8d)
{
    const int bytes = iq_block_bytes(type), iq1 = type == GGML_IQ1_S || type == GGML_IQ1_M;
    for (int64_t i = 0; i < nb; i++, b += bytes) {
        const float d = iq_block_d(type, b);
        for (int ib = 0; ib < 8; ib++) {
            struct iq_sub o;
            iq_sub(type, b, d, ib, &o);
            for (int l = 0; l < 4; l++, y += 8)
                if (iq1)
                    put8d(y, o.g[l], o.delta[l], o.db[l / 2]);
                else
                    put8(y, o.g[l], o.s[l], o.db[l / 2]);
        }
    }
}

/* each format: a portable body, and the same body with AVX2's put8 where
 * the CPU has AVX2 */
#ifdef QG_IQ_AVX2
#define IQ_DECODER(name, TYPE)                                                                     \
    AVX2 static void name##_avx2(const uint8_t *b, float *y, int64_t nb)                           \
    {                                                                                              \
        iq_decode(TYPE, b, y, nb, put8_avx2, put8d_avx2);                                          \
    }                                                                                              \
    void dequant_##name(const uint8_t *b, float *y, int64_t nb)                                    \
    {                                                                                              \
        if (quant_has_f16c()) /* AVX2 (with F16C, as every AVX2 CPU has) */                        \
            name##_avx2(b, y, nb);                                                                 \
        else                                                                                       \
            iq_decode(TYPE, b, y, nb, put8_c, put8d_c);                                            \
    }
#else
#define IQ_DECODER(name, TYPE)                                                                     \
    void dequant_##name(const uint8_t *b, float *y, int64_t nb)                                    \
    {                                                                                              \
        iq_decode(TYPE, b, y, nb, put8_c, put8d_c);                                                \
    }
#endif

IQ_DECODER(iq2_xxs, GGML_IQ2_XXS)
IQ_DECODER(iq2_xs, GGML_IQ2_XS)
IQ_DECODER(iq2_s, GGML_IQ2_S)
IQ_DECODER(iq3_xxs, GGML_IQ3_XXS)
IQ_DECODER(iq3_s, GGML_IQ3_S)
IQ_DECODER(iq1_s, GGML_IQ1_S)
IQ_DECODER(iq1_m, GGML_IQ1_M)

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

/* matmul_iq — fused decode kernels of ggml's seven grid formats (IQ1_S,
 * IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), AVX2 and AVX-512.
 *
 * Each 32-element sub-block is read by iq_blocks_impl.h, the reading
 * dequant_iq.c decodes with, so every weight is dequant's value to the
 * bit: the grid bytes widened to f32 lanes, the signs flipped by a mask
 * (an exact negation, as ggml's product with -1), IQ1's delta added,
 * times the run's scale; then multiplied by x in registers, with no
 * decoded row in memory. */
#include "backends/iq_blocks_impl.h"
#include "backends/matmul_x86_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* ------------------------------------------------------------ AVX-512 */

/* runs 2h and 2h + 1 of sub-block o as 16 values before the scale */
AVX512 static inline __attribute__((always_inline)) __m512 iq_runs16(const struct iq_sub *o, int h,
                                                                     int iq1)
{
    const __m128i g = _mm_set_epi64x((long long)o->g[2 * h + 1], (long long)o->g[2 * h]);
    if (iq1) {
        __m512 dl = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(o->delta[2 * h]),
                                         _mm512_set1_ps(o->delta[2 * h + 1]));
        return _mm512_add_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(g)), dl);
    }
    __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(g));
    __mmask16 neg = (__mmask16)(o->s[2 * h] | o->s[2 * h + 1] << 8);
    return _mm512_mask_xor_ps(v, neg, v, _mm512_set1_ps(-0.0f));
}

AVX512 static inline __attribute__((always_inline)) float
iq_row_avx512(uint32_t type, const struct wmat *W, int64_t r, const float *x)
{
    const int bytes = iq_block_bytes(type), iq1 = type == GGML_IQ1_S || type == GGML_IQ1_M;
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += bytes) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const float d = iq_block_d(type, b);
        for (int ib = 0; ib < 8; ib++) {
            struct iq_sub o;
            iq_sub(type, b, d, ib, &o);
            const float *xs = x + k + 32 * ib;
            a0 = _mm512_fmadd_ps(_mm512_mul_ps(iq_runs16(&o, 0, iq1), _mm512_set1_ps(o.db[0])),
                                 _mm512_loadu_ps(xs), a0);
            a1 = _mm512_fmadd_ps(_mm512_mul_ps(iq_runs16(&o, 1, iq1), _mm512_set1_ps(o.db[1])),
                                 _mm512_loadu_ps(xs + 16), a1);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

#define IQ_ROW(fn)                                                                                 \
    switch (W->type) {                                                                             \
    case GGML_IQ2_XXS:                                                                             \
        return fn(GGML_IQ2_XXS, W, r, x);                                                          \
    case GGML_IQ2_XS:                                                                              \
        return fn(GGML_IQ2_XS, W, r, x);                                                           \
    case GGML_IQ2_S:                                                                               \
        return fn(GGML_IQ2_S, W, r, x);                                                            \
    case GGML_IQ3_XXS:                                                                             \
        return fn(GGML_IQ3_XXS, W, r, x);                                                          \
    case GGML_IQ3_S:                                                                               \
        return fn(GGML_IQ3_S, W, r, x);                                                            \
    case GGML_IQ1_S:                                                                               \
        return fn(GGML_IQ1_S, W, r, x);                                                            \
    default:                                                                                       \
        return fn(GGML_IQ1_M, W, r, x);                                                            \
    }

AVX512 float mx_row_iq_avx512(const struct wmat *W, int64_t r,
                              const float *x){IQ_ROW(iq_row_avx512)}

/* --------------------------------------------------------------- AVX2 */

/* run l of sub-block o as 8 values before the scale */
AVX2 static inline __attribute__((always_inline)) __m256
    iq_run8(const struct iq_sub *o, int l, int iq1)
{
    const __m128i g = _mm_cvtsi64_si128((long long)o->g[l]);
    if (iq1)
        return _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(g)),
                             _mm256_set1_ps(o->delta[l]));
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i neg = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)o->s[l]), bit), bit);
    return _mm256_xor_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(g)),
                         _mm256_castsi256_ps(_mm256_slli_epi32(neg, 31)));
}

AVX2 static inline __attribute__((always_inline)) float
iq_row_avx2(uint32_t type, const struct wmat *W, int64_t r, const float *x)
{
    const int bytes = iq_block_bytes(type), iq1 = type == GGML_IQ1_S || type == GGML_IQ1_M;
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t k = 0; k < W->in; k += 256, b += bytes) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const float d = iq_block_d(type, b);
        for (int ib = 0; ib < 8; ib++) {
            struct iq_sub o;
            iq_sub(type, b, d, ib, &o);
            const float *xs = x + k + 32 * ib;
            for (int l = 0; l < 4; l++)
                a[l] =
                    _mm256_fmadd_ps(_mm256_mul_ps(iq_run8(&o, l, iq1), _mm256_set1_ps(o.db[l / 2])),
                                    _mm256_loadu_ps(xs + 8 * l), a[l]);
        }
    }
    return hsum256(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
}

AVX2 float mx_row_iq_avx2(const struct wmat *W, int64_t r, const float *x)
{
    IQ_ROW(iq_row_avx2)
}

#endif

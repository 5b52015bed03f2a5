/* flash_f16 — one query row of ggml's f16 flash attention. */

/* no fused multiply-add but the written ones (the running sums of weights
 * would fuse in the AVX-512 body only) */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif
#include "backends/flash_f16.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/matmul_impl.h"
#include "backends/quant.h"

static float f16r(float v)
{
    return quant_f16_to_f32(quant_f32_to_f16(v));
}

/* expf(x), without libm's slow underflow path where its value is +0 (every
 * x below -104: e^-104 lies below half the smallest subnormal float) */
static float exp_or_zero(float x)
{
    return x < -104.0f ? 0.0f : expf(x);
}

/* one key's weights: s its score, *M the running maximum (updated). Returns
 * 1 on a new maximum (the sum so far then takes the factor *ms, the key
 * weight 1), else 0 with the key's weight in *vs */
static int key_weight(float s, float cap, float *M, float *ms, float *vs)
{
    if (cap > 0) s = cap * tanhf(s * (1.0f / cap));
    *ms = 1.0f, *vs = 1.0f;
    if (s > *M) {
        *ms = exp_or_zero(*M - s);
        *M = s;
        return 1;
    }
    *vs = exp_or_zero(s - *M);
    return 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define F16_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* f16_step's first elements, 8 at a time with FMA and F16C (the same
 * roundings: one fused multiply-add, then to f16 nearest-even and back);
 * returns how many */
__attribute__((target("avx2,fma,f16c"))) static int f16_step_x86(float *o, const float *v,
                                                                 const uint16_t *h, float a, int n)
{
    const __m256 av = _mm256_set1_ps(a);
    int d = 0;
    for (; d + 8 <= n; d += 8) {
        __m256 r;
        if (h)
            r = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + d))), av,
                                _mm256_loadu_ps(o + d));
        else if (v)
            r = _mm256_fmadd_ps(_mm256_loadu_ps(v + d), av, _mm256_loadu_ps(o + d));
        else
            r = _mm256_mul_ps(_mm256_loadu_ps(o + d), av);
        r = _mm256_cvtph_ps(_mm256_cvtps_ph(r, F16_NEAREST));
        _mm256_storeu_ps(o + d, r);
    }
    return d;
}

#define F16_AVX512 __attribute__((target("avx512f")))

/* keys ahead whose V row is prefetched: rows lie a whole cache row apart
 * (all heads of a position), which the hardware's streams follow late; 16
 * keys cover the memory's latency at some 20-40 cycles a key */
enum { FLASH_AHEAD = 16 };

F16_AVX512 static inline __m512 round16(__m512 r)
{
    return _mm512_cvtph_ps(_mm512_cvtps_ph(r, F16_NEAREST));
}

/* 16 values of V's row: f32, or fp16 widened (half a constant where it
 * is inlined) */
F16_AVX512 static inline __attribute__((always_inline)) __m512 v16(const float *v,
                                                                   const uint16_t *h, int half)
{
    return half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)h))
                : _mm512_loadu_ps(v);
}

/* the row with the running sum in nv registers of 16 (nv and half
 * constants where it is inlined, so that acc stays in registers); V's rows
 * are f32 (V) or fp16 (H, half 1); returns the sum of the weights, o the
 * unnormalised sum */
F16_AVX512 static inline __attribute__((always_inline)) float
row_avx512(float *o, const float *scores, const float *V, const uint16_t *H, int T, int stride,
           float cap, int nv, int half)
{
    __m512 acc[16];
    for (int i = 0; i < nv; i++)
        acc[i] = _mm512_setzero_ps();
    float S = 0.0f, M = -INFINITY;
    for (int t = 0; t < T; t++) {
        float ms, vs;
        const size_t at = (size_t)t * (size_t)stride;
        if (t + FLASH_AHEAD < T) { /* the row FLASH_AHEAD keys on, one stride per key */
            const size_t ahead = at + (size_t)FLASH_AHEAD * (size_t)stride;
            const char *next = half ? (const char *)(H + ahead) : (const char *)(V + ahead);
            for (int off = 0; off < nv * 16 * (half ? 2 : 4); off += 64)
                _mm_prefetch(next + off, _MM_HINT_T0);
        }
        if (key_weight(scores[t], cap, &M, &ms, &vs)) { /* a new maximum: the sum rescaled first */
            const __m512 m = _mm512_set1_ps(ms);
            for (int i = 0; i < nv; i++)
                acc[i] = round16(_mm512_mul_ps(acc[i], m));
        }
        const __m512 w = _mm512_set1_ps(vs);
        for (int i = 0; i < nv; i++)
            acc[i] = round16(_mm512_fmadd_ps(
                v16(half ? NULL : V + at + 16 * i, half ? H + at + 16 * i : NULL, half), w,
                acc[i]));
        S = S * ms + vs;
    }
    for (int i = 0; i < nv; i++)
        _mm512_storeu_ps(o + 16 * i, acc[i]);
    return S;
}

/* the row in registers for hd = 16 nv, nv <= 16; -1 (nothing done) for
 * other sizes (half a constant where it is inlined) */
F16_AVX512 static inline __attribute__((always_inline)) float
row_sizes(float *o, const float *scores, const float *V, const uint16_t *H, int T, int stride,
          int hd, float cap, int half)
{
    switch (hd) {
    case 64:
        return row_avx512(o, scores, V, H, T, stride, cap, 4, half);
    case 128:
        return row_avx512(o, scores, V, H, T, stride, cap, 8, half);
    case 256:
        return row_avx512(o, scores, V, H, T, stride, cap, 16, half);
    default:
        if (hd % 16 || hd > 256) return -1.0f;
        return row_avx512(o, scores, V, H, T, stride, cap, hd / 16, half);
    }
}

/* row_sizes with V's rows fp16 where H is not NULL */
F16_AVX512 static float row_avx512_any(float *o, const float *scores, const float *V,
                                       const uint16_t *H, int T, int stride, int hd, float cap)
{
    return H ? row_sizes(o, scores, V, H, T, stride, hd, cap, 1)
             : row_sizes(o, scores, V, H, T, stride, hd, cap, 0);
}
#endif

/* o[d] = f16(v[d] a + o[d]) (one rounding of the fused product; v[d] from
 * h where h is not NULL), or with neither f16(o[d] a), for d < n: the f16
 * running sum of V rows */
static void f16_step(float *o, const float *v, const uint16_t *h, float a, int n)
{
    int d = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (mv_isa_current() >= MV_AVX2) d = f16_step_x86(o, v, h, a, n);
#endif
    for (; d < n; d++)
        o[d] = f16r(h ? fmaf(quant_f16_to_f32(h[d]), a, o[d]) : v ? fmaf(v[d], a, o[d]) : o[d] * a);
}

/* flash_f16_row with V's rows f32 (V) or fp16 (H) */
static void flash_row(float *o, const float *scores, const float *V, const uint16_t *H, int T,
                      int stride, int hd, float cap)
{
    float S = -1.0f;
#if defined(__x86_64__) && defined(__GNUC__)
    if (mv_isa_current() >= MV_AVX512) S = row_avx512_any(o, scores, V, H, T, stride, hd, cap);
#endif
    if (S < 0) {
        S = 0.0f;
        float M = -INFINITY;
        for (int d = 0; d < hd; d++)
            o[d] = 0.0f;
        for (int t = 0; t < T; t++) {
            float ms, vs;
            const size_t at = (size_t)t * (size_t)stride;
            if (key_weight(scores[t], cap, &M, &ms, &vs)) f16_step(o, NULL, NULL, ms, hd);
            f16_step(o, H ? NULL : V + at, H ? H + at : NULL, vs, hd);
            S = S * ms + vs;
        }
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (int d = 0; d < hd; d++)
        o[d] *= inv;
}

void flash_f16_row(float *o, const float *scores, const float *V, int T, int stride, int hd,
                   float cap)
{
    flash_row(o, scores, V, NULL, T, stride, hd, cap);
}

void flash_f16_row_h(float *o, const float *scores, const uint16_t *V, int T, int stride, int hd,
                     float cap)
{
    flash_row(o, scores, NULL, V, T, stride, hd, cap);
}

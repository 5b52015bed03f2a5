/* act8 — llama.cpp's 8-bit activation blocks, in C and in AVX2. */

/* each product rounded on its own (no fused multiply-add), in both bodies */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include "backends/act8.h"

#include <math.h>
#include <string.h>

#include "backends/matmul_impl.h"
#include "backends/quant.h"

static float f16r(float v)
{
    return quant_f16_to_f32(quant_f32_to_f16(v));
}

/* one Q8_0 block's figures into c (block b of 32 values from x's start;
 * s: fp16(d * (s0 + s1))) */
static void q8_0_figs(const struct simfmt_codes *c, int64_t b, float dh, float s, int s0, int s1)
{
    c->d[b] = dh;
    c->sum16[2 * b] = s0, c->sum16[2 * b + 1] = s1;
    c->s[b] = s;
}

static int q8_0_c(float *x, int64_t n, const struct simfmt_codes *c)
{
    int rc = 0;
    for (int64_t b = 0; b + 32 <= n; b += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fabsf(x[b + j]) > amax ? fabsf(x[b + j]) : amax;
        float d = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
        float dh = f16r(d);
        if (!isfinite(amax)) rc = -1;
        int sum[2] = {0, 0};
        for (int j = 0; j < 32; j++) {
            float q = nearbyintf(x[b + j] * id);
            x[b + j] = q * dh;
            if (!isfinite(q)) rc = -1; /* no code (and no cast of it below) */
            if (c && !rc) {
                c->q[b + j] = (int8_t)q;
                sum[j / 16] += (int)q;
            }
        }
        if (c && !rc) q8_0_figs(c, b / 32, dh, f16r((float)(sum[0] + sum[1]) * d), sum[0], sum[1]);
    }
    return rc;
}

/* a Q8_K block whose largest magnitude is 0: zeros, and zero codes */
static void q8_k_zero(float *x, int64_t b, const struct simfmt_codes *c)
{
    memset(x + b, 0, 256 * sizeof *x);
    if (c) {
        memset(c->q + b, 0, 256);
        memset(c->sum16 + b / 16, 0, 16 * sizeof *c->sum16);
        c->d[b / 256] = 0;
    }
}

static void q8_k_sums(const struct simfmt_codes *c, int64_t b)
{
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int j = 0; j < 16; j++)
            sum += c->q[b + 16 * g + j];
        c->sum16[b / 16 + g] = sum;
    }
}

static int q8_k_c(float *x, int64_t n, const struct simfmt_codes *c)
{
    int rc = 0;
    for (int64_t b = 0; b + 256 <= n; b += 256) {
        float amax = 0, max = 0;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[b + j]) > amax) amax = fabsf(x[b + j]), max = x[b + j];
        if (!isfinite(amax)) rc = -1;
        if (amax == 0) {
            q8_k_zero(x, b, rc ? NULL : c);
            continue;
        }
        float iscale = -127.0f / max, d = 1.0f / iscale;
        if (!isfinite(iscale)) rc = -1; /* |max| below 127 / FLT_MAX: codes of +-Inf */
        for (int j = 0; j < 256; j++) {
            float q = nearbyintf(iscale * x[b + j]);
            q = q < 127.0f ? q : 127.0f; /* fminf's: NaN gives 127 */
            x[b + j] = q * d;
            if (c && !rc) c->q[b + j] = (int8_t)q;
        }
        if (c && !rc) {
            c->d[b / 256] = d;
            q8_k_sums(c, b);
        }
    }
    return rc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define A8_AVX2 __attribute__((target("avx2,f16c")))

/* f16r's bits with F16C (both round to nearest even) */
A8_AVX2 static float f16r_x86(float v)
{
    return _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
}

/* the largest lane (no lane is NaN: the callers' maxima skip NaN) */
A8_AVX2 static float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

A8_AVX2 static int hsum8i(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* |v| > m ? |v| : m, lane by lane: maxps keeps m where |v| is NaN, as the
 * C loops' comparisons do */
A8_AVX2 static __m256 absmax(__m256 v, __m256 m)
{
    return _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), m);
}

/* all ones in the lanes of q that are NaN or +-Inf */
A8_AVX2 static __m256 not_finite(__m256 q)
{
    return _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), q), _mm256_set1_ps(INFINITY),
                         _CMP_NLT_UQ);
}

/* 32 int32 codes (each in -128..127) as 32 bytes in order at q */
A8_AVX2 static void store_codes(int8_t *q, const __m256i *qi)
{
    __m256i p =
        _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)q, p);
}

#define A8_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

A8_AVX2 static int q8_0_avx2(float *x, int64_t n, const struct simfmt_codes *c)
{
    __m256 bad = _mm256_setzero_ps();
    int rc = 0;
    for (int64_t b = 0; b + 32 <= n; b += 32) {
        __m256 v[4], a = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++)
            a = absmax(v[k] = _mm256_loadu_ps(x + b + 8 * k), a);
        const float amax = hmax8(a);
        const float d = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
        const float dh = f16r_x86(d);
        if (!isfinite(amax)) rc = -1;
        const __m256 idv = _mm256_set1_ps(id), dv = _mm256_set1_ps(dh);
        __m256i qi[4];
        for (int k = 0; k < 4; k++) {
            const __m256 q = _mm256_round_ps(_mm256_mul_ps(v[k], idv), A8_NEAREST);
            _mm256_storeu_ps(x + b + 8 * k, _mm256_mul_ps(q, dv));
            bad = _mm256_or_ps(bad, not_finite(q));
            qi[k] = _mm256_cvtps_epi32(q);
        }
        if (!c) continue;
        store_codes(c->q + b, qi);
        const int s0 = hsum8i(_mm256_add_epi32(qi[0], qi[1])),
                  s1 = hsum8i(_mm256_add_epi32(qi[2], qi[3]));
        /* a NaN code is INT_MIN: the sum in 64 bits (its value then unused) */
        q8_0_figs(c, b / 32, dh, f16r_x86((float)((int64_t)s0 + s1) * d), s0, s1);
    }
    return rc || _mm256_movemask_ps(bad) ? -1 : 0;
}

/* the first value of x[0..256) whose magnitude is amax (> 0, not NaN) */
A8_AVX2 static float first_of_magnitude(const float *x, float amax)
{
    const __m256 m = _mm256_set1_ps(amax), sign = _mm256_set1_ps(-0.0f);
    for (int j = 0; j < 256; j += 8) {
        int hit = _mm256_movemask_ps(
            _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m, _CMP_EQ_OQ));
        if (hit) return x[j + __builtin_ctz((unsigned)hit)];
    }
    return amax; /* not reached: amax is one of the magnitudes */
}

/* one Q8_K block at x whose first value of largest magnitude is max */
A8_AVX2 static __m256 q8_k_block(float *x, float max, int8_t *codes, int32_t *sum16)
{
    const float iscale = -127.0f / max, d = 1.0f / iscale;
    const __m256 is = _mm256_set1_ps(iscale), dv = _mm256_set1_ps(d), cap = _mm256_set1_ps(127.0f);
    __m256 bad = _mm256_setzero_ps();
    __m256i qi[4];
    for (int j = 0; j < 256; j += 32) {
        for (int k = 0; k < 4; k++) {
            __m256 q =
                _mm256_round_ps(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8 * k)), A8_NEAREST);
            q = _mm256_min_ps(q, cap); /* q < 127 ? q : 127: NaN gives 127 */
            _mm256_storeu_ps(x + j + 8 * k, _mm256_mul_ps(q, dv));
            bad = _mm256_or_ps(bad, not_finite(q));
            qi[k] = _mm256_cvtps_epi32(q);
        }
        if (!codes) continue;
        store_codes(codes + j, qi);
        sum16[j / 16] = hsum8i(_mm256_add_epi32(qi[0], qi[1]));
        sum16[j / 16 + 1] = hsum8i(_mm256_add_epi32(qi[2], qi[3]));
    }
    return isfinite(iscale) ? bad : _mm256_castsi256_ps(_mm256_set1_epi32(-1));
}

A8_AVX2 static int q8_k_avx2(float *x, int64_t n, const struct simfmt_codes *c)
{
    __m256 bad = _mm256_setzero_ps();
    for (int64_t b = 0; b + 256 <= n; b += 256) {
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                       _mm256_setzero_ps()};
        for (int j = 0; j < 256; j += 32)
            for (int k = 0; k < 4; k++)
                a[k] = absmax(_mm256_loadu_ps(x + b + j + 8 * k), a[k]);
        const float amax =
            hmax8(_mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3])));
        if (!isfinite(amax)) bad = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        if (amax == 0) {
            q8_k_zero(x, b, c);
            continue;
        }
        const float max = first_of_magnitude(x + b, amax);
        bad = _mm256_or_ps(
            bad, q8_k_block(x + b, max, c ? c->q + b : NULL, c ? c->sum16 + b / 16 : NULL));
        if (c) c->d[b / 256] = 1.0f / (-127.0f / max);
    }
    return _mm256_movemask_ps(bad) ? -1 : 0;
}
#endif

int act8_q8_0(float *x, int64_t n, const struct simfmt_codes *c)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (mv_isa_current() >= MV_AVX2) return q8_0_avx2(x, n, c);
#endif
    return q8_0_c(x, n, c);
}

int act8_q8_k(float *x, int64_t n, const struct simfmt_codes *c)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (mv_isa_current() >= MV_AVX2) return q8_k_avx2(x, n, c);
#endif
    return q8_k_c(x, n, c);
}

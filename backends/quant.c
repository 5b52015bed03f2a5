/* quant — fp16 conversion (ggml/FP16 library) and reference quantisers. */
#include "backends/quant.h"
#include "backends/ggml_types.h"
#include "core/status.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define QG_X86 1
#endif

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t quant_f32_to_f16(float f)
{
    const float scale_to_inf = 0x1.0p+112f;
    const float scale_to_zero = 0x1.0p-110f;
    float base = (fabsf(f) * scale_to_inf) * scale_to_zero;
    const uint32_t w = f2u(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = u2f((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f2u(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float quant_f16_to_f32(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    const float exp_scale = 0x1.0p-112f;
    const float normalized = u2f((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float denormalized = u2f((two_w >> 17) | magic_mask) - 0.5f;
    const uint32_t cutoff = 1u << 27;
    return u2f(sign | (two_w < cutoff ? f2u(denormalized) : f2u(normalized)));
}

int quant_has_f16c(void)
{
#ifdef QG_X86
    static int cached = -1; /* every thread computes the same answer */
    int has = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (has < 0) {
        unsigned a, b, c, d;
        __builtin_cpu_init();
        has = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) && __builtin_cpu_supports("avx2");
        __atomic_store_n(&cached, has, __ATOMIC_RELAXED);
    }
    return has;
#else
    return 0;
#endif
}

#ifdef QG_X86
__attribute__((target("avx2,f16c"))) static int64_t round_f16_f16c(float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
    }
    return i;
}
#endif

#ifdef QG_X86
/* the rows' first elements, 8 at a time; return how many */
__attribute__((target("avx2,f16c"))) static int64_t to_f16_f16c(const float *x, uint16_t *h,
                                                                int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}

__attribute__((target("avx2,f16c"))) static int64_t from_f16_f16c(const uint16_t *h, float *y,
                                                                  int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + i))));
    return i;
}

/* quant_f16_gather's first elements, 8 at a time; returns how many */
__attribute__((target("avx2,f16c"))) static int64_t
f16_gather_f16c(const uint8_t *base, size_t stride, int64_t n, float *y)
{
    const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm256_set1_epi32((int)stride));
    const __m256i lo = _mm256_set1_epi32(0xFFFF);
    int64_t i = 0;
    /* a lane reads 4 bytes at its value: the last one only where 2 more
     * bytes follow it, so the gathers stop 2 elements short */
    for (; i + 8 + 1 < n && stride <= (1u << 24); i += 8) {
        __m256i g =
            _mm256_i32gather_epi32((const int *)(const void *)(base + (size_t)i * stride), at, 1);
        g = _mm256_and_si256(g, lo);
        __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    if (i < n && n >= 9 && stride >= 2 && stride <= (1u << 24)) {
        /* the last 8 (some again) read 4 bytes ending with their value:
         * the 2 before it are the previous value's, n - 8 >= 1 */
        const int64_t j = n - 8;
        __m256i g = _mm256_i32gather_epi32(
            (const int *)(const void *)(base + (size_t)j * stride - 2), at, 1);
        g = _mm256_srli_epi32(g, 16);
        __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
        _mm256_storeu_ps(y + j, _mm256_cvtph_ps(h));
        for (; i < j; i++) /* at most one before them */
            y[i] = quant_f16_to_f32(
                (uint16_t)(base[(size_t)i * stride] | base[(size_t)i * stride + 1] << 8));
        i = n;
    }
    return i;
}
#endif

void quant_f16_gather(const uint8_t *base, size_t stride, int64_t n, float *y)
{
    int64_t i = 0;
#ifdef QG_X86
    if (quant_has_f16c()) i = f16_gather_f16c(base, stride, n, y);
#endif
    for (; i < n; i++)
        y[i] = quant_f16_to_f32(
            (uint16_t)(base[(size_t)i * stride] | base[(size_t)i * stride + 1] << 8));
}

void quant_f32_to_f16_row(const float *x, uint16_t *h, int64_t n)
{
    int64_t i = 0;
#ifdef QG_X86
    if (quant_has_f16c()) i = to_f16_f16c(x, h, n);
#endif
    for (; i < n; i++)
        h[i] = quant_f32_to_f16(x[i]);
}

void quant_f16_to_f32_row(const uint16_t *h, float *y, int64_t n)
{
    int64_t i = 0;
#ifdef QG_X86
    if (quant_has_f16c()) i = from_f16_f16c(h, y, n);
#endif
    for (; i < n; i++)
        y[i] = quant_f16_to_f32(h[i]);
}

void quant_round_f16(float *x, int64_t n)
{
    int64_t i = 0;
#ifdef QG_X86
    if (quant_has_f16c()) i = round_f16_f16c(x, n);
#endif
    for (; i < n; i++)
        x[i] = quant_f16_to_f32(quant_f32_to_f16(x[i]));
}

void quant_row_q8_0(const float *x, void *out, int64_t n)
{
    uint8_t *y = out;
    for (int64_t b = 0; b < n / 32; b++, x += 32, y += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t dh = quant_f32_to_f16(d);
        memcpy(y, &dh, 2); /* little-endian hosts only, as ggml */
        for (int j = 0; j < 32; j++)
            y[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

void quant_row_q4_0(const float *x, void *out, int64_t n)
{
    uint8_t *y = out;
    for (int64_t b = 0; b < n / 32; b++, x += 32, y += 18) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t dh = quant_f32_to_f16(d);
        memcpy(y, &dh, 2);
        for (int j = 0; j < 16; j++) {
            int q0 = (int8_t)(x[j] * id + 8.5f), q1 = (int8_t)(x[16 + j] * id + 8.5f);
            if (q0 > 15) q0 = 15;
            if (q1 > 15) q1 = 15;
            y[2 + j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void quant_row_q4_k(const float *x, void *out, int64_t n)
{
    uint8_t *y = out;
    for (int64_t b = 0; b < n / 256; b++, x += 256, y += 144) {
        float scale[8], minv[8], max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            float mn = 0.0f, mx = x[32 * j];
            for (int i = 0; i < 32; i++) {
                mn = fminf(mn, x[32 * j + i]);
                mx = fmaxf(mx, x[32 * j + i]);
            }
            scale[j] = (mx - mn) / 15.0f;
            minv[j] = -mn;
            max_scale = fmaxf(max_scale, scale[j]);
            max_min = fmaxf(max_min, minv[j]);
        }
        uint16_t dh = quant_f32_to_f16(max_scale / 63.0f), mh = quant_f32_to_f16(max_min / 63.0f);
        memcpy(y, &dh, 2);
        memcpy(y + 2, &mh, 2);
        float d = quant_f16_to_f32(dh), dmin = quant_f16_to_f32(mh);
        uint8_t *sc = y + 4, *qs = y + 16, L[256];
        memset(sc, 0, 12);
        for (int j = 0; j < 8; j++) {
            int ls = d > 0 ? (int)lroundf(scale[j] / d) : 0,
                lm = dmin > 0 ? (int)lroundf(minv[j] / dmin) : 0;
            ls = ls > 63 ? 63 : ls;
            lm = lm > 63 ? 63 : lm;
            if (j < 4) {
                sc[j] = (uint8_t)ls;
                sc[j + 4] = (uint8_t)lm;
            } else {
                sc[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
                sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
                sc[j] |= (uint8_t)((lm >> 4) << 6);
            }
            float ds = d * (float)ls, dm = dmin * (float)lm;
            for (int i = 0; i < 32; i++) {
                int l = ds > 0 ? (int)lroundf((x[32 * j + i] + dm) / ds) : 0;
                L[32 * j + i] = (uint8_t)(l < 0 ? 0 : l > 15 ? 15 : l);
            }
        }
        for (int j = 0; j < 256; j += 64)
            for (int l = 0; l < 32; l++)
                qs[j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

int quant_row(uint32_t type, const float *x, void *out, int64_t n)
{
    switch (type) {
    case GGML_F32:
        memcpy(out, x, (size_t)n * 4);
        return QG_OK;
    case GGML_F16: {
        uint16_t *h = out;
        for (int64_t i = 0; i < n; i++)
            h[i] = quant_f32_to_f16(x[i]);
        return QG_OK;
    }
    case GGML_Q8_0:
        if (n % 32) return QG_ERR_UNSUPPORTED;
        quant_row_q8_0(x, out, n);
        return QG_OK;
    case GGML_Q4_0:
        if (n % 32) return QG_ERR_UNSUPPORTED;
        quant_row_q4_0(x, out, n);
        return QG_OK;
    case GGML_Q4_K:
        if (n % 256) return QG_ERR_UNSUPPORTED;
        quant_row_q4_k(x, out, n);
        return QG_OK;
    }
    return QG_ERR_UNSUPPORTED;
}

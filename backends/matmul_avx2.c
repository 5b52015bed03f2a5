/* matmul_avx2 — the AVX2 decode kernels (with FMA and F16C): F16, BF16,
 * Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, and x's AVX2 preparation. */
#include "backends/matmul_impl.h"
#include "backends/matmul_x86_impl.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 8 floats of b at k: f32, or fp16 widened (half a constant where it is
 * inlined: the same values, so the same sums) */
AVX2 static inline __attribute__((always_inline)) __m256 b8(const float *b, const uint16_t *bh,
                                                            int64_t k, int half)
{
    return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(bh + k)))
                : _mm256_loadu_ps(b + k);
}

AVX2 static inline __attribute__((always_inline)) float
dot256_any(const float *a, const float *b, const uint16_t *bh, int64_t n, int half)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), b8(b, bh, k, half), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), b8(b, bh, k + 8, half), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; k < n; k++)
        s += a[k] * (half ? quant_f16_to_f32(bh[k]) : b[k]);
    return s;
}

AVX2 float mx_dot_avx2(const float *a, const float *b, int64_t n)
{
    return dot256_any(a, b, NULL, n, 0);
}

AVX2 void mx_dots_avx2(float *out, const float *a, const float *b, int64_t T, int64_t stride,
                       int64_t n, float scale)
{
    for (int64_t t = 0; t < T; t++)
        out[t] = dot256_any(a, b + t * stride, NULL, n, 0) * scale;
}

AVX2 void mx_dots_f16_avx2(float *out, const float *a, const uint16_t *b, int64_t T, int64_t stride,
                           int64_t n, float scale)
{
    for (int64_t t = 0; t < T; t++)
        out[t] = dot256_any(a, NULL, b + t * stride, n, 1) * scale;
}

/* 8 int8 -> 8 floats */
__attribute__((target("avx2,fma"))) static __m256 i8x8(const uint8_t *q)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

/* Q8_0: 32 int8 and an fp16 scale per block */
AVX2 float mx_row_q8_0_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 32, b += 34) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m256 d = _mm256_set1_ps(h2f_f16c(b));
        __m256 s0 = _mm256_mul_ps(i8x8(b + 2), _mm256_loadu_ps(x + k));
        __m256 s1 = _mm256_mul_ps(i8x8(b + 10), _mm256_loadu_ps(x + k + 8));
        s0 = _mm256_fmadd_ps(i8x8(b + 18), _mm256_loadu_ps(x + k + 16), s0);
        s1 = _mm256_fmadd_ps(i8x8(b + 26), _mm256_loadu_ps(x + k + 24), s1);
        acc = _mm256_fmadd_ps(d, _mm256_add_ps(s0, s1), acc);
    }
    return hsum256(acc);
}

/* Q4_0: y = (q - 8) d, low nibbles elements 0..15, high 16..31; with the
 * group sums of x, dot = sum_b d_b (q.x)_b - 8 d_b sum(x)_b */
AVX2 float mx_row_q4_0_avx2(const struct wmat *W, int64_t r, const float *x, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m4 = _mm256_set1_epi32(0xF);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t k = 0; k < W->in; k += 32, b += 18) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        float d = h2f_f16c(b);
        __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2)));
        __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + 10)));
        __m256 s0 =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v0, m4)), _mm256_loadu_ps(x + k));
        __m256 s1 =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v1, m4)), _mm256_loadu_ps(x + k + 8));
        s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4)),
                             _mm256_loadu_ps(x + k + 16), s0);
        s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v1, 4)),
                             _mm256_loadu_ps(x + k + 24), s1);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_add_ps(s0, s1), acc);
        mins += 8 * d * xg[W->in + k / 32];
    }
    return hsum256(acc) - mins;
}

/* signed byte k of each 32-bit lane of v, as 8 floats */
AVX2 static inline __attribute__((always_inline)) __m256 lane_sbyte(__m256i v, int k)
{
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * k), 24));
}

/* Q6_K: per 128 elements, quarter k (32 elements) takes the low (k < 2) or
 * high nibbles of ql[32 (k % 2) + l], bits 2k of qh[l] above them, minus
 * 32, times d and an int8 scale per 16. Read as the prepared lanes (mv_x86_prep): lanes 0..3
 * hold elements 0..15 of a quarter, lanes 4..7 elements 16..31, so the two
 * scales of a quarter are one vector */
AVX2 float mx_row_q6_k_avx2(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3), c32 = _mm256_set1_epi8(32);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 210) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const float d = h2f_f16c(b + 208);
        float ds[16];
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(b + 192));
        _mm256_storeu_ps(
            ds, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8))));
        _mm256_storeu_ps(ds + 8,
                         _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                              _mm_srli_si128(sc8, 8)))));
        for (int n = 0; n < 2; n++) {
            const uint8_t *ql = b + 64 * n;
            const __m256i h = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * n));
            for (int q = 0; q < 4; q++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(ql + 32 * (q % 2)));
                __m256i lo = _mm256_and_si256(q < 2 ? v : _mm256_srli_epi16(v, 4), m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * q), m3);
                __m256i x6 = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), c32);
                const float *xl = lanes + k + 128 * n + 32 * q;
                __m256 s0 = _mm256_mul_ps(lane_sbyte(x6, 0), _mm256_loadu_ps(xl));
                __m256 s1 = _mm256_mul_ps(lane_sbyte(x6, 1), _mm256_loadu_ps(xl + 8));
                s0 = _mm256_fmadd_ps(lane_sbyte(x6, 2), _mm256_loadu_ps(xl + 16), s0);
                s1 = _mm256_fmadd_ps(lane_sbyte(x6, 3), _mm256_loadu_ps(xl + 24), s1);
                const float *sq = ds + 8 * n + 2 * q;
                __m256 sc = _mm256_setr_m128(_mm_broadcast_ss(sq), _mm_broadcast_ss(sq + 1));
                if (q % 2)
                    a1 = _mm256_fmadd_ps(sc, _mm256_add_ps(s0, s1), a1);
                else
                    a0 = _mm256_fmadd_ps(sc, _mm256_add_ps(s0, s1), a0);
            }
        }
    }
    return hsum256(_mm256_add_ps(a0, a1));
}

/* sum over 32 4-bit elements (16 bytes at q: low nibbles first, then
 * high) of tab[code] x, unscaled: tab 16 int8 values */
AVX2 static __m256 nib_tab32(const uint8_t *q, const float *x, const int8_t *tab)
{
    const __m128i table = _mm_loadu_si128((const __m128i *)tab), m4 = _mm_set1_epi8(0xF);
    __m128i bytes = _mm_loadu_si128((const __m128i *)q);
    __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(bytes, m4));
    __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
    __m256 s0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), _mm256_loadu_ps(x));
    __m256 s1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))),
                              _mm256_loadu_ps(x + 8));
    s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), _mm256_loadu_ps(x + 16), s0);
    s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))),
                         _mm256_loadu_ps(x + 24), s1);
    return _mm256_add_ps(s0, s1);
}

/* q.x and sum(x) of one block of 32 at k: 16 bytes of nibbles at qs
 * (low nibbles elements 0..15, high 16..31) with, for Q5_0/Q5_1, bit j of
 * qh above element j's nibble */
AVX2 static inline __attribute__((always_inline)) __m256
legacy_qx(const uint8_t *qs, uint32_t qh, int five, const float *x, __m256 *xs)
{
    const __m256i m4 = _mm256_set1_epi32(0xF), one = _mm256_set1_epi32(1),
                  sh = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), h = _mm256_set1_epi32((int)qh);
    __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs));
    __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8)));
    __m256i q[4] = {_mm256_and_si256(v0, m4), _mm256_and_si256(v1, m4), _mm256_srli_epi32(v0, 4),
                    _mm256_srli_epi32(v1, 4)};
    __m256 acc = _mm256_setzero_ps(), sum = acc;
    for (int g = 0; g < 4; g++) {
        if (five) { /* bits 8g..8g+7 of qh */
            __m256i hb = _mm256_srlv_epi32(h, _mm256_add_epi32(sh, _mm256_set1_epi32(8 * g)));
            q[g] = _mm256_or_si256(q[g], _mm256_slli_epi32(_mm256_and_si256(hb, one), 4));
        }
        __m256 xv = _mm256_loadu_ps(x + 8 * g);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q[g]), xv, acc);
        sum = _mm256_add_ps(sum, xv);
    }
    *xs = sum;
    return acc;
}

/* 8 bytes at p widened to 8 int32 lanes */
AVX2 static inline __attribute__((always_inline)) __m256i u8x8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* Q2_K (see mx_row_q2_k_avx512): run r = 8 half + 2 j + h, 16 elements as
 * two vectors of 8 */
AVX2 float mx_row_q2_k_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m3 = _mm256_set1_epi32(3);
    __m256 acc = _mm256_setzero_ps(), accm = acc;
    for (int64_t k = 0; k < W->in; k += 256, b += 84) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const float d = h2f_f16c(b + 80), dmin = h2f_f16c(b + 82);
        for (int half = 0; half < 2; half++)
            for (int h = 0; h < 2; h++) {
                const uint8_t *q = b + 16 + 32 * half + 16 * h;
                const __m256i v0 = u8x8(q), v1 = u8x8(q + 8);
                for (int j = 0; j < 4; j++) {
                    const int run = 8 * half + 2 * j + h;
                    const __m128i sh = _mm_cvtsi32_si128(2 * j);
                    const __m256 dl = _mm256_set1_ps(d * (float)(b[run] & 0xF)),
                                 ml = _mm256_set1_ps(dmin * (float)(b[run] >> 4));
                    const float *xr = x + k + 16 * run;
                    const __m256 x0 = _mm256_loadu_ps(xr), x1 = _mm256_loadu_ps(xr + 8);
                    __m256 q0 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(v0, sh), m3)),
                           q1 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(v1, sh), m3));
                    acc = _mm256_fmadd_ps(dl, _mm256_fmadd_ps(q1, x1, _mm256_mul_ps(q0, x0)), acc);
                    accm = _mm256_fmadd_ps(ml, _mm256_add_ps(x0, x1), accm);
                }
            }
    }
    return hsum256(_mm256_sub_ps(acc, accm));
}

/* Q3_K (see mx_row_q3_k_avx512), 8 lanes at a time; the scales through
 * dequant's own unpacking */
AVX2 float mx_row_q3_k_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m3 = _mm256_set1_epi32(3), one = _mm256_set1_epi32(1),
                  four = _mm256_set1_epi32(4);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += 110) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const float d = h2f_f16c(b + 108);
        for (int h = 0; h < 2; h++) {
            const __m256i h0 = u8x8(b + 16 * h), h1 = u8x8(b + 16 * h + 8);
            for (int half = 0; half < 2; half++) {
                const uint8_t *q = b + 32 + 32 * half + 16 * h;
                const __m256i v0 = u8x8(q), v1 = u8x8(q + 8);
                for (int j = 0; j < 4; j++) {
                    const int run = 8 * half + 2 * j + h;
                    const __m128i sh = _mm_cvtsi32_si128(2 * j),
                                  hs = _mm_cvtsi32_si128(4 * half + j);
                    __m256i q0 = _mm256_and_si256(_mm256_srl_epi32(v0, sh), m3),
                            q1 = _mm256_and_si256(_mm256_srl_epi32(v1, sh), m3);
                    q0 = _mm256_or_si256(
                        q0, _mm256_slli_epi32(_mm256_and_si256(_mm256_srl_epi32(h0, hs), one), 2));
                    q1 = _mm256_or_si256(
                        q1, _mm256_slli_epi32(_mm256_and_si256(_mm256_srl_epi32(h1, hs), one), 2));
                    const float *xr = x + k + 16 * run;
                    __m256 s = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(_mm256_sub_epi32(q1, four)), _mm256_loadu_ps(xr + 8),
                        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q0, four)),
                                      _mm256_loadu_ps(xr)));
                    acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)dequant_q3k_scale(b + 96, run)),
                                          s, acc);
                }
            }
        }
    }
    return hsum256(acc);
}

/* Q4_1, Q5_0 and Q5_1: blocks of 32 with an fp16 d (and m for the _1
 * formats, after d), qh (4 bytes, the 5-bit formats) and 16 bytes of
 * nibbles: y = d q + m, or d (q - 16) for Q5_0; dot = sum_b d_b (q.x)_b +
 * (m_b or -16 d_b) sum(x)_b */
AVX2 float mx_row_legacy_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const struct legacy_block g = legacy_block_of(W->type);
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps(), accm = acc;
    for (int64_t k = 0; k < W->in; k += 32, b += g.bytes) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        uint32_t qh;
        float m, d = legacy_scales(&g, b, &m, &qh);
        __m256 xs, qx = legacy_qx(b + g.qs, qh, g.five, x + k, &xs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), qx, acc);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(m), xs, accm);
    }
    return hsum256(_mm256_add_ps(acc, accm));
}

/* IQ4_NL: blocks of 32, an fp16 scale and 16 bytes */
AVX2 float mx_row_iq4_nl_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 32, b += 18)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b)),
                              nib_tab32(b + 2, x + k, dequant_iq4nl_values), acc);
    return hsum256(acc);
}

/* MXFP4: blocks of 32, an E8M0 scale byte and 16 bytes of E2M1 codes; the
 * codes as twice their values (integers), the scale halved (exact) */
AVX2 float mx_row_mxfp4_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 32, b += 17)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(0.5f * e8m0_scale(b[0])),
                              nib_tab32(b + 1, x + k, dequant_mxfp4_x2), acc);
    return hsum256(acc);
}

/* IQ4_XS: superblocks of 256; 6-bit group scales (4 low bits in scales_l,
 * 2 high in scales_h), value scale d (ls - 32) */
AVX2 float mx_row_iq4_xs_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 136) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        const float d = h2f_f16c(b);
        const unsigned sh = (unsigned)(b[2] | b[3] << 8);
        const uint8_t *sl = b + 4, *qs = b + 8;
        for (int ib = 0; ib < 8; ib += 2) {
            int ls0 = iq4xs_scale(sl, sh, ib), ls1 = iq4xs_scale(sl, sh, ib + 1);
            a0 =
                _mm256_fmadd_ps(_mm256_set1_ps(d * (float)(ls0 - 32)),
                                nib_tab32(qs + 16 * ib, x + k + 32 * ib, dequant_iq4nl_values), a0);
            a1 = _mm256_fmadd_ps(
                _mm256_set1_ps(d * (float)(ls1 - 32)),
                nib_tab32(qs + 16 * ib + 16, x + k + 32 * ib + 32, dequant_iq4nl_values), a1);
        }
    }
    return hsum256(_mm256_add_ps(a0, a1));
}

/* 8 F16 (F16C's conversion) or BF16 (the high half of an f32) at p */
AVX2 static inline __attribute__((always_inline)) __m256 half8(const uint8_t *p, int bf16)
{
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    if (!bf16) return _mm256_cvtph_ps(v);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

/* F16 and BF16 rows: 16 elements converted in registers and multiplied at
 * once; the tail through dequant's own conversion */
AVX2 float mx_row_half_avx2(const struct wmat *W, int64_t r, const float *x, int bf16)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t k = 0;
    for (; k + 16 <= W->in; k += 16) {
        s0 = _mm256_fmadd_ps(half8(b + 2 * k, bf16), _mm256_loadu_ps(x + k), s0);
        s1 = _mm256_fmadd_ps(half8(b + 2 * k + 16, bf16), _mm256_loadu_ps(x + k + 8), s1);
    }
    return half_tail(W, b, x, k, hsum256(_mm256_add_ps(s0, s1)));
}

/* the same with d sc_g into ds[8], returning the mins' share */
AVX2 static inline __attribute__((always_inline)) __m256 k4_scales(const uint8_t *b,
                                                                   const float *xg, float ds[8])
{
    __m256 mins;
    _mm256_storeu_ps(ds, k4_scales_v(b, xg, &mins));
    return mins;
}

/* byte k of each 32-bit lane of v, as 8 floats */
AVX2 static inline __attribute__((always_inline)) __m256 lane_byte(__m256i v, int k)
{
    const __m256i m = _mm256_set1_epi32(0xFF);
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * k), m));
}

/* sum over a 32-element group of q x: q in the bytes of v (byte l is
 * element l), x as the prepared lanes (mv_x86_prep) */
AVX2 static inline __attribute__((always_inline)) __m256 lanes_dot(__m256i v, const float *xl)
{
    __m256 s0 = _mm256_mul_ps(lane_byte(v, 0), _mm256_loadu_ps(xl));
    __m256 s1 = _mm256_mul_ps(lane_byte(v, 1), _mm256_loadu_ps(xl + 8));
    s0 = _mm256_fmadd_ps(lane_byte(v, 2), _mm256_loadu_ps(xl + 16), s0);
    s1 = _mm256_fmadd_ps(lane_byte(v, 3), _mm256_loadu_ps(xl + 24), s1);
    return _mm256_add_ps(s0, s1);
}

/* Q4_K: y = d sc q - dmin m per 32; dot = sum_g d sc_g (x.q)_g - dmin m_g sum(x)_g,
 * with the group sums and lanes of x prepared once per product (xg) */
AVX2 float mx_row_q4_k_avx2(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg, *sums = xg + W->in;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, accm = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 144) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        float ds[8];
        accm = _mm256_add_ps(accm, k4_scales(b, sums + k / 32, ds));
        /* pairs of groups share 32 bytes: low nibbles are group 2p, high
         * 2p + 1; each group summed unscaled and scaled once */
        for (int p = 0; p < 4; p++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * p));
            __m256i lo = _mm256_and_si256(v, m4),
                    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            const float *xl = lanes + k + 64 * p;
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + 2 * p), lanes_dot(lo, xl), a0);
            a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + 2 * p + 1), lanes_dot(hi, xl + 32), a1);
        }
    }
    return hsum256(_mm256_add_ps(a0, a1)) - hsum256(accm);
}

/* Q5_K: Q4_K's layout (176 bytes: d, dmin, scales, then 32 bytes qh before
 * the 128 of nibbles) with a fifth bit per element: bit 2p of qh[l] for
 * element l of group 2p, bit 2p + 1 for group 2p + 1 */
AVX2 float mx_row_q5_k_avx2(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg, *sums = xg + W->in;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, accm = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 176) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        float ds[8];
        accm = _mm256_add_ps(accm, k4_scales(b, sums + k / 32, ds));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int p = 0; p < 4; p++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(b + 48 + 32 * p));
            /* within 16-bit lanes: a shift by 2p < 8 brings nothing of the
             * high byte into bit 0 of the low one */
            __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one),
                    h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_slli_epi16(h0, 4)),
                    hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                         _mm256_slli_epi16(h1, 4));
            const float *xl = lanes + k + 64 * p;
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + 2 * p), lanes_dot(lo, xl), a0);
            a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + 2 * p + 1), lanes_dot(hi, xl + 32), a1);
        }
    }
    return hsum256(_mm256_add_ps(a0, a1)) - hsum256(accm);
}

/* The AVX2 layout, lanes[32 g + 8 k + i] = x[32 g + 4 i + k], and the
 * group sums, for n % 32 == 0: per group a 4 x 4 transpose of element
 * pairs (x[4 i + k], x[4 (i + 1) + k]) */
AVX2 void mx_prep_avx2(const float *x, int64_t n, float *lanes, float *sums)
{
    const __m256i pairs = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n; b += 32) {
        __m256d p[4];
        __m256 total = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            const __m256 a = _mm256_loadu_ps(x + b + 8 * j);
            total = _mm256_add_ps(total, a);
            p[j] = _mm256_castps_pd(_mm256_permutevar8x32_ps(a, pairs));
        }
        const __m256d t0 = _mm256_unpacklo_pd(p[0], p[1]), t1 = _mm256_unpackhi_pd(p[0], p[1]),
                      t2 = _mm256_unpacklo_pd(p[2], p[3]), t3 = _mm256_unpackhi_pd(p[2], p[3]);
        _mm256_storeu_ps(lanes + b, _mm256_castpd_ps(_mm256_permute2f128_pd(t0, t2, 0x20)));
        _mm256_storeu_ps(lanes + b + 8, _mm256_castpd_ps(_mm256_permute2f128_pd(t1, t3, 0x20)));
        _mm256_storeu_ps(lanes + b + 16, _mm256_castpd_ps(_mm256_permute2f128_pd(t0, t2, 0x31)));
        _mm256_storeu_ps(lanes + b + 24, _mm256_castpd_ps(_mm256_permute2f128_pd(t1, t3, 0x31)));
        sums[b / 32] = hsum256(total);
    }
}

#endif

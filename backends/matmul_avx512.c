/* matmul_avx512 — the AVX-512 decode kernels (F, BW, VL, DQ): F16, BF16,
 * Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS, and x's AVX-512 preparation. */
#include "backends/matmul_impl.h"
#include "backends/matmul_x86_impl.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* the sum of v's lanes as GCC's _mm512_reduce_add_ps sums them (lanes i
 * and i + 8, then i and i + 4, then 0 and 2 with 1 and 3, then those two),
 * written out so that reduce16 below can promise the same bits under any
 * compiler */
AVX512 static inline __attribute__((always_inline)) float hsum512(__m512 v)
{
    const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
    const __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    const __m128 p = _mm_add_ps(q, _mm_permute_ps(q, 0x4E));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
}

/* 16 floats of b at k: f32, or fp16 widened (half a constant where it is
 * inlined: the same values, so the same sums) */
AVX512 static inline __attribute__((always_inline)) __m512 b16(const float *b, const uint16_t *bh,
                                                               int64_t k, int half)
{
    return half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(bh + k)))
                : _mm512_loadu_ps(b + k);
}

AVX512 static inline __attribute__((always_inline)) float
dot512_any(const float *a, const float *b, const uint16_t *bh, int64_t n, int half)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= n; k += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), b16(b, bh, k, half), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), b16(b, bh, k + 16, half), s1);
    }
    float s = hsum512(_mm512_add_ps(s0, s1));
    for (; k < n; k++)
        s += a[k] * (half ? quant_f16_to_f32(bh[k]) : b[k]);
    return s;
}

AVX512 static inline __attribute__((always_inline)) float dot512(const float *a, const float *b,
                                                                 int64_t n)
{
    return dot512_any(a, b, NULL, n, 0);
}

AVX512 float mx_dot_avx512(const float *a, const float *b, int64_t n)
{
    return dot512(a, b, n);
}

/* dot512_any's lane sums s0 + s1 (before its horizontal sum) for n % 32 == 0 */
AVX512 static inline __attribute__((always_inline)) __m512
lanes512(const float *a, const float *b, const uint16_t *bh, int64_t n, int half)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; k += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), b16(b, bh, k, half), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), b16(b, bh, k + 16, half), s1);
    }
    return _mm512_add_ps(s0, s1);
}

/* v[0..15] each summed as hsum512 sums one register (each add pairs the
 * same values, so the same bits), v[t]'s sum in lane t */
AVX512 static inline __attribute__((always_inline)) __m512 reduce16(const __m512 v[16])
{
    __m512 p[8], q[4], r[4];
    for (int k = 0; k < 8; k++) /* [v2k's 8 sums | v2k+1's] */
        p[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xEE),
                             _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44));
    for (int m = 0; m < 4; m++) /* four keys' 4 sums, one key a 128-bit lane */
        q[m] = _mm512_add_ps(_mm512_shuffle_f32x4(p[2 * m], p[2 * m + 1], 0xDD),
                             _mm512_shuffle_f32x4(p[2 * m], p[2 * m + 1], 0x88));
    for (int m = 0; m < 4; m++) { /* (x0 + x2) + (x1 + x3) in each lane's first element */
        const __m512 h = _mm512_add_ps(q[m], _mm512_permute_ps(q[m], 0x4E));
        r[m] = _mm512_add_ps(h, _mm512_permute_ps(h, 0xB1));
    }
    const __m512i i01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512 r01 = _mm512_permutex2var_ps(r[0], i01, r[1]),
                 r23 = _mm512_permutex2var_ps(r[2], i01, r[3]);
    return _mm512_shuffle_f32x4(r01, r23, 0x44);
}

/* the keys b + t stride, f32 (b) or fp16 (bh, half 1) */
AVX512 static inline __attribute__((always_inline)) void dots512(float *out, const float *a,
                                                                 const float *b, const uint16_t *bh,
                                                                 int64_t T, int64_t stride,
                                                                 int64_t n, float scale, int half)
{
    int64_t t = 0;
    if (n % 32 == 0)
        for (; t + 16 <= T; t += 16) { /* 16 keys' horizontal sums together */
            __m512 v[16];
            for (int k = 0; k < 16; k++) {
                if (t + 16 + k < T) { /* the next 16 keys' rows, one stride apart */
                    const char *next = half ? (const char *)(bh + (t + 16 + k) * stride)
                                            : (const char *)(b + (t + 16 + k) * stride);
                    for (int64_t off = 0; off < n * (half ? 2 : 4); off += 64)
                        _mm_prefetch(next + off, _MM_HINT_T0);
                }
                v[k] = lanes512(a, half ? NULL : b + (t + k) * stride,
                                half ? bh + (t + k) * stride : NULL, n, half);
            }
            _mm512_storeu_ps(out + t, _mm512_mul_ps(reduce16(v), _mm512_set1_ps(scale)));
        }
    for (; t < T; t++)
        out[t] =
            dot512_any(a, half ? NULL : b + t * stride, half ? bh + t * stride : NULL, n, half) *
            scale;
}

AVX512 void mx_dots_avx512(float *out, const float *a, const float *b, int64_t T, int64_t stride,
                           int64_t n, float scale)
{
    dots512(out, a, b, NULL, T, stride, n, scale, 0);
}

AVX512 void mx_dots_f16_avx512(float *out, const float *a, const uint16_t *b, int64_t T,
                               int64_t stride, int64_t n, float scale)
{
    dots512(out, a, NULL, b, T, stride, n, scale, 1);
}

/* 16 x 32-bit lanes of 32 bytes at p loaded twice, the upper copy shifted
 * right by 4: for the 4-bit formats, the low nibbles of bytes 4i..4i+3 in
 * lane i, their high nibbles in lane 8 + i */
AVX512 static inline __attribute__((always_inline)) __m512i nibble_pair(const uint8_t *p)
{
    const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    return _mm512_srlv_epi32(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)), sh);
}

/* sum over a pair of groups of q x, unscaled, q of 5 bits: q = t0:t1[low
 * 5 bits of byte k of lane i] (vpermt2ps reads only those; t0 holds 0..15,
 * t1 16..31), x as pair lanes */
AVX512 static inline __attribute__((always_inline)) __m512 pair_dot5(__m512i v, const float *xl,
                                                                     __m512 t0, __m512 t1)
{
    __m512 s0 = _mm512_mul_ps(_mm512_permutex2var_ps(t0, v, t1), _mm512_loadu_ps(xl));
    __m512 s1 = _mm512_mul_ps(_mm512_permutex2var_ps(t0, _mm512_srli_epi32(v, 8), t1),
                              _mm512_loadu_ps(xl + 16));
    s0 = _mm512_fmadd_ps(_mm512_permutex2var_ps(t0, _mm512_srli_epi32(v, 16), t1),
                         _mm512_loadu_ps(xl + 32), s0);
    s1 = _mm512_fmadd_ps(_mm512_permutex2var_ps(t0, _mm512_srli_epi32(v, 24), t1),
                         _mm512_loadu_ps(xl + 48), s1);
    return _mm512_add_ps(s0, s1);
}

/* 0, 1, ..., 15 */
AVX512 static inline __attribute__((always_inline)) __m512 iota16(void)
{
    return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

/* nibble masks of byte k of a lane: the low nibble in lanes 0..7, the high
 * one in lanes 8..15 */
AVX512 static inline __attribute__((always_inline)) __m512i nibble_mask(int k)
{
    const int lo = 0xF << 8 * k, hi = (int)(0xF0u << 8 * k);
    return _mm512_setr_epi32(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi);
}

/* sum over a pair of groups of q x, unscaled, for 32 bytes of nibbles at q
 * (low nibbles group 2p, high 2p + 1): each nibble is masked where it lies
 * and converted, q 2^(8k + 4h) for byte k, nibble h, which x's scaled pair
 * lanes (x 2^-(8k + 4h)) undo exactly. Masks run on the logic units, so
 * the shared shift, permute and multiply units do 2 operations per 16
 * elements, not 3 */
AVX512 static inline __attribute__((always_inline)) __m512 pair_dot_masked(const uint8_t *q,
                                                                           const float *xl)
{
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)q));
#define QG_NIB(k) _mm512_cvtepu32_ps(_mm512_and_si512(v, nibble_mask(k)))
    __m512 s = _mm512_mul_ps(QG_NIB(0), _mm512_loadu_ps(xl));
    s = _mm512_fmadd_ps(QG_NIB(1), _mm512_loadu_ps(xl + 16), s);
    s = _mm512_fmadd_ps(QG_NIB(2), _mm512_loadu_ps(xl + 32), s);
    return _mm512_fmadd_ps(QG_NIB(3), _mm512_loadu_ps(xl + 48), s);
#undef QG_NIB
}

/* Q4_K (see row_q4_k_avx2): a pair of groups per 32 bytes of nibbles */
AVX512 float mx_row_q4_k_avx512(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg, *sums = xg + W->in;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, accm = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 144) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512 ds = k4_scales16(b, sums + k / 32, &accm);
        for (int p = 0; p < 4; p += 2) {
            const float *xl = lanes + k + 64 * p;
            a0 = _mm512_fmadd_ps(two_scales(ds, 2 * p), pair_dot_masked(b + 16 + 32 * p, xl), a0);
            a1 = _mm512_fmadd_ps(two_scales(ds, 2 * p + 2),
                                 pair_dot_masked(b + 48 + 32 * p, xl + 64), a1);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) - _mm512_reduce_add_ps(accm);
}

/* Q5_K (see row_q5_k_avx2): the fifth bit joins each nibble as bit 4 of
 * its byte, bit 2p of qh for the low nibbles (lanes 0..7), 2p + 1 for the
 * high ones */
AVX512 float mx_row_q5_k_avx512(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg, *sums = xg + W->in;
    const __m512 t0 = iota16(), t1 = _mm512_add_ps(t0, _mm512_set1_ps(16));
    const __m512i m4 = _mm512_set1_epi8(0xF), b4 = _mm512_set1_epi8(0x10),
                  odd = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    __m256 accm = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += 176) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        __m256 mins;
        const __m512 ds = _mm512_castps256_ps512(k4_scales_v(b, sums + k / 32, &mins));
        accm = _mm256_add_ps(accm, mins);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 16)));
        for (int p = 0; p < 4; p++) {
            /* bit 2p (lanes 0..7) or 2p + 1 (8..15) of each byte of qh
             * to bit 0 of that byte (a right shift by < 8 takes it from
             * the same byte), then to bit 4 */
            __m512i h = _mm512_slli_epi32(
                _mm512_srlv_epi32(qh, _mm512_add_epi32(odd, _mm512_set1_epi32(2 * p))), 4);
            __m512i v = _mm512_or_si512(_mm512_and_si512(nibble_pair(b + 48 + 32 * p), m4),
                                        _mm512_and_si512(h, b4));
            __m512 s = pair_dot5(v, lanes + k + 64 * p, t0, t1);
            if (p % 2)
                a1 = _mm512_fmadd_ps(two_scales(ds, 2 * p), s, a1);
            else
                a0 = _mm512_fmadd_ps(two_scales(ds, 2 * p), s, a0);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) - hsum256(accm);
}

/* signed byte k of each 32-bit lane of v, as 16 floats */
AVX512 static inline __attribute__((always_inline)) __m512 lane_sbyte512(__m512i v, int k)
{
    return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * k), 24));
}

/* Q6_K (see row_q6_k_avx2): per half n of 128 elements, the 64 bytes of
 * ql as one vector hold quarters 0 and 1 (low nibbles) or 2 and 3 (high),
 * a pair of groups in the pair layout; their scales, 16 elements each,
 * are four per vector */
AVX512 float mx_row_q6_k_avx512(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg;
    const __m512i c32 = _mm512_set1_epi8(32),
                  quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 210) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512 d = _mm512_set1_ps(h2f_f16c(b + 208));
        const __m512 ds = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                               _mm_loadu_si128((const __m128i *)(b + 192)))));
        for (int n = 0; n < 2; n++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(b + 64 * n));
            const __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 128 + 32 * n)));
            for (int h = 0; h < 2; h++) {
                __m512i v = _mm512_sub_epi8(q6_values(ql, qh, h), c32);
                const float *xl = lanes + k + 128 * n + 64 * h;
                __m512 s0 = _mm512_mul_ps(lane_sbyte512(v, 0), _mm512_loadu_ps(xl));
                __m512 s1 = _mm512_mul_ps(lane_sbyte512(v, 1), _mm512_loadu_ps(xl + 16));
                s0 = _mm512_fmadd_ps(lane_sbyte512(v, 2), _mm512_loadu_ps(xl + 32), s0);
                s1 = _mm512_fmadd_ps(lane_sbyte512(v, 3), _mm512_loadu_ps(xl + 48), s1);
                /* scales 8n + 4h .. 8n + 4h + 3, each over 4 lanes */
                __m512 sc = _mm512_permutexvar_ps(
                    _mm512_add_epi32(quad, _mm512_set1_epi32(8 * n + 4 * h)), ds);
                if (h)
                    a1 = _mm512_fmadd_ps(sc, _mm512_add_ps(s0, s1), a1);
                else
                    a0 = _mm512_fmadd_ps(sc, _mm512_add_ps(s0, s1), a0);
            }
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* Q8_0: 32 int8 and an fp16 scale per block, 16 converted at a time */
AVX512 float mx_row_q8_0_avx512(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t k = 0;
    for (; k + 64 <= W->in; k += 64, b += 68) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m512 s0 = _mm512_mul_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2)))),
            _mm512_loadu_ps(x + k));
        __m512 s1 = _mm512_mul_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 36)))),
            _mm512_loadu_ps(x + k + 32));
        s0 = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 18)))),
            _mm512_loadu_ps(x + k + 16), s0);
        s1 = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 52)))),
            _mm512_loadu_ps(x + k + 48), s1);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(h2f_f16c(b)), s0, a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(h2f_f16c(b + 34)), s1, a1);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; k < W->in; k += 32, b += 34) { /* an odd last block */
        __m512 t = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 18)))),
            _mm512_loadu_ps(x + k + 16),
            _mm512_mul_ps(
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2)))),
                _mm512_loadu_ps(x + k)));
        s += h2f_f16c(b) * _mm512_reduce_add_ps(t);
    }
    return s;
}

/* sum over 32 elements of t[q] x, q the nibbles of the 16 bytes at q (low
 * nibbles elements 0..15, high 16..31): vpermps reads the low 4 bits of
 * each lane, so the high nibble needs only a shift */
AVX512 static inline __attribute__((always_inline)) __m512 nib32_dot(const uint8_t *q,
                                                                     const float *x, __m512 t)
{
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q));
    __m512 s = _mm512_mul_ps(_mm512_permutexvar_ps(v, t), _mm512_loadu_ps(x));
    return _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), t),
                           _mm512_loadu_ps(x + 16), s);
}

/* the IQ4 values as a table */
AVX512 static inline __attribute__((always_inline)) __m512 iq4_table(void)
{
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)dequant_iq4nl_values)));
}

/* Q4_0 and IQ4_NL (iq4), blocks of 32 (an fp16 scale and 16 bytes of
 * nibbles): d t[q], t the format's 16 values (Q4_0: q - 8, so no offset
 * term) */
AVX512 float mx_row_nib32_avx512(const struct wmat *W, int64_t r, const float *x, int iq4)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512 t = iq4 ? iq4_table() : _mm512_sub_ps(iota16(), _mm512_set1_ps(8));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 32, b += 18) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f_f16c(b)), nib32_dot(b + 2, x + k, t), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* MXFP4 (see mx_row_mxfp4_avx2): nib32_dot over the E2M1 values */
AVX512 float mx_row_mxfp4_avx512(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                       _mm_loadu_si128((const __m128i *)dequant_mxfp4_x2))),
                                   _mm512_set1_ps(0.5f));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 32, b += 17) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(e8m0_scale(b[0])), nib32_dot(b + 1, x + k, t), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* Q4_1, Q5_0 and Q5_1 (see mx_row_legacy_avx2): 16 lanes per half block,
 * the 5-bit formats' high bits added as 16 under the mask of qh's bits */
AVX512 float mx_row_legacy_avx512(const struct wmat *W, int64_t r, const float *x)
{
    const struct legacy_block g = legacy_block_of(W->type);
    const __m512i m4 = _mm512_set1_epi32(0xF), c16 = _mm512_set1_epi32(16);
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m512 acc = _mm512_setzero_ps(), accm = acc;
    for (int64_t k = 0; k < W->in; k += 32, b += g.bytes) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        uint32_t qh;
        float m, d = legacy_scales(&g, b, &m, &qh);
        __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + g.qs)));
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_srli_epi32(v, 4);
        lo = _mm512_mask_add_epi32(lo, (__mmask16)(qh & 0xFFFF), lo, c16);
        hi = _mm512_mask_add_epi32(hi, (__mmask16)(qh >> 16), hi, c16);
        __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
        __m512 qx =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), x1, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), x0));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), qx, acc);
        accm = _mm512_fmadd_ps(_mm512_set1_ps(m), _mm512_add_ps(x0, x1), accm);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc, accm));
}

/* Q2_K: 256 per block, 16 runs of 16; run r = 8 half + 2 j + h takes bits
 * 2j of the 16 bytes q[32 half + 16 h + l], with scale byte r (4-bit
 * scale, 4-bit min): y = d sc q - dmin m. Each 16 bytes is loaded once
 * for its four shifts; the 16 scales and mins converted once per block */
AVX512 float mx_row_q2_k_avx512(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i m3 = _mm512_set1_epi32(3), m4 = _mm512_set1_epi32(15);
    __m512 acc = _mm512_setzero_ps(), accm = acc;
    float dl[16], ml[16];
    for (int64_t k = 0; k < W->in; k += 256, b += 84) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b));
        _mm512_storeu_ps(dl, _mm512_mul_ps(_mm512_set1_ps(h2f_f16c(b + 80)),
                                           _mm512_cvtepi32_ps(_mm512_and_si512(sc, m4))));
        _mm512_storeu_ps(ml, _mm512_mul_ps(_mm512_set1_ps(h2f_f16c(b + 82)),
                                           _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4))));
        for (int half = 0; half < 2; half++)
            for (int h = 0; h < 2; h++) {
                __m512i v = _mm512_cvtepu8_epi32(
                    _mm_loadu_si128((const __m128i *)(b + 16 + 32 * half + 16 * h)));
                for (int j = 0; j < 4; j++) {
                    int run = 8 * half + 2 * j + h;
                    __m512 q = _mm512_cvtepi32_ps(
                        _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(2 * j)), m3));
                    __m512 xv = _mm512_loadu_ps(x + k + 16 * run);
                    acc = _mm512_fmadd_ps(_mm512_mul_ps(q, _mm512_set1_ps(dl[run])), xv, acc);
                    accm = _mm512_fmadd_ps(_mm512_set1_ps(ml[run]), xv, accm);
                }
            }
    }
    return _mm512_reduce_add_ps(_mm512_sub_ps(acc, accm));
}

/* Q3_K: 110 bytes per 256 (32 of high bits hm, 64 of 2-bit codes, 12 of
 * scales, d), Q2_K's 16 runs of 16; run r = 8 half + 2 j + h takes bits 2j
 * of q[32 half + 16 h + l] and bit 4 half + j of hm[16 h + l] (clear: -4),
 * times d and its 6-bit scale less 32. The scales come out of a masked
 * load (the 12 bytes, none past the block) as 16 lanes: low 4 bits of
 * byte j % 8 shifted by 4 (j / 8), high 2 of byte 8 + j % 4 shifted by
 * 2 (j / 4) */
AVX512 float mx_row_q3_k_avx512(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i lo_at = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7),
                  lo_sh = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4),
                  hi_at = _mm512_setr_epi32(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11),
                  hi_sh = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
    const __m512i m3 = _mm512_set1_epi32(3), one = _mm512_set1_epi32(1);
    __m512 acc = _mm512_setzero_ps();
    float dl[16];
    for (int64_t k = 0; k < W->in; k += 256, b += 110) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        __m512i sc = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(0x0FFF, b + 96));
        __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(lo_at, sc), lo_sh),
                                      _mm512_set1_epi32(0xF));
        __m512i hi =
            _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(hi_at, sc), hi_sh), m3);
        __m512i s6 =
            _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
        _mm512_storeu_ps(dl,
                         _mm512_mul_ps(_mm512_set1_ps(h2f_f16c(b + 108)), _mm512_cvtepi32_ps(s6)));
        for (int h = 0; h < 2; h++) {
            const __m512i hv = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + 16 * h)));
            for (int half = 0; half < 2; half++) {
                __m512i v = _mm512_cvtepu8_epi32(
                    _mm_loadu_si128((const __m128i *)(b + 32 + 32 * half + 16 * h)));
                for (int j = 0; j < 4; j++) {
                    int run = 8 * half + 2 * j + h;
                    __m512i q = _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(2 * j)), m3);
                    __m512i hb = _mm512_and_si512(
                        _mm512_srl_epi32(hv, _mm_cvtsi32_si128(4 * half + j)), one);
                    q = _mm512_sub_epi32(_mm512_or_si512(q, _mm512_slli_epi32(hb, 2)),
                                         _mm512_set1_epi32(4));
                    acc = _mm512_fmadd_ps(
                        _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(dl[run])),
                        _mm512_loadu_ps(x + k + 16 * run), acc);
                }
            }
        }
    }
    return _mm512_reduce_add_ps(acc);
}

/* IQ4_XS (see row_iq4_xs_avx2) */
AVX512 float mx_row_iq4_xs_avx512(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512 t = iq4_table();
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 136) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const float d = h2f_f16c(b);
        const unsigned sh = (unsigned)(b[2] | b[3] << 8);
        const uint8_t *sl = b + 4, *qs = b + 8;
        for (int ib = 0; ib < 8; ib += 2) {
            int ls0 = iq4xs_scale(sl, sh, ib), ls1 = iq4xs_scale(sl, sh, ib + 1);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(d * (float)(ls0 - 32)),
                                 nib32_dot(qs + 16 * ib, x + k + 32 * ib, t), a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(d * (float)(ls1 - 32)),
                                 nib32_dot(qs + 16 * ib + 16, x + k + 32 * ib + 32, t), a1);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* F16 and BF16 rows, 32 elements at a time; the tail through dequant's
 * own conversion */
AVX512 static inline __attribute__((always_inline)) __m512 half16(const uint8_t *p, int bf16)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    if (!bf16) return _mm512_cvtph_ps(v);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

AVX512 float mx_row_half_avx512(const struct wmat *W, int64_t r, const float *x, int bf16)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t k = 0;
    for (; k + 32 <= W->in; k += 32) {
        s0 = _mm512_fmadd_ps(half16(b + 2 * k, bf16), _mm512_loadu_ps(x + k), s0);
        s1 = _mm512_fmadd_ps(half16(b + 2 * k + 32, bf16), _mm512_loadu_ps(x + k + 16), s1);
    }
    return half_tail(W, b, x, k, _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
}

/* The AVX-512 pair layout (see nibble_pair) of x[0..n), n % 64 == 0, and
 * the group sums: per 64 elements, 8 permutes, 4 blends and 4 multiplies
 * by 2^-(8k + 4h) (the masked Q4_K kernel's) or 1 */
AVX512 void mx_prep_avx512(int masked, const float *x, int64_t n, float *lanes, float *sums)
{
    __m512i idx[4];
    __m512 scale[4];
    for (int k = 0; k < 4; k++) {
        int i4[16];
        float sc[16];
        for (int l = 0; l < 16; l++) {
            i4[l] = 4 * (l % 8) + k;
            sc[l] = masked ? (float)(1.0 / (double)(1u << (8 * k + 4 * (l / 8)))) : 1.0f;
        }
        idx[k] = _mm512_loadu_si512(i4);
        scale[k] = _mm512_loadu_ps(sc);
    }
    for (int64_t b = 0; b < n; b += 64) {
        const __m512 x0 = _mm512_loadu_ps(x + b), x1 = _mm512_loadu_ps(x + b + 16),
                     x2 = _mm512_loadu_ps(x + b + 32), x3 = _mm512_loadu_ps(x + b + 48);
        for (int k = 0; k < 4; k++) {
            __m512 v = _mm512_mask_blend_ps(0xFF00, _mm512_permutex2var_ps(x0, idx[k], x1),
                                            _mm512_permutex2var_ps(x2, idx[k], x3));
            _mm512_storeu_ps(lanes + b + 16 * k, _mm512_mul_ps(v, scale[k]));
        }
        sums[b / 32] = _mm512_reduce_add_ps(_mm512_add_ps(x0, x1));
        sums[b / 32 + 1] = _mm512_reduce_add_ps(_mm512_add_ps(x2, x3));
    }
}

#endif

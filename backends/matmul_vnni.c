/* matmul_vnni — the integer K-quant kernels of the avx512vnni set (VNNI,
 * VBMI, GFNI): Q2_K, Q3_K, Q4_K, Q5_K and Q6_K against x held as 24-bit
 * integers in three byte planes, and that preparation of x
 * (docs/engine.md, "The integer K-quant kernels"). */
#include "backends/matmul_impl.h"
#include "backends/matmul_x86_impl.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* writes a group's planes and 2^(e - 22), and when quads is not NULL 32
 * times the sum of n over each 4 elements (8 of them); 0, or -1 when it
 * cannot */
AVX512VNNI static int vnni_group(const float *x, uint8_t *planes, float *xs, int32_t *quads)
{
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    /* a NaN first: the max instructions drop it */
    if (_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q))
        return -1;
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    if (!(m <= 0x1p60f) || (m != 0.0f && m < 0x1p-60f)) return -1;
    int e = m == 0.0f ? 0 : ilogbf(m);
    *xs = m == 0.0f ? 0.0f : ldexpf(1.0f, e - 22);
    const __m512 up = _mm512_set1_ps((float)(22 - e));
    const __m512i lo = _mm512_set1_epi32(-(1 << 23)), hi = _mm512_set1_epi32((1 << 23) - 1);
    for (int h = 0; h < 2; h++) {
        /* round to nearest, then held to 24 bits (2^23 - 1/2 rounds up) */
        __m512i n = _mm512_cvt_roundps_epi32(_mm512_scalef_ps(h ? x1 : x0, up),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        n = _mm512_min_epi32(_mm512_max_epi32(n, lo), hi);
        _mm_storeu_si128((__m128i *)(planes + 16 * h),
                         _mm512_cvtepi32_epi8(_mm512_srai_epi32(n, 16)));
        _mm_storeu_si128((__m128i *)(planes + 64 + 16 * h),
                         _mm512_cvtepi32_epi8(_mm512_srli_epi32(n, 8)));
        _mm_storeu_si128((__m128i *)(planes + 128 + 16 * h), _mm512_cvtepi32_epi8(n));
        if (!quads) continue;
        /* a 128-bit lane holds 4 elements: its sum in each of its lanes */
        __m512i t = _mm512_add_epi32(n, _mm512_shuffle_epi32(n, _MM_PERM_CDAB));
        t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
        t = _mm512_permutexvar_epi32(
            _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), t);
        _mm_storeu_si128((__m128i *)(quads + 4 * h),
                         _mm512_castsi512_si128(_mm512_slli_epi32(t, 5)));
    }
    return 0;
}

/* The VNNI preparation of x[0..n) (n % 64 == 0) for Q4_K and Q5_K (the
 * planes, then the group sums at prep + n) or the vnni_quads types (the
 * planes, then 32 times the sum of n over each 4 elements: int32 at prep
 * + 3n/4 + n/32); or, with the flag 0, the float kernel's layout
 * (prep_avx512, masked for Q4_K) */
AVX512VNNI void mx_prep_vnni(uint32_t type, const float *x, int64_t n, float *prep)
{
    uint8_t *planes = (uint8_t *)prep;
    float *xs = prep + 3 * n / 4, *sums = prep + n;
    int32_t *quads = vnni_quads(type) ? (int32_t *)(void *)(xs + n / 32) : NULL;
    for (int64_t g = 0; g < n / 32; g++) {
        /* group g: pair g / 2, half g % 2 */
        uint8_t *pg = planes + g / 2 * VNNI_PAIR_BYTES + 32 * (g % 2);
        if (vnni_group(x + 32 * g, pg, xs + g, quads ? quads + 8 * g : NULL)) {
            mx_prep_avx512(type == GGML_Q4_K, x, n, prep, sums);
            prep[vnni_flag_at(n)] = 0.0f;
            return;
        }
    }
    for (int64_t g = 0; !quads && g < n / 32; g++)
        sums[g] = _mm512_reduce_add_ps(
            _mm512_add_ps(_mm512_loadu_ps(x + 32 * g), _mm512_loadu_ps(x + 32 * g + 16)));
    prep[vnni_flag_at(n)] = 1.0f;
}

/* the 64 nibbles of 32 bytes at q in element order (low nibbles, then high) */
AVX512VNNI static inline __attribute__((always_inline)) __m512i nibbles64(const uint8_t *q)
{
    /* bit matrices (GF(2) affine, one per 64-bit lane): the low nibble of
     * each byte in lanes 0..3, the high one moved down in lanes 4..7 */
    const long long lo = 0x0102040800000000LL, hi = 0x1020408000000000LL;
    return _mm512_gf2p8affine_epi64_epi8(
        _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)q)),
        _mm512_setr_epi64(lo, lo, lo, lo, hi, hi, hi, hi), 0);
}

/* byte indices for k4_scales_x4's maskz permutes (only every fourth byte
 * is read): byte 4l of [h] is lane l's scale of block 2h + l / 8 (its 16
 * bytes at 16 (2h + l / 8), scales 0..7, mins 8..15), [h + 2] its min */
#define K4_SPREAD(s)                                                                               \
    {                                                                                              \
        (s), 0, 0, 0, (s) + 1, 0, 0, 0, (s) + 2, 0, 0, 0, (s) + 3, 0, 0, 0, (s) + 4, 0, 0, 0,      \
            (s) + 5, 0, 0, 0, (s) + 6, 0, 0, 0, (s) + 7, 0, 0, 0, (s) + 16, 0, 0, 0, (s) + 17, 0,  \
            0, 0, (s) + 18, 0, 0, 0, (s) + 19, 0, 0, 0, (s) + 20, 0, 0, 0, (s) + 21, 0, 0, 0,      \
            (s) + 22, 0, 0, 0, (s) + 23, 0, 0, 0                                                   \
    }

static const uint8_t k4_spread[4][64] = {K4_SPREAD(0), K4_SPREAD(32), K4_SPREAD(8), K4_SPREAD(40)};

/* the scales of 4 Q4_K or Q5_K blocks at b (stride bytes apart) into ds (8 floats a
 * block: d sc_g 2^(e_g - 22), xs holding the 2^(e_g - 22)), adding their
 * mins' share (dmin m_g sum(x)_g) to *mins: k4_unpack's shuffles on each
 * 128-bit lane, one block per lane */
AVX512VNNI static inline __attribute__((always_inline)) void
k4_scales_x4(const uint8_t *b, size_t stride, const float *xs, const float *sums, float *ds,
             __m512 *mins)
{
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b + 4)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + stride + 4)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 2 * stride + 4)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 3 * stride + 4)), 3);
    const __m512i low = _mm512_shuffle_epi8(
        v,
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
    const __m512i top =
        _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(_mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1,
                                                                    -1, -1, -1, 4, 5, 6, 7)));
    const __m512i m =
        _mm512_broadcast_i32x4(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m512i u = _mm512_or_si512(
        _mm512_and_si512(_mm512_srlv_epi32(low, _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0, 0, 4))),
                         m),
        _mm512_and_si512(_mm512_srli_epi32(top, 2), _mm512_set1_epi8(0x30)));
    /* d and dmin of the 4 blocks: d0 dmin0 d1 dmin1 ... */
    uint32_t w[4];
    for (int i = 0; i < 4; i++)
        memcpy(&w[i], b + stride * i, 4);
    const __m512 dd = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w)));
    for (int h = 0; h < 2; h++) {
        /* blocks 2h, 2h + 1: their 8 scale (mins: + 8) bytes to 16 lanes */
        const uint8_t *is = k4_spread[h], *im = k4_spread[h + 2];
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi8(
                         0x1111111111111111ULL, _mm512_loadu_si512(is), u)),
                     mn = _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi8(
                         0x1111111111111111ULL, _mm512_loadu_si512(im), u));
        const __m512i id = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
        const __m512i di = _mm512_add_epi32(id, _mm512_set1_epi32(4 * h));
        const __m512 d = _mm512_permutexvar_ps(di, dd),
                     dm = _mm512_permutexvar_ps(_mm512_add_epi32(di, _mm512_set1_epi32(1)), dd);
        _mm512_storeu_ps(ds + 16 * h,
                         _mm512_mul_ps(_mm512_mul_ps(d, sc), _mm512_loadu_ps(xs + 16 * h)));
        *mins = _mm512_fmadd_ps(_mm512_mul_ps(dm, mn), _mm512_loadu_ps(sums + 16 * h), *mins);
    }
}

/* the scales of one block (k4_scales_x4's, for a row's last blocks) */
AVX512VNNI static inline __attribute__((always_inline)) void
k4_scales_x1(const uint8_t *b, const float *xs, const float *sums, float *ds, __m512 *mins)
{
    __m512 acc = _mm512_setzero_ps();
    const __m512 v = k4_scales16(b, sums, &acc);
    *mins = _mm512_add_ps(*mins, acc);
    _mm256_storeu_ps(ds, _mm256_mul_ps(_mm512_castps512_ps256(v), _mm256_loadu_ps(xs)));
}

/* Q4_K (five 0) or Q5_K (five 1) from the VNNI preparation: dot = sum_g
 * d sc_g 2^(e_g - 22) (q.n)_g - dmin m_g sum(x)_g. The scales of up to 64
 * blocks are decoded ahead of their values, 4 blocks at a time. Q5_K's
 * fifth bits join its nibbles as row_q5_k_avx512 does. */
AVX512VNNI static inline __attribute__((always_inline)) float
row_k45_vnni(const struct wmat *W, int64_t r, const float *prep, int five)
{
    const size_t stride = five ? 176 : 144, first = five ? 48 : 16; /* nibbles' offset */
    const uint8_t *b = W->data + (size_t)r * W->row_bytes, *planes = (const uint8_t *)prep;
    const float *xs = prep + 3 * W->in / 4, *sums = prep + W->in;
    const __m512i b4 = _mm512_set1_epi8(0x10),
                  odd = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, accm = a0;
    const int64_t nb = W->in / 256;
    float ds[64 * 8];
    for (int64_t s0 = 0; s0 < nb; s0 += 64) {
        const int64_t s1 = s0 + 64 < nb ? s0 + 64 : nb;
        int64_t i = s0;
        for (; i + 4 <= s1; i += 4)
            k4_scales_x4(b + stride * i, stride, xs + 8 * i, sums + 8 * i, ds + 8 * (i - s0),
                         &accm);
        for (; i < s1; i++)
            k4_scales_x1(b + stride * i, xs + 8 * i, sums + 8 * i, ds + 8 * (i - s0), &accm);
        for (i = s0; i < s1; i++) {
            const uint8_t *q = b + stride * i;
            _mm_prefetch((const char *)q + AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)q + AHEAD + 64, _MM_HINT_T0);
            if (five) _mm_prefetch((const char *)q + AHEAD + 128, _MM_HINT_T0);
            const __m512 d = _mm512_castps256_ps512(_mm256_loadu_ps(ds + 8 * (i - s0)));
            const uint8_t *p = planes + 4 * i * VNNI_PAIR_BYTES;
            const __m512i qh =
                five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(q + 16)))
                     : _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                __m512i v = nibbles64(q + first + 32 * j);
                if (five) { /* bit 2j (low nibbles) or 2j + 1 (high) of qh to bit 4 */
                    const __m512i h =
                        _mm512_srlv_epi32(qh, _mm512_add_epi32(odd, _mm512_set1_epi32(2 * j)));
                    v = _mm512_ternarylogic_epi32(v, _mm512_slli_epi32(h, 4), b4, 0xF8);
                }
                const __m512 t = _mm512_cvtepi32_ps(
                    planes_dot(v, p + VNNI_PAIR_BYTES * j, _mm512_setzero_si512()));
                if (j % 2)
                    a1 = _mm512_fmadd_ps(two_scales(d, 2 * j), t, a1);
                else
                    a0 = _mm512_fmadd_ps(two_scales(d, 2 * j), t, a0);
            }
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) - _mm512_reduce_add_ps(accm);
}

AVX512VNNI float mx_row_q4_k_vnni(const struct wmat *W, int64_t r, const float *prep)
{
    return row_k45_vnni(W, r, prep, 0);
}

AVX512VNNI float mx_row_q5_k_vnni(const struct wmat *W, int64_t r, const float *prep)
{
    return row_k45_vnni(W, r, prep, 1);
}

AVX512VNNI float mx_row_q2_k_vnni(const struct wmat *W, int64_t r, const float *prep)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes, *planes = (const uint8_t *)prep;
    const float *xs = prep + 3 * W->in / 4;
    const int32_t *quads = (const int32_t *)(const void *)(xs + W->in / 32);
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m256i m3 = _mm256_set1_epi8(3);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += 84) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m128i ms = _mm_loadu_si128((const __m128i *)b); /* scale, minimum per 16 */
        const __m512 ds = _mm512_mul_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(ms, _mm_set1_epi8(0xF)))),
            xs16(xs + k / 32, h2f_f16c(b + 80)));
        /* dmin m_j / 32: the quads hold 32 sum n */
        const __m512 dm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(
                                            _mm_srli_epi16(ms, 4), _mm_set1_epi8(0xF)))),
                                        xs16(xs + k / 32, h2f_f16c(b + 82) * 0x1p-5f));
        for (int j = 0; j < 2; j++) {
            const __m256i q2 = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j));
            for (int h = 0; h < 2; h++) {
                const __m512i v = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_and_si256(_mm256_srli_epi16(q2, 4 * h), m3)),
                    _mm256_and_si256(_mm256_srli_epi16(q2, 4 * h + 2), m3), 1);
                const int64_t e0 = k + 128 * j + 64 * h;
                const __m512i t =
                    planes_dot(v, planes + e0 / 64 * VNNI_PAIR_BYTES, _mm512_setzero_si512());
                const __m512i at = _mm512_add_epi32(quad, _mm512_set1_epi32(8 * j + 4 * h));
                acc = _mm512_fmadd_ps(_mm512_permutexvar_ps(at, ds), _mm512_cvtepi32_ps(t), acc);
                acc = _mm512_fnmadd_ps(
                    _mm512_permutexvar_ps(at, dm),
                    _mm512_cvtepi32_ps(_mm512_loadu_si512((const void *)(quads + e0 / 4))), acc);
            }
        }
    }
    return _mm512_reduce_add_ps(acc);
}

AVX512VNNI float mx_row_q3_k_vnni(const struct wmat *W, int64_t r, const float *prep)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes, *planes = (const uint8_t *)prep;
    const float *xs = prep + 3 * W->in / 4;
    const int32_t *quads = (const int32_t *)(const void *)(xs + W->in / 32);
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += 110) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512 ds = _mm512_mul_ps(_mm512_cvtepi32_ps(q3k_scales16(b + 96)),
                                        xs16(xs + k / 32, h2f_f16c(b + 108)));
        for (int j = 0; j < 2; j++) {
            for (int h = 0; h < 2; h++) {
                const int64_t e0 = k + 128 * j + 64 * h;
                const __m512i t = planes_dot(
                    q3k_values(b, j, h), planes + e0 / 64 * VNNI_PAIR_BYTES,
                    _mm512_srai_epi32(_mm512_loadu_si512((const void *)(quads + e0 / 4)), 3));
                const __m512 sc = _mm512_permutexvar_ps(
                    _mm512_add_epi32(quad, _mm512_set1_epi32(8 * j + 4 * h)), ds);
                acc = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(t), acc);
            }
        }
    }
    return _mm512_reduce_add_ps(acc);
}

/* Q6_K from the VNNI preparation: per 4 elements the exact integer sum of
 * (q - 32) n, as sum q n (q, the stored 6 bits, below 64: the nibbles'
 * role in planes_dot) less 32 sum n (the preparation's quads), below
 * 2^30; scaled by d sc_j 2^(e - 22), scale j over 16 elements, x's group
 * j / 2. The 6-bit values by q6_values, in element order, 64 a vector. */
AVX512VNNI float mx_row_q6_k_vnni(const struct wmat *W, int64_t r, const float *prep)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes, *planes = (const uint8_t *)prep;
    const float *xs = prep + 3 * W->in / 4;
    const int32_t *quads = (const int32_t *)(const void *)(xs + W->in / 32);
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                  halves = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 210) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 128, _MM_HINT_T0);
        const __m512 xs_q6 =
            _mm512_permutexvar_ps(halves, _mm512_castps256_ps512(_mm256_loadu_ps(xs + k / 32)));
        const __m512 ds =
            _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(h2f_f16c(b + 208)),
                                        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                            _mm_loadu_si128((const __m128i *)(b + 192))))),
                          xs_q6);
        for (int n = 0; n < 2; n++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(b + 64 * n));
            const __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 128 + 32 * n)));
            for (int h = 0; h < 2; h++) {
                const __m512i v = q6_values(ql, qh, h);
                const int64_t e0 = k + 128 * n + 64 * h; /* its first element */
                const __m512i t = planes_dot(v, planes + e0 / 64 * VNNI_PAIR_BYTES,
                                             _mm512_loadu_si512(quads + e0 / 4));
                const __m512 sc = _mm512_permutexvar_ps(
                    _mm512_add_epi32(quad, _mm512_set1_epi32(8 * n + 4 * h)), ds);
                if (h)
                    a1 = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(t), a1);
                else
                    a0 = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(t), a0);
            }
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

#endif



/* matmul_x86 — the AVX2 and AVX-512 decode kernels behind matmul.c.
 *
 * Each kernel computes dot(row r of W, x) for a stored block format,
 * decoding in registers. Summation orders differ from the portable C
 * kernel's (the tests compare the two within a tolerance); every kernel
 * decodes exactly the values dequant.c does. */
#include "backends/matmul_impl.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Bytes each kernel prefetches ahead of the block it decodes (into L1).
 * Decode streams each thread's rows at 20-25 GB/s per core, and 400-1440
 * bytes ahead (the distances before) left the kernels waiting on memory.
 * On the 1.1B model (bench_decode, alternating runs, 2 cores of a Zen 5):
 * Q4_K 57 tokens/s at 1440 bytes, 56-65 at 3072, 65-71 at 4096-6144;
 * Q8_0 39-40 at 420, 47 at 6144; F16 about 5 % faster at 6144. */
enum { AHEAD = 6144 };

/* ------------------------------------------------------------------ AVX2 */

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static float h2f_f16c(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8));
}

__attribute__((target("avx2,fma"))) static float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; k < n; k++)
        s += a[k] * b[k];
    return s;
}

/* 8 int8 -> 8 floats */
__attribute__((target("avx2,fma"))) static __m256 i8x8(const uint8_t *q)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

/* Q8_0: 32 int8 and an fp16 scale per block */
AVX2 static float row_q8_0_avx2(const struct wmat *W, int64_t r, const float *x)
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
AVX2 static float row_q4_0_avx2(const struct wmat *W, int64_t r, const float *x, const float *xg)
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
AVX2 static float row_q6_k_avx2(const struct wmat *W, int64_t r, const float *xg)
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

/* the 16 IQ4 (non-linear 4-bit) values ggml uses */
static const int8_t kvalues_iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};

/* sum over 32 IQ4 elements (16 bytes at q: low nibbles first, then high)
 * of value x x, unscaled */
AVX2 static __m256 iq4_32(const uint8_t *q, const float *x)
{
    const __m128i table = _mm_loadu_si128((const __m128i *)kvalues_iq4), m4 = _mm_set1_epi8(0xF);
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

/* IQ4_XS's 6-bit scale of group ib: 4 low bits in scales_l (sl), 2 high
 * in scales_h (sh) */
static inline int iq4xs_scale(const uint8_t *sl, unsigned sh, int ib)
{
    return ((sl[ib / 2] >> 4 * (ib % 2)) & 0xF) | (int)(((sh >> (2 * ib)) & 3) << 4);
}

/* IQ4_NL: blocks of 32, an fp16 scale and 16 bytes */
AVX2 static float row_iq4_nl_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 32, b += 18)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b)), iq4_32(b + 2, x + k), acc);
    return hsum256(acc);
}

/* IQ4_XS: superblocks of 256; 6-bit group scales (4 low bits in scales_l,
 * 2 high in scales_h), value scale d (ls - 32) */
AVX2 static float row_iq4_xs_avx2(const struct wmat *W, int64_t r, const float *x)
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
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)(ls0 - 32)),
                                 iq4_32(qs + 16 * ib, x + k + 32 * ib), a0);
            a1 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)(ls1 - 32)),
                                 iq4_32(qs + 16 * ib + 16, x + k + 32 * ib + 32), a1);
        }
    }
    return hsum256(_mm256_add_ps(a0, a1));
}

/* s plus the products with x of elements [k, W->in) of the F16 or BF16
 * row at b, through dequant's own conversion (the wide kernels' tails) */
static float half_tail(const struct wmat *W, const uint8_t *b, const float *x, int64_t k, float s)
{
    float w;
    for (; k < W->in; k++) {
        dequant_row(W->type, b + 2 * k, &w, 1);
        s += w * x[k];
    }
    return s;
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
AVX2 static float row_half_avx2(const struct wmat *W, int64_t r, const float *x, int bf16)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t k = 0;
    for (; k + 16 <= W->in; k += 16) {
        _mm_prefetch((const char *)(b + 2 * k) + AHEAD, _MM_HINT_T0);
        s0 = _mm256_fmadd_ps(half8(b + 2 * k, bf16), _mm256_loadu_ps(x + k), s0);
        s1 = _mm256_fmadd_ps(half8(b + 2 * k + 16, bf16), _mm256_loadu_ps(x + k + 8), s1);
    }
    return half_tail(W, b, x, k, hsum256(_mm256_add_ps(s0, s1)));
}

/* the scales of a Q4_K/Q5_K block b (d at b, dmin at b + 2, the 12 packed
 * 6-bit scales and mins at b + 4): returns d sc_g in lane g; *mins gets
 * the mins' share, dmin m_g times the group sums of x (xg), as 8 partial
 * sums. The 12 bytes are unpacked as four words into 8 scale bytes and 8
 * min bytes (scales 0..3: bytes 0..3 & 63; 4..7: bytes 8..11 & 15 with the
 * top 2 bits of bytes 0..3 above; mins likewise from bytes 4..7 and
 * 8..11 >> 4), two byte shuffles placing each word's sources; the load
 * reads 4 bytes past the scales, still inside the block, and drops them */
AVX2 static inline __attribute__((always_inline)) __m128i k4_unpack(const uint8_t *b)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(b + 4));
    const __m128i low =
        _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i top =
        _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i m = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(low, _mm_setr_epi32(0, 0, 0, 4)), m);
    return _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi32(top, 2), _mm_set1_epi8(0x30)));
}

AVX2 static inline __attribute__((always_inline)) __m256 k4_scales_v(const uint8_t *b,
                                                                     const float *xg, __m256 *mins)
{
    __m128i v = k4_unpack(b);
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)),
           mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
    __m256 dm = _mm256_mul_ps(_mm256_set1_ps(h2f_f16c(b + 2)), mn);
    *mins = _mm256_mul_ps(dm, _mm256_loadu_ps(xg));
    return _mm256_mul_ps(_mm256_set1_ps(h2f_f16c(b)), sc);
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
AVX2 static float row_q4_k_avx2(const struct wmat *W, int64_t r, const float *xg)
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
AVX2 static float row_q5_k_avx2(const struct wmat *W, int64_t r, const float *xg)
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

/* --------------------------------------------------------------- AVX-512 */

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

AVX512 static float dot_avx512(const float *a, const float *b, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= n; k += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(b + k + 16), s1);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; k < n; k++)
        s += a[k] * b[k];
    return s;
}

/* 16 x 32-bit lanes of 32 bytes at p loaded twice, the upper copy shifted
 * right by 4: for the 4-bit formats, the low nibbles of bytes 4i..4i+3 in
 * lane i, their high nibbles in lane 8 + i */
AVX512 static inline __attribute__((always_inline)) __m512i nibble_pair(const uint8_t *p)
{
    const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    return _mm512_srlv_epi32(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)), sh);
}

/* The pair layout of x (mv_x86_prep for AVX-512): per two 32-element groups
 * (2P, 2P + 1), 64 floats, lanes[64 P + 16 k + 8 h + i] = x[32 (2P + h) +
 * 4 i + k]: byte k of lane i of a nibble_pair vector meets its element. */

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

/* lanes 0..7 lane g of s, lanes 8..15 lane g + 1 */
AVX512 static inline __attribute__((always_inline)) __m512 two_scales(__m512 s, int g)
{
    const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    return _mm512_permutexvar_ps(_mm512_add_epi32(half, _mm512_set1_epi32(g)), s);
}

/* the scales of a Q4_K/Q5_K block b (see k4_scales_v) as one vector: d sc_g
 * in lane g, dmin m_g in lane 8 + g; adds the mins' share (dmin m_g times
 * the group sums xg) to *mins, lanes 8..15 */
AVX512 static inline __attribute__((always_inline)) __m512
k4_scales16(const uint8_t *b, const float *xg, __m512 *mins)
{
    const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    uint32_t d2;
    memcpy(&d2, b, 4);
    const __m512 dd = _mm512_permutexvar_ps(
        half, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128((int)d2))));
    __m512 v = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(k4_unpack(b))));
    *mins = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(0xFF00, xg - 8), *mins);
    return v;
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
AVX512 static float row_q4_k_avx512(const struct wmat *W, int64_t r, const float *xg)
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
AVX512 static float row_q5_k_avx512(const struct wmat *W, int64_t r, const float *xg)
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

/* Q6_K's 6-bit values q (below 64) of elements 128n + 64h .. + 63 of a
 * block, in element order: ql the 64 bytes of low nibbles of that n
 * (elements l and l + 32 in the low nibbles of bytes l and l + 32, l +
 * 64 and l + 96 in their high nibbles: h), qh its 32 bytes of high bits
 * broadcast to both halves (bits 2q of byte l for quarter q = 2h and 2h +
 * 1, moved to bits 4..5) */
AVX512 static inline __attribute__((always_inline)) __m512i q6_values(__m512i ql, __m512i qh, int h)
{
    const __m512i two = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m512i lo = _mm512_and_si512(h ? _mm512_srli_epi32(ql, 4) : ql, _mm512_set1_epi8(0xF));
    const __m512i sh = _mm512_srlv_epi32(qh, _mm512_add_epi32(two, _mm512_set1_epi32(4 * h)));
    /* lo | (sh << 4 & 0x30) */
    return _mm512_ternarylogic_epi32(lo, _mm512_slli_epi32(sh, 4), _mm512_set1_epi8(0x30), 0xF8);
}

/* Q6_K (see row_q6_k_avx2): per half n of 128 elements, the 64 bytes of
 * ql as one vector hold quarters 0 and 1 (low nibbles) or 2 and 3 (high),
 * a pair of groups in the pair layout; their scales, 16 elements each,
 * are four per vector */
AVX512 static float row_q6_k_avx512(const struct wmat *W, int64_t r, const float *xg)
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
AVX512 static float row_q8_0_avx512(const struct wmat *W, int64_t r, const float *x)
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
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)kvalues_iq4)));
}

/* Q4_0 and IQ4_NL (iq4), blocks of 32 (an fp16 scale and 16 bytes of
 * nibbles): d t[q], t the format's 16 values (Q4_0: q - 8, so no offset
 * term) */
AVX512 static float row_nib32_avx512(const struct wmat *W, int64_t r, const float *x, int iq4)
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

/* IQ4_XS (see row_iq4_xs_avx2) */
AVX512 static float row_iq4_xs_avx512(const struct wmat *W, int64_t r, const float *x)
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

AVX512 static float row_half_avx512(const struct wmat *W, int64_t r, const float *x, int bf16)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t k = 0;
    for (; k + 32 <= W->in; k += 32) {
        _mm_prefetch((const char *)(b + 2 * k) + AHEAD, _MM_HINT_T0);
        s0 = _mm512_fmadd_ps(half16(b + 2 * k, bf16), _mm512_loadu_ps(x + k), s0);
        s1 = _mm512_fmadd_ps(half16(b + 2 * k + 32, bf16), _mm512_loadu_ps(x + k + 16), s1);
    }
    return half_tail(W, b, x, k, _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
}

/* ------------------------------------------------------------- dispatch */

enum mv_isa mv_isa_detect(void)
{
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && quant_has_f16c();
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi") &&
                       __builtin_cpu_supports("gfni")
                   ? MV_AVX512_VNNI
                   : MV_AVX512;
    return avx2 ? MV_AVX2 : MV_PORTABLE;
}

mv_dot_fn mv_x86_dot(enum mv_isa isa)
{
    return isa >= MV_AVX512 ? dot_avx512 : isa == MV_AVX2 ? dot_avx2 : NULL;
}

size_t mv_x86_prep_floats(enum mv_isa isa, uint32_t type, int64_t in)
{
    int k = type == GGML_Q4_K || type == GGML_Q5_K || type == GGML_Q6_K;
    if (isa >= MV_AVX512 ? !k || in % 64 : isa != MV_AVX2 || (!k && type != GGML_Q4_0) || in % 32)
        return 0;
    /* and on avx512vnni the flag after the rest (vnni_flag_at) */
    return (size_t)(in / 32 + in) + (isa == MV_AVX512_VNNI);
}

/* The AVX-512 pair layout (see nibble_pair) of x[0..n), n % 64 == 0, and
 * the group sums: per 64 elements, 8 permutes, 4 blends and 4 multiplies
 * by 2^-(8k + 4h) (the masked Q4_K kernel's) or 1 */
AVX512 static void prep_avx512(int masked, const float *x, int64_t n, float *lanes, float *sums)
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

/* The AVX2 layout, lanes[32 g + 8 k + i] = x[32 g + 4 i + k], and the
 * group sums, for n % 32 == 0: per group a 4 x 4 transpose of element
 * pairs (x[4 i + k], x[4 (i + 1) + k]) */
AVX2 static void prep_avx2(const float *x, int64_t n, float *lanes, float *sums)
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

/* ---------------------------- AVX-512 VNNI: Q4_K, Q5_K and Q6_K in integers
 *
 * x's preparation (prep_vnni) holds each 32-element
 * group as integers n = round(x 2^(22 - e)) below 2^23 in magnitude (e
 * the exponent of the group's largest |x|, which keeps 23 significant
 * bits), split into three byte planes (n = top 2^16 + mid 2^8 + low; top
 * signed, mid and low unsigned). A pair of groups' 64 weights (values
 * below 64) meets each plane in one vpdpbusd, which sums 4 products per
 * 32-bit lane exactly: the lane sum of q n (below 2^31) is exact, is
 * converted to float once and scaled by d sc 2^(e - 22). So the roundings
 * are x's (at most 2^-23 of its group's largest), the lane sum's
 * conversion, and the float accumulation; the float kernels round each
 * product instead. After the layout's other parts, one flag: 1 for this
 * layout, 0 where some group was not held so (a NaN or infinity, or a
 * largest |x| outside 2^-60..2^60 but not 0: a conservative range, well
 * inside float's) and the float kernel's layout was written instead. */

#define AVX512VNNI                                                                                 \
    __attribute__((                                                                                \
        target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,gfni,avx2,fma,f16c")))

/* the planes of a group: per pair of groups 192 bytes, top, mid, low, 64
 * each in element order; then per group 2^(e_g - 22) */
enum { VNNI_PAIR_BYTES = 192 };

/* the flag's index in a preparation over in inputs */
static int64_t vnni_flag_at(int64_t in)
{
    return in + in / 32;
}

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

/* The VNNI preparation of x[0..n) (n % 256 == 0) for Q4_K and Q5_K (the
 * planes, then the group sums at prep + n) or Q6_K (the planes, then 32
 * times the sum of n over each 4 elements: int32 at prep + 3n/4 + n/32);
 * or, with the flag 0, the float kernel's layout (prep_avx512, masked for
 * Q4_K) */
AVX512VNNI static void prep_vnni(uint32_t type, const float *x, int64_t n, float *prep)
{
    uint8_t *planes = (uint8_t *)prep;
    float *xs = prep + 3 * n / 4, *sums = prep + n;
    int32_t *quads = type == GGML_Q6_K ? (int32_t *)(void *)(xs + n / 32) : NULL;
    for (int64_t g = 0; g < n / 32; g++) {
        /* group g: pair g / 2, half g % 2 */
        uint8_t *pg = planes + g / 2 * VNNI_PAIR_BYTES + 32 * (g % 2);
        if (vnni_group(x + 32 * g, pg, xs + g, quads ? quads + 8 * g : NULL)) {
            prep_avx512(type == GGML_Q4_K, x, n, prep, sums);
            prep[vnni_flag_at(n)] = 0.0f;
            return;
        }
    }
    for (int64_t g = 0; !quads && g < n / 32; g++)
        sums[g] = _mm512_reduce_add_ps(
            _mm512_add_ps(_mm512_loadu_ps(x + 32 * g), _mm512_loadu_ps(x + 32 * g + 16)));
    prep[vnni_flag_at(n)] = 1.0f;
}

/* sum of q n over a pair of groups, less `less`, per 32-bit lane (4
 * elements): q the pair's 64 values (below 64) in element order, p its
 * planes. `less` is taken off before the low plane, where the partial sum
 * is smallest (Q6_K's 32 sum n; zero for the others) */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
planes_dot(__m512i v, const uint8_t *p, __m512i less)
{
    /* the top plane is signed: the values as the unsigned operand; the mid
     * and low planes are unsigned: the values (below 64) as the signed one */
    __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v, _mm512_loadu_si512(p));
    t = _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 8), _mm512_loadu_si512(p + 64), v);
    t = _mm512_sub_epi32(_mm512_slli_epi32(t, 8), less);
    return _mm512_dpbusd_epi32(t, _mm512_loadu_si512(p + 128), v);
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
#undef K4_SPREAD

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

AVX512VNNI static float row_q4_k_vnni(const struct wmat *W, int64_t r, const float *prep)
{
    return row_k45_vnni(W, r, prep, 0);
}

AVX512VNNI static float row_q5_k_vnni(const struct wmat *W, int64_t r, const float *prep)
{
    return row_k45_vnni(W, r, prep, 1);
}

/* Q6_K from the VNNI preparation: per 4 elements the exact integer sum of
 * (q - 32) n, as sum q n (q, the stored 6 bits, below 64: the nibbles'
 * role in planes_dot) less 32 sum n (the preparation's quads), below
 * 2^30; scaled by d sc_j 2^(e - 22), scale j over 16 elements, x's group
 * j / 2. The 6-bit values by q6_values, in element order, 64 a vector. */
AVX512VNNI static float row_q6_k_vnni(const struct wmat *W, int64_t r, const float *prep)
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
        const __m512 xs16 =
            _mm512_permutexvar_ps(halves, _mm512_castps256_ps512(_mm256_loadu_ps(xs + k / 32)));
        const __m512 ds =
            _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(h2f_f16c(b + 208)),
                                        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                            _mm_loadu_si128((const __m128i *)(b + 192))))),
                          xs16);
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

void mv_x86_prep(enum mv_isa isa, uint32_t type, const float *x, int64_t n, float *prep)
{
    float *lanes = prep, *sums = prep + n;
    if (isa == MV_AVX512_VNNI) { /* only the K-quants have a preparation there */
        prep_vnni(type, x, n, prep);
        return;
    }
    if (isa >= MV_AVX512) {
        prep_avx512(type == GGML_Q4_K, x, n, lanes, sums);
        return;
    }
    prep_avx2(x, n, lanes, sums);
}

#define ROWS(expr)                                                                                 \
    do {                                                                                           \
        for (int64_t r = r0; r < r1; r++)                                                          \
            y[r - r0] = (expr);                                                                    \
        return 1;                                                                                  \
    } while (0)

static int rows_avx512(enum mv_isa isa, float *y, const float *x, const float *prep,
                       const struct wmat *W, int64_t r0, int64_t r1)
{
    /* the K-quants' preparation in the integer layout (prep_vnni) */
    const int ints = prep && isa == MV_AVX512_VNNI && prep[vnni_flag_at(W->in)] != 0.0f;
    switch (W->type) {
    case GGML_Q8_0:
        ROWS(row_q8_0_avx512(W, r, x));
    case GGML_Q4_0:
        ROWS(row_nib32_avx512(W, r, x, 0));
    case GGML_IQ4_NL:
        ROWS(row_nib32_avx512(W, r, x, 1));
    case GGML_IQ4_XS:
        ROWS(row_iq4_xs_avx512(W, r, x));
    case GGML_F16:
    case GGML_BF16:
        ROWS(row_half_avx512(W, r, x, W->type == GGML_BF16));
    case GGML_Q4_K:
        if (ints) ROWS(row_q4_k_vnni(W, r, prep));
        if (prep) ROWS(row_q4_k_avx512(W, r, prep));
        return 0;
    case GGML_Q5_K:
        if (ints) ROWS(row_q5_k_vnni(W, r, prep));
        if (prep) ROWS(row_q5_k_avx512(W, r, prep));
        return 0;
    case GGML_Q6_K:
        if (ints) ROWS(row_q6_k_vnni(W, r, prep));
        if (prep) ROWS(row_q6_k_avx512(W, r, prep));
        return 0;
    default:
        return 0;
    }
}

static int rows_avx2(float *y, const float *x, const float *prep, const struct wmat *W, int64_t r0,
                     int64_t r1)
{
    switch (W->type) {
    case GGML_Q8_0:
        ROWS(row_q8_0_avx2(W, r, x));
    case GGML_IQ4_NL:
        ROWS(row_iq4_nl_avx2(W, r, x));
    case GGML_IQ4_XS:
        ROWS(row_iq4_xs_avx2(W, r, x));
    case GGML_F16:
    case GGML_BF16:
        ROWS(row_half_avx2(W, r, x, W->type == GGML_BF16));
    case GGML_Q4_0:
        if (prep) ROWS(row_q4_0_avx2(W, r, x, prep));
        return 0;
    case GGML_Q4_K:
        if (prep) ROWS(row_q4_k_avx2(W, r, prep));
        return 0;
    case GGML_Q5_K:
        if (prep) ROWS(row_q5_k_avx2(W, r, prep));
        return 0;
    case GGML_Q6_K:
        if (prep) ROWS(row_q6_k_avx2(W, r, prep));
        return 0;
    default:
        return 0;
    }
}

int mv_x86_rows(enum mv_isa isa, float *y, const float *x, const float *prep, const struct wmat *W,
                int64_t r0, int64_t r1)
{
    if (isa >= MV_AVX512 && rows_avx512(isa, y, x, prep, W, r0, r1)) return 1;
    /* the AVX2 kernels without an AVX-512 one read no preparation */
    return isa != MV_PORTABLE && rows_avx2(y, x, isa == MV_AVX2 ? prep : NULL, W, r0, r1);
}

#else /* not x86: the portable kernel only */

enum mv_isa mv_isa_detect(void)
{
    return MV_PORTABLE;
}

mv_dot_fn mv_x86_dot(enum mv_isa isa)
{
    (void)isa;
    return NULL;
}

size_t mv_x86_prep_floats(enum mv_isa isa, uint32_t type, int64_t in)
{
    (void)isa, (void)type, (void)in;
    return 0;
}

void mv_x86_prep(enum mv_isa isa, uint32_t type, const float *x, int64_t n, float *prep)
{
    (void)isa, (void)x, (void)n, (void)prep;
}

int mv_x86_rows(enum mv_isa isa, float *y, const float *x, const float *prep, const struct wmat *W,
                int64_t r0, int64_t r1)
{
    (void)isa, (void)y, (void)x, (void)prep, (void)W, (void)r0, (void)r1;
    return 0;
}
#endif

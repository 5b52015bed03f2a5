/* matmul_ternary — fused decode kernels of ggml's ternary formats TQ1_0
 * and TQ2_0 (values -1, 0, 1 times an fp16 scale per 256), AVX2 and
 * AVX-512. Each decodes dequant.c's values exactly (small integers) and
 * applies the block scale to the block's sum.
 *
 * TQ2_0 (66 bytes): 64 bytes of 2-bit codes, then d; element 128 h + 32 l
 * + m is bits 2l of byte 32 h + m, less 1.
 * TQ1_0 (54 bytes): 48 bytes of five trits each (32, then 16), 4 bytes of
 * four, then d. Trit n of byte v is ((v 3^n mod 256) 3) >> 8, less 1:
 * elements 32 n + m from bytes m < 32, 160 + 16 n + m from bytes 32 + m,
 * 240 + 4 n + j from byte 48 + j. */
#include "backends/matmul_x86_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* ------------------------------------------------------------ AVX-512 */

/* trit n (multiplier p = 3^n) of each lane's byte v, less 1, as floats */
AVX512 static inline __attribute__((always_inline)) __m512 trit16(__m512i v, __m512i p)
{
    __m512i q = _mm512_and_si512(_mm512_mullo_epi32(v, p), _mm512_set1_epi32(0xFF));
    q = _mm512_srli_epi32(_mm512_mullo_epi32(q, _mm512_set1_epi32(3)), 8);
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(1)));
}

AVX512 static inline __attribute__((always_inline)) __m512i u8x16_512(const uint8_t *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

AVX512 float mx_row_tq1_0_avx512(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    /* the 4 bytes of qh as lanes j + 4 n, with their multipliers 3^n */
    const __m512i qh_at = _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3),
                  qh_p = _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += 54) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        const __m512i v0 = u8x16_512(b), v1 = u8x16_512(b + 16), v2 = u8x16_512(b + 32);
        const float *xb = x + k;
        __m512 s = _mm512_setzero_ps();
        int p = 1;
        for (int n = 0; n < 5; n++, p *= 3) {
            const __m512i pv = _mm512_set1_epi32(p);
            s = _mm512_fmadd_ps(trit16(v0, pv), _mm512_loadu_ps(xb + 32 * n), s);
            s = _mm512_fmadd_ps(trit16(v1, pv), _mm512_loadu_ps(xb + 32 * n + 16), s);
            s = _mm512_fmadd_ps(trit16(v2, pv), _mm512_loadu_ps(xb + 160 + 16 * n), s);
        }
        uint32_t qh;
        memcpy(&qh, b + 48, 4);
        const __m512i h =
            _mm512_permutexvar_epi32(qh_at, _mm512_cvtepu8_epi32(_mm_cvtsi32_si128((int)qh)));
        s = _mm512_fmadd_ps(trit16(h, qh_p), _mm512_loadu_ps(xb + 240), s);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f_f16c(b + 52)), s, acc);
    }
    return _mm512_reduce_add_ps(acc);
}

AVX512 float mx_row_tq2_0_avx512(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i m3 = _mm512_set1_epi32(3), one = _mm512_set1_epi32(1);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += 66) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m512 s = _mm512_setzero_ps();
        for (int h = 0; h < 2; h++) {
            const __m512i v0 = u8x16_512(b + 32 * h), v1 = u8x16_512(b + 32 * h + 16);
            for (int l = 0; l < 4; l++) {
                const __m128i sh = _mm_cvtsi32_si128(2 * l);
                const float *xl = x + k + 128 * h + 32 * l;
                __m512i q0 = _mm512_sub_epi32(_mm512_and_si512(_mm512_srl_epi32(v0, sh), m3), one),
                        q1 = _mm512_sub_epi32(_mm512_and_si512(_mm512_srl_epi32(v1, sh), m3), one);
                s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q0), _mm512_loadu_ps(xl), s);
                s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q1), _mm512_loadu_ps(xl + 16), s);
            }
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f_f16c(b + 64)), s, acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* --------------------------------------------------------------- AVX2 */

AVX2 static inline __attribute__((always_inline)) __m256 trit8(__m256i v, __m256i p)
{
    __m256i q = _mm256_and_si256(_mm256_mullo_epi32(v, p), _mm256_set1_epi32(0xFF));
    q = _mm256_srli_epi32(_mm256_mullo_epi32(q, _mm256_set1_epi32(3)), 8);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(1)));
}

AVX2 static inline __attribute__((always_inline)) __m256i u8x8_256(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

AVX2 float mx_row_tq1_0_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i qh_at = _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3),
                  qh_p0 = _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3),
                  qh_p1 = _mm256_setr_epi32(9, 9, 9, 9, 27, 27, 27, 27);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += 54) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        const float *xb = x + k;
        __m256 s = _mm256_setzero_ps();
        for (int c = 0; c < 6; c++) { /* the 48 bytes, 8 at a time */
            const __m256i v = u8x8_256(b + 8 * c);
            const float *xc = c < 4 ? xb + 8 * c : xb + 160 + 8 * (c - 4);
            const int stride = c < 4 ? 32 : 16;
            int p = 1;
            for (int n = 0; n < 5; n++, p *= 3)
                s = _mm256_fmadd_ps(trit8(v, _mm256_set1_epi32(p)),
                                    _mm256_loadu_ps(xc + stride * n), s);
        }
        uint32_t qh;
        memcpy(&qh, b + 48, 4);
        const __m256i h =
            _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi32_si128((int)qh)), qh_at);
        s = _mm256_fmadd_ps(trit8(h, qh_p0), _mm256_loadu_ps(xb + 240), s);
        s = _mm256_fmadd_ps(trit8(h, qh_p1), _mm256_loadu_ps(xb + 248), s);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b + 52)), s, acc);
    }
    return hsum256(acc);
}

AVX2 float mx_row_tq2_0_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m3 = _mm256_set1_epi32(3), one = _mm256_set1_epi32(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += 66) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m256 s = _mm256_setzero_ps();
        for (int c = 0; c < 8; c++) { /* the 64 bytes, 8 at a time */
            const __m256i v = u8x8_256(b + 8 * c);
            const float *xc = x + k + 128 * (c / 4) + 8 * (c % 4);
            for (int l = 0; l < 4; l++) {
                __m256i q = _mm256_and_si256(_mm256_srl_epi32(v, _mm_cvtsi32_si128(2 * l)), m3);
                s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, one)),
                                    _mm256_loadu_ps(xc + 32 * l), s);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b + 64)), s, acc);
    }
    return hsum256(acc);
}

#endif

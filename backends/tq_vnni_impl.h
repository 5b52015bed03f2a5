/* tq_vnni_impl — the ternary formats' (TQ1_0, TQ2_0) codes for the
 * avx512vnni set (folder-private), as ggml's TQ kernels unpack them:
 * each 64 values' codes u = value + 1 (0, 1 or 2) in element order, for
 * a=llamacpp's kernels (matmul_q8_iq.c, against 8-bit codes) and plain
 * mode's (matmul_vnni_iq.c, against x's 24-bit planes). */
#ifndef QG_TQ_VNNI_IMPL_H
#define QG_TQ_VNNI_IMPL_H

#include "backends/matmul_x86_impl.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)

/* TQ2_0 block b's codes of values 64 i .. 64 i + 63: 32-byte chunk i / 2,
 * 2-bit fields 2 (i % 2) and 2 (i % 2) + 1 */
AVX512VNNI static inline __attribute__((always_inline)) __m512i tq2_values(const uint8_t *b, int i)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 32 * (i / 2)));
    const int h = i % 2;
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_and_si256(_mm256_srli_epi16(v, 4 * h), m3)),
        _mm256_and_si256(_mm256_srli_epi16(v, 4 * h + 2), m3), 1);
}

/* x times 3 in bytes (x + x + x) and x times 9 ((x << 3) + x), wrapping
 * as ggml's TQ1_0 kernel computes them */
AVX512VNNI static inline __attribute__((always_inline)) __m256i tq_times3(__m256i x)
{
    return _mm256_add_epi8(x, _mm256_add_epi8(x, x));
}

AVX512VNNI static inline __attribute__((always_inline)) __m256i tq_times9(__m256i x)
{
    return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(x, 3), _mm256_set1_epi8(-8)), x);
}

/* the top trit of each byte (the digit (x 3) >> 8) by ggml's halving
 * adds: lo's 32 bytes, then hi's, 64 at once */
AVX512VNNI static inline __attribute__((always_inline)) __m512i tq_trits(__m256i lo, __m256i hi)
{
    __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    x = _mm512_subs_epu8(x, _mm512_set1_epi8(1));
    x = _mm512_avg_epu8(x, _mm512_avg_epu8(x, _mm512_setzero_si512()));
    return _mm512_and_si512(_mm512_srli_epi16(x, 6), _mm512_set1_epi8(3));
}

/* TQ1_0 block b's codes, u[i] those of values 64 i .. 64 i + 63: the
 * trits of 48 bytes of five (32: values 32n + m, then 16: 160 + 16n + m)
 * and 4 of four (240 + 4n + m), unpacked as ggml unpacks them */
AVX512VNNI static inline __attribute__((always_inline)) void tq1_values(const uint8_t *b,
                                                                        __m512i u[4])
{
    const __m256i p3 = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    const __m256i q0 = _mm256_loadu_si256((const __m256i *)b);
    const __m256i q0x3 = tq_times3(q0), q0x9 = tq_times9(q0), q0x27 = tq_times9(q0x3),
                  q0x81 = tq_times9(q0x9);
    const __m128i q1 = _mm_loadu_si128((const __m128i *)(b + 32));
    const __m256i q1a = _mm256_set_m128i(q1, q1);
    const __m256i q1x = _mm256_blend_epi32(q1a, tq_times3(q1a), 0xF0); /* q1, q1 3 */
    const __m256i q1y = tq_times9(q1x);                                /* q1 9, q1 27 */
    uint32_t qh;
    memcpy(&qh, b + 48, 4);
    const __m256i h16 =
        _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_set1_epi32((int)qh)), p3),
                         _mm256_set1_epi16(0xFF));
    const __m128i h8 =
        _mm_packus_epi16(_mm256_castsi256_si128(h16), _mm256_extracti128_si256(h16, 1));
    const __m256i q1z =
        _mm256_set_m128i(h8, _mm256_castsi256_si128(tq_times9(q1y))); /* q1 81, qh */
    u[0] = tq_trits(q0, q0x3);
    u[1] = tq_trits(q0x9, q0x27);
    u[2] = tq_trits(q0x81, q1x);
    u[3] = tq_trits(q1y, q1z);
}

#endif

#endif

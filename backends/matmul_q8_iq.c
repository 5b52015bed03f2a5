/* matmul_q8_iq — a=llamacpp's integer decode kernels (AVX-512 VNNI) of
 * the ternary formats (TQ1_0, TQ2_0) and the grid formats (IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), as matmul_q8.c's: llama.cpp's
 * integer lanes and its order of float operations, format by format as
 * ggml's AVX2 kernels with VNNI have them, to the bit. */
#include "backends/iq_blocks_impl.h"
#include "backends/matmul_x86_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* TQ2_0 x Q8_K, llama.cpp's way: per block eight lanes sum (u - 1) q over
 * lanes of four bytes of each 32-value run (u the 2-bit code; the 1 taken
 * out as s_2k + s_2k+1 in lane k, s_j the sum of run j's 16 codes), times
 * d_x d_w, added (not fused) into eight running sums */
AVX512VNNI float mx_q8_tq2_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 66) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m512i isum = _mm512_setzero_si512();
        for (int c = 0; c < 2; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 32 * c));
            for (int h = 0; h < 2; h++) {
                const __m512i w = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_and_si256(_mm256_srli_epi16(v, 4 * h), m3)),
                    _mm256_and_si256(_mm256_srli_epi16(v, 4 * h + 2), m3), 1);
                isum = _mm512_dpbusd_epi32(
                    isum, w, _mm512_loadu_si512((const void *)(a->q + k + 128 * c + 64 * h)));
            }
        }
        const __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(fold16(isum), run_sums(a, k)));
        acc = _mm256_add_ps(_mm256_mul_ps(f, _mm256_set1_ps(a->d[blk] * h2f_f16c(b + 64))), acc);
    }
    return hsum8(acc);
}

/* x times 3 in bytes (x + x + x) and x times 9 ((x << 3) + x), wrapping
 * as ggml's TQ1_0 kernel computes them */
AVX512VNNI static inline __attribute__((always_inline)) __m256i times3(__m256i x)
{
    return _mm256_add_epi8(x, _mm256_add_epi8(x, x));
}

AVX512VNNI static inline __attribute__((always_inline)) __m256i times9(__m256i x)
{
    return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(x, 3), _mm256_set1_epi8(-8)), x);
}

/* the top trit of each byte (the digit (x 3) >> 8) by ggml's halving adds */
AVX512VNNI static inline __attribute__((always_inline)) __m256i trits(__m256i x)
{
    x = _mm256_subs_epu8(x, _mm256_set1_epi8(1));
    x = _mm256_avg_epu8(x, _mm256_avg_epu8(x, _mm256_setzero_si256()));
    return _mm256_and_si256(_mm256_srli_epi16(x, 6), _mm256_set1_epi8(3));
}

AVX512VNNI static inline __attribute__((always_inline)) __m512i join(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* TQ1_0 x Q8_K: TQ2_0's lanes with the trits of 48 bytes of five (32:
 * values 32n + m, then 16: 160 + 16n + m) and 4 of four (240 + 4n + m),
 * unpacked as ggml unpacks them */
AVX512VNNI float mx_q8_tq1_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i p3 = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 54) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)b);
        const __m256i q0x3 = times3(q0), q0x9 = times9(q0), q0x27 = times9(q0x3),
                      q0x81 = times9(q0x9);
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(b + 32));
        const __m256i q1a = _mm256_set_m128i(q1, q1);
        const __m256i q1x = _mm256_blend_epi32(q1a, times3(q1a), 0xF0); /* q1, q1 3 */
        const __m256i q1y = times9(q1x);                                /* q1 9, q1 27 */
        uint32_t qh;
        memcpy(&qh, b + 48, 4);
        const __m256i h16 =
            _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_set1_epi32((int)qh)), p3),
                             _mm256_set1_epi16(0xFF));
        const __m128i h8 =
            _mm_packus_epi16(_mm256_castsi256_si128(h16), _mm256_extracti128_si256(h16, 1));
        const __m256i q1z =
            _mm256_set_m128i(h8, _mm256_castsi256_si128(times9(q1y))); /* q1 81, qh */
        const __m512i u[4] = {join(trits(q0), trits(q0x3)), join(trits(q0x9), trits(q0x27)),
                              join(trits(q0x81), trits(q1x)), join(trits(q1y), trits(q1z))};
        __m512i isum = _mm512_setzero_si512();
        for (int i = 0; i < 4; i++)
            isum = _mm512_dpbusd_epi32(isum, u[i],
                                       _mm512_loadu_si512((const void *)(a->q + k + 64 * i)));
        const __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(fold16(isum), run_sums(a, k)));
        acc = _mm256_add_ps(_mm256_mul_ps(f, _mm256_set1_ps(a->d[blk] * h2f_f16c(b + 52))), acc);
    }
    return hsum8(acc);
}

/* the grid formats with signs (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
 * x Q8_K, llama.cpp's way: per block eight lanes sum_j ls_j (|g| . (+-q))
 * over lanes of four bytes of each 32-value run (ls_j the integer scale
 * of each 16 values: the sub-block reader's scale for d = 1 times m),
 * times d_w d_x into eight running sums; the sum times 1 / m (ggml's
 * 0.125, 0.25 or 1) */
AVX512VNNI static inline __attribute__((always_inline)) float
grid_row(const struct wmat *W, int64_t r, const struct matmul_q8 *a, const uint32_t type,
         const float m)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const size_t bsize = (size_t)iq_block_bytes(type);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += bsize) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        __m512i isum = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            struct iq_sub s0, s1;
            iq_sub(type, b, 1.0f, ib, &s0);
            iq_sub(type, b, 1.0f, ib + 1, &s1);
            const __m512i g = _mm512_set_epi64(
                (long long)s1.g[3], (long long)s1.g[2], (long long)s1.g[1], (long long)s1.g[0],
                (long long)s0.g[3], (long long)s0.g[2], (long long)s0.g[1], (long long)s0.g[0]);
            const uint64_t neg =
                (uint64_t)(s0.s[0] | s0.s[1] << 8 | s0.s[2] << 16 | (uint32_t)s0.s[3] << 24) |
                (uint64_t)(s1.s[0] | s1.s[1] << 8 | s1.s[2] << 16 | (uint32_t)s1.s[3] << 24) << 32;
            __m512i q = _mm512_loadu_si512((const void *)(a->q + k + 32 * ib));
            q = _mm512_mask_sub_epi8(q, (__mmask64)neg, _mm512_setzero_si512(), q);
            const __m128i ls4 = _mm_cvttps_epi32(
                _mm_mul_ps(_mm_setr_ps(s0.db[0], s0.db[1], s1.db[0], s1.db[1]), _mm_set1_ps(m)));
            const __m512i ls = quad_scales(_mm512_castsi128_si512(ls4), 0);
            isum = _mm512_add_epi32(
                isum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g, q), ls));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(iq_block_d(type, b) * a->d[blk]),
                              _mm256_cvtepi32_ps(fold16(isum)), acc);
    }
    return (1.0f / m) * hsum8(acc);
}

/* IQ1_S, IQ1_M x Q8_K, llama.cpp's way: the grid values (-1, 0, 1) per
 * lane as (g + 1) q - q, times the integer scales, d_w d_x into eight
 * running sums; the deltas' signs against the codes: IQ1_S as one integer
 * per block (the code sums, ggml's bsums, times sign and scale) times d
 * into a scalar, IQ1_M per lane into eight more running sums; the deltas'
 * sum times 1/8 added last */
AVX512VNNI static inline __attribute__((always_inline)) float
iq1_row(const struct wmat *W, int64_t r, const struct matmul_q8 *a, const uint32_t type)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const size_t bsize = (size_t)iq_block_bytes(type);
    const __m512i one = _mm512_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps(), acc2 = acc;
    float acc1 = 0;
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += bsize) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m512i isum = _mm512_setzero_si512(), isum2 = isum;
        int32_t si1 = 0;
        for (int ib = 0; ib < 8; ib += 2) {
            /* the two sub-blocks' 8 grid indices, 4 scales, delta signs */
            unsigned idx[8], ls[4], dneg[8];
            for (int h = 0; h < 2; h++) {
                const int j = ib + h;
                if (type == GGML_IQ1_S) {
                    const unsigned qh = iqb_rd16(b + 34 + 2 * j);
                    for (int l = 0; l < 4; l++) {
                        idx[4 * h + l] = b[2 + 4 * j + l] | ((qh >> (3 * l)) & 7) << 8;
                        dneg[4 * h + l] = qh >> 15;
                    }
                    ls[2 * h] = ls[2 * h + 1] = 2 * ((qh >> 12) & 7) + 1;
                } else {
                    const uint8_t *qs = b + 4 * j, *qh = b + 32 + 2 * j;
                    idx[4 * h] = qs[0] | ((qh[0] << 8) & 0x700);
                    idx[4 * h + 1] = qs[1] | ((qh[0] << 4) & 0x700);
                    idx[4 * h + 2] = qs[2] | ((qh[1] << 8) & 0x700);
                    idx[4 * h + 3] = qs[3] | ((qh[1] << 4) & 0x700);
                    for (int l = 0; l < 4; l++)
                        dneg[4 * h + l] = (qh[l / 2] >> (l % 2 ? 7 : 3)) & 1;
                    const unsigned sc = iqb_rd16(b + 48 + 2 * (j / 2)), sh = 6 * (j % 2);
                    ls[2 * h] = 2 * ((sc >> sh) & 7) + 1;
                    ls[2 * h + 1] = 2 * ((sc >> (sh + 3)) & 7) + 1;
                }
            }
            const __m512i g =
                _mm512_set_epi64((long long)iq1s_grid[idx[7]], (long long)iq1s_grid[idx[6]],
                                 (long long)iq1s_grid[idx[5]], (long long)iq1s_grid[idx[4]],
                                 (long long)iq1s_grid[idx[3]], (long long)iq1s_grid[idx[2]],
                                 (long long)iq1s_grid[idx[1]], (long long)iq1s_grid[idx[0]]);
            const __m512i q = _mm512_loadu_si512((const void *)(a->q + k + 32 * ib));
            const __m512i s = _mm512_sub_epi32(
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_add_epi8(g, one), q),
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), one, q));
            const __m512i lsv = quad_scales(_mm512_castsi128_si512(_mm_setr_epi32(
                                                (int)ls[0], (int)ls[1], (int)ls[2], (int)ls[3])),
                                            0);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, lsv));
            if (type == GGML_IQ1_S) {
                si1 += (a->sum16[k / 16 + 2 * ib] + a->sum16[k / 16 + 2 * ib + 1]) *
                           (dneg[0] ? -1 : 1) * (int)ls[0] +
                       (a->sum16[k / 16 + 2 * ib + 2] + a->sum16[k / 16 + 2 * ib + 3]) *
                           (dneg[4] ? -1 : 1) * (int)ls[2];
            } else { /* IQ1_M: a delta sign per run of 8 */
                uint64_t neg = 0;
                for (int l = 0; l < 8; l++)
                    neg |= (uint64_t)(0xFFu * dneg[l]) << 8 * l;
                const __m512i dq =
                    _mm512_mask_sub_epi8(q, (__mmask64)neg, _mm512_setzero_si512(), q);
                isum2 = _mm512_add_epi32(
                    isum2,
                    _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), one, dq), lsv));
            }
        }
        const float d = a->d[blk] * iq_block_d(type, b);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(isum)), acc);
        if (type == GGML_IQ1_S)
            acc1 += d * (float)si1;
        else
            acc2 = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(isum2)), acc2);
    }
    return hsum8(acc) + IQ1_DELTA * (type == GGML_IQ1_S ? acc1 : hsum8(acc2));
}

AVX512VNNI float mx_q8_iq1_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return iq1_row(W, r, a, GGML_IQ1_S);
}

AVX512VNNI float mx_q8_iq1_m_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return iq1_row(W, r, a, GGML_IQ1_M);
}

AVX512VNNI float mx_q8_iq2_xxs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(W, r, a, GGML_IQ2_XXS, 8.0f);
}

/* IQ2_XS: grid_row's order, its sub-blocks read straight from the 16-bit
 * codes (9 bits of grid index, 7 of signs) and the scale nibbles */
AVX512VNNI float mx_q8_iq2_xs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 74) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        __m512i isum = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            uint64_t c;
            memcpy(&c, b + 2 + 8 * ib, 8); /* sub-block ib's four codes */
            uint64_t c1;
            memcpy(&c1, b + 10 + 8 * ib, 8);
            uint64_t neg = 0;
            long long g[8];
            for (int l = 0; l < 4; l++) {
                const unsigned q0 = (unsigned)(c >> 16 * l) & 0xFFFF,
                               q1 = (unsigned)(c1 >> 16 * l) & 0xFFFF;
                g[l] = (long long)iq2xs_grid[q0 & 511];
                g[4 + l] = (long long)iq2xs_grid[q1 & 511];
                neg |= (uint64_t)ksigns_iq2xs[q0 >> 9] << 8 * l | (uint64_t)ksigns_iq2xs[q1 >> 9]
                                                                      << (32 + 8 * l);
            }
            const __m512i gv = _mm512_set_epi64(g[7], g[6], g[5], g[4], g[3], g[2], g[1], g[0]);
            __m512i q = _mm512_loadu_si512((const void *)(a->q + k + 32 * ib));
            q = _mm512_mask_sub_epi8(q, (__mmask64)neg, _mm512_setzero_si512(), q);
            const uint8_t s0 = b[66 + ib], s1 = b[67 + ib];
            const __m128i ls4 = _mm_setr_epi32(2 * (s0 & 0xF) + 1, 2 * (s0 >> 4) + 1,
                                               2 * (s1 & 0xF) + 1, 2 * (s1 >> 4) + 1);
            isum = _mm512_add_epi32(
                isum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), gv, q),
                                         quad_scales(_mm512_castsi128_si512(ls4), 0)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b) * a->d[blk]),
                              _mm256_cvtepi32_ps(fold16(isum)), acc);
    }
    return 0.125f * hsum8(acc);
}

AVX512VNNI float mx_q8_iq2_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(W, r, a, GGML_IQ2_S, 8.0f);
}

AVX512VNNI float mx_q8_iq3_xxs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(W, r, a, GGML_IQ3_XXS, 4.0f);
}

AVX512VNNI float mx_q8_iq3_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(W, r, a, GGML_IQ3_S, 1.0f);
}

#endif

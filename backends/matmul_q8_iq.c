/* matmul_q8_iq — a=llamacpp's integer decode kernels (AVX-512 VNNI) of
 * the ternary formats (TQ1_0, TQ2_0) and the grid formats (IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), as matmul_q8.c's: llama.cpp's
 * integer lanes and its order of float operations, format by format as
 * ggml's AVX2 kernels with VNNI have them, to the bit. */
#include "backends/iq_vnni_impl.h"
#include "backends/tq_vnni_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* TQ2_0 x Q8_K, llama.cpp's way: per block eight lanes sum (u - 1) q over
 * lanes of four bytes of each 32-value run (u the 2-bit code; the 1 taken
 * out as s_2k + s_2k+1 in lane k, s_j the sum of run j's 16 codes), times
 * d_x d_w, added (not fused) into eight running sums */
AVX512VNNI float mx_q8_tq2_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 66) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m512i isum = _mm512_setzero_si512();
        for (int i = 0; i < 4; i++)
            isum = _mm512_dpbusd_epi32(isum, tq2_values(b, i),
                                       _mm512_loadu_si512((const void *)(a->q + k + 64 * i)));
        const __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(fold16(isum), run_sums(a, k)));
        acc = _mm256_add_ps(_mm256_mul_ps(f, _mm256_set1_ps(a->d[blk] * h2f_f16c(b + 64))), acc);
    }
    return hsum8(acc);
}

/* TQ1_0 x Q8_K: TQ2_0's lanes with tq1_values' codes */
AVX512VNNI float mx_q8_tq1_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 54) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m512i u[4];
        tq1_values(b, u);
        __m512i isum = _mm512_setzero_si512();
        for (int i = 0; i < 4; i++)
            isum = _mm512_dpbusd_epi32(isum, u[i],
                                       _mm512_loadu_si512((const void *)(a->q + k + 64 * i)));
        const __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(fold16(isum), run_sums(a, k)));
        acc = _mm256_add_ps(_mm256_mul_ps(f, _mm256_set1_ps(a->d[blk] * h2f_f16c(b + 52))), acc);
    }
    return hsum8(acc);
}

/* The grid formats with signs (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
 * x Q8_K, llama.cpp's way: per block eight lanes sum_j ls_j (|g| . (+-q))
 * over lanes of four bytes of each 32-value run (ls_j the odd integer
 * scale of each 16 or 32 values), times d_w d_x into eight running sums,
 * the sum times ggml's 1/m (0.125, 0.25 or 1) at the end. A pair of
 * sub-blocks is decoded by iq_vnni_impl.h; its products (each within 16
 * bits: at most 4 x 62 x 127) times their scales by one dpwssd. */

/* isum + ls (g . q with q negated where neg), lanes of 4 bytes */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
pair_dot(__m512i isum, __m512i g, const int8_t *q8, __mmask64 neg, __m512i ls)
{
    const __m512i q = _mm512_loadu_si512((const void *)q8);
    return _mm512_dpwssd_epi32(
        isum,
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), g,
                            _mm512_mask_sub_epi8(q, neg, _mm512_setzero_si512(), q)),
        ls);
}

AVX512VNNI static inline __attribute__((always_inline)) __m256 block_acc(__m256 acc, float d,
                                                                         __m512i isum)
{
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(isum)), acc);
}

AVX512VNNI static inline __attribute__((always_inline)) float
grid_row(uint32_t type, const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const size_t bytes = (size_t)iq_block_bytes(type);
    struct iq_tabs t;
    iq_tabs_load(type, &t);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += bytes) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        struct iq_blk o;
        iq_blk_read(type, b, &t, &o);
        __m512i isum = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            __mmask64 neg;
            __m512i ls;
            const __m512i g = iq_pair(type, b, &t, &o, p, &neg, &ls);
            isum = pair_dot(isum, g, a->q + k + 64 * p, neg, ls);
        }
        acc = block_acc(acc, h2f_f16c(b) * a->d[blk], isum);
    }
    return iq_m_inv(type) * hsum8(acc);
}

AVX512VNNI float mx_q8_iq2_xxs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(GGML_IQ2_XXS, W, r, a);
}

AVX512VNNI float mx_q8_iq2_xs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(GGML_IQ2_XS, W, r, a);
}

AVX512VNNI float mx_q8_iq2_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(GGML_IQ2_S, W, r, a);
}

AVX512VNNI float mx_q8_iq3_xxs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(GGML_IQ3_XXS, W, r, a);
}

AVX512VNNI float mx_q8_iq3_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return grid_row(GGML_IQ3_S, W, r, a);
}

/* the eight grid entries (iq1s_grid) of a run of 64 values: index j is
 * qs[j] with 3 more bits of qh (from bit st j, j < 4, else 16 + st (j -
 * 4); IQ1_S st 3, IQ1_M 4), by scalar loads: a vpgatherqq is slower here
 * (bench_kernels, a=llamacpp: IQ1_M 9.0 G weights/s gathered, 12.7 so;
 * the indices computed in a vector and read back from the stack: 9.4) */
AVX512VNNI static inline __attribute__((always_inline)) __m512i iq1_grid8(const uint8_t *qs,
                                                                          uint32_t qh, int st)
{
    uint64_t e[8];
    for (int j = 0; j < 8; j++)
        e[j] = iq1s_grid[qs[j] | ((qh >> (j < 4 ? st * j : 16 + st * (j - 4))) & 7) << 8];
    const __m128i a = _mm_insert_epi64(_mm_cvtsi64_si128((long long)e[0]), (long long)e[1], 1),
                  b = _mm_insert_epi64(_mm_cvtsi64_si128((long long)e[2]), (long long)e[3], 1),
                  c = _mm_insert_epi64(_mm_cvtsi64_si128((long long)e[4]), (long long)e[5], 1),
                  d = _mm_insert_epi64(_mm_cvtsi64_si128((long long)e[6]), (long long)e[7], 1);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(b, a)),
                              _mm256_set_m128i(d, c), 1);
}

/* IQ1_S, IQ1_M x Q8_K, llama.cpp's way: the grid values (-1, 0, 1) per
 * lane as (g + 1) q - q, times the integer scales, d_w d_x into eight
 * running sums; the deltas' signs against the codes: IQ1_S as one integer
 * per block (the code sums, ggml's bsums, times sign and scale) times d
 * into a scalar, IQ1_M per lane into eight more running sums; the deltas'
 * sum times 1/8 added last. The 11-bit grid indices looked up one by one (iq1_grid8). */
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
        for (int p = 0; p < 4; p++) {
            const int ib = 2 * p;
            const uint8_t *qs = type == GGML_IQ1_S ? b + 2 + 8 * p : b + 8 * p;
            const uint32_t qh =
                type == GGML_IQ1_S ? iqb_rd32(b + 34 + 4 * p) : iqb_rd32(b + 32 + 4 * p);
            const __m512i g = iq1_grid8(qs, qh, type == GGML_IQ1_S ? 3 : 4);
            const __m512i q = _mm512_loadu_si512((const void *)(a->q + k + 32 * ib));
            const __m512i s4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), one, q);
            const __m512i s = _mm512_sub_epi32(
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_add_epi8(g, one), q), s4);
            __m512i lsv;
            if (type == GGML_IQ1_S) {
                lsv = _mm512_and_si512(
                    _mm512_srlv_epi32(_mm512_set1_epi32((int)qh),
                                      _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(12),
                                                              _mm512_set1_epi32(28))),
                    _mm512_set1_epi32(7));
            } else {
                const __m512i sc = _mm512_set1_epi32(iqb_rd16(b + 48 + 2 * p));
                lsv = _mm512_and_si512(
                    _mm512_srlv_epi32(
                        sc, _mm512_setr_epi32(0, 0, 0, 0, 3, 3, 3, 3, 6, 6, 6, 6, 9, 9, 9, 9)),
                    _mm512_set1_epi32(7));
            }
            lsv = _mm512_add_epi32(_mm512_add_epi32(lsv, lsv), _mm512_set1_epi32(1));
            isum = _mm512_dpwssd_epi32(isum, s, lsv);
            if (type == GGML_IQ1_M) { /* a delta sign per run of 8 (bit 3 of its nibble) */
                const __mmask16 neg = _mm512_test_epi32_mask(
                    _mm512_srlv_epi32(_mm512_set1_epi32((int)qh),
                                      _mm512_setr_epi32(3, 3, 7, 7, 11, 11, 15, 15, 19, 19, 23, 23,
                                                        27, 27, 31, 31)),
                    _mm512_set1_epi32(1));
                isum2 = _mm512_dpwssd_epi32(
                    isum2, _mm512_mask_sub_epi32(s4, neg, _mm512_setzero_si512(), s4), lsv);
            }
        }
        if (type == GGML_IQ1_S) { /* run j's code sum times its scale, less where bit 15 */
            const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 34)));
            const __m256i ls = _mm256_add_epi32(
                _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 12), _mm256_set1_epi32(7)),
                                  1),
                _mm256_set1_epi32(1));
            const __m256i t = _mm256_mullo_epi32(run_sums(a, k), ls);
            si1 = _mm512_reduce_add_epi32(_mm512_zextsi256_si512(
                _mm256_mask_sub_epi32(t, _mm256_test_epi32_mask(h, _mm256_set1_epi32(0x8000)),
                                      _mm256_setzero_si256(), t)));
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

#endif

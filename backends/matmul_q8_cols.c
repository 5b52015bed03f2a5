/* matmul_q8_cols — a=llamacpp's decode of Q4_0, IQ4_NL and MXFP4 in the
 * order of llama.cpp's repacked kernels (AVX-512 VNNI).
 *
 * Where a matrix of these types has a multiple of 8 rows, llama.cpp on an
 * AVX2 machine repacks it at load (CPU_REPACK: block_q4_0x8 and kin) and
 * multiplies a token by ggml_gemv_*_8x8_q8_0: per row and block the
 * exact integer sum I of the block's 32 products, then
 *     acc = fma((float)I, d_w * d_x, acc)
 * block after block, one running sum per row and no horizontal sum
 * (matmul_q8_blockwise). Here sixteen rows a register: decode's copy of
 * such a matrix (matmul_copy, "columns") keeps each group of 16 rows'
 * block i together, the 16 rows' 4-byte runs of nibbles side by side, so
 * that one vpdpbusd with four of the input's codes broadcast adds four
 * products to each of the 16 rows' sums. The rows past the last whole
 * group, and a matrix without its copy, are read from the file, one row
 * at a time, with the same operations. */
#include "backends/matmul_x86_impl.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)

/* the input's codes 4 k .. 4 k + 3 of block i as one 32-bit lane */
static inline int32_t codes4(const struct matmul_q8 *a, int64_t i, int k)
{
    int32_t v;
    memcpy(&v, a->q + 32 * i + 4 * k, 4);
    return v;
}

/* what the unsigned weight codes (the nibble, or its value in the table
 * plus 128) add beyond the signed values, times the sum of the block's
 * input codes: 8 (Q4_0) or 128 (a table) per code */
static inline int32_t offset_sum(const struct matmul_q8 *a, int64_t i, int lut)
{
    return (lut ? 128 : 8) * (a->sum16[2 * i] + a->sum16[2 * i + 1]);
}

/* 16 E8M0 bytes as e8m0_half gives each */
AVX512VNNI static inline __attribute__((always_inline)) __m512 e8m0_16(const uint8_t *p)
{
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    const __m512i small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e),
                  big = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    return _mm512_castsi512_ps(
        _mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), big, small));
}

/* Rows r .. r + 15 (r % 16 == 0, a whole group of W->copy) into y[0..16):
 * the copy's group is block after block of 16 x bsize bytes, first 4
 * slices of 64 bytes (slice k: row j's nibble bytes 4 k .. 4 k + 3 at
 * 4 j: low nibbles values 4 k .., high ones 16 + 4 k ..), then the 16
 * rows' scales (fp16 d; MXFP4: E8M0 bytes). */
AVX512VNNI static inline __attribute__((always_inline)) void
cols16(float *y, const struct wmat *W, int64_t r, const struct matmul_q8 *a, const int8_t *values,
       const int lut, const int mx)
{
    const size_t bsize = mx ? 17 : 18;
    const int64_t nb = W->in / 32;
    const uint8_t *b = W->copy + (size_t)r * W->row_bytes;
    const __m512i m4 = _mm512_set1_epi8(0xF), table = lut ? table16(values) : m4;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b += 16 * bsize) {
        for (int l = 0; l < 5; l++)
            _mm_prefetch((const char *)b + AHEAD + 64 * l, _MM_HINT_T0);
        __m512i s0 = _mm512_setzero_si512(), s1 = s0;
        for (int k = 0; k < 4; k++) {
            const __m512i raw = _mm512_loadu_si512((const void *)(b + 64 * k));
            __m512i lo = _mm512_and_si512(raw, m4),
                    hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            if (lut) lo = _mm512_shuffle_epi8(table, lo), hi = _mm512_shuffle_epi8(table, hi);
            s0 = _mm512_dpbusd_epi32(s0, lo, _mm512_set1_epi32(codes4(a, i, k)));
            s1 = _mm512_dpbusd_epi32(s1, hi, _mm512_set1_epi32(codes4(a, i, 4 + k)));
        }
        const __m512i isum =
            _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(offset_sum(a, i, lut)));
        const __m512 dw =
            mx ? e8m0_16(b + 256)
               : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(b + 256)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(a->d[i])),
                              acc);
    }
    _mm512_storeu_ps(y, acc);
}

/* One row from the file in that order: two blocks' integers a step (16
 * lanes, each half one block's), each block's total then its fma. */
AVX512VNNI static inline __attribute__((always_inline)) float
seq_row(const struct wmat *W, int64_t r, const struct matmul_q8 *a, const int8_t *values,
        const int lut, const int mx)
{
    const size_t bsize = mx ? 17 : 18, qs = mx ? 1 : 2;
    const int64_t nb = W->in / 32;
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i table = lut ? table16(values) : _mm512_setzero_si512();
    float acc = 0.0f;
    for (int64_t i = 0; i < nb; i += 2, b += 2 * bsize) {
        const int two = i + 1 < nb;
        __m512i w = nib_pair(b + qs, b + (two ? bsize : 0) + qs);
        if (lut) w = _mm512_shuffle_epi8(table, w);
        const __m512i q = _mm512_maskz_loadu_epi8(two ? ~0ull : 0xFFFFFFFFull, a->q + 32 * i);
        const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, q);
        for (int h = 0; h <= two; h++) {
            const uint8_t *c = b + h * bsize;
            const int32_t isum = _mm512_mask_reduce_add_epi32((__mmask16)(0xFF << 8 * h), s) -
                                 offset_sum(a, i + h, lut);
            const float dw = mx ? e8m0_half(c[0]) : h2f_f16c(c);
            acc = fmaf((float)isum, dw * a->d[i + h], acc);
        }
    }
    return acc;
}

/* Q4_K, rows r .. r + 15 from W->copy (cols_copy.h): per super-block
 * the exact integers of llama.cpp's ggml_gemv_q4_K_8x8_q8_K, I = sum over
 * the 8 sub-blocks of scale x (sum of nibble x code) and M = sum of
 * minimum x (sum of the sub-block's 32 codes), then
 *     acc  = fma((float)I, d_w * d_x, acc)
 *     accm = fma((float)M, dmin_w * d_x, accm)
 * and the row's product acc - accm. Slice k of a block: 64-value chunk
 * c = k / 8, its low nibbles values 64 c + 4 (k % 8) .. (sub-block 2 c),
 * its high ones 32 further (sub-block 2 c + 1). */
AVX512VNNI void mx_q8_q4_k_cols16_vnni(float *y, const struct wmat *W, int64_t r,
                                       const struct matmul_q8 *a)
{
    const int64_t nb = W->in / 256;
    const uint8_t *b = W->copy + (size_t)r * (size_t)nb * 148;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc = _mm512_setzero_ps(), accm = acc;
    for (int64_t i = 0; i < nb; i++, b += 16 * 148) {
        const int8_t *q = a->q + 256 * i;
        __m512i isum = _mm512_setzero_si512(), msum = isum;
        for (int c = 0; c < 4; c++) {
            __m512i lo = _mm512_setzero_si512(), hi = lo;
            for (int k = 0; k < 8; k++) {
                const uint8_t *p = b + 64 * (8 * c + k);
                _mm_prefetch((const char *)p + AHEAD, _MM_HINT_T0);
                const __m512i raw = _mm512_loadu_si512((const void *)p);
                int32_t q0, q1;
                memcpy(&q0, q + 64 * c + 4 * k, 4), memcpy(&q1, q + 64 * c + 32 + 4 * k, 4);
                lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(raw, m4), _mm512_set1_epi32(q0));
                hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4),
                                         _mm512_set1_epi32(q1));
            }
            const __m512i s0 = _mm512_cvtepu8_epi32(
                              _mm_loadu_si128((const __m128i *)(const void *)(b + 2048 + 32 * c))),
                          s1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(
                              (const __m128i *)(const void *)(b + 2048 + 32 * c + 16)));
            isum = _mm512_add_epi32(
                isum, _mm512_add_epi32(_mm512_mullo_epi32(lo, s0), _mm512_mullo_epi32(hi, s1)));
        }
        for (int sb = 0; sb < 8; sb++) {
            const __m512i mn = _mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(b + 2176 + 16 * sb)));
            const int32_t bsum = a->sum16[16 * i + 2 * sb] + a->sum16[16 * i + 2 * sb + 1];
            msum = _mm512_add_epi32(msum, _mm512_mullo_epi32(mn, _mm512_set1_epi32(bsum)));
        }
        const __m512 dx = _mm512_set1_ps(a->d[i]);
        const __m512 d =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(b + 2304)));
        const __m512 dmin =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(b + 2336)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dx), acc);
        accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), accm);
    }
    _mm512_storeu_ps(y, _mm512_sub_ps(acc, accm));
}

/* Q4_K, row r from the file in that order: a 64-value chunk a step (its
 * low nibbles and high ones against 64 codes, lanes 0-7 one sub-block,
 * 8-15 the next), times the lanes' scales */
AVX512VNNI float mx_q8_q4_k_seq_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const int64_t nb = W->in / 256;
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    float acc = 0.0f, accm = 0.0f;
    for (int64_t i = 0; i < nb; i++, b += 144) {
        int sc[8], mn[8];
        for (int s = 0; s < 8; s++)
            dequant_k4_scale_min(s, b + 4, &sc[s], &mn[s]);
        __m512i isum = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            const __m256i raw =
                _mm256_loadu_si256((const __m256i *)(const void *)(b + 16 + 32 * c));
            const __m512i w =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(raw, m4)),
                                   _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), 1);
            const __m512i s =
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), w,
                                    _mm512_loadu_si512((const void *)(a->q + 256 * i + 64 * c)));
            const __m512i scale = _mm512_inserti64x4(_mm512_set1_epi32(sc[2 * c]),
                                                     _mm256_set1_epi32(sc[2 * c + 1]), 1);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, scale));
        }
        int32_t msum = 0;
        for (int s = 0; s < 8; s++)
            msum += mn[s] * (a->sum16[16 * i + 2 * s] + a->sum16[16 * i + 2 * s + 1]);
        const float dx = a->d[i];
        acc = fmaf((float)_mm512_reduce_add_epi32(isum), h2f_f16c(b) * dx, acc);
        accm = fmaf((float)msum, h2f_f16c(b + 2) * dx, accm);
    }
    return acc - accm;
}

/* Q2_K, rows r .. r + 15 from W->copy (cols_copy.h): as Q4_K's, with
 * llama.cpp's ggml_gemv_q2_K_8x8_q8_K integers, I = sum over the 16
 * groups of 16 of scale x (sum of 2-bit code x input code) and M = sum
 * of minimum x (sum of the group's 16 input codes). Slice k of a block:
 * half h = k / 8 of the codes, its bytes 4 (k % 8) .. at shift 2 l
 * values 128 h + 32 l + 4 (k % 8) .., group 8 h + 2 l + (k % 8) / 4. */
AVX512VNNI void mx_q8_q2_k_cols16_vnni(float *y, const struct wmat *W, int64_t r,
                                       const struct matmul_q8 *a)
{
    const int64_t nb = W->in / 256;
    const uint8_t *b = W->copy + (size_t)r * W->row_bytes;
    const __m512i m2 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi32(0xF);
    __m512 acc = _mm512_setzero_ps(), accm = acc;
    for (int64_t i = 0; i < nb; i++, b += 16 * 84) {
        const int8_t *q = a->q + 256 * i;
        __m512i isum = _mm512_setzero_si512(), msum = isum;
        for (int hg = 0; hg < 4; hg++) { /* half hg / 2, slices' second four where hg odd */
            __m512i s[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                            _mm512_setzero_si512()};
            for (int k4 = 0; k4 < 4; k4++) {
                const uint8_t *p = b + 64 * (4 * hg + k4);
                _mm_prefetch((const char *)p + AHEAD, _MM_HINT_T0);
                const __m512i raw = _mm512_loadu_si512((const void *)p);
                for (int l = 0; l < 4; l++) {
                    int32_t c;
                    memcpy(&c, q + 128 * (hg / 2) + 32 * l + 16 * (hg % 2) + 4 * k4, 4);
                    s[l] = _mm512_dpbusd_epi32(s[l],
                                               _mm512_and_si512(_mm512_srli_epi16(raw, 2 * l), m2),
                                               _mm512_set1_epi32(c));
                }
            }
            for (int l = 0; l < 4; l++) {
                const int g = 8 * (hg / 2) + 2 * l + hg % 2;
                const __m512i sc = _mm512_cvtepu8_epi32(
                    _mm_loadu_si128((const __m128i *)(const void *)(b + 1024 + 16 * g)));
                const int32_t bsum = a->sum16[16 * i + g];
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s[l], _mm512_and_si512(sc, m4)));
                msum = _mm512_add_epi32(
                    msum, _mm512_mullo_epi32(_mm512_srli_epi32(sc, 4), _mm512_set1_epi32(bsum)));
            }
        }
        const __m512 dx = _mm512_set1_ps(a->d[i]);
        const __m512 d =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(b + 1280)));
        const __m512 dmin =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(b + 1312)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dx), acc);
        accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), accm);
    }
    _mm512_storeu_ps(y, _mm512_sub_ps(acc, accm));
}

/* Q2_K, row r from the file in that order: two 32-value runs a step
 * (shifts 2 l and 2 l + 2 of a half's 32 bytes against 64 codes: lanes
 * 4 t .. 4 t + 3 group 8 h + 2 l + t), times the lanes' scales */
AVX512VNNI float mx_q8_q2_k_seq_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const int64_t nb = W->in / 256;
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m2 = _mm256_set1_epi8(3);
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    float acc = 0.0f, accm = 0.0f;
    for (int64_t i = 0; i < nb; i++, b += 84) {
        const __m512i sc = _mm512_and_si512(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)b)),
            _mm512_set1_epi32(0xF));
        __m512i isum = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m256i raw =
                _mm256_loadu_si256((const __m256i *)(const void *)(b + 16 + 32 * h));
            for (int l = 0; l < 4; l += 2) {
                const __m512i w = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_and_si256(_mm256_srli_epi16(raw, 2 * l), m2)),
                    _mm256_and_si256(_mm256_srli_epi16(raw, 2 * l + 2), m2), 1);
                const __m512i s = _mm512_dpbusd_epi32(
                    _mm512_setzero_si512(), w,
                    _mm512_loadu_si512((const void *)(a->q + 256 * i + 128 * h + 32 * l)));
                const __m512i lanes = _mm512_permutexvar_epi32(
                    _mm512_add_epi32(quad, _mm512_set1_epi32(8 * h + 2 * l)), sc);
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, lanes));
            }
        }
        int32_t msum = 0;
        for (int g = 0; g < 16; g++)
            msum += (b[g] >> 4) * a->sum16[16 * i + g];
        const float dx = a->d[i];
        acc = fmaf((float)_mm512_reduce_add_epi32(isum), h2f_f16c(b + 80) * dx, acc);
        accm = fmaf((float)msum, h2f_f16c(b + 82) * dx, accm);
    }
    return acc - accm;
}

AVX512VNNI void mx_q8_q4_0_cols16_vnni(float *y, const struct wmat *W, int64_t r,
                                       const struct matmul_q8 *a)
{
    cols16(y, W, r, a, NULL, 0, 0);
}

AVX512VNNI void mx_q8_iq4_nl_cols16_vnni(float *y, const struct wmat *W, int64_t r,
                                         const struct matmul_q8 *a)
{
    cols16(y, W, r, a, dequant_iq4nl_values, 1, 0);
}

AVX512VNNI void mx_q8_mxfp4_cols16_vnni(float *y, const struct wmat *W, int64_t r,
                                        const struct matmul_q8 *a)
{
    cols16(y, W, r, a, dequant_mxfp4_x2, 1, 1);
}

AVX512VNNI float mx_q8_q4_0_seq_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return seq_row(W, r, a, NULL, 0, 0);
}

AVX512VNNI float mx_q8_iq4_nl_seq_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return seq_row(W, r, a, dequant_iq4nl_values, 1, 0);
}

AVX512VNNI float mx_q8_mxfp4_seq_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return seq_row(W, r, a, dequant_mxfp4_x2, 1, 1);
}

#endif /* x86 */

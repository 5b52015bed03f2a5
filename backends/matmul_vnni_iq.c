/* matmul_vnni_iq — plain mode's integer decode kernels of the grid
 * formats with signs (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) and the
 * ternary ones (TQ1_0, TQ2_0) in the avx512vnni set: x held as 24-bit
 * integers in three byte planes (the K-quants' preparation, matmul_vnni.c,
 * in Q6_K's layout with the sums of each 4), the weights decoded by
 * iq_vnni_impl.h and tq_vnni_impl.h. */
#include "backends/iq_vnni_impl.h"
#include "backends/tq_vnni_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* Per pair of sub-blocks (64 values, x's groups 2j and 2j + 1): v = 64 +-
 * g (2..126, where ggml's grids end at 62; the level table gives 64 + g
 * and 128 less it 64 - g), whose sum with n over each 4 values less 64
 * sum n is sum (+-g) n exactly (every step wraps modulo 2^32 and the
 * result is below 2^31 in magnitude); converted once per 4 values and
 * times ls d / m 2^(e_group - 22), with m ggml's 8, 4 or 1, the block's 8
 * or 16 such factors computed once. */
AVX512VNNI static inline __attribute__((always_inline)) float
grid_planes_row(uint32_t type, const struct wmat *W, int64_t r, const float *prep)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes, *planes = (const uint8_t *)prep;
    const float *xs = prep + 3 * W->in / 4;
    const int32_t *quads = (const int32_t *)(const void *)(xs + W->in / 32);
    const size_t bytes = (size_t)iq_block_bytes(type);
    const __m512i c128 = _mm512_set1_epi8((char)128);
    struct iq_tabs t;
    iq_tabs_load(type, &t);
    t.lv = _mm512_add_epi8(t.lv, _mm512_set1_epi8(64));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += bytes) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        struct iq_blk o;
        iq_blk_read(type, b, &t, &o);
        /* 2^(e - 22) d / m of the block's 8 groups, then each scale's factor */
        __m512 f = xs8(xs + k / 32, h2f_f16c(b) * iq_m_inv(type));
        if (iq_scales16(type))
            f = _mm512_permutexvar_ps(
                _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), f);
        f = _mm512_mul_ps(f, _mm512_cvtepi32_ps(iq_blk_scales(type, &o)));
        for (int p = 0; p < 4; p++) {
            __mmask64 neg;
            __m512i ls;
            const __m512i g = iq_pair(type, b, &t, &o, p, &neg, &ls); /* 64 + g */
            const int64_t e0 = k + 64 * p;
            const __m512i s = planes_dot(
                _mm512_mask_sub_epi8(g, neg, c128, g), planes + e0 / 64 * VNNI_PAIR_BYTES,
                _mm512_slli_epi32(_mm512_loadu_si512((const void *)(quads + e0 / 4)), 1));
            acc = _mm512_fmadd_ps(_mm512_permutexvar_ps(iq_pair_at(type, p), f),
                                  _mm512_cvtepi32_ps(s), acc);
        }
    }
    return _mm512_reduce_add_ps(acc);
}

/* TQ1_0, TQ2_0: the codes u = value + 1 (0..2) against the planes less
 * sum n (the quads / 32), sum (u - 1) n exactly per 4 values; times d
 * 2^(e_group - 22) */
AVX512VNNI static inline __attribute__((always_inline)) float
tq_planes_row(uint32_t type, const struct wmat *W, int64_t r, const float *prep)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes, *planes = (const uint8_t *)prep;
    const float *xs = prep + 3 * W->in / 4;
    const int32_t *quads = (const int32_t *)(const void *)(xs + W->in / 32);
    const int bytes = type == GGML_TQ2_0 ? 66 : 54, dat = bytes - 2;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += bytes) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        __m512i u[4];
        if (type == GGML_TQ2_0)
            for (int i = 0; i < 4; i++)
                u[i] = tq2_values(b, i);
        else
            tq1_values(b, u);
        const __m512 f = xs8(xs + k / 32, h2f_f16c(b + dat));
        for (int i = 0; i < 4; i++) {
            const int64_t e0 = k + 64 * i;
            const __m512i s = planes_dot(
                u[i], planes + e0 / 64 * VNNI_PAIR_BYTES,
                _mm512_srai_epi32(_mm512_loadu_si512((const void *)(quads + e0 / 4)), 5));
            acc = _mm512_fmadd_ps(
                _mm512_permutexvar_ps(_mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(2 * i),
                                                              _mm512_set1_epi32(2 * i + 1)),
                                      f),
                _mm512_cvtepi32_ps(s), acc);
        }
    }
    return _mm512_reduce_add_ps(acc);
}

AVX512VNNI float mx_row_iq_vnni(const struct wmat *W, int64_t r, const float *prep)
{
    switch (W->type) {
    case GGML_IQ2_XXS:
        return grid_planes_row(GGML_IQ2_XXS, W, r, prep);
    case GGML_IQ2_XS:
        return grid_planes_row(GGML_IQ2_XS, W, r, prep);
    case GGML_IQ2_S:
        return grid_planes_row(GGML_IQ2_S, W, r, prep);
    case GGML_IQ3_XXS:
        return grid_planes_row(GGML_IQ3_XXS, W, r, prep);
    case GGML_IQ3_S:
        return grid_planes_row(GGML_IQ3_S, W, r, prep);
    case GGML_TQ2_0:
        return tq_planes_row(GGML_TQ2_0, W, r, prep);
    default:
        return tq_planes_row(GGML_TQ1_0, W, r, prep);
    }
}

#endif

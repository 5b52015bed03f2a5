/* matmul_vnni_iq — plain mode's integer decode kernels of the grid
 * formats with signs (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) in the
 * avx512vnni set: x held as 24-bit integers in three byte planes (the
 * K-quants' preparation, matmul_vnni.c, in Q6_K's layout with the sums of
 * each 4), the weights decoded by iq_vnni_impl.h. */
#include "backends/iq_vnni_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* Per pair of sub-blocks (64 values, x's groups 2j and 2j + 1): v = 64 +-
 * g (2..126, where ggml's grids end at 62), whose sum with n over each 4
 * values less 64 sum n is sum (+-g) n exactly (every step wraps modulo
 * 2^32 and the result is below 2^31 in magnitude); converted once per 4
 * values and times d ls / m 2^(e_group - 22), with m ggml's 8, 4 or 1. */
AVX512VNNI static inline __attribute__((always_inline)) float
grid_planes_row(uint32_t type, const struct wmat *W, int64_t r, const float *prep)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes, *planes = (const uint8_t *)prep;
    const float *xs = prep + 3 * W->in / 4;
    const int32_t *quads = (const int32_t *)(const void *)(xs + W->in / 32);
    const size_t bytes = (size_t)iq_block_bytes(type);
    const __m512i c64 = _mm512_set1_epi8(64);
    struct iq_tabs t;
    iq_tabs_load(type, &t);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 256, b += bytes) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        struct iq_blk o;
        iq_blk_read(type, b, &t, &o);
        const float dm = h2f_f16c(b) * iq_m_inv(type);
        for (int p = 0; p < 4; p++) {
            __mmask64 neg;
            __m512i ls;
            const __m512i g = iq_pair(type, b, &t, &o, p, &neg, &ls);
            const int64_t e0 = k + 64 * p;
            const __m512i v = _mm512_mask_sub_epi8(_mm512_add_epi8(g, c64), neg, c64, g);
            const __m512i s = planes_dot(
                v, planes + e0 / 64 * VNNI_PAIR_BYTES,
                _mm512_slli_epi32(_mm512_loadu_si512((const void *)(quads + e0 / 4)), 1));
            const __m512 xd = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(xs[e0 / 32] * dm),
                                                   _mm512_set1_ps(xs[e0 / 32 + 1] * dm));
            acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ls), xd), _mm512_cvtepi32_ps(s),
                                  acc);
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
    default:
        return grid_planes_row(GGML_IQ3_S, W, r, prep);
    }
}

#endif

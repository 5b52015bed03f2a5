/* matmul_q8_cols — a=llamacpp's decode of the formats llama.cpp repacks
 * (Q4_0, IQ4_NL, MXFP4, Q4_K, Q2_K with a multiple of 8 rows:
 * matmul_q8_blockwise), in the order of its repacked kernels (AVX-512
 * VNNI).
 *
 * llama.cpp on an AVX2 machine (Q2_K: AVX-512) repacks such a matrix at
 * load (CPU_REPACK: block_q4_0x8 and kin) and multiplies a token by
 * ggml_gemv_*_8x8_q8_0 / _q8_K: per row and block the exact integer sum I
 * of the block's products (the K-quants: their sub-blocks' sums times
 * their integer scales, and M, their minima times the input's sums),
 * then
 *     acc  = fma((float)I, d_w * d_x, acc)        block after block
 *     accm = fma((float)M, dmin_w * d_x, accm)    (the K-quants)
 * one running sum per row, no horizontal sum, and acc - accm at the end.
 *
 * Here sixteen rows a register: four of a row's nibble (or 2-bit) bytes
 * in each 32-bit lane, one vpdpbusd with four of the input's codes
 * broadcast adds four products to each of the 16 rows' sums. The lanes
 * come from decode's copy ("columns", cols_copy.h: a group of 16 rows'
 * blocks side by side, one load a slice) or, for the rows past its last
 * whole group and a matrix without it (its allocation failed), from the file, one
 * gather a slice (the same integers, so the same bits). */
#include "backends/matmul_x86_impl.h"
#include "backends/cols_copy.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* Where a group's lanes come from: the copy's group (lane j row j's 4
 * bytes, a slice of 64 at a time) or 16 rows of the file (lane j the 4
 * bytes at the same place of row j: a gather), rows past m masked off */
struct grp {
    const uint8_t *b; /* the copy's group, or the first row in the file */
    __m512i off;      /* file: lane j's row offset j x row_bytes */
    __mmask16 m;
    int file;
};

/* rows r .. r + n - 1 (n <= 16) of W: from the copy where they are one of
 * its whole groups, else from the file */
AVX512VNNI static inline __attribute__((always_inline)) struct grp grp_of(const struct wmat *W,
                                                                          int64_t r, int n)
{
    struct grp g;
    const int64_t full = W->copy ? W->out / 16 * 16 : 0;
    g.file = !(n == 16 && r % 16 == 0 && r + 16 <= full);
    g.m = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
    g.off =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int)W->row_bytes));
    if (g.file) {
        g.b = W->data + (size_t)r * W->row_bytes;
    } else {
        const size_t crb = (size_t)(W->in / cols_block_values(W->type)) *
                           cols_block_bytes(W->type) / 16; /* the copy's bytes a row */
        g.b = W->copy + (size_t)r * crb;
    }
    return g;
}

/* 16 lanes of 4 bytes: the copy's 64 bytes at c, or each row's 4 at f */
AVX512VNNI static inline __attribute__((always_inline)) __m512i lanes(const struct grp *g, size_t c,
                                                                      size_t f)
{
    if (g->file)
        return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), g->m, g->off,
                                           (const void *)(g->b + f), 1);
    _mm_prefetch((const char *)g->b + c + AHEAD, _MM_HINT_T0);
    return _mm512_loadu_si512((const void *)(g->b + c));
}

/* 16 bytes as lanes: the copy's at c, or each row's byte at f */
AVX512VNNI static inline __attribute__((always_inline)) __m512i bytes16(const struct grp *g,
                                                                        size_t c, size_t f)
{
    if (g->file) return _mm512_and_si512(lanes(g, 0, f), _mm512_set1_epi32(0xFF));
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(g->b + c)));
}

/* 16 fp16 values as floats: the copy's at c, or each row's at f (the
 * high half of the 4 bytes there where hi) */
AVX512VNNI static inline __attribute__((always_inline)) __m512 halves16(const struct grp *g,
                                                                        size_t c, size_t f, int hi)
{
    if (g->file)
        return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(lanes(g, 0, f), 16 * hi)));
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(g->b + c)));
}

/* E8M0 bytes (lanes) as e8m0_half gives each */
AVX512VNNI static inline __attribute__((always_inline)) __m512 e8m0_lanes(__m512i e)
{
    const __m512i small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e),
                  big = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    return _mm512_castsi512_ps(
        _mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), big, small));
}

/* the 32-blocks (bs bytes: the scale, then 16 of nibbles, at qs): slice k
 * of block i holds values 4 k .. (low nibbles) and 16 + 4 k .. (high);
 * the unsigned weight codes (the nibble, or its table value plus 128)
 * add 8 or 128 times the sum of the block's input codes, taken out */
AVX512VNNI static inline __attribute__((always_inline)) void
cols32(float *y, const struct grp *g, int64_t nb, const struct matmul_q8 *a, const int8_t *values,
       const int lut, const int mx)
{
    const size_t bs = mx ? 17 : 18, cb = 16 * bs, qs = mx ? 1 : 2;
    const __m512i m4 = _mm512_set1_epi8(0xF), table = lut ? table16(values) : m4;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const int8_t *q = a->q + 32 * i;
        __m512i s0 = _mm512_setzero_si512(), s1 = s0;
        for (size_t k = 0; k < 4; k++) {
            const __m512i raw = lanes(g, i * cb + 64 * k, i * bs + qs + 4 * k);
            __m512i lo = _mm512_and_si512(raw, m4),
                    hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            if (lut) lo = _mm512_shuffle_epi8(table, lo), hi = _mm512_shuffle_epi8(table, hi);
            s0 = _mm512_dpbusd_epi32(s0, lo, codes4(q + 4 * k));
            s1 = _mm512_dpbusd_epi32(s1, hi, codes4(q + 16 + 4 * k));
        }
        const int32_t off = (lut ? 128 : 8) * (a->sum16[2 * i] + a->sum16[2 * i + 1]);
        const __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(off));
        const __m512 dw = mx ? e8m0_lanes(bytes16(g, i * cb + 256, i * bs))
                             : halves16(g, i * cb + 256, i * bs, 0);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(a->d[i])),
                              acc);
    }
    _mm512_mask_storeu_ps(y, g->m, acc);
}

/* Q4_K's 6-bit scales sc[8] and minima mn[8] of block i as lanes: the
 * copy's bytes, or the 12 packed bytes of each row decoded
 * (dequant_k4_scale_min) */
AVX512VNNI static inline __attribute__((always_inline)) void
k4_scales(const struct grp *g, int64_t i, __m512i *sc, __m512i *mn)
{
    const size_t cb = 16 * 148;
    if (!g->file) {
        for (size_t s = 0; s < 8; s++)
            sc[s] = bytes16(g, i * cb + 2048 + 16 * s, 0),
            mn[s] = bytes16(g, i * cb + 2176 + 16 * s, 0);
        return;
    }
    const __m512i q0 = lanes(g, 0, (size_t)i * 144 + 4), q1 = lanes(g, 0, (size_t)i * 144 + 8),
                  q2 = lanes(g, 0, (size_t)i * 144 + 12);
    const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(0xF),
                  m2 = _mm512_set1_epi32(3);
    for (unsigned t = 0; t < 4; t++) {
        const __m512i b0 = _mm512_srli_epi32(q0, 8 * t), b1 = _mm512_srli_epi32(q1, 8 * t),
                      b2 = _mm512_srli_epi32(q2, 8 * t);
        sc[t] = _mm512_and_si512(b0, m6), mn[t] = _mm512_and_si512(b1, m6);
        sc[t + 4] =
            _mm512_or_si512(_mm512_and_si512(b2, m4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(b0, 6), m2), 4));
        mn[t + 4] =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(b2, 4), m4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(b1, 6), m2), 4));
    }
}

/* Q4_K: llama.cpp's ggml_gemv_q4_K_8x8_q8_K integers. Slice k of a block
 * (qs bytes 4 k ..): 64-value chunk c = k / 8, its low nibbles values
 * 64 c + 4 (k % 8) .. (sub-block 2 c), its high ones 32 further */
AVX512VNNI static inline __attribute__((always_inline)) void
cols_q4_k(float *y, const struct grp *g, int64_t nb, const struct matmul_q8 *a)
{
    const size_t cb = 16 * 148;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc = _mm512_setzero_ps(), accm = acc;
    for (int64_t i = 0; i < nb; i++) {
        const int8_t *q = a->q + 256 * i;
        __m512i sc[8], mn[8], isum = _mm512_setzero_si512(), msum = isum;
        k4_scales(g, i, sc, mn);
        for (size_t c = 0; c < 4; c++) {
            __m512i lo = _mm512_setzero_si512(), hi = lo;
            for (size_t k = 0; k < 8; k++) {
                const size_t sl = 8 * c + k;
                const __m512i raw = lanes(g, i * cb + 64 * sl, (size_t)i * 144 + 16 + 4 * sl);
                lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(raw, m4), codes4(q + 64 * c + 4 * k));
                hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4),
                                         codes4(q + 64 * c + 32 + 4 * k));
            }
            isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(lo, sc[2 * c]),
                                                           _mm512_mullo_epi32(hi, sc[2 * c + 1])));
        }
        for (int s = 0; s < 8; s++) {
            const int32_t bsum = a->sum16[16 * i + 2 * s] + a->sum16[16 * i + 2 * s + 1];
            msum = _mm512_add_epi32(msum, _mm512_mullo_epi32(mn[s], _mm512_set1_epi32(bsum)));
        }
        const __m512 dx = _mm512_set1_ps(a->d[i]);
        const __m512 d = halves16(g, i * cb + 2304, (size_t)i * 144, 0),
                     dmin = halves16(g, i * cb + 2336, (size_t)i * 144, 1);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dx), acc);
        accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), accm);
    }
    _mm512_mask_storeu_ps(y, g->m, _mm512_sub_ps(acc, accm));
}

/* Q2_K: llama.cpp's ggml_gemv_q2_K_8x8_q8_K integers, 16 groups of 16
 * with a scale (low nibble) and a minimum (high) each. Slice k of a block
 * (qs bytes 4 k ..): half h = k / 8, its bytes at shift 2 l values
 * 128 h + 32 l + 4 (k % 8) .., group 8 h + 2 l + (k % 8) / 4 */
AVX512VNNI static inline __attribute__((always_inline)) void
cols_q2_k(float *y, const struct grp *g, int64_t nb, const struct matmul_q8 *a)
{
    const size_t cb = 16 * 84;
    const __m512i m2 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi32(0xF);
    __m512 acc = _mm512_setzero_ps(), accm = acc;
    for (int64_t i = 0; i < nb; i++) {
        const int8_t *q = a->q + 256 * i;
        __m512i isum = _mm512_setzero_si512(), msum = isum;
        for (size_t hg = 0; hg < 4; hg++) { /* half hg / 2, its slices' second four where hg odd */
            __m512i s[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                            _mm512_setzero_si512()};
            for (size_t k = 0; k < 4; k++) {
                const size_t sl = 4 * hg + k;
                const __m512i raw = lanes(g, i * cb + 64 * sl, (size_t)i * 84 + 16 + 4 * sl);
                for (unsigned l = 0; l < 4; l++)
                    s[l] = _mm512_dpbusd_epi32(
                        s[l], _mm512_and_si512(_mm512_srli_epi16(raw, 2 * l), m2),
                        codes4(q + 128 * (hg / 2) + 32 * l + 16 * (hg % 2) + 4 * k));
            }
            for (size_t l = 0; l < 4; l++) {
                const size_t gr = 8 * (hg / 2) + 2 * l + hg % 2;
                const __m512i sm = bytes16(g, i * cb + 1024 + 16 * gr, (size_t)i * 84 + gr);
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s[l], _mm512_and_si512(sm, m4)));
                msum = _mm512_add_epi32(
                    msum, _mm512_mullo_epi32(_mm512_srli_epi32(sm, 4),
                                             _mm512_set1_epi32(a->sum16[16 * i + (int64_t)gr])));
            }
        }
        const __m512 dx = _mm512_set1_ps(a->d[i]);
        const __m512 d = halves16(g, i * cb + 1280, (size_t)i * 84 + 80, 0),
                     dmin = halves16(g, i * cb + 1312, (size_t)i * 84 + 80, 1);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dx), acc);
        accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), accm);
    }
    _mm512_mask_storeu_ps(y, g->m, _mm512_sub_ps(acc, accm));
}

AVX512VNNI void mx_q8_cols_vnni(float *y, const struct wmat *W, int64_t r, int n,
                                const struct matmul_q8 *a)
{
    const struct grp g = grp_of(W, r, n);
    switch (W->type) {
    case GGML_Q4_0:
        cols32(y, &g, W->in / 32, a, NULL, 0, 0);
        break;
    case GGML_IQ4_NL:
        cols32(y, &g, W->in / 32, a, dequant_iq4nl_values, 1, 0);
        break;
    case GGML_MXFP4:
        cols32(y, &g, W->in / 32, a, dequant_mxfp4_x2, 1, 1);
        break;
    case GGML_Q4_K:
        cols_q4_k(y, &g, W->in / 256, a);
        break;
    case GGML_Q2_K:
        cols_q2_k(y, &g, W->in / 256, a);
        break;
    default:
        break;
    }
}

#endif /* x86 */

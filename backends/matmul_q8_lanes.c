/* matmul_q8_lanes — a=llamacpp's decode of IQ4_XS, Q3_K, Q4_1, Q5_0,
 * Q5_1, IQ1_S, IQ1_M, TQ1_0 and TQ2_0 (cols_lanes8)
 * from decode's columns copy, in ggml's vec_dot order (AVX-512 VNNI).
 *
 * llama.cpp does not repack these formats; its vec_dot gives each
 * row, per block (256 values; Q4_1, Q5_0, Q5_1: 32), eight int32 lane
 * sums (lane k: the products of the four values 4 k .. 4 k + 3 of every
 * 32-value run, times that run's (IQ4_XS) or half-run's (Q3_K) integer
 * scale), then
 *     acc[k] = fma(d_w * d_x, (float)lane[k], acc[k])    block after block
 * and ggml's horizontal sum of the eight, ((a0 + a4) + (a2 + a6)) +
 * ((a1 + a5) + (a3 + a7)) (Q4_1, Q5_1: plus their minima's sum). The
 * row kernels (mx_q8_iq4_xs_vnni, mx_q8_q3_k_vnni, legacy_row) do that
 * one row at a time. Here sixteen rows a register: acc[k] and the block's
 * lane[k] hold lane k of 16 rows, one vpdpbusd (a row's 4 bytes in each
 * 32-bit lane, the input's 4 codes broadcast) gives a run's lane k for
 * the 16 rows at once, and the per-row scales, d and the horizontal sum
 * are vector operations on the 16. The integers are the same, and so are
 * the float operations on each row: the same bits as the row kernels.
 *
 * The weight bytes enter vpdpbusd unsigned (IQ4_XS: its table value plus
 * 128; Q3_K: the 2 low bits plus 4 times the hmask bit, the value plus
 * 4; Q5_0: the value plus 16), so each 4-product sum is less 128 (4,
 * 16) times the sum of the 4 input codes, taken out before the scale. */
#include "backends/matmul_x86_impl.h"
#include "backends/cols_copy.h"
#include "backends/iq_blocks_impl.h"
#include "backends/iq_vnni_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* minus m times the sum of each 4 input codes of the 256-block at q:
 * e[t] for codes 4 t .. 4 t + 3 (a vpdpbusd's start, so that the sum it
 * gives is the products' own) */
AVX512VNNI static inline __attribute__((always_inline)) void sums4(const int8_t *q, char m,
                                                                   int32_t *e)
{
    for (int c = 0; c < 4; c++)
        _mm512_storeu_si512(
            e + 16 * c,
            _mm512_sub_epi32(_mm512_setzero_si512(),
                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(m),
                                                 _mm512_loadu_si512(q + 64 * c))));
}

/* eight registers of running sums, and of a block's lane sums, cleared */
AVX512VNNI static inline __attribute__((always_inline)) void clear8(__m512 *acc, __m512i *lane)
{
    for (int k = 0; k < 8; k++) {
        if (acc) acc[k] = _mm512_setzero_ps();
        if (lane) lane[k] = _mm512_setzero_si512();
    }
}

/* line n of the block of cb bytes at g, AHEAD bytes on, into the cache
 * (the lines spread over the block's steps, not all at its start) */
AVX512VNNI static inline __attribute__((always_inline)) void fetch_line(const uint8_t *g, size_t cb,
                                                                        size_t n)
{
    if (64 * n < cb + 63) _mm_prefetch((const char *)g + AHEAD + 64 * n, _MM_HINT_T0);
}

/* the 16 bytes at s (one a row) as lanes */
AVX512VNNI static inline __attribute__((always_inline)) __m512i u8x16(const uint8_t *s)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)s));
}

/* 2 v + 1: the grid formats' odd scales */
AVX512VNNI static inline __attribute__((always_inline)) __m512i odd(__m512i v)
{
    return _mm512_add_epi32(_mm512_add_epi32(v, v), _mm512_set1_epi32(1));
}

/* 16 six-bit scales stored as bytes at s, less 32, as lanes */
AVX512VNNI static inline __attribute__((always_inline)) __m512i scales16(const uint8_t *s)
{
    return _mm512_sub_epi32(u8x16(s), _mm512_set1_epi32(32));
}

/* the 16 rows' d_w (fp16 at dw) times d_x */
AVX512VNNI static inline __attribute__((always_inline)) __m512 row_d(const uint8_t *dw, float dx)
{
    return _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)dw)),
                         _mm512_set1_ps(dx));
}

/* lane[k] += sc (w . q + e), w's 4 unsigned bytes a row against the
 * broadcast codes c, e = sums4's; where short (Q3_K: |w . q + e| <=
 * 4 * 4 * 127 and sc in its lanes' low 16 bits, the high 0) by one
 * vpdpwssd */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
lane_add(__m512i lane, __m512i w, __m512i c, int32_t e, __m512i sc, const int short16)
{
    const __m512i s = _mm512_dpbusd_epi32(_mm512_set1_epi32(e), w, c);
    if (short16) return _mm512_dpwssd_epi32(lane, s, sc);
    return _mm512_add_epi32(lane, _mm512_mullo_epi32(s, sc));
}

/* the block's lanes into the running sums, d_w (16 fp16 at dw) times
 * d_x; that product returned */
AVX512VNNI static inline __attribute__((always_inline)) __m512
lanes_fma(__m512 *acc, const __m512i *lane, const uint8_t *dw, float dx)
{
    const __m512 d = row_d(dw, dx);
    for (int k = 0; k < 8; k++)
        acc[k] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lane[k]), acc[k]);
    return d;
}

/* ggml's hsum_float_8 of each row's eight sums, for 16 rows */
AVX512VNNI static inline __attribute__((always_inline)) __m512 hsum16(const __m512 *a)
{
    const __m512 lo = _mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                 hi = _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7]));
    return _mm512_add_ps(lo, hi);
}

/* IQ4_XS: slice 4 r + t of a block holds run r's bytes 4 t .. 4 t + 3,
 * whose low nibbles are values 4 t .. (lane t) and high ones 16 + 4 t ..
 * (lane t + 4) */
AVX512VNNI static void lanes_iq4_xs(float *y, const uint8_t *g, int64_t nb,
                                    const struct matmul_q8 *a)
{
    const size_t cb = 16 * 138;
    const __m512i m4 = _mm512_set1_epi8(0xF), table = table16(dequant_iq4nl_values);
    __m512 acc[8];
    clear8(acc, NULL);
    for (int64_t i = 0; i < nb; i++, g += cb) {
        const int8_t *q = a->q + 256 * i;
        int32_t e[64];
        sums4(q, (char)0x80, e);
        __m512i lane[8];
        clear8(NULL, lane);
        for (int r = 0; r < 8; r++) {
            const __m512i sc = scales16(g + 2048 + 16 * r);
            for (int t = 0; t < 4; t++) {
                fetch_line(g, cb, (size_t)(4 * r + t)), fetch_line(g, cb, (size_t)(32 + 4 * r + t));
                const __m512i raw = _mm512_loadu_si512((const void *)(g + 64 * (4 * r + t)));
                const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(raw, m4)),
                              hi = _mm512_shuffle_epi8(
                                  table, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
                lane[t] = lane_add(lane[t], lo, codes4(q + 32 * r + 4 * t), e[8 * r + t], sc, 0);
                lane[t + 4] = lane_add(lane[t + 4], hi, codes4(q + 32 * r + 16 + 4 * t),
                                       e[8 * r + 4 + t], sc, 0);
            }
        }
        lanes_fma(acc, lane, g + 2176, a->d[i]);
    }
    _mm512_storeu_ps(y, hsum16(acc));
}

/* Q3_K: slice 8 h + s of a block holds qs bytes 32 h + 4 s .. 32 h +
 * 4 s + 3, whose bits 2 l, 2 l + 1 are values 128 h + 32 l + 4 s .. (lane
 * s), with their hmask bits 4 h + l in hmask slice s; scale 8 h + 2 l for
 * lanes 0..3, 8 h + 2 l + 1 for lanes 4..7 */
AVX512VNNI static void lanes_q3_k(float *y, const uint8_t *g, int64_t nb, const struct matmul_q8 *a)
{
    const size_t cb = 16 * 114;
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    __m512 acc[8];
    clear8(acc, NULL);
    for (int64_t i = 0; i < nb; i++, g += cb) {
        const int8_t *q = a->q + 256 * i;
        int32_t e[64];
        sums4(q, 4, e);
        __m512i lane[8];
        clear8(NULL, lane);
        for (int h = 0; h < 2; h++) {
            for (int l = 0; l < 4; l++) {
                const __m512i m16 = _mm512_set1_epi32(0xFFFF),
                              sc0 =
                                  _mm512_and_si512(scales16(g + 1536 + 16 * (8 * h + 2 * l)), m16),
                              sc1 = _mm512_and_si512(scales16(g + 1536 + 16 * (8 * h + 2 * l + 1)),
                                                     m16),
                              bit = _mm512_set1_epi8((char)(1 << (4 * h + l)));
                for (int s = 0; s < 8; s++) {
                    fetch_line(g, cb, (size_t)(32 * h + 8 * l + s));
                    const __m512i raw = _mm512_loadu_si512((const void *)(g + 64 * (8 * h + s)));
                    const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(raw, 2 * l), m3);
                    const __mmask64 hm = _mm512_test_epi8_mask(
                        _mm512_loadu_si512((const void *)(g + 1024 + 64 * s)), bit);
                    lane[s] = lane_add(lane[s], _mm512_mask_add_epi8(lo, hm, lo, four),
                                       codes4(q + 128 * h + 32 * l + 4 * s), e[32 * h + 8 * l + s],
                                       s < 4 ? sc0 : sc1, 1);
                }
            }
        }
        lanes_fma(acc, lane, g + 1792, a->d[i]);
    }
    _mm512_storeu_ps(y, hsum16(acc));
}

/* Q4_1, Q5_0, Q5_1: per 32-block the lanes as in lanes_iq4_xs's runs
 * (slice t: lanes t and t + 4), the nibbles plus 16 where the high bit's
 * mask says (Q5), Q5_0 less 16 times the codes' sums; Q4_1 and Q5_1 add
 * m_w s_x block after block (a product, then a sum, as legacy_row) */
AVX512VNNI static inline __attribute__((always_inline)) void
lanes32(float *y, const uint8_t *g, int64_t nb, const struct matmul_q8 *a, const int five,
        const int with_m)
{
    const size_t cb = 16 * (size_t)(with_m ? (five ? 24 : 20) : 22), at_d = five ? 320 : 256;
    const __m512i m4 = _mm512_set1_epi8(0xF), c16 = _mm512_set1_epi8(16);
    __m512 acc[8], summs = _mm512_setzero_ps();
    clear8(acc, NULL);
    for (int64_t i = 0; i < nb; i++, g += cb) {
        const int8_t *q = a->q + 32 * i;
        /* Q5_0: minus 16 times the sums of each 4 codes, lane t's in lane t */
        const __m512i e =
            five && !with_m ? _mm512_castsi256_si512(_mm256_sub_epi32(
                                  _mm256_setzero_si256(),
                                  _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(16),
                                                      _mm256_loadu_si256((const __m256i *)q))))
                            : _mm512_setzero_si512();
        __m512i lane[8];
        for (int t = 0; t < 4; t++) {
            fetch_line(g, cb, (size_t)(2 * t)), fetch_line(g, cb, (size_t)(2 * t + 1));
            const __m512i raw = _mm512_loadu_si512((const void *)(g + 64 * t));
            __m512i lo = _mm512_and_si512(raw, m4),
                    hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            if (five) {
                uint64_t ml, mh;
                memcpy(&ml, g + 256 + 16 * t, 8);
                memcpy(&mh, g + 256 + 16 * t + 8, 8);
                lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(ml), lo, c16);
                hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(mh), hi, c16);
            }
            lane[t] = _mm512_dpbusd_epi32(_mm512_permutexvar_epi32(_mm512_set1_epi32(t), e), lo,
                                          codes4(q + 4 * t));
            lane[t + 4] = _mm512_dpbusd_epi32(_mm512_permutexvar_epi32(_mm512_set1_epi32(t + 4), e),
                                              hi, codes4(q + 16 + 4 * t));
        }
        lanes_fma(acc, lane, g + at_d, a->d[i]);
        if (with_m) summs = _mm512_add_ps(summs, row_d(g + at_d + 32, a->s[i])); /* m_w s_x */
    }
    _mm512_storeu_ps(y, _mm512_add_ps(hsum16(acc), summs));
}

/* IQ1_S, IQ1_M: chunk c = 8 r + k of a block (16 bytes) holds the codes
 * g + 1 of values 4 c .. 4 c + 3 of the 16 rows, row 4 l + n / 4's in
 * byte n at bit 2 l (one GFNI affine a register: iq1_codes64), so that
 * lane k of run r is sum (g + 1) q - sum q, times the odd scale 2 s + 1
 * (IQ1_S: run r's; IQ1_M: that of its 16 values). The delta: IQ1_S's
 * run sums of the codes times the scale, negated where the run's sign,
 * added per block into a float sum (a product, then a sum, as
 * iq1_row's); IQ1_M's sums of 4 codes, negated where the 8 values'
 * sign, times the scale into eight more lanes */
AVX512VNNI static inline __attribute__((always_inline)) void
lanes_iq1(float *y, const uint8_t *g, int64_t nb, const struct matmul_q8 *a, const int m)
{
    const size_t cb = m ? 16 * 86 : 16 * 74, at_d = m ? 1344 : 1152;
    __m512 acc[8], acc2[8], acc1 = _mm512_setzero_ps();
    clear8(acc, NULL), clear8(acc2, NULL);
    for (int64_t i = 0; i < nb; i++, g += cb) {
        const int8_t *q = a->q + 256 * i;
        int32_t e[64];
        sums4(q, 1, e);
        __m512i lane[8], lane2[8], si1 = _mm512_setzero_si512();
        clear8(NULL, lane), clear8(NULL, lane2);
        const __m512i words =
            m ? _mm512_loadu_si512((const void *)(g + 1280)) : _mm512_setzero_si512();
        for (int r = 0; r < 8; r++) {
            /* IQ1_S: run r's nibble (scale, sign in bit 3); IQ1_M: two scales */
            const __m512i raw = u8x16(g + 1024 + 16 * (m ? 2 * r : r));
            const __m512i ls0 = odd(_mm512_and_si512(raw, _mm512_set1_epi32(7))),
                          ls1 = m ? odd(u8x16(g + 1024 + 16 * (2 * r + 1))) : ls0;
            for (int k = 0; k < 8; k++) {
                fetch_line(g, cb, (size_t)(8 * r + k));
                const __m512i ls = k < 4 ? ls0 : ls1;
                const __m512i s = _mm512_dpbusd_epi32(_mm512_set1_epi32(e[8 * r + k]),
                                                      iq1_codes64(g + 16 * (8 * r + k)),
                                                      codes4(q + 32 * r + 4 * k));
                lane[k] = _mm512_dpwssd_epi32(lane[k], s, ls);
                if (m) { /* the 4 codes' sum, -e, negated where the sign */
                    const __m512i ev = _mm512_set1_epi32(e[8 * r + k]);
                    const __mmask16 pos = _mm512_testn_epi32_mask(
                        words, _mm512_set1_epi32((int)(1u << (4 * r + k / 2))));
                    lane2[k] = _mm512_dpwssd_epi32(
                        lane2[k], _mm512_mask_sub_epi32(ev, pos, _mm512_setzero_si512(), ev), ls);
                }
            }
            if (!m) {
                const __m512i t =
                    _mm512_mullo_epi32(ls0, _mm512_set1_epi32(a->sum16[16 * i + 2 * r] +
                                                              a->sum16[16 * i + 2 * r + 1]));
                si1 = _mm512_add_epi32(
                    si1, _mm512_mask_sub_epi32(t, _mm512_test_epi32_mask(raw, _mm512_set1_epi32(8)),
                                               _mm512_setzero_si512(), t));
            }
        }
        const __m512 d = lanes_fma(acc, lane, g + at_d, a->d[i]);
        if (m)
            for (int k = 0; k < 8; k++)
                acc2[k] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lane2[k]), acc2[k]);
        else
            acc1 = _mm512_add_ps(acc1, _mm512_mul_ps(d, _mm512_cvtepi32_ps(si1)));
    }
    const __m512 main = hsum16(acc), delta = m ? hsum16(acc2) : acc1;
    _mm512_storeu_ps(y, _mm512_add_ps(main, _mm512_mul_ps(_mm512_set1_ps(IQ1_DELTA), delta)));
}

/* TQ2_0 and TQ1_0 (as TQ2_0): IQ1's chunks of codes u = value + 1, no
 * scale; lane k starts at minus the sum of run k's 32 input codes (as
 * ggml's TQ2_0 kernel takes the 1 out: the lanes' total is the same),
 * and the block's lanes times d_x d_w are added to the sums, not fused
 * (as mx_q8_tq2_0_vnni) */
AVX512VNNI static void lanes_tq(float *y, const uint8_t *g, int64_t nb, const struct matmul_q8 *a)
{
    const size_t cb = 16 * 66;
    __m512 acc[8];
    clear8(acc, NULL);
    for (int64_t i = 0; i < nb; i++, g += cb) {
        const int8_t *q = a->q + 256 * i;
        __m512i lane[8];
        for (int k = 0; k < 8; k++)
            lane[k] = _mm512_set1_epi32(-(a->sum16[16 * i + 2 * k] + a->sum16[16 * i + 2 * k + 1]));
        for (int r = 0; r < 8; r++)
            for (int k = 0; k < 8; k++) {
                fetch_line(g, cb, (size_t)(8 * r + k));
                lane[k] = _mm512_dpbusd_epi32(lane[k], iq1_codes64(g + 16 * (8 * r + k)),
                                              codes4(q + 32 * r + 4 * k));
            }
        const __m512 d = row_d(g + 1024, a->d[i]);
        for (int k = 0; k < 8; k++)
            acc[k] = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(lane[k]), d), acc[k]);
    }
    _mm512_storeu_ps(y, hsum16(acc));
}

/* IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: IQ1's chunks of 2-bit level
 * codes (IQ3: 4 added where the level-bit mask says), the levels'
 * magnitudes by one vpshufb, the input's 4 codes negated where the
 * chunk's sign mask says, then lane k += (2 s + 1) (mag . q) for the
 * run's (IQ2_XS, IQ2_S: the 16 values') 4-bit scale s, times d_w d_x into
 * the sums, and 1 / m after the horizontal sum (as grid_copy_row) */
AVX512VNNI static inline __attribute__((always_inline)) void
lanes_grid(float *y, const uint8_t *g, int64_t nb, const struct matmul_q8 *a, const uint32_t type)
{
    const int iq3 = type == GGML_IQ3_XXS || type == GGML_IQ3_S,
              per16 = type == GGML_IQ2_XS || type == GGML_IQ2_S;
    const size_t at_s = iq3 ? 2048 : 1536, at_d = at_s + (per16 ? 256 : 128),
                 cb = at_d + 32; /* the group's block */
    const __m512i lv = _mm512_broadcast_i32x4(
        type == GGML_IQ3_XXS ? _mm_setr_epi8(4, 12, 20, 28, 36, 44, 52, 62, 0, 0, 0, 0, 0, 0, 0, 0)
        : type == GGML_IQ3_S ? _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0)
                             : _mm_setr_epi8(8, 25, 43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    __m512 acc[8];
    clear8(acc, NULL);
    for (int64_t i = 0; i < nb; i++, g += cb) {
        const int8_t *q = a->q + 256 * i;
        __m512i lane[8];
        clear8(NULL, lane);
        for (int r = 0; r < 8; r++) {
            const __m512i ls0 = odd(u8x16(g + at_s + 16 * (per16 ? 2 * r : r))),
                          ls1 = per16 ? odd(u8x16(g + at_s + 16 * (2 * r + 1))) : ls0;
            for (int k = 0; k < 8; k++) {
                const int c = 8 * r + k;
                fetch_line(g, cb, (size_t)c);
                __m512i code = iq1_codes64(g + 16 * c);
                uint64_t neg, hi;
                if (iq3) {
                    memcpy(&hi, g + 1536 + 8 * c, 8);
                    code =
                        _mm512_mask_add_epi8(code, _cvtu64_mask64(hi), code, _mm512_set1_epi8(4));
                }
                memcpy(&neg, g + 1024 + 8 * c, 8);
                const __m512i qb = codes4(q + 32 * r + 4 * k);
                const __m512i qs =
                    _mm512_mask_sub_epi8(qb, _cvtu64_mask64(neg), _mm512_setzero_si512(), qb);
                lane[k] = _mm512_dpwssd_epi32(
                    lane[k],
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(lv, code), qs),
                    k < 4 ? ls0 : ls1);
            }
        }
        lanes_fma(acc, lane, g + at_d, a->d[i]);
    }
    _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_set1_ps(iq_m_inv(type)), hsum16(acc)));
}

AVX512VNNI void mx_q8_lanes_vnni(float *y, const struct wmat *W, int64_t r,
                                 const struct matmul_q8 *a)
{
    const int64_t nb = W->in / cols_block_values(W->type);
    const uint8_t *g = W->copy + (size_t)r * (size_t)nb * cols_block_bytes(W->type) / 16;
    switch (W->type) {
    case GGML_IQ4_XS:
        lanes_iq4_xs(y, g, nb, a);
        break;
    case GGML_Q3_K:
        lanes_q3_k(y, g, nb, a);
        break;
    case GGML_Q4_1:
        lanes32(y, g, nb, a, 0, 1);
        break;
    case GGML_Q5_0:
        lanes32(y, g, nb, a, 1, 0);
        break;
    case GGML_Q5_1:
        lanes32(y, g, nb, a, 1, 1);
        break;
    case GGML_IQ1_S:
        lanes_iq1(y, g, nb, a, 0);
        break;
    case GGML_IQ1_M:
        lanes_iq1(y, g, nb, a, 1);
        break;
    case GGML_TQ1_0:
    case GGML_TQ2_0:
        lanes_tq(y, g, nb, a);
        break;
#define GRID_CASE(t)                                                                               \
    case t: /* the type a constant: its own inlined kernel */                                      \
        lanes_grid(y, g, nb, a, t);                                                                \
        break
        GRID_CASE(GGML_IQ2_XXS);
        GRID_CASE(GGML_IQ2_XS);
        GRID_CASE(GGML_IQ2_S);
        GRID_CASE(GGML_IQ3_XXS);
        GRID_CASE(GGML_IQ3_S);
#undef GRID_CASE
    default:
        break;
    }
}

#endif /* x86 */

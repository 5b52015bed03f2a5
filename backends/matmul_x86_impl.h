/* matmul_x86_impl — what the x86 kernel files share (folder-private): the
 * target attributes of the three sets, the prefetch distance, and each
 * file's kernels for the dispatch in matmul_x86.c (mx_ names). Only on
 * x86-64 with GCC-compatible compilers. */
#ifndef QG_MATMUL_X86_IMPL_H
#define QG_MATMUL_X86_IMPL_H

#include "backends/matmul.h"
#include "backends/matmul_impl.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"

#include <stddef.h>
#include <string.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Bytes each kernel prefetches ahead of the block it decodes (into L1).
 * Decode streams each thread's rows at 20-25 GB/s per core, and 400-1440
 * bytes ahead (the distances before) left the kernels waiting on memory.
 * On the 1.1B model (bench_decode, alternating runs, 2 cores of a Zen 5):
 * Q4_K 57 tokens/s at 1440 bytes, 56-65 at 3072, 65-71 at 4096-6144;
 * Q8_0 39-40 at 420, 47 at 6144; F16 about 5 % faster at 6144. */
enum { AHEAD = 6144 };

#define AVX2 __attribute__((target("avx2,fma,f16c")))

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

#define AVX512VNNI                                                                                 \
    __attribute__((                                                                                \
        target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,gfni,avx2,fma,f16c")))

AVX2 static inline float h2f_f16c(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8));
}

__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* s plus the products with x of elements [k, W->in) of the F16 or BF16
 * row at b, through dequant's own conversion (the wide kernels' tails) */
static inline float half_tail(const struct wmat *W, const uint8_t *b, const float *x, int64_t k,
                              float s)
{
    float w;
    for (; k < W->in; k++) {
        dequant_row(W->type, b + 2 * k, &w, 1);
        s += w * x[k];
    }
    return s;
}

/* IQ4_XS's 6-bit scale of group ib: 4 low bits in scales_l (sl), 2 high
 * in scales_h (sh) */
static inline int iq4xs_scale(const uint8_t *sl, unsigned sh, int ib)
{
    return ((sl[ib / 2] >> 4 * (ib % 2)) & 0xF) | (int)(((sh >> (2 * ib)) & 3) << 4);
}

/* MXFP4's E8M0 scale 2^(e - 127) (e = 0: the subnormal 2^-127), NaN for
 * e = 255, built from its bits as dequant's ldexpf gives it */
static inline float e8m0_scale(uint8_t e)
{
    uint32_t u = e == 0xFF ? 0x7FC00000u : e == 0 ? 0x00400000u : (uint32_t)e << 23;
    float f;
    memcpy(&f, &u, 4);
    return f;
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

/* the flag's index in a preparation over in inputs */
static inline int64_t vnni_flag_at(int64_t in)
{
    return in + in / 32;
}

/* the planes of a group: per pair of groups 192 bytes, top, mid, low, 64
 * each in element order; then per group 2^(e_g - 22) */
enum { VNNI_PAIR_BYTES = 192 };

AVX2 float mx_dot_avx2(const float *a, const float *b, int64_t n);
AVX2 void mx_dots_avx2(float *out, const float *a, const float *b, int64_t T, int64_t stride,
                       int64_t n, float scale);
/* mx_dots_avx2 with b's rows in fp16: the bits of their f32 values */
AVX2 void mx_dots_f16_avx2(float *out, const float *a, const uint16_t *b, int64_t T, int64_t stride,
                           int64_t n, float scale);

/* Q8_0: 32 int8 and an fp16 scale per block */
AVX2 float mx_row_q8_0_avx2(const struct wmat *W, int64_t r, const float *x);

/* a Q4_1, Q5_0 or Q5_1 block's geometry: its bytes, where its 16 bytes of
 * nibbles start, whether it has qh (4 bytes after d and m) and m (after d) */
struct legacy_block {
    size_t bytes, qs;
    int five, with_m;
};
static inline struct legacy_block legacy_block_of(uint32_t type)
{
    struct legacy_block g = {0, 0, type != GGML_Q4_1, type != GGML_Q5_0};
    g.qs = (size_t)(2 + 2 * g.with_m + 4 * g.five);
    g.bytes = g.qs + 16;
    return g;
}

/* block b's d, m (Q5_0: -16 d) and qh (0 without) */
AVX2 static inline float legacy_scales(const struct legacy_block *g, const uint8_t *b, float *m,
                                       uint32_t *qh)
{
    float d = h2f_f16c(b);
    *m = g->with_m ? h2f_f16c(b + 2) : -16.0f * d;
    *qh = 0;
    if (g->five) memcpy(qh, b + 2 + 2 * g->with_m, 4);
    return d;
}

/* Q4_1, Q5_0, Q5_1: y = d q + m (Q5_0: d (q - 16)), the 5-bit formats' high
 * bits in qh; the block sums of x computed alongside */
AVX2 float mx_row_legacy_avx2(const struct wmat *W, int64_t r, const float *x);

/* Q4_0: y = (q - 8) d, low nibbles elements 0..15, high 16..31; with the
 * group sums of x, dot = sum_b d_b (q.x)_b - 8 d_b sum(x)_b */
AVX2 float mx_row_q4_0_avx2(const struct wmat *W, int64_t r, const float *x, const float *xg);

/* Q6_K: per 128 elements, quarter k (32 elements) takes the low (k < 2) or
 * high nibbles of ql[32 (k % 2) + l], bits 2k of qh[l] above them, minus
 * 32, times d and an int8 scale per 16. Read as the prepared lanes (mv_x86_prep): lanes 0..3
 * hold elements 0..15 of a quarter, lanes 4..7 elements 16..31, so the two
 * scales of a quarter are one vector */
AVX2 float mx_row_q6_k_avx2(const struct wmat *W, int64_t r, const float *xg);

/* IQ4_NL: blocks of 32, an fp16 scale and 16 bytes */
AVX2 float mx_row_iq4_nl_avx2(const struct wmat *W, int64_t r, const float *x);

/* IQ4_XS: superblocks of 256; 6-bit group scales (4 low bits in scales_l,
 * 2 high in scales_h), value scale d (ls - 32) */
AVX2 float mx_row_iq4_xs_avx2(const struct wmat *W, int64_t r, const float *x);

/* F16 and BF16 rows: 16 elements converted in registers and multiplied at
 * once; the tail through dequant's own conversion */
AVX2 float mx_row_half_avx2(const struct wmat *W, int64_t r, const float *x, int bf16);

/* Q4_K: y = d sc q - dmin m per 32; dot = sum_g d sc_g (x.q)_g - dmin m_g sum(x)_g,
 * with the group sums and lanes of x prepared once per product (xg) */
AVX2 float mx_row_q4_k_avx2(const struct wmat *W, int64_t r, const float *xg);

/* Q5_K: Q4_K's layout (176 bytes: d, dmin, scales, then 32 bytes qh before
 * the 128 of nibbles) with a fifth bit per element: bit 2p of qh[l] for
 * element l of group 2p, bit 2p + 1 for group 2p + 1 */
AVX2 float mx_row_q5_k_avx2(const struct wmat *W, int64_t r, const float *xg);

AVX512 float mx_dot_avx512(const float *a, const float *b, int64_t n);
/* out[t] = mx_dot_avx512(a, b + t stride, n) * scale, t < T, to the bit */
AVX512 void mx_dots_avx512(float *out, const float *a, const float *b, int64_t T, int64_t stride,
                           int64_t n, float scale);
/* mx_dots_avx512 with b's rows in fp16: the bits of their f32 values */
AVX512 void mx_dots_f16_avx512(float *out, const float *a, const uint16_t *b, int64_t T,
                               int64_t stride, int64_t n, float scale);

/* Q4_K (see row_q4_k_avx2): a pair of groups per 32 bytes of nibbles */
AVX512 float mx_row_q4_k_avx512(const struct wmat *W, int64_t r, const float *xg);

/* Q5_K (see row_q5_k_avx2): the fifth bit joins each nibble as bit 4 of
 * its byte, bit 2p of qh for the low nibbles (lanes 0..7), 2p + 1 for the
 * high ones */
AVX512 float mx_row_q5_k_avx512(const struct wmat *W, int64_t r, const float *xg);

/* Q6_K (see row_q6_k_avx2): per half n of 128 elements, the 64 bytes of
 * ql as one vector hold quarters 0 and 1 (low nibbles) or 2 and 3 (high),
 * a pair of groups in the pair layout; their scales, 16 elements each,
 * are four per vector */
AVX512 float mx_row_q6_k_avx512(const struct wmat *W, int64_t r, const float *xg);

/* Q8_0: 32 int8 and an fp16 scale per block, 16 converted at a time */
AVX512 float mx_row_q8_0_avx512(const struct wmat *W, int64_t r, const float *x);

/* Q4_0 and IQ4_NL (iq4), blocks of 32 (an fp16 scale and 16 bytes of
 * nibbles): d t[q], t the format's 16 values (Q4_0: q - 8, so no offset
 * term) */
AVX512 float mx_row_nib32_avx512(const struct wmat *W, int64_t r, const float *x, int iq4);

/* Q2_K: runs of 16 with a 4-bit scale and min each */
AVX512 float mx_row_q2_k_avx512(const struct wmat *W, int64_t r, const float *x);

/* Q3_K: Q2_K's runs, a high bit each from hm, a signed 6-bit scale */
AVX512 float mx_row_q3_k_avx512(const struct wmat *W, int64_t r, const float *x);

/* Q2_K and Q3_K, 8 lanes at a time */
AVX2 float mx_row_q2_k_avx2(const struct wmat *W, int64_t r, const float *x);
AVX2 float mx_row_q3_k_avx2(const struct wmat *W, int64_t r, const float *x);

/* Q4_1, Q5_0, Q5_1 (mx_row_legacy_avx2's arithmetic, 16 lanes) */
AVX512 float mx_row_legacy_avx512(const struct wmat *W, int64_t r, const float *x);

/* the seven grid formats (matmul_iq.c), one sub-block of 32 at a time */
AVX512 float mx_row_iq_avx512(const struct wmat *W, int64_t r, const float *x);
AVX2 float mx_row_iq_avx2(const struct wmat *W, int64_t r, const float *x);

/* TQ1_0 and TQ2_0 (matmul_ternary.c) */
AVX512 float mx_row_tq1_0_avx512(const struct wmat *W, int64_t r, const float *x);
AVX512 float mx_row_tq2_0_avx512(const struct wmat *W, int64_t r, const float *x);
AVX2 float mx_row_tq1_0_avx2(const struct wmat *W, int64_t r, const float *x);
AVX2 float mx_row_tq2_0_avx2(const struct wmat *W, int64_t r, const float *x);

/* MXFP4: blocks of 32, an E8M0 scale and 16 bytes of E2M1 nibbles */
AVX512 float mx_row_mxfp4_avx512(const struct wmat *W, int64_t r, const float *x);
AVX2 float mx_row_mxfp4_avx2(const struct wmat *W, int64_t r, const float *x);

/* IQ4_XS (see row_iq4_xs_avx2) */
AVX512 float mx_row_iq4_xs_avx512(const struct wmat *W, int64_t r, const float *x);

AVX512 float mx_row_half_avx512(const struct wmat *W, int64_t r, const float *x, int bf16);

/* The AVX-512 pair layout (see nibble_pair) of x[0..n), n % 64 == 0, and
 * the group sums: per 64 elements, 8 permutes, 4 blends and 4 multiplies
 * by 2^-(8k + 4h) (the masked Q4_K kernel's) or 1 */
AVX512 void mx_prep_avx512(int masked, const float *x, int64_t n, float *lanes, float *sums);

/* The AVX2 layout, lanes[32 g + 8 k + i] = x[32 g + 4 i + k], and the
 * group sums, for n % 32 == 0: per group a 4 x 4 transpose of element
 * pairs (x[4 i + k], x[4 (i + 1) + k]) */
AVX2 void mx_prep_avx2(const float *x, int64_t n, float *lanes, float *sums);

/* The VNNI preparation of x[0..n) (n % 256 == 0) for Q4_K and Q5_K (the
 * planes, then the group sums at prep + n) or the vnni_quads types (the
 * planes, then 32 times the sum of n over each 4 elements:
 * int32 at prep + 3n/4 + n/32);
 * or, with the flag 0, the float kernel's layout (prep_avx512, masked for
 * Q4_K) */
AVX512VNNI void mx_prep_vnni(uint32_t type, const float *x, int64_t n, float *prep);

/* sum of q n over a pair of groups, less `less`, per 32-bit lane (4
 * elements): q the pair's 64 values (below 128) in element order, p its
 * planes. `less` is taken off before the low plane, where the partial sum
 * is smallest (Q6_K's 32 sum n, the grid formats' 64 sum n; zero for the
 * others) */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
planes_dot(__m512i v, const uint8_t *p, __m512i less)
{
    /* the top plane is signed: the values as the unsigned operand; the mid
     * and low planes are unsigned: the values (below 128) as the signed one */
    __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v, _mm512_loadu_si512(p));
    t = _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 8), _mm512_loadu_si512(p + 64), v);
    t = _mm512_sub_epi32(_mm512_slli_epi32(t, 8), less);
    return _mm512_dpbusd_epi32(t, _mm512_loadu_si512(p + 128), v);
}

AVX512VNNI float mx_row_q4_k_vnni(const struct wmat *W, int64_t r, const float *prep);

AVX512VNNI float mx_row_q5_k_vnni(const struct wmat *W, int64_t r, const float *prep);

/* Q6_K from the VNNI preparation: per 4 elements the exact integer sum of
 * (q - 32) n, as sum q n (q, the stored 6 bits, below 64: the nibbles'
 * role in planes_dot) less 32 sum n (the preparation's quads), below
 * 2^30; scaled by d sc_j 2^(e - 22), scale j over 16 elements, x's group
 * j / 2. The 6-bit values by q6_values, in element order, 64 a vector. */
AVX512VNNI float mx_row_q6_k_vnni(const struct wmat *W, int64_t r, const float *prep);

/* 1 for the grid formats with integer kernels of their own in the
 * avx512vnni set, plain (mx_row_iq_vnni) and a=llamacpp, decoded by
 * iq_vnni_impl.h's iq_pair */
static inline int iq_vnni_grid(uint32_t type)
{
    return type == GGML_IQ2_XXS || type == GGML_IQ2_XS || type == GGML_IQ2_S ||
           type == GGML_IQ3_XXS || type == GGML_IQ3_S;
}

/* 1 for the types whose VNNI preparation exists in the avx512vnni set
 * only (their avx512 kernels read x): the iq_vnni_grid formats, Q2_K,
 * Q3_K, TQ1_0 and TQ2_0 */
static inline int vnni_only_prep(uint32_t type)
{
    return iq_vnni_grid(type) || type == GGML_Q3_K || type == GGML_Q2_K || type == GGML_TQ1_0 ||
           type == GGML_TQ2_0;
}

/* 1 for the types whose VNNI preparation keeps 32 times the sums of n
 * over each 4 elements (the quads) */
static inline int vnni_quads(uint32_t type)
{
    return type == GGML_Q6_K || vnni_only_prep(type);
}

/* Q3_K's 16 scales of the 12 bytes at s (dequant_q3k_scale: signed,
 * -32..31), one a lane */
AVX512VNNI static inline __attribute__((always_inline)) __m512i q3k_scales16(const uint8_t *s)
{
    uint32_t l0, l1, h;
    memcpy(&l0, s, 4);
    memcpy(&l1, s + 4, 4);
    memcpy(&h, s + 8, 4);
    const __m128i lo =
        _mm_and_si128(_mm_srlv_epi32(_mm_setr_epi32((int)l0, (int)l1, (int)l0, (int)l1),
                                     _mm_setr_epi32(0, 0, 4, 4)),
                      _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(
        _mm_srlv_epi32(_mm_set1_epi32((int)h), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_or_si128(lo, _mm_slli_epi32(hi, 4))),
                            _mm512_set1_epi32(32));
}

/* Q2_K from the VNNI preparation (quads): per 4 elements the exact sum of
 * q n (q below 4), scaled by d sc_j 2^(e - 22); less dmin m_j 2^(e - 22)
 * times the quads / 32 (sum n), in floats */
AVX512VNNI float mx_row_q2_k_vnni(const struct wmat *W, int64_t r, const float *prep);

/* lanes 0-7: d 2^(e_g - 22) of a block's 8 groups (xs: their 2^(e - 22)
 * in the VNNI preparation), lanes 8-15 zero */
AVX512VNNI static inline __attribute__((always_inline)) __m512 xs8(const float *xs, float d)
{
    return _mm512_zextps256_ps512(_mm256_mul_ps(_mm256_loadu_ps(xs), _mm256_set1_ps(d)));
}

/* lane n: xs[n / 2] d (the factor of values 16 n .. 16 n + 15) */
AVX512VNNI static inline __attribute__((always_inline)) __m512 xs16(const float *xs, float d)
{
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                                 xs8(xs, d));
}

/* Q3_K block b's values 128 j + 64 h .. 128 j + 64 h + 63 (runs 2 h and
 * 2 h + 1 of its half j) as v = the 2 low bits + 4 h (h the hmask bit),
 * below 8: the value is v - 4 */
AVX512VNNI static inline __attribute__((always_inline)) __m512i q3k_values(const uint8_t *b, int j,
                                                                           int h)
{
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)b),
                  q3 = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * j));
    const int l = 2 * h, bit = 4 * j + l;
    const __m256i v0 =
        _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(q3, 2 * l), m3),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, bit), one), 2));
    const __m256i v1 = _mm256_add_epi8(
        _mm256_and_si256(_mm256_srli_epi16(q3, 2 * l + 2), m3),
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, bit + 1), one), 2));
    return _mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1);
}

/* Q3_K from the VNNI preparation (quads): per 4 elements the exact sum of
 * (v - 4) n, v = the 2 low bits + 4 h (below 8), as sum v n less 4 sum n
 * (the quads / 8); scaled by d sc_j 2^(e - 22), scale j over 16 elements */
AVX512VNNI float mx_row_q3_k_vnni(const struct wmat *W, int64_t r, const float *prep);

/* The grid formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S from the
 * VNNI preparation in Q6_K's layout (planes, then quads): per 4 elements
 * the exact integer sum of (+-g) n, as sum (64 +- g) n (below 128: the
 * nibbles' role in planes_dot) less 64 sum n (twice the quads), below 2^31
 * (|g| <= 62); scaled by d ls / m 2^(e - 22) per lane; and TQ1_0, TQ2_0:
 * sum (u - 1) n as sum u n less the quads / 32 (matmul_vnni_iq.c) */
AVX512VNNI float mx_row_iq_vnni(const struct wmat *W, int64_t r, const float *prep);

/* a=llamacpp's integer products (matmul_q8.c, matmul_q8_iq.c): helpers
 * they share, then one kernel per weight type against an input in
 * llama.cpp's 8-bit blocks (a row's product, llama.cpp's bits) */

/* ggml's hsum_float_8: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
AVX512VNNI static inline __attribute__((always_inline)) float hsum8(__m256 v)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

/* two 16-byte runs of nibbles (a, b) as 64 unsigned bytes in element
 * order: a's low nibbles (elements 0..15), a's high (16..31), then b's */
AVX512VNNI static inline __attribute__((always_inline)) __m512i nib_pair(const uint8_t *a,
                                                                         const uint8_t *b)
{
    const __m256i v =
        _mm256_set_m128i(_mm_loadu_si128((const __m128i *)b), _mm_loadu_si128((const __m128i *)a));
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    /* [a lo, b lo, a hi, b hi] to [a lo, a hi, b lo, b hi] */
    return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7),
                                    _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
}

/* a 16-value table (IQ4_NL's, MXFP4's) offset by 128 to unsigned bytes,
 * in each 128-bit lane */
AVX512VNNI static inline __attribute__((always_inline)) __m512i table16(const int8_t *values)
{
    return _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)values)),
        _mm512_set1_epi8((char)0x80));
}

/* ggml's E8M0 scale halved (its MXFP4 values are twice E2M1's): 2^(e - 128),
 * e = 0, 1 subnormal, e = 255 2^127 (no NaN, as ggml) */
static inline float e8m0_half(uint8_t e)
{
    uint32_t u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* per 128-bit lane l a GFNI bit matrix taking bits 2l and 2l + 1 of each
 * byte to bits 0 and 1 (bit i of the result: row byte 7 - i) */
#define IQ1_Q(s) ((long long)(1ULL << (s) << 56 | 1ULL << ((s) + 1) << 48))

AVX512VNNI static inline __attribute__((always_inline)) __m512i iq1_codes64(const uint8_t *c)
{
    const __m512i quarters = _mm512_setr_epi64(IQ1_Q(0), IQ1_Q(0), IQ1_Q(2), IQ1_Q(2), IQ1_Q(4),
                                               IQ1_Q(4), IQ1_Q(6), IQ1_Q(6));
    return _mm512_gf2p8affine_epi64_epi8(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)c)), quarters, 0);
}

/* the input's 4 codes at q as one 32-bit lane, broadcast (the columns
 * kernels: one vpdpbusd adds them times 16 rows' 4 weight bytes) */
AVX512VNNI static inline __attribute__((always_inline)) __m512i codes4(const int8_t *q)
{
    int32_t v;
    memcpy(&v, q, 4);
    return _mm512_set1_epi32(v);
}

/* sixteen int32 lanes to eight: lanes k and k + 8 added */
AVX512VNNI static inline __attribute__((always_inline)) __m256i fold16(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* the 4 scales of the 64 values from 16 * i0 as 16 lanes, 4 each */
AVX512VNNI static inline __attribute__((always_inline)) __m512i quad_scales(__m512i sc, int i0)
{
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_epi32(_mm512_add_epi32(quad, _mm512_set1_epi32(i0)), sc);
}

/* the sums of each 32 codes of the Q8_K block at k, in run order (each
 * two of its sums of 16) */
AVX512VNNI static inline __attribute__((always_inline)) __m256i run_sums(const struct matmul_q8 *a,
                                                                         int64_t k)
{
    const __m512i s16 = _mm512_loadu_si512((const void *)(a->sum16 + k / 16));
    return _mm256_permute4x64_epi64(
        _mm256_hadd_epi32(_mm512_castsi512_si256(s16), _mm512_extracti64x4_epi64(s16, 1)), 0xD8);
}

AVX512VNNI float mx_q8_q4_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q8_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
/* rows r to r + 3 (r % 4 == 0) into y[0..3] from W->copy (matmul_copy),
 * each as mx_q8_q4_0_vnni gives it */
AVX512VNNI void mx_q8_q4_0_rows4_vnni(float *y, const struct wmat *W, int64_t r,
                                      const struct matmul_q8 *a);
/* the same for IQ4_NL and MXFP4, each row as mx_q8_iq4_nl_vnni and
 * mx_q8_mxfp4_vnni give it */
AVX512VNNI void mx_q8_iq4_nl_rows4_vnni(float *y, const struct wmat *W, int64_t r,
                                        const struct matmul_q8 *a);
AVX512VNNI void mx_q8_mxfp4_rows4_vnni(float *y, const struct wmat *W, int64_t r,
                                       const struct matmul_q8 *a);
/* Q4_0, IQ4_NL, MXFP4, Q4_K, Q2_K in llama.cpp's repacked order
 * (matmul_q8_cols.c, matmul_q8_blockwise): rows r .. r + n - 1 (n <= 16)
 * into y[0..n), from W->copy where they are one of its whole groups of
 * 16, else from W->data */
AVX512VNNI void mx_q8_cols_vnni(float *y, const struct wmat *W, int64_t r, int n,
                                const struct matmul_q8 *a);
/* IQ4_XS, Q3_K, Q4_1, Q5_0, Q5_1, IQ1_S, IQ1_M, TQ1_0, TQ2_0 in ggml's
 * vec_dot order
 * (matmul_q8_lanes.c, cols_lanes8): rows r .. r + 15 (r % 16 == 0, one of
 * W->copy's whole groups) into y[0..16), each as the type's row kernel
 * (mx_q8_iq4_xs_vnni ...) gives it */
AVX512VNNI void mx_q8_lanes_vnni(float *y, const struct wmat *W, int64_t r,
                                 const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q4_1_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q5_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q5_1_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q4_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq4_nl_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_mxfp4_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq4_xs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q2_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_tq2_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_tq1_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq1_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq1_m_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq2_xxs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq2_xs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq2_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq3_xxs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_iq3_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q3_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q5_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);
AVX512VNNI float mx_q8_q6_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a);

#endif /* x86 */

#endif

/* matmul_q8 — integer decode kernels for a=llamacpp (AVX-512 VNNI): the
 * input already in llama.cpp's 8-bit blocks (struct matmul_q8), each
 * product is computed as ggml's CPU kernels (AVX2 with VNNI, the ones
 * llama.cpp runs on this kind of machine for a single token) compute it,
 * to the bit: per block eight exact integer sums over lanes of four
 * consecutive codes in each 32-byte run, each converted to float and
 * multiplied by the block's two scales into eight running sums, block
 * after block (one fused multiply-add each), then summed as ggml's
 * hsum_float_8 sums them. Two blocks' integers at a time here (64 bytes,
 * vpdpbusd); the order of the float operations is ggml's. Where llama.cpp
 * repacks (matmul_q8_blockwise) its repacked kernels' order is
 * matmul_q8_cols.c's instead; these then serve repack=0 (--no-repack). */
#include "backends/matmul_x86_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* isum + s sc per 32-bit lane, exactly, by one vpdpwssd: for s within
 * int16 (a lane of 4 products of a weight below 64 in magnitude and a
 * code of at most 127: 4 x 63 x 127 = 32004) and sc's upper 16 bits zero
 * (a scale from 0 to 32767, or a signed one through low16) */
AVX512VNNI static inline __attribute__((always_inline)) __m512i scaled_add(__m512i isum, __m512i s,
                                                                           __m512i sc)
{
    return _mm512_dpwssd_epi32(isum, s, sc);
}

/* a lane's low 16 bits (a signed scale as scaled_add takes it) */
AVX512VNNI static inline __attribute__((always_inline)) __m512i low16(__m512i v)
{
    return _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF));
}

/* acc += d0 lo(s) then += d1 hi(s): two blocks' lane sums in ggml's order */
AVX512VNNI static inline __attribute__((always_inline)) __m256 two_blocks(__m256 acc, __m512i s,
                                                                          float d0, float d1)
{
    const __m512 f = _mm512_cvtepi32_ps(s);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d0), _mm512_castps512_ps256(f), acc);
    return _mm256_fmadd_ps(_mm256_set1_ps(d1), _mm512_extractf32x8_ps(f, 1), acc);
}

/* one Q4_0 row's next two blocks (b: the first) against codes q, d0 d1
 * the input's scales: per lane sum (nib - 8) q = sum nib q - 8 sum q */
AVX512VNNI static inline __attribute__((always_inline)) __m256
q4_0_two(__m256 acc, const uint8_t *b, __m512i q, float d0, float d1)
{
    const __m512i s =
        _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), nib_pair(b + 2, b + 20), q),
                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), q));
    return two_blocks(acc, s, h2f_f16c(b) * d0, h2f_f16c(b + 18) * d1);
}

/* one Q4_0 row's last block (an odd count) */
AVX512VNNI static inline __attribute__((always_inline)) __m256
q4_0_one(__m256 acc, const uint8_t *b, const int8_t *q, float d)
{
    const __m256i qv = _mm256_loadu_si256((const __m256i *)(const void *)q);
    const __m256i w = _mm512_castsi512_si256(nib_pair(b + 2, b + 2));
    const __m256i s =
        _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w, qv),
                         _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), qv));
    return _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b) * d), _mm256_cvtepi32_ps(s), acc);
}

/* one Q8_0 row's next two blocks: the weight codes offset by 128 to
 * unsigned bytes, per lane sum (w + 128) q - 128 sum q */
AVX512VNNI static inline __attribute__((always_inline)) __m256
q8_0_two(__m256 acc, const uint8_t *b, __m512i q, float d0, float d1)
{
    const __m512i off = _mm512_set1_epi8((char)0x80);
    const __m512i w =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 2))),
                           _mm256_loadu_si256((const __m256i *)(b + 36)), 1);
    const __m512i s =
        _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(w, off), q),
                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, q));
    return two_blocks(acc, s, h2f_f16c(b) * d0, h2f_f16c(b + 34) * d1);
}

AVX512VNNI static inline __attribute__((always_inline)) __m256
q8_0_one(__m256 acc, const uint8_t *b, const int8_t *q, float d)
{
    const __m256i off = _mm256_set1_epi8((char)0x80);
    const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 2)), off);
    const __m256i qv = _mm256_loadu_si256((const __m256i *)(const void *)q);
    const __m256i s = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w, qv),
                                       _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, qv));
    return _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b) * d), _mm256_cvtepi32_ps(s), acc);
}

/* Four 32-blocks at a time (Q4_0, IQ4_NL, MXFP4): the blocks' 64 bytes of
 * nibbles moved into element order by one byte permutation of two loads
 * (the second masked to the blocks' own bytes) and split into low and
 * high nibbles by one affine transform a register (GFNI: a bit matrix
 * per 64-bit lane), the four scales converted and multiplied at once. */
struct quad {
    __m512i idx01, idx23; /* byte permutations: blocks 0, 1 and 2, 3 */
    __m512i nib;          /* per 64-bit lane the low- or high-nibble matrix */
    __mmask64 tail;       /* the bytes of the second load that are the blocks' */
};

/* per 64-bit lane a GFNI bit matrix that maps bit 7 - i of its row
 * bytes to bit i: NIB_LO keeps a byte's low four bits, NIB_HI moves its
 * high four down (gf2p8affine with either: a nibble split in one op) */
#define NIB_LO 0x0102040800000000LL
#define NIB_HI 0x1020408000000000LL

/* low nibbles in the low 256 bits, high nibbles in the high 256 */
AVX512VNNI static inline __attribute__((always_inline)) __m512i nib_halves(void)
{
    return _mm512_setr_epi64(NIB_LO, NIB_LO, NIB_LO, NIB_LO, NIB_HI, NIB_HI, NIB_HI, NIB_HI);
}

/* the permutations for blocks of bsize bytes with 16 nibble bytes at qs */
AVX512VNNI static inline __attribute__((always_inline)) struct quad quad_of(int bsize, int qs)
{
    const __m512i t = _mm512_set4_epi32(0x0F0E0D0C, 0x0B0A0908, 0x07060504, 0x03020100);
    const int o0 = qs * 0x01010101, o1 = (bsize + qs) * 0x01010101,
              o2 = (2 * bsize + qs) * 0x01010101, o3 = (3 * bsize + qs) * 0x01010101;
    const long long lo = NIB_LO, hi = NIB_HI;
    struct quad x = {_mm512_add_epi8(t, _mm512_setr_epi32(o0, o0, o0, o0, o0, o0, o0, o0, o1, o1,
                                                          o1, o1, o1, o1, o1, o1)),
                     _mm512_add_epi8(t, _mm512_setr_epi32(o2, o2, o2, o2, o2, o2, o2, o2, o3, o3,
                                                          o3, o3, o3, o3, o3, o3)),
                     _mm512_setr_epi64(lo, lo, hi, hi, lo, lo, hi, hi), ~0ULL >> (128 - 4 * bsize)};
    return x;
}

/* the four blocks at b: their first 64 bytes (raw) and their 4-bit values
 * in element order, blocks 0 and 1 (w01), 2 and 3 (w23) */
AVX512VNNI static inline __attribute__((always_inline)) void
nib_quad(const struct quad *x, const uint8_t *b, __m512i *raw, __m512i *w01, __m512i *w23)
{
    const __m512i l0 = _mm512_loadu_si512((const void *)b),
                  l1 = _mm512_maskz_loadu_epi8(x->tail, (const void *)(b + 64));
    *raw = l0;
    *w01 = _mm512_gf2p8affine_epi64_epi8(_mm512_permutex2var_epi8(l0, x->idx01, l1), x->nib, 0);
    *w23 = _mm512_gf2p8affine_epi64_epi8(_mm512_permutex2var_epi8(l0, x->idx23, l1), x->nib, 0);
}

/* a one-row four-block step's reads: the blocks at b prefetched ahead and
 * read (nib_quad), the input's 128 codes from q as two registers */
AVX512VNNI static inline __attribute__((always_inline)) void
quad_step(const struct quad *x, const uint8_t *b, const int8_t *q, __m512i *raw, __m512i *w01,
          __m512i *w23, __m512i *q01, __m512i *q23)
{
    _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
    _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
    *q01 = _mm512_loadu_si512((const void *)q);
    *q23 = _mm512_loadu_si512((const void *)(q + 64));
    nib_quad(x, b, raw, w01, w23);
}

/* the fp16 scales of four 18-byte blocks (raw: their first 64 bytes) */
AVX512VNNI static inline __attribute__((always_inline)) __m128 f16_quad(__m512i raw)
{
    const __m512i idx = _mm512_castsi128_si512(_mm_setr_epi16(0, 9, 18, 27, 0, 0, 0, 0));
    return _mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(idx, raw)));
}

/* lane k of four floats, in all eight lanes */
AVX512VNNI static inline __attribute__((always_inline)) __m256 lane(__m128 v, int k)
{
    return _mm256_permutexvar_ps(_mm256_set1_epi32(k), _mm256_castps128_ps256(v));
}

/* per lane sum w q less e (the same lanes' offset times q), as floats */
AVX512VNNI static inline __attribute__((always_inline)) __m512 lanes_less(__m512i w, __m512i q,
                                                                          __m512i e)
{
    return _mm512_cvtepi32_ps(
        _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w, q), e));
}

/* four blocks' lanes (f01: blocks 0, 1; f23: 2, 3) times their scales d
 * into *a0 .. *a3 in that order (the same sums where they alias: one
 * row's chain) */
AVX512VNNI static inline __attribute__((always_inline)) void
quad_fma(__m256 *a0, __m256 *a1, __m256 *a2, __m256 *a3, __m128 d, __m512 f01, __m512 f23)
{
    *a0 = _mm256_fmadd_ps(lane(d, 0), _mm512_castps512_ps256(f01), *a0);
    *a1 = _mm256_fmadd_ps(lane(d, 1), _mm512_extractf32x8_ps(f01, 1), *a1);
    *a2 = _mm256_fmadd_ps(lane(d, 2), _mm512_castps512_ps256(f23), *a2);
    *a3 = _mm256_fmadd_ps(lane(d, 3), _mm512_extractf32x8_ps(f23, 1), *a3);
}

/* Q4_0 x Q8_0, one row: four blocks at a time, then two, then an odd
 * last one, in ggml's order (the row's chain of fused multiply-adds
 * bounds it; two rows side by side would overlap two chains but, read
 * from memory, ran slower: bench_decode --1b, 36 tokens/s against 45) */
AVX512VNNI static inline __attribute__((always_inline)) float
q4_0_row(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const int64_t nb = W->in / 32;
    const struct quad x = quad_of(18, 2);
    const __m512i eight = _mm512_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4, b += 4 * 18) {
        __m512i raw, w01, w23, q01, q23;
        quad_step(&x, b, a->q + 32 * i, &raw, &w01, &w23, &q01, &q23);
        const __m512 f01 =
            lanes_less(w01, q01, _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, q01));
        const __m512 f23 =
            lanes_less(w23, q23, _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, q23));
        quad_fma(&acc, &acc, &acc, &acc, _mm_mul_ps(f16_quad(raw), _mm_loadu_ps(a->d + i)), f01,
                 f23);
    }
    for (; i + 2 <= nb; i += 2, b += 36)
        acc = q4_0_two(acc, b, _mm512_loadu_si512((const void *)(a->q + 32 * i)), a->d[i],
                       a->d[i + 1]);
    if (i < nb) acc = q4_0_one(acc, b, a->q + 32 * i, a->d[i]);
    return hsum8(acc);
}

/* Q8_0 x Q8_0, one row: two blocks at a time, an odd last one alone */
AVX512VNNI static inline __attribute__((always_inline)) float
q8_0_row(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const int64_t nb = W->in / 32;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2, b += 68) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512i q = _mm512_loadu_si512((const void *)(a->q + 32 * i));
        acc = q8_0_two(acc, b, q, a->d[i], a->d[i + 1]);
    }
    if (i < nb) acc = q8_0_one(acc, b, a->q + 32 * i, a->d[i]);
    return hsum8(acc);
}

AVX512VNNI float mx_q8_q4_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return q4_0_row(W, r, a);
}

AVX512VNNI float mx_q8_q8_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return q8_0_row(W, r, a);
}

/* a 32-block's 5-bit values (Q5_0, Q5_1): the nibbles at qs with the
 * high bits of the 32-bit word at qh, two blocks (qs0/qh0, qs1/qh1) as 64
 * unsigned bytes */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
five_pair(const uint8_t *qs0, const uint8_t *qh0, const uint8_t *qs1, const uint8_t *qh1)
{
    uint32_t h0, h1;
    memcpy(&h0, qh0, 4);
    memcpy(&h1, qh1, 4);
    const __mmask64 hi = (__mmask64)h0 | (__mmask64)h1 << 32;
    return _mm512_or_si512(nib_pair(qs0, qs1), _mm512_maskz_mov_epi8(hi, _mm512_set1_epi8(16)));
}

/* Q4_1, Q5_0, Q5_1 x Q8_0 (Q8_1: a->s), llama.cpp's way: per lane sum
 * u q (Q5_0: less 16 sum q, its values u - 16), d_w d_x into eight
 * running sums; Q4_1, Q5_1 add m_w s_x block after block into a scalar */
AVX512VNNI static inline __attribute__((always_inline)) float
legacy_row(const struct wmat *W, int64_t r, const struct matmul_q8 *a, const size_t bsize,
           const int five, const int with_m)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const int64_t nb = W->in / 32;
    const size_t qh = with_m ? 4 : 2, qs = qh + (five ? 4 : 0); /* offsets in a block */
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < nb; i += 2, b += 2 * bsize) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        const int two = i + 1 < nb; /* else the last block with itself, the high half unused */
        const uint8_t *c = two ? b + bsize : b;
        const __m512i q = two ? _mm512_loadu_si512((const void *)(a->q + 32 * i))
                              : _mm512_zextsi256_si512(_mm256_loadu_si256(
                                    (const __m256i *)(const void *)(a->q + 32 * i)));
        const __m512i w =
            five ? five_pair(b + qs, b + qh, c + qs, c + qh) : nib_pair(b + qs, c + qs);
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, q);
        if (five && !with_m)
            s = _mm512_sub_epi32(
                s, _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), q));
        const __m512 f = _mm512_cvtepi32_ps(s);
        acc =
            _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b) * a->d[i]), _mm512_castps512_ps256(f), acc);
        if (with_m) summs += h2f_f16c(b + 2) * a->s[i];
        if (!two) break;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(c) * a->d[i + 1]),
                              _mm512_extractf32x8_ps(f, 1), acc);
        if (with_m) summs += h2f_f16c(c + 2) * a->s[i + 1];
    }
    return hsum8(acc) + summs;
}

AVX512VNNI float mx_q8_q4_1_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return legacy_row(W, r, a, 20, 0, 1);
}

AVX512VNNI float mx_q8_q5_0_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return legacy_row(W, r, a, 22, 1, 0);
}

AVX512VNNI float mx_q8_q5_1_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return legacy_row(W, r, a, 24, 1, 1);
}

/* per lane sum v q of two runs of 4-bit indices into table (qs0, qs1: 16
 * bytes of nibbles each) against 64 codes q: (v + 128) q - 128 q, exactly */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
iq4_pair(__m512i table, const uint8_t *qs0, const uint8_t *qs1, __m512i q)
{
    const __m512i w = _mm512_shuffle_epi8(table, nib_pair(qs0, qs1));
    return _mm512_sub_epi32(
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, q),
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), q));
}

/* the E8M0 scales of four 17-byte blocks (raw: their first 64 bytes),
 * each as e8m0_half gives it */
AVX512VNNI static inline __attribute__((always_inline)) __m128 e8m0_quad(__m512i raw)
{
    const __m128i e = _mm_cvtepu8_epi32(
        _mm512_castsi512_si128(_mm512_permutexvar_epi8(_mm512_set1_epi32(0x33221100), raw)));
    const __m128i small = _mm_sllv_epi32(_mm_set1_epi32(0x00200000), e),
                  big = _mm_slli_epi32(_mm_sub_epi32(e, _mm_set1_epi32(1)), 23);
    return _mm_castsi128_ps(
        _mm_mask_blend_epi32(_mm_cmplt_epu32_mask(e, _mm_set1_epi32(2)), big, small));
}

/* a 32-block of 16-value lookups (IQ4_NL: fp16 d then 16 bytes; MXFP4: an
 * E8M0 byte then 16) times Q8_0 codes, llama.cpp's way: even blocks into
 * one set of eight running sums, odd ones into another, added before
 * ggml's horizontal sum; an odd last block's integer total times d_x d_w
 * added after. Four blocks at a time, then two. */
AVX512VNNI static inline __attribute__((always_inline)) float
lookup_row(const struct wmat *W, int64_t r, const struct matmul_q8 *a, const int8_t *values,
           const int mx)
{
    const int bsize = mx ? 17 : 18, qs = mx ? 1 : 2;
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const int64_t nb = W->in / 32;
    const __m512i table = table16(values), off = _mm512_set1_epi8((char)0x80);
    const struct quad x = quad_of(bsize, qs);
    __m256 acc1 = _mm256_setzero_ps(), acc2 = acc1;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4, b += 4 * bsize) {
        __m512i raw, w01, w23, q01, q23;
        quad_step(&x, b, a->q + 32 * i, &raw, &w01, &w23, &q01, &q23);
        const __m512 f01 = lanes_less(_mm512_shuffle_epi8(table, w01), q01,
                                      _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, q01));
        const __m512 f23 = lanes_less(_mm512_shuffle_epi8(table, w23), q23,
                                      _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, q23));
        quad_fma(&acc1, &acc2, &acc1, &acc2,
                 _mm_mul_ps(_mm_loadu_ps(a->d + i), mx ? e8m0_quad(raw) : f16_quad(raw)), f01, f23);
    }
    for (; i + 2 <= nb; i += 2, b += 2 * bsize) {
        const __m512 f = _mm512_cvtepi32_ps(iq4_pair(
            table, b + qs, b + bsize + qs, _mm512_loadu_si512((const void *)(a->q + 32 * i))));
        const float d0 = a->d[i] * (mx ? e8m0_half(b[0]) : h2f_f16c(b));
        const float d1 = a->d[i + 1] * (mx ? e8m0_half(b[bsize]) : h2f_f16c(b + bsize));
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d0), _mm512_castps512_ps256(f), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(d1), _mm512_extractf32x8_ps(f, 1), acc2);
    }
    float y = hsum8(_mm256_add_ps(acc1, acc2));
    if (i < nb) {
        int32_t t = 0;
        for (int j = 0; j < 16; j++)
            t += a->q[32 * i + j] * values[b[qs + j] & 0xF] +
                 a->q[32 * i + 16 + j] * values[b[qs + j] >> 4];
        y += a->d[i] * (mx ? e8m0_half(b[0]) : h2f_f16c(b)) * (float)t;
    }
    return y;
}

/* one step of the four-row kernels (Q4_0's, lookup_rows4): block i of
 * four rows at b against the input's block broadcast, the offset's lanes
 * (off q) once for the four; its scales d (d_x times the rows' d_w) and
 * lanes f01 (rows 0, 1), f23 (rows 2, 3); the 4-bit values looked up in
 * table where lut (a constant where inlined), else as they are */
AVX512VNNI static inline __attribute__((always_inline)) void
step4(const struct quad *x, const uint8_t *b, const struct matmul_q8 *a, int64_t i, const int lut,
      __m512i table, __m512i off, const int mx, __m128 *d, __m512 *f01, __m512 *f23)
{
    _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
    _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
    const __m512i q =
        _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(a->q + 32 * i)));
    const __m512i e = _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, q);
    __m512i raw, w01, w23;
    nib_quad(x, b, &raw, &w01, &w23);
    *d = _mm_mul_ps(_mm_set1_ps(a->d[i]), mx ? e8m0_quad(raw) : f16_quad(raw));
    *f01 = lanes_less(lut ? _mm512_shuffle_epi8(table, w01) : w01, q, e);
    *f23 = lanes_less(lut ? _mm512_shuffle_epi8(table, w23) : w23, q, e);
}

/* Q4_0 x Q8_0, rows r to r + 3 (r % 4 == 0) from W->copy: each step
 * block i of the four rows, one chain per row, each row's operations as
 * q4_0_row's in its order (the same bits); one stream, four chains */
AVX512VNNI void mx_q8_q4_0_rows4_vnni(float *y, const struct wmat *W, int64_t r,
                                      const struct matmul_q8 *a)
{
    const int64_t nb = W->in / 32;
    const uint8_t *b = W->copy + (size_t)(r / 4) * 4 * W->row_bytes;
    const struct quad x = quad_of(18, 2);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < nb; i++, b += 4 * 18) {
        __m128 d;
        __m512 f01, f23;
        step4(&x, b, a, i, 0, _mm512_setzero_si512(), _mm512_set1_epi8(8), 0, &d, &f01, &f23);
        quad_fma(&a0, &a1, &a2, &a3, d, f01, f23);
    }
    y[0] = hsum8(a0), y[1] = hsum8(a1), y[2] = hsum8(a2), y[3] = hsum8(a3);
}

/* lookup_row for rows r to r + 3 (r % 4 == 0) from W->copy: each step
 * block i of the four rows against the input's block broadcast, the
 * offset's lanes once for the four; row j's even and odd blocks into
 * ev[j] and od[j] in order (two blocks a turn, so that the eight sums stay
 * in registers) and an odd last block after, as lookup_row (the same
 * bits) */
AVX512VNNI static inline __attribute__((always_inline)) void
lookup_rows4(float *y, const struct wmat *W, int64_t r, const struct matmul_q8 *a,
             const int8_t *values, const int mx)
{
    const int bsize = mx ? 17 : 18, qs = mx ? 1 : 2;
    const int64_t nb = W->in / 32, whole = nb / 2 * 2;
    const uint8_t *b = W->copy + (size_t)(r / 4) * 4 * W->row_bytes;
    const __m512i table = table16(values), off = _mm512_set1_epi8((char)0x80);
    const struct quad x = quad_of(bsize, qs);
    __m256 ev0 = _mm256_setzero_ps(), ev1 = ev0, ev2 = ev0, ev3 = ev0, od0 = ev0, od1 = ev0,
           od2 = ev0, od3 = ev0;
    for (int64_t i = 0; i < whole; i += 2, b += 8 * bsize) {
        __m128 d;
        __m512 f01, f23;
        step4(&x, b, a, i, 1, table, off, mx, &d, &f01, &f23);
        quad_fma(&ev0, &ev1, &ev2, &ev3, d, f01, f23);
        step4(&x, b + 4 * bsize, a, i + 1, 1, table, off, mx, &d, &f01, &f23);
        quad_fma(&od0, &od1, &od2, &od3, d, f01, f23);
    }
    y[0] = hsum8(_mm256_add_ps(ev0, od0));
    y[1] = hsum8(_mm256_add_ps(ev1, od1));
    y[2] = hsum8(_mm256_add_ps(ev2, od2));
    y[3] = hsum8(_mm256_add_ps(ev3, od3));
    for (int j = 0; j < 4 && whole < nb; j++) {
        const uint8_t *c = b + (size_t)j * bsize; /* row j's odd last block */
        int32_t t = 0;
        for (int k = 0; k < 16; k++)
            t += a->q[32 * whole + k] * values[c[qs + k] & 0xF] +
                 a->q[32 * whole + 16 + k] * values[c[qs + k] >> 4];
        y[j] += a->d[whole] * (mx ? e8m0_half(c[0]) : h2f_f16c(c)) * (float)t;
    }
}

AVX512VNNI void mx_q8_iq4_nl_rows4_vnni(float *y, const struct wmat *W, int64_t r,
                                        const struct matmul_q8 *a)
{
    lookup_rows4(y, W, r, a, dequant_iq4nl_values, 0);
}

AVX512VNNI void mx_q8_mxfp4_rows4_vnni(float *y, const struct wmat *W, int64_t r,
                                       const struct matmul_q8 *a)
{
    lookup_rows4(y, W, r, a, dequant_mxfp4_x2, 1);
}

AVX512VNNI float mx_q8_iq4_nl_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return lookup_row(W, r, a, dequant_iq4nl_values, 0);
}

AVX512VNNI float mx_q8_mxfp4_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    return lookup_row(W, r, a, dequant_mxfp4_x2, 1);
}

/* IQ4_XS x Q8_K: per block eight lanes sum_j ls_j (v . q) over lanes of
 * four bytes of each 32-value run (ls_j the run's 6-bit scale less 32),
 * times d_w d_x into eight running sums */
AVX512VNNI float mx_q8_iq4_xs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i table = table16(dequant_iq4nl_values);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 136) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const uint16_t sh = (uint16_t)(b[2] | b[3] << 8);
        __m512i isum = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            const int ls0 = ((b[4 + p] & 0xF) | (sh >> 4 * p & 3) << 4) - 32;
            const int ls1 = ((b[4 + p] >> 4) | (sh >> (4 * p + 2) & 3) << 4) - 32;
            const __m512i s = iq4_pair(table, b + 8 + 32 * p, b + 24 + 32 * p,
                                       _mm512_loadu_si512((const void *)(a->q + k + 64 * p)));
            const __m512i ls =
                _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(ls0), _mm512_set1_epi32(ls1));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, ls));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b) * a->d[blk]),
                              _mm256_cvtepi32_ps(fold16(isum)), acc);
    }
    return hsum8(acc);
}

/* a Q4_K or Q5_K block's lanes sum_g sc_g (v . q): its 4 runs of 64 values
 * (32 bytes of nibbles at qs each: group 2p low, 2p + 1 high; Q5_K: plus
 * hi[p], the fifth bits as 16) against the codes at a->q + k; sm: the
 * block's 6-bit scales in lanes 0..7 */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
k4_lanes(const uint8_t *qs, const __m512i *hi, __m512i sm, const struct matmul_q8 *a, int64_t k)
{
    const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512i isum = _mm512_setzero_si512();
    for (int p = 0; p < 4; p++) {
        /* the 32 bytes twice, low nibbles kept in the low half, high ones
         * moved down in the high half (one GFNI affine, nib_matrices) */
        __m512i w = _mm512_gf2p8affine_epi64_epi8(
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * p))),
            nib_halves(), 0);
        if (hi) w = _mm512_or_si512(w, hi[p]);
        const __m512i s = _mm512_dpbusd_epi32(
            _mm512_setzero_si512(), w, _mm512_loadu_si512((const void *)(a->q + k + 64 * p)));
        const __m512i sc =
            _mm512_permutexvar_epi32(_mm512_add_epi32(half, _mm512_set1_epi32(2 * p)), sm);
        isum = scaled_add(isum, s, sc);
    }
    return isum;
}

/* Q4_K x Q8_K: per block eight lanes sum_g sc_g (nib . q) over lanes of
 * four bytes of each 32-byte run (groups 2p and 2p + 1 are the low and
 * high nibbles of the same 32 bytes, one vpdpbusd), times d_x d_w into
 * eight running sums; the minima as four pair sums m_g sum_g(q), times
 * -d_x dmin_w into four more */
AVX512VNNI float mx_q8_q4_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 144) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512i sm = _mm512_cvtepu8_epi32(k4_unpack(b)); /* scales 0..7, mins 8..15 */
        const __m512i isum = k4_lanes(b + 16, NULL, sm, a, k);
        /* the groups' code sums (sum16 pairs) in group order, times the minima */
        const __m256i g = run_sums(a, k);
        const __m256i pm = _mm256_mullo_epi32(g, _mm512_extracti64x4_epi64(sm, 1));
        const __m128i pairs =
            _mm_hadd_epi32(_mm256_castsi256_si128(pm), _mm256_extracti128_si256(pm, 1));
        const float d = a->d[blk] * h2f_f16c(b), dmin = -a->d[blk] * h2f_f16c(b + 2);
        accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(pairs), accm);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(isum)), acc);
    }
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    return hsum8(acc) + _mm_cvtss_f32(accm);
}

/* Q5_K x Q8_K: Q4_K's lanes with the fifth bits (qh, 32 bytes: bit g of
 * byte j for element j of group g) as 16, and the minima's one integer
 * total times -d_x dmin_w added block after block into a scalar */
AVX512VNNI float mx_q8_q5_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 176) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 128, _MM_HINT_T0);
        const __m512i sm = _mm512_cvtepu8_epi32(k4_unpack(b)); /* scales 0..7, mins 8..15 */
        /* the fifth bits: bytes of group 2p's bits in the low half, 2p + 1's
         * (one further) in the high half, each moved to bit 4 below */
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b + 16));
        const __m512i h2 =
            _mm512_inserti64x4(_mm512_castsi256_si512(hb), _mm256_srli_epi16(hb, 1), 1);
        const __m512i b4 = _mm512_set1_epi8(16);
        const __m512i hi[4] = {_mm512_and_si512(_mm512_slli_epi16(h2, 4), b4),
                               _mm512_and_si512(_mm512_slli_epi16(h2, 2), b4),
                               _mm512_and_si512(h2, b4),
                               _mm512_and_si512(_mm512_srli_epi16(h2, 2), b4)};
        const __m512i isum = k4_lanes(b + 48, hi, sm, a, k);
        const __m256i g = run_sums(a, k);
        const int32_t mins = _mm512_reduce_add_epi32(
            _mm512_zextsi256_si512(_mm256_mullo_epi32(g, _mm512_extracti64x4_epi64(sm, 1))));
        const float d = a->d[blk] * h2f_f16c(b), dmin = -a->d[blk] * h2f_f16c(b + 2);
        summs += dmin * (float)mins;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(isum)), acc);
    }
    return hsum8(acc) + summs;
}

/* Q2_K x Q8_K, llama.cpp's way: per block, first the minima (eight lanes
 * m_2k s_2k + m_2k+1 s_2k+1, s_j the sum of run j's 16 codes) times
 * -d_x dmin_w, then eight lanes sum_j sc_j (v . q) over lanes of four
 * bytes of each 32-value run times d_x d_w, into eight running sums */
AVX512VNNI float mx_q8_q2_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 84) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m128i ms = _mm_loadu_si128((const __m128i *)b); /* scale, minimum per 16 */
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_and_si128(ms, _mm_set1_epi8(0xF)));
        const __m256i mins =
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), _mm_set1_epi8(0xF)));
        const __m256i s16 =
            _mm512_cvtepi32_epi16(_mm512_loadu_si512((const void *)(a->sum16 + k / 16)));
        const float d = a->d[blk] * h2f_f16c(b + 80), dmin = -a->d[blk] * h2f_f16c(b + 82);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
                              _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, s16)), acc);
        __m512i isum = _mm512_setzero_si512();
        for (int j = 0; j < 2; j++) {
            const __m256i q2 = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j));
            for (int h = 0; h < 2; h++) {
                const __m512i w = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_and_si256(_mm256_srli_epi16(q2, 4 * h), m3)),
                    _mm256_and_si256(_mm256_srli_epi16(q2, 4 * h + 2), m3), 1);
                const __m512i s = _mm512_dpbusd_epi32(
                    _mm512_setzero_si512(), w,
                    _mm512_loadu_si512((const void *)(a->q + k + 128 * j + 64 * h)));
                isum = scaled_add(isum, s, quad_scales(sc, 8 * j + 4 * h));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(isum)), acc);
    }
    return hsum8(acc);
}

/* Q3_K x Q8_K: per block eight lanes sum_j sc_j (v . q) over lanes of four
 * bytes of each 32-value run, v = the 2 low bits + 4 h - 4 (h the hmask
 * bit) as (v + 4) q - 4 q, times d_x d_w into eight running sums */
AVX512VNNI float mx_q8_q3_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 110) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512i sc = q3k_scales16(b + 96);
        __m512i isum = _mm512_setzero_si512();
        for (int j = 0; j < 2; j++) {
            for (int h = 0; h < 2; h++) {
                const __m512i q = _mm512_loadu_si512((const void *)(a->q + k + 128 * j + 64 * h));
                const __m512i s = _mm512_sub_epi32(
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), q3k_values(b, j, h), q),
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(4), q));
                isum =
                    _mm512_add_epi32(isum, _mm512_mullo_epi32(s, quad_scales(sc, 8 * j + 4 * h)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a->d[blk] * h2f_f16c(b + 108)),
                              _mm256_cvtepi32_ps(fold16(isum)), acc);
    }
    return hsum8(acc);
}

/* Q6_K x Q8_K: per block eight lanes sum_j sc_j (q . x) over lanes of four
 * bytes of each 32-byte run, less 32 (s_2k sc_2k + s_2k+1 sc_2k+1) in lane
 * k (s_j the sum of run j's 16 codes), times d_x d_w into eight running
 * sums; the 6-bit values by q6_values, 64 at a time */
AVX512VNNI float mx_q8_q6_k_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 210) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 128, _MM_HINT_T0);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(b + 192));
        const __m512i sc = low16(_mm512_cvtepi8_epi32(sc8));
        __m512i isum = _mm512_setzero_si512();
        for (int n = 0; n < 2; n++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(b + 64 * n));
            const __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 128 + 32 * n)));
            for (int h = 0; h < 2; h++) {
                const int64_t e0 = 128 * n + 64 * h;
                const __m512i s =
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), q6_values(ql, qh, h),
                                        _mm512_loadu_si512((const void *)(a->q + k + e0)));
                const __m512i scj = _mm512_permutexvar_epi32(
                    _mm512_add_epi32(quad, _mm512_set1_epi32(8 * n + 4 * h)), sc);
                isum = scaled_add(isum, s, scj);
            }
        }
        const __m256i s16 =
            _mm512_cvtepi32_epi16(_mm512_loadu_si512((const void *)(a->sum16 + k / 16)));
        const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(s16, _mm256_cvtepi8_epi16(sc8)), 5);
        const float d = a->d[blk] * h2f_f16c(b + 208);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
                              _mm256_cvtepi32_ps(_mm256_sub_epi32(fold16(isum), sub)), acc);
    }
    return hsum8(acc);
}

#endif

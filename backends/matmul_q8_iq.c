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

/* The grid formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
 * IQ1_M) x Q8_K, llama.cpp's way: per block eight lanes sum_j ls_j (|g| .
 * (+-q)) over lanes of four bytes of each 32-value run (ls_j the odd
 * integer scale of each 16 or 32 values), times d_w d_x into eight running
 * sums, the sum times ggml's 0.125, 0.25 or 1 at the end. A pair of
 * sub-blocks (64 values) is one register: lanes 0-7 the first, 8-15 the
 * second; their products (each within 16 bits) times their scales by one
 * dpwssd. The grid values come from vector code, not one load per 8:
 * where the grid has 256 to 1024 entries, the block's indices are looked
 * up in its level-code tables (iq_grids.h), 256 entries in four registers
 * (the top index bits choose among them), each run's code moved to its own
 * 64-bit lane and spread to one level a byte (multishift), the level to
 * its value by a 64-byte table; IQ1's grid (2048 entries) is gathered. */

/* byte 8 r + j of each control: the byte of a pair's run r (r < 4: the
 * first sub-block's, from byte r; else the second's, from 8 + r - 4) in
 * 16 bytes of two sub-blocks' 8-byte records, pair p's at 16 p */
AVX512VNNI static inline __attribute__((always_inline)) __m512i pair_ctl(int p)
{
    const long long o = 0x0101010101010101LL;
    return _mm512_add_epi8(_mm512_set_epi64(11 * o, 10 * o, 9 * o, 8 * o, 3 * o, 2 * o, o, 0),
                           _mm512_set1_epi8((char)(16 * p)));
}

/* the negation mask of a pair's 64 lanes, run r's sign byte in every byte
 * of qword r: bit j of that byte to lane 8 r + j */
AVX512VNNI static inline __attribute__((always_inline)) __mmask64 sign_lanes(__m512i runs)
{
    return _mm512_test_epi8_mask(runs, _mm512_set1_epi64((long long)0x8040201008040201ULL));
}

/* a 256-entry byte table (4 registers) looked up at every byte of v */
AVX512VNNI static inline __attribute__((always_inline)) __m512i lut256(const __m512i t[4],
                                                                       __m512i v)
{
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), _mm512_permutex2var_epi8(t[0], v, t[1]),
                                  _mm512_permutex2var_epi8(t[2], v, t[3]));
}

AVX512VNNI static inline __attribute__((always_inline)) void load_lut(__m512i *t,
                                                                      const uint8_t *tab, int n)
{
    for (int i = 0; i < n; i++)
        t[i] = _mm512_loadu_si512((const void *)(tab + 64 * i));
}

/* the value of each byte's level (its low 2 or 3 bits) */
AVX512VNNI static inline __attribute__((always_inline)) __m512i levels(const uint8_t lv[8],
                                                                       int bits)
{
    uint64_t w;
    memcpy(&w, lv, 8);
    return bits == 2 ? _mm512_set1_epi32((int)(uint32_t)w) : _mm512_set1_epi64((long long)w);
}

/* qword r of code: 2-bit levels (one run's code in bits 0-15), or 3-bit
 * (two grid entries' codes in bits 0-11 and 16-27): as 8 value bytes */
AVX512VNNI static inline __attribute__((always_inline)) __m512i spread(__m512i code, __m512i lv,
                                                                       int bits)
{
    const __m512i at = bits == 2 ? _mm512_set1_epi64(0x0E0C0A0806040200LL)
                                 : _mm512_set1_epi64(0x1916131009060300LL);
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(at, code), lv);
}

/* qword r: the 3-bit codes of a pair's grid entries 2 r and 2 r + 1 (the
 * index bytes 16 p + 2 r, + 1), from the low (cl) and high (ch) code bytes
 * of a block's 64 indices */
AVX512VNNI static inline __attribute__((always_inline)) __m512i codes3(__m512i cl, __m512i ch,
                                                                       int p)
{
    const long long b0 = 0x41014000LL; /* bytes 0, 64, 1, 65 */
    const __m512i ctl = _mm512_add_epi8(
        _mm512_set_epi64(b0 + 14 * 0x01010101LL, b0 + 12 * 0x01010101LL, b0 + 10 * 0x01010101LL,
                         b0 + 8 * 0x01010101LL, b0 + 6 * 0x01010101LL, b0 + 4 * 0x01010101LL,
                         b0 + 2 * 0x01010101LL, b0),
        _mm512_set1_epi8((char)(16 * p)));
    return _mm512_maskz_permutex2var_epi8(0x0F0F0F0F0F0F0F0FULL, cl, ctl, ch);
}

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

/* the 16 nibbles of the 8 bytes w (low nibble first) as 2 n + 1, one a lane */
AVX512VNNI static inline __attribute__((always_inline)) __m512i odd_nibbles(uint64_t w)
{
    const __m512i nib = _mm512_and_si512(
        _mm512_multishift_epi64_epi8(
            _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0x3C3834302C282420LL, 0x1C1814100C080400LL),
            _mm512_set1_epi64((long long)w)),
        _mm512_set1_epi8(15));
    const __m512i n = _mm512_cvtepu8_epi32(_mm512_castsi512_si128(nib));
    return _mm512_add_epi32(_mm512_add_epi32(n, n), _mm512_set1_epi32(1));
}

/* lanes 0-7 lane i0 of v, lanes 8-15 lane i1 */
AVX512VNNI static inline __attribute__((always_inline)) __m512i halves(__m512i v, int i0, int i1)
{
    return _mm512_permutexvar_epi32(
        _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(i0), _mm512_set1_epi32(i1)), v);
}

/* the 7-bit sign fields of IQ2_XXS and IQ3_XXS (in each qword from bit
 * `at`) as ksigns' bytes: bytes 8 i + l, l < 4 */
AVX512VNNI static inline __attribute__((always_inline)) __m512i ksigns(__m512i v, long long at)
{
    const __m512i ks0 = _mm512_loadu_si512((const void *)ksigns_iq2xs),
                  ks1 = _mm512_loadu_si512((const void *)(ksigns_iq2xs + 64));
    const long long f = at | (at + 7) << 8 | (at + 14) << 16 | (at + 21) << 24;
    return _mm512_permutex2var_epi8(
        ks0, _mm512_multishift_epi64_epi8(_mm512_set1_epi64(f | f << 32), v), ks1);
}

AVX512VNNI static inline __attribute__((always_inline)) __m512i odd_top4(__m512i v)
{
    return _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(v, 28), 1), _mm512_set1_epi32(1));
}

AVX512VNNI static inline __attribute__((always_inline)) __m256 block_acc(__m256 acc, float d,
                                                                         __m512i isum)
{
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(isum)), acc);
}

/* IQ2_XXS: a block's 8 sub-block records (4 grid indices, then 4 sign
 * fields and the scale) in one register */
AVX512VNNI float mx_q8_iq2_xxs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m512i tl[4], th[4];
    load_lut(tl, iq2xxs_codes[0], 4);
    load_lut(th, iq2xxs_codes[1], 4);
    const __m512i lv = levels(iq2xxs_levels, 2);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 66) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512((const void *)(b + 2));
        const __m512i sg = ksigns(v, 32), ls = odd_top4(v);
        const __m512i cl = lut256(tl, v), ch = lut256(th, v);
        __m512i isum = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            const __m512i ctl = pair_ctl(p);
            const __m512i code = _mm512_maskz_permutex2var_epi8(
                0x0303030303030303ULL, cl,
                _mm512_mask_add_epi8(ctl, 0xAAAAAAAAAAAAAAAAULL, ctl, _mm512_set1_epi8(64)), ch);
            isum = pair_dot(isum, spread(code, lv, 2), a->q + k + 64 * p,
                            sign_lanes(_mm512_permutexvar_epi8(ctl, sg)),
                            halves(ls, 4 * p + 1, 4 * p + 3));
        }
        acc = block_acc(acc, h2f_f16c(b) * a->d[blk], isum);
    }
    return 0.125f * hsum8(acc);
}

/* IQ2_XS: 16-bit codes (9 bits of grid index, 7 of signs), the grid's
 * 512 entries as two 256-entry tables each chosen by index bit 8 */
AVX512VNNI float mx_q8_iq2_xs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i lv = levels(iq2xs_levels, 2);
    const __m512i ks0 = _mm512_loadu_si512((const void *)ksigns_iq2xs),
                  ks1 = _mm512_loadu_si512((const void *)(ksigns_iq2xs + 64));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 74) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512((const void *)(b + 2));
        /* even byte 2 i: the looked-up bytes of word i's index */
        const __mmask64 hi = _kshiftri_mask64(_mm512_movepi8_mask(_mm512_slli_epi16(v, 7)), 1);
        __m512i t[4];
        load_lut(t, iq2xs_codes[0], 4);
        __m512i lo = lut256(t, v);
        load_lut(t, iq2xs_codes[0] + 256, 4);
        lo = _mm512_mask_blend_epi8(hi, lo, lut256(t, v));
        load_lut(t, iq2xs_codes[1], 4);
        __m512i up = lut256(t, v);
        load_lut(t, iq2xs_codes[1] + 256, 4);
        up = _mm512_mask_blend_epi8(hi, up, lut256(t, v));
        const __m512i c =
            _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAULL, lo, _mm512_slli_epi16(up, 8));
        const __m512i sg = _mm512_permutex2var_epi8(ks0, _mm512_srli_epi16(v, 9), ks1);
        uint64_t sw;
        memcpy(&sw, b + 66, 8);
        const __m512i ls = odd_nibbles(sw);
        __m512i isum = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            const __m512i w = _mm512_add_epi16(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0),
                                               _mm512_set1_epi16((short)(8 * p)));
            const __m512i code = _mm512_maskz_permutexvar_epi16(0x11111111u, w, c);
            isum = pair_dot(
                isum, spread(code, lv, 2), a->q + k + 64 * p,
                sign_lanes(_mm512_permutexvar_epi8(
                    _mm512_add_epi8(
                        _mm512_set_epi64(14 * 0x0101010101010101LL, 12 * 0x0101010101010101LL,
                                         10 * 0x0101010101010101LL, 8 * 0x0101010101010101LL,
                                         6 * 0x0101010101010101LL, 4 * 0x0101010101010101LL,
                                         2 * 0x0101010101010101LL, 0),
                        _mm512_set1_epi8((char)(16 * p))),
                    sg)),
                quad_scales(ls, 4 * p));
        }
        acc = block_acc(acc, h2f_f16c(b) * a->d[blk], isum);
    }
    return 0.125f * hsum8(acc);
}

/* IQ2_S: 10-bit grid indices (8 bits, 2 more in qh), the grid's 1024
 * entries as four 256-entry tables chosen by the top two bits; sign bytes
 * as stored */
AVX512VNNI float mx_q8_iq2_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i lv = levels(iq2s_levels, 2);
    /* byte n: qh's bits 2 n and up (n < 32) */
    const __m512i at = _mm512_set_epi64(0, 0, 0, 0, 0x3E3C3A3836343230LL, 0x2E2C2A2826242220LL,
                                        0x1E1C1A1816141210LL, 0x0E0C0A0806040200LL);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 82) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512i v = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 2)));
        uint64_t h;
        memcpy(&h, b + 66, 8);
        const __m512i hb = _mm512_multishift_epi64_epi8(at, _mm512_set1_epi64((long long)h));
        const __mmask64 m0 = _mm512_test_epi8_mask(hb, _mm512_set1_epi8(1)),
                        m1 = _mm512_test_epi8_mask(hb, _mm512_set1_epi8(2));
        __m512i c[2];
        for (int part = 0; part < 2; part++) {
            __m512i t[4], e[4];
            for (int q = 0; q < 4; q++) {
                load_lut(t, iq2s_codes[part] + 256 * q, 4);
                e[q] = lut256(t, v);
            }
            c[part] = _mm512_mask_blend_epi8(m1, _mm512_mask_blend_epi8(m0, e[0], e[1]),
                                             _mm512_mask_blend_epi8(m0, e[2], e[3]));
        }
        uint64_t sw;
        memcpy(&sw, b + 74, 8);
        const __m512i ls = odd_nibbles(sw);
        __m512i isum = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            /* qword r: bytes 8 p + r of the low and high code bytes */
            const __m512i ctl = _mm512_add_epi8(
                _mm512_set_epi64(0x4707, 0x4606, 0x4505, 0x4404, 0x4303, 0x4202, 0x4101, 0x4000),
                _mm512_set1_epi8((char)(8 * p)));
            const __m512i code =
                _mm512_maskz_permutex2var_epi8(0x0303030303030303ULL, c[0], ctl, c[1]);
            uint64_t neg;
            memcpy(&neg, b + 34 + 8 * p, 8);
            isum = pair_dot(isum, spread(code, lv, 2), a->q + k + 64 * p, _cvtu64_mask64(neg),
                            quad_scales(ls, 4 * p));
        }
        acc = block_acc(acc, h2f_f16c(b) * a->d[blk], isum);
    }
    return 0.125f * hsum8(acc);
}

/* IQ3_XXS: 64 index bytes (two 4-value entries a run), then the 8
 * sub-blocks' sign fields and scales */
AVX512VNNI float mx_q8_iq3_xxs_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m512i tl[4], th[4];
    load_lut(tl, iq3xxs_codes[0], 4);
    load_lut(th, iq3xxs_codes[1], 4);
    const __m512i lv = levels(iq3xxs_levels, 3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 98) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512((const void *)(b + 2));
        const __m512i aux = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(b + 66)));
        const __m512i sg = ksigns(aux, 0), ls = odd_top4(aux);
        const __m512i cl = lut256(tl, v), ch = lut256(th, v);
        __m512i isum = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++)
            isum = pair_dot(isum, spread(codes3(cl, ch, p), lv, 3), a->q + k + 64 * p,
                            sign_lanes(_mm512_permutexvar_epi8(pair_ctl(p), sg)),
                            halves(ls, 4 * p, 4 * p + 2));
        acc = block_acc(acc, h2f_f16c(b) * a->d[blk], isum);
    }
    return 0.25f * hsum8(acc);
}

/* IQ3_S: 9-bit indices (the 9th bits in qh, one a byte: a byte mask), sign
 * bytes as stored, a scale nibble per sub-block */
AVX512VNNI float mx_q8_iq3_s_vnni(const struct wmat *W, int64_t r, const struct matmul_q8 *a)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m512i lv = levels(iq3s_levels, 3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0, blk = 0; k < W->in; k += 256, blk++, b += 110) {
        _mm_prefetch((const char *)b + AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + AHEAD + 64, _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512((const void *)(b + 2));
        uint64_t h;
        memcpy(&h, b + 66, 8);
        __m512i t[4];
        load_lut(t, iq3s_codes[0], 4);
        __m512i cl = lut256(t, v);
        load_lut(t, iq3s_codes[0] + 256, 4);
        cl = _mm512_mask_blend_epi8(_cvtu64_mask64(h), cl, lut256(t, v));
        load_lut(t, iq3s_codes[1], 4);
        __m512i ch = lut256(t, v);
        load_lut(t, iq3s_codes[1] + 256, 4);
        ch = _mm512_mask_blend_epi8(_cvtu64_mask64(h), ch, lut256(t, v));
        const __m512i ls = odd_nibbles(iqb_rd32(b + 106));
        __m512i isum = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            uint64_t neg;
            memcpy(&neg, b + 74 + 8 * p, 8);
            isum = pair_dot(isum, spread(codes3(cl, ch, p), lv, 3), a->q + k + 64 * p,
                            _cvtu64_mask64(neg), halves(ls, 2 * p, 2 * p + 1));
        }
        acc = block_acc(acc, h2f_f16c(b) * a->d[blk], isum);
    }
    return hsum8(acc);
}

/* IQ1_S, IQ1_M x Q8_K, llama.cpp's way: the grid values (-1, 0, 1) per
 * lane as (g + 1) q - q, times the integer scales, d_w d_x into eight
 * running sums; the deltas' signs against the codes: IQ1_S as one integer
 * per block (the code sums, ggml's bsums, times sign and scale) times d
 * into a scalar, IQ1_M per lane into eight more running sums; the deltas'
 * sum times 1/8 added last. The 11-bit grid indices gathered. */
AVX512VNNI static inline __attribute__((always_inline)) float
iq1_row(const struct wmat *W, int64_t r, const struct matmul_q8 *a, const uint32_t type)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const size_t bsize = (size_t)iq_block_bytes(type);
    const __m512i one = _mm512_set1_epi8(1), seven = _mm512_set1_epi64(7);
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
            const __m512i sh = type == GGML_IQ1_S ? _mm512_setr_epi64(0, 3, 6, 9, 16, 19, 22, 25)
                                                  : _mm512_setr_epi64(0, 4, 8, 12, 16, 20, 24, 28);
            const __m512i hb = _mm512_srlv_epi64(_mm512_set1_epi64(qh), sh);
            const __m512i idx =
                _mm512_or_si512(_mm512_cvtepu8_epi64(_mm_loadl_epi64((const __m128i *)qs)),
                                _mm512_slli_epi64(_mm512_and_si512(hb, seven), 8));
            const __m512i g = _mm512_i64gather_epi64(idx, (const void *)iq1s_grid, 8);
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
            if (type == GGML_IQ1_S) {
                const int ls0 = 2 * ((qh >> 12) & 7) + 1, ls1 = 2 * ((qh >> 28) & 7) + 1;
                si1 += (a->sum16[k / 16 + 2 * ib] + a->sum16[k / 16 + 2 * ib + 1]) *
                           ((qh >> 15) & 1 ? -1 : 1) * ls0 +
                       (a->sum16[k / 16 + 2 * ib + 2] + a->sum16[k / 16 + 2 * ib + 3]) *
                           ((qh >> 31) & 1 ? -1 : 1) * ls1;
            } else { /* IQ1_M: a delta sign per run of 8 (bit 3 of its nibble) */
                const __mmask16 neg = _mm512_test_epi32_mask(
                    _mm512_srlv_epi32(_mm512_set1_epi32((int)qh),
                                      _mm512_setr_epi32(3, 3, 7, 7, 11, 11, 15, 15, 19, 19, 23, 23,
                                                        27, 27, 31, 31)),
                    _mm512_set1_epi32(1));
                isum2 = _mm512_dpwssd_epi32(
                    isum2, _mm512_mask_sub_epi32(s4, neg, _mm512_setzero_si512(), s4), lsv);
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

#endif

/* iq_vnni_impl — the grid formats' vector decoding for the avx512vnni
 * set (folder-private): IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S blocks
 * read into each pair of sub-blocks' 64 grid magnitudes (unsigned bytes),
 * their negation mask and their odd integer scales, for a=llamacpp's
 * kernels (matmul_q8_iq.c, against 8-bit codes) and plain mode's
 * (matmul_vnni_iq.c, against x's 24-bit planes).
 *
 * A pair of sub-blocks (64 values) is one register: lanes of 4 bytes,
 * lanes 0-7 the first sub-block, 8-15 the second. The grid values come
 * from vector code, not one load per 8: the block's indices are looked up
 * in the grid's level-code tables (iq_grids.h), 256 entries in four
 * registers (`vpermt2b`; the top index bits choose among 2 or 4 tables for
 * the 512- and 1024-entry grids), each run's code moved to its own 64-bit
 * lane and spread to one level a byte (`vpmultishiftqb`), the level to its
 * value by a 64-byte table (`vpermb`); the signs by ksigns (one 128-byte
 * lookup a block) or as stored; the scales by shifts. Every value is
 * dequant's (iq_blocks_impl.h reads the same layouts): only whole
 * integers move. */
#ifndef QG_IQ_VNNI_IMPL_H
#define QG_IQ_VNNI_IMPL_H

#include "backends/iq_blocks_impl.h"
#include "backends/matmul_x86_impl.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)

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

AVX512VNNI static inline __attribute__((always_inline)) __m512i odd_top4(__m512i v)
{
    return _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(v, 28), 1), _mm512_set1_epi32(1));
}

/* the tables a row's blocks are looked up in */
struct iq_tabs {
    __m512i lo[4], hi[4]; /* the 256-entry grids' code bytes (IQ2_XXS, IQ3_XXS) */
    __m512i lv;           /* the level values (levels) */
    __m512i ks0, ks1;     /* ksigns_iq2xs */
};

/* a block's decoded parts, as iq_pair reads them */
struct iq_blk {
    __m512i c0, c1; /* code bytes (IQ2_XS: whole codes a word) */
    __m512i sg;     /* sign bytes (ksigns' formats) */
    __m512i ls;     /* odd scales, one a lane */
};

/* ggml's factor m^-1 (the scale ls / m times d is dequant's db) */
static inline float iq_m_inv(uint32_t type)
{
    return type == GGML_IQ3_S ? 1.0f : type == GGML_IQ3_XXS ? 0.25f : 0.125f;
}

AVX512VNNI static inline __attribute__((always_inline)) void iq_tabs_load(uint32_t type,
                                                                          struct iq_tabs *t)
{
    t->ks0 = _mm512_loadu_si512((const void *)ksigns_iq2xs);
    t->ks1 = _mm512_loadu_si512((const void *)(ksigns_iq2xs + 64));
    switch (type) {
    case GGML_IQ2_XXS:
        load_lut(t->lo, iq2xxs_codes[0], 4);
        load_lut(t->hi, iq2xxs_codes[1], 4);
        t->lv = levels(iq2xxs_levels, 2);
        break;
    case GGML_IQ3_XXS:
        load_lut(t->lo, iq3xxs_codes[0], 4);
        load_lut(t->hi, iq3xxs_codes[1], 4);
        t->lv = levels(iq3xxs_levels, 3);
        break;
    case GGML_IQ2_XS:
        t->lv = levels(iq2xs_levels, 2);
        break;
    case GGML_IQ2_S:
        t->lv = levels(iq2s_levels, 2);
        break;
    default:
        t->lv = levels(iq3s_levels, 3);
        break;
    }
}

/* the 7-bit sign fields of IQ2_XXS and IQ3_XXS (in each qword from bit
 * `at`) as ksigns' bytes: bytes 8 i + l, l < 4 */
AVX512VNNI static inline __attribute__((always_inline)) __m512i ksigns(const struct iq_tabs *t,
                                                                       __m512i v, long long at)
{
    const long long f = at | (at + 7) << 8 | (at + 14) << 16 | (at + 21) << 24;
    return _mm512_permutex2var_epi8(
        t->ks0, _mm512_multishift_epi64_epi8(_mm512_set1_epi64(f | f << 32), v), t->ks1);
}

/* a 512-entry table (codes: 512 bytes) at v's bytes, entries from 256 where hi */
AVX512VNNI static inline __attribute__((always_inline)) __m512i lut512(const uint8_t *codes,
                                                                       __m512i v, __mmask64 hi)
{
    __m512i t[4];
    load_lut(t, codes, 4);
    const __m512i lo = lut256(t, v);
    load_lut(t, codes + 256, 4);
    return _mm512_mask_blend_epi8(hi, lo, lut256(t, v));
}

/* IQ2_XXS: the 8 sub-block records (4 grid indices, then 4 sign fields
 * and the scale) in one register. IQ2_XS: 16-bit codes (9 bits of index,
 * 7 of signs), c0 the codes a word. IQ2_S: 10-bit indices (8 bits, 2 in
 * qh), the top 2 bits choosing among four tables. IQ3_XXS: 64 index
 * bytes (two 4-value entries a run), then each sub-block's sign fields
 * and scale. IQ3_S: 9-bit indices (the 9th bits in qh, a bit a byte: a
 * byte mask), a scale nibble per sub-block. */
AVX512VNNI static inline __attribute__((always_inline)) void
iq_blk_read(uint32_t type, const uint8_t *b, const struct iq_tabs *t, struct iq_blk *o)
{
    if (type == GGML_IQ2_XXS || type == GGML_IQ3_XXS) {
        const __m512i v = _mm512_loadu_si512((const void *)(b + 2));
        o->c0 = lut256(t->lo, v);
        o->c1 = lut256(t->hi, v);
        if (type == GGML_IQ2_XXS) {
            o->sg = ksigns(t, v, 32);
            o->ls = odd_top4(v);
        } else {
            const __m512i aux =
                _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(b + 66)));
            o->sg = ksigns(t, aux, 0);
            o->ls = odd_top4(aux);
        }
        return;
    }
    uint64_t w;
    if (type == GGML_IQ2_XS) {
        const __m512i v = _mm512_loadu_si512((const void *)(b + 2));
        /* even byte 2 i: the looked-up bytes of word i's index */
        const __mmask64 hi = _kshiftri_mask64(_mm512_movepi8_mask(_mm512_slli_epi16(v, 7)), 1);
        const __m512i lo = lut512(iq2xs_codes[0], v, hi), up = lut512(iq2xs_codes[1], v, hi);
        o->c0 = _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAULL, lo, _mm512_slli_epi16(up, 8));
        o->sg = _mm512_permutex2var_epi8(t->ks0, _mm512_srli_epi16(v, 9), t->ks1);
        memcpy(&w, b + 66, 8);
        o->ls = odd_nibbles(w);
    } else if (type == GGML_IQ2_S) {
        const __m512i v = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 2)));
        /* byte n: qh's bits 2 n and up (n < 32) */
        const __m512i at = _mm512_set_epi64(0, 0, 0, 0, 0x3E3C3A3836343230LL, 0x2E2C2A2826242220LL,
                                            0x1E1C1A1816141210LL, 0x0E0C0A0806040200LL);
        memcpy(&w, b + 66, 8);
        const __m512i hb = _mm512_multishift_epi64_epi8(at, _mm512_set1_epi64((long long)w));
        const __mmask64 m0 = _mm512_test_epi8_mask(hb, _mm512_set1_epi8(1)),
                        m1 = _mm512_test_epi8_mask(hb, _mm512_set1_epi8(2));
        o->c0 = _mm512_mask_blend_epi8(m1, lut512(iq2s_codes[0], v, m0),
                                       lut512(iq2s_codes[0] + 512, v, m0));
        o->c1 = _mm512_mask_blend_epi8(m1, lut512(iq2s_codes[1], v, m0),
                                       lut512(iq2s_codes[1] + 512, v, m0));
        memcpy(&w, b + 74, 8);
        o->ls = odd_nibbles(w);
    } else { /* IQ3_S */
        const __m512i v = _mm512_loadu_si512((const void *)(b + 2));
        memcpy(&w, b + 66, 8);
        o->c0 = lut512(iq3s_codes[0], v, _cvtu64_mask64(w));
        o->c1 = lut512(iq3s_codes[1], v, _cvtu64_mask64(w));
        o->ls = odd_nibbles(iqb_rd32(b + 106));
    }
}

/* 1 for the formats with a scale per 16 values (IQ2_XS, IQ2_S), 0 for
 * those with one per sub-block of 32 */
static inline int iq_scales16(uint32_t type)
{
    return type == GGML_IQ2_XS || type == GGML_IQ2_S;
}

/* the block's odd scales in order, one a lane: lane i sub-block i's (8
 * lanes), or (iq_scales16) lane n that of values 16 n .. 16 n + 15 */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
iq_blk_scales(uint32_t type, const struct iq_blk *o)
{
    if (type == GGML_IQ2_XXS || type == GGML_IQ3_XXS) /* in dwords 2 i + 1, 2 i */
        return _mm512_permutexvar_epi32(
            _mm512_add_epi32(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0),
                             _mm512_set1_epi32(type == GGML_IQ2_XXS)),
            o->ls);
    return o->ls;
}

/* pair p's lanes' indices into iq_blk_scales */
AVX512VNNI static inline __attribute__((always_inline)) __m512i iq_pair_at(uint32_t type, int p)
{
    if (iq_scales16(type))
        return _mm512_add_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                _mm512_set1_epi32(4 * p));
    return _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(2 * p), _mm512_set1_epi32(2 * p + 1));
}

/* pair p of the block (values 64 p .. 64 p + 63): their grid magnitudes,
 * *neg their negation mask, *ls their scales a lane */
AVX512VNNI static inline __attribute__((always_inline)) __m512i
iq_pair(uint32_t type, const uint8_t *b, const struct iq_tabs *t, const struct iq_blk *o, int p,
        __mmask64 *neg, __m512i *ls)
{
    uint64_t s;
    switch (type) {
    case GGML_IQ2_XXS: {
        const __m512i ctl = pair_ctl(p);
        *neg = sign_lanes(_mm512_permutexvar_epi8(ctl, o->sg));
        *ls = halves(o->ls, 4 * p + 1, 4 * p + 3);
        return spread(
            _mm512_maskz_permutex2var_epi8(
                0x0303030303030303ULL, o->c0,
                _mm512_mask_add_epi8(ctl, 0xAAAAAAAAAAAAAAAAULL, ctl, _mm512_set1_epi8(64)), o->c1),
            t->lv, 2);
    }
    case GGML_IQ2_XS: {
        /* qword r: word 8 p + r; its sign byte at byte 16 p + 2 r */
        const __m512i w = _mm512_add_epi16(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi16((short)(8 * p)));
        const long long o1 = 0x0101010101010101LL;
        *neg = sign_lanes(_mm512_permutexvar_epi8(
            _mm512_add_epi8(
                _mm512_set_epi64(14 * o1, 12 * o1, 10 * o1, 8 * o1, 6 * o1, 4 * o1, 2 * o1, 0),
                _mm512_set1_epi8((char)(16 * p))),
            o->sg));
        *ls = quad_scales(o->ls, 4 * p);
        return spread(_mm512_maskz_permutexvar_epi16(0x11111111u, w, o->c0), t->lv, 2);
    }
    case GGML_IQ2_S: {
        /* qword r: bytes 8 p + r of the low and high code bytes */
        const __m512i ctl = _mm512_add_epi8(
            _mm512_set_epi64(0x4707, 0x4606, 0x4505, 0x4404, 0x4303, 0x4202, 0x4101, 0x4000),
            _mm512_set1_epi8((char)(8 * p)));
        memcpy(&s, b + 34 + 8 * p, 8);
        *neg = _cvtu64_mask64(s);
        *ls = quad_scales(o->ls, 4 * p);
        return spread(_mm512_maskz_permutex2var_epi8(0x0303030303030303ULL, o->c0, ctl, o->c1),
                      t->lv, 2);
    }
    case GGML_IQ3_XXS:
        *neg = sign_lanes(_mm512_permutexvar_epi8(pair_ctl(p), o->sg));
        *ls = halves(o->ls, 4 * p, 4 * p + 2);
        return spread(codes3(o->c0, o->c1, p), t->lv, 3);
    default: /* IQ3_S */
        memcpy(&s, b + 74 + 8 * p, 8);
        *neg = _cvtu64_mask64(s);
        *ls = halves(o->ls, 2 * p, 2 * p + 1);
        return spread(codes3(o->c0, o->c1, p), t->lv, 3);
    }
}

#endif

#endif

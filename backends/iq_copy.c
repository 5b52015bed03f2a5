/* iq_copy — decoded copies of the IQ1, IQ2 and IQ3 grid formats' blocks
 * (iq_copy.h). */
#include "backends/iq_copy.h"
#include "backends/ggml_types.h"
#include "backends/iq_blocks_impl.h"
#include "backends/iq_grids.h"

#include <pthread.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { S_BYTES = 50, M_BYTES = 56, CODES = 64 };

size_t iq_copy_block_bytes(uint32_t type)
{
    switch (type) {
    case GGML_IQ1_S:
        return IQ1_COPY_S_BYTES;
    case GGML_IQ1_M:
        return IQ1_COPY_M_BYTES;
    case GGML_IQ2_XXS:
        return IQ2_COPY_XXS_BYTES;
    case GGML_IQ2_XS:
    case GGML_IQ2_S:
        return IQ2_COPY_XS_BYTES;
    case GGML_IQ3_XXS:
    case GGML_IQ3_S:
        return IQ3_COPY_BYTES;
    default:
        return 0;
    }
}

/* grid index of each pattern of 8 codes, by the codes read as base-3 digits
 * (code of value i times 3^i) */
static uint16_t index_of[6561];
static pthread_once_t index_once = PTHREAD_ONCE_INIT;

static void index_build(void)
{
    for (int i = 2047; i >= 0; i--) { /* duplicates, were there any: the lowest index */
        int key = 0;
        for (int v = 7; v >= 0; v--)
            key = 3 * key + (int8_t)(iq1s_grid[i] >> 8 * v) + 1;
        index_of[key] = (uint16_t)i;
    }
}

/* Run t's 8 values (elements 8t .. 8t + 7) share a shift among the codes
 * and lie in 8 consecutive bytes: those of the run of 64 (t / 8) from
 * byte 8 (t % 2) of its 16, quarter (t % 8) / 2. */
static size_t run_byte(int t)
{
    return (size_t)(16 * (t / 8) + 8 * (t % 2));
}

static int run_shift(int t)
{
    return 2 * ((t % 8) / 2);
}

#define ONES 0x0101010101010101ULL

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* little-endian, as x86 (the only set with a copy) */
}

static void wr64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

/* 8 codes (a byte each, below 4) into run t's place among the codes */
static void or_run(uint8_t *codes, int t, uint64_t c8)
{
    uint8_t *at = codes + run_byte(t);
    wr64(at, rd64(at) | c8 << run_shift(t));
}

/* run t of 8 values (grid index idx) into the codes: g + 1 per byte, added
 * without carries between bytes (-1 is 0xFF: its low 7 bits plus 1 is
 * 0x80, less its top bit 0) */
static void put_run(uint8_t *codes, int t, int idx)
{
    const uint64_t g = iq1s_grid[idx], top = 0x80 * ONES;
    or_run(codes, t, ((g & ~top) + ONES) ^ (g & top));
}

/* the grid index of run t from the codes: its 8 codes read as base-3
 * digits, value v's the digit of 3^v, added pairwise */
static int get_run(const uint8_t *codes, int t)
{
    const uint64_t c = rd64(codes + run_byte(t)) >> run_shift(t) & 3 * ONES;
    const uint64_t m16 = 0x00FF00FF00FF00FFULL, m32 = 0x0000FFFF0000FFFFULL;
    const uint64_t pairs = (c & m16) + 3 * (c >> 8 & m16);
    const uint64_t quads = (pairs & m32) + 9 * (pairs >> 16 & m32);
    return index_of[(quads & 0xFFFFFFFFu) + 81 * (quads >> 32)];
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* IQ1_S: d, qs[32], qh[8] (16 bits: 3 index bits per run of its 32
 * values, then the scale and the delta's sign) */
static void copy_s(const uint8_t *b, uint8_t *c)
{
    uint32_t nib = 0;
    for (int j = 0; j < 8; j++) {
        const uint16_t qh = rd16(b + 34 + 2 * j);
        for (int l = 0; l < 4; l++)
            put_run(c, 4 * j + l, b[2 + 4 * j + l] | ((qh >> 3 * l) & 7) << 8);
        nib |= (uint32_t)(qh >> 12) << 4 * j;
    }
    memcpy(c + CODES, b, 2);
    wr32(c + CODES + 2, nib);
}

static void stored_s(const uint8_t *c, uint8_t *b)
{
    const uint32_t nib = rd32(c + CODES + 2);
    memcpy(b, c + CODES, 2);
    for (int j = 0; j < 8; j++) {
        uint32_t qh = (nib >> 4 * j & 0xF) << 12;
        for (int l = 0; l < 4; l++) {
            const int idx = get_run(c, 4 * j + l);
            b[2 + 4 * j + l] = (uint8_t)idx;
            qh |= (uint32_t)(idx >> 8) << 3 * l;
        }
        b[34 + 2 * j] = (uint8_t)qh;
        b[35 + 2 * j] = (uint8_t)(qh >> 8);
    }
}

/* IQ1_M: qs[32], qh[16] (a nibble per run: 3 index bits, the delta's
 * sign), scales[8] */
static void copy_m(const uint8_t *b, uint8_t *c)
{
    uint32_t signs = 0;
    for (int t = 0; t < 32; t++) {
        const int h = b[32 + t / 2] >> 4 * (t % 2) & 0xF;
        put_run(c, t, b[t] | (h & 7) << 8);
        signs |= (uint32_t)(h >> 3) << t;
    }
    memcpy(c + CODES, b + 48, 8);
    wr32(c + CODES + 8, signs);
}

static void stored_m(const uint8_t *c, uint8_t *b)
{
    const uint32_t signs = rd32(c + CODES + 8);
    memset(b + 32, 0, 16);
    for (int t = 0; t < 32; t++) {
        const int idx = get_run(c, t);
        b[t] = (uint8_t)idx;
        b[32 + t / 2] |= (uint8_t)(((idx >> 8) | (int)(signs >> t & 1) << 3) << 4 * (t % 2));
    }
    memcpy(b + 48, c + CODES, 8);
}

/* IQ2: each run's 8 magnitudes (iq_sub's grid bytes, 8, 25 or 43) as
 * their levels (magnitude / 16) and its sign byte; d; the scales */
static void copy_iq2(uint32_t type, const uint8_t *b, uint8_t *c)
{
    for (int ib = 0; ib < 8; ib++) {
        struct iq_sub o;
        iq_sub(type, b, 0.0f, ib, &o);
        for (int l = 0; l < 4; l++) {
            const int t = 4 * ib + l;
            or_run(c, t, o.g[l] >> 4 & 3 * ONES);
            c[CODES + t] = (uint8_t)o.s[l];
        }
    }
    memcpy(c + CODES + 32, b, 2);
    if (type == GGML_IQ2_XXS) {
        uint32_t nib = 0;
        for (int ib = 0; ib < 8; ib++) /* the top nibble of each sub-block's second word */
            nib |= (rd32(b + 2 + 8 * ib + 4) >> 28) << 4 * ib;
        wr32(c + CODES + 34, nib);
    } else {
        memcpy(c + CODES + 34, b + (type == GGML_IQ2_XS ? 66 : 74), 8);
    }
}

/* IQ3: each run's 8 magnitudes as levels (IQ3_XXS magnitude / 8, IQ3_S
 * magnitude / 2), their low 2 bits among the codes, bit 2 packed a bit a
 * value (bytes of 0 or 1 times 0x0102040810204080: byte j's bit to bit
 * 56 + j), its sign byte; d; the scales */
static void copy_iq3(uint32_t type, const uint8_t *b, uint8_t *c)
{
    for (int ib = 0; ib < 8; ib++) {
        struct iq_sub o;
        iq_sub(type, b, 0.0f, ib, &o);
        for (int l = 0; l < 4; l++) {
            const int t = 4 * ib + l;
            const uint64_t lev = o.g[l] >> (type == GGML_IQ3_XXS ? 3 : 1) &
                                 (type == GGML_IQ3_XXS ? 0x1F : 0x7F) * ONES;
            or_run(c, t, lev & 3 * ONES);
            c[CODES + t] = (uint8_t)((lev >> 2 & ONES) * 0x0102040810204080ULL >> 56);
            c[CODES + 32 + t] = (uint8_t)o.s[l];
        }
    }
    memcpy(c + CODES + 64, b, 2);
    uint32_t nib = 0;
    for (int ib = 0; ib < 8; ib++)
        nib |= (type == GGML_IQ3_XXS ? rd32(b + 66 + 4 * ib) >> 28
                                     : (uint32_t)(b[106 + ib / 2] >> 4 * (ib % 2) & 0xF))
               << 4 * ib;
    wr32(c + CODES + 66, nib);
}

void iq_copy_blocks(uint32_t type, const uint8_t *src, uint8_t *dst, int64_t nb)
{
    const size_t cb = iq_copy_block_bytes(type), sb = (size_t)iq_block_bytes(type);
    for (int64_t i = 0; i < nb; i++, src += sb, dst += cb) {
        memset(dst, 0, CODES);
        if (type == GGML_IQ1_S)
            copy_s(src, dst);
        else if (type == GGML_IQ1_M)
            copy_m(src, dst);
        else if (type == GGML_IQ3_XXS || type == GGML_IQ3_S)
            copy_iq3(type, src, dst);
        else
            copy_iq2(type, src, dst);
    }
}

void iq_stored_blocks(uint32_t type, const uint8_t *src, uint8_t *dst, int64_t nb)
{
    pthread_once(&index_once, index_build);
    const size_t cb = iq_copy_block_bytes(type), sb = type == GGML_IQ1_S ? S_BYTES : M_BYTES;
    for (int64_t i = 0; i < nb; i++, src += cb, dst += sb) {
        if (type == GGML_IQ1_S)
            stored_s(src, dst);
        else
            stored_m(src, dst);
    }
}

#if defined(__SSE2__)
/* the 16 codes of runs t and t + 1 (t even: 16 bytes of a run of 64 at
 * one shift), a byte each */
static __m128i codes2(const uint8_t *codes, int t)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(codes + run_byte(t)));
    return _mm_and_si128(_mm_srli_epi64(v, run_shift(t)), _mm_set1_epi8(3));
}

/* 0xFF in byte j (j < 8) where bit j of b0 is set, in byte 8 + j where
 * bit j of b1 is, else 0 */
static __m128i bit_masks2(uint8_t b0, uint8_t b1)
{
    const __m128i bits = _mm_set1_epi64x((long long)0x8040201008040201ULL);
    const __m128i v = _mm_set_epi64x((long long)(b1 * ONES), (long long)(b0 * ONES));
    return _mm_cmpeq_epi8(_mm_and_si128(v, bits), bits);
}
#endif

/* runs t and t + 1 (t even: the 16 bytes of a run of 64 at one shift)
 * as codes 8 g + 1 where up (bit 0: run t, bit 1: run t + 1), else
 * 8 g - 1: 8 (g + 1) + 120 +- 1 per byte, then less 128 (no byte carries:
 * at most 137) */
static void run_codes2(const uint8_t *codes, int t, int up, int8_t *c)
{
    const uint64_t b0 = (up & 1 ? 121 : 119) * ONES, b1 = (up & 2 ? 121 : 119) * ONES;
#if defined(__SSE2__)
    const __m128i g1 = codes2(codes, t);
    _mm_storeu_si128((__m128i *)(void *)c,
                     _mm_xor_si128(_mm_add_epi8(_mm_slli_epi64(g1, 3),
                                                _mm_set_epi64x((long long)b1, (long long)b0)),
                                   _mm_set1_epi8((char)0x80)));
#else
    const uint64_t g0 = rd64(codes + run_byte(t)) >> run_shift(t) & 3 * ONES,
                   g1 = rd64(codes + run_byte(t) + 8) >> run_shift(t) & 3 * ONES;
    wr64((uint8_t *)c, ((g0 << 3) + b0) ^ 0x80 * ONES);
    wr64((uint8_t *)c + 8, ((g1 << 3) + b1) ^ 0x80 * ONES);
#endif
}

#if !defined(__SSE2__)
/* 1 in byte j for bit j of b8 */
static uint64_t bit_bytes(unsigned b8)
{
    const uint64_t x = ((uint64_t)(b8 & 0xFF) * ONES) & 0x8040201008040201ULL;
    return (((x + 0x7F * ONES) | x) & 0x80 * ONES) >> 7;
}
#endif

/* IQ2's codes of a block: each run's magnitudes from its levels c (8 +
 * 17 c + c / 2: 8, 25, 43), negated where its sign byte says (128 + v or
 * 128 - v, no byte carrying, then less 128); its scales d (0.5 + n) / 4
 * as dequant's */
static void codes_iq2(uint32_t type, const uint8_t *src, int8_t *code, float *s)
{
#if defined(__SSE2__) /* two runs at a time: v, then (v ^ neg) - neg */
    for (int t = 0; t < 32; t += 2) {
        const __m128i c = codes2(src, t);
        const __m128i v =
            _mm_add_epi8(_mm_add_epi8(_mm_set1_epi8(8), _mm_add_epi8(_mm_slli_epi64(c, 4), c)),
                         _mm_and_si128(_mm_srli_epi64(c, 1), _mm_set1_epi8(1)));
        const __m128i neg = bit_masks2(src[CODES + t], src[CODES + t + 1]);
        _mm_storeu_si128((__m128i *)(void *)(code + 8 * t),
                         _mm_sub_epi8(_mm_xor_si128(v, neg), neg));
    }
#else
    for (int t = 0; t < 32; t++) {
        const uint64_t c = rd64(src + run_byte(t)) >> run_shift(t) & 3 * ONES;
        const uint64_t v = 8 * ONES + (c << 4) + c + (c >> 1 & ONES);
        const uint64_t neg = bit_bytes(src[CODES + t]) * 0xFF, mid = 0x80 * ONES;
        wr64((uint8_t *)code + 8 * t, (((mid + v) & ~neg) | ((mid - v) & neg)) ^ mid);
    }
#endif
    const float d = quant_f16_to_f32(rd16(src + CODES + 32));
    const uint8_t *sc = src + CODES + 34;
    if (type == GGML_IQ2_XXS)
        for (int j = 0; j < 8; j++)
            s[j] = d * (0.5f + (float)(rd32(sc) >> 4 * j & 0xF)) * 0.25f;
    else
        for (int j = 0; j < 16; j++)
            s[j] = d * (0.5f + (float)(sc[j / 2] >> 4 * (j % 2) & 0xF)) * 0.25f;
}

/* IQ3's codes of a block: each run's levels (2 low bits and bit 2) to
 * magnitudes (IQ3_XXS 4 + 8 n, and 2 more for level 7: 62; IQ3_S 2 n +
 * 1), negated where its sign byte says; its scales as dequant's (IQ3_XXS
 * d (0.5 + n) / 2, IQ3_S d (1 + 2 n)) */
static void codes_iq3(uint32_t type, const uint8_t *src, int8_t *code, float *s)
{
#if defined(__SSE2__) /* two runs at a time, as codes_iq2 */
    const __m128i one = _mm_set1_epi8(1);
    for (int t = 0; t < 32; t += 2) {
        const __m128i lev = _mm_or_si128(
            codes2(src, t),
            _mm_and_si128(bit_masks2(src[CODES + t], src[CODES + t + 1]), _mm_set1_epi8(4)));
        __m128i v;
        if (type == GGML_IQ3_XXS) { /* 4 + 8 n, 2 more where n + 1 is 8 */
            const __m128i top = _mm_and_si128(_mm_srli_epi64(_mm_add_epi8(lev, one), 3), one);
            v = _mm_add_epi8(_mm_add_epi8(_mm_set1_epi8(4), _mm_slli_epi64(lev, 3)),
                             _mm_add_epi8(top, top));
        } else {
            v = _mm_add_epi8(_mm_slli_epi64(lev, 1), one);
        }
        const __m128i neg = bit_masks2(src[CODES + 32 + t], src[CODES + 33 + t]);
        _mm_storeu_si128((__m128i *)(void *)(code + 8 * t),
                         _mm_sub_epi8(_mm_xor_si128(v, neg), neg));
    }
#else
    for (int t = 0; t < 32; t++) {
        const uint64_t lev =
            (rd64(src + run_byte(t)) >> run_shift(t) & 3 * ONES) | bit_bytes(src[CODES + t]) << 2;
        const uint64_t v = type == GGML_IQ3_XXS
                               ? 4 * ONES + (lev << 3) + ((lev + ONES) >> 3 & ONES) * 2
                               : (lev << 1) + ONES;
        const uint64_t neg = bit_bytes(src[CODES + 32 + t]) * 0xFF, mid = 0x80 * ONES;
        wr64((uint8_t *)code + 8 * t, (((mid + v) & ~neg) | ((mid - v) & neg)) ^ mid);
    }
#endif
    const float d = quant_f16_to_f32(rd16(src + CODES + 64));
    const uint32_t nib = rd32(src + CODES + 66);
    for (int j = 0; j < 8; j++)
        s[j] = type == GGML_IQ3_XXS ? d * (0.5f + (float)(nib >> 4 * j & 0xF)) * 0.5f
                                    : d * (float)(1 + 2 * (nib >> 4 * j & 0xF));
}

void iq_copy_codes(uint32_t type, const uint8_t *src, int64_t nb, int8_t *code, float *s)
{
    const size_t cb = iq_copy_block_bytes(type);
    for (int64_t i = 0; i < nb; i++, src += cb, code += 256) {
        const uint8_t *tail = src + CODES;
        if (type == GGML_IQ3_XXS || type == GGML_IQ3_S) {
            codes_iq3(type, src, code, s);
            s += 8;
        } else if (type != GGML_IQ1_S && type != GGML_IQ1_M) {
            codes_iq2(type, src, code, s);
            s += type == GGML_IQ2_XXS ? 8 : 16;
        } else if (type == GGML_IQ1_S) {
            const float d = quant_f16_to_f32(rd16(tail));
            const uint32_t nib = rd32(tail + 2);
            for (int j = 0; j < 8; j++) {
                const uint32_t h = nib >> 4 * j;
                for (int l = 0; l < 4; l += 2)
                    run_codes2(src, 4 * j + l, h & 8 ? 0 : 3, code + 32 * j + 8 * l);
                *s++ = d * (float)(2 * (h & 7) + 1) * 0.125f;
            }
        } else {
            const float d = iq1m_d(tail);
            const uint32_t signs = rd32(tail + 8);
            for (int t = 0; t < 32; t += 2)
                run_codes2(src, t, (int)(~signs >> t & 3), code + 8 * t);
            for (int j = 0; j < 16; j++) /* scale j of 16 values: word j / 4, field j % 4 */
                *s++ = d * (float)(2 * (rd16(tail + 2 * (j / 4)) >> 3 * (j % 4) & 7) + 1) * 0.125f;
        }
    }
}

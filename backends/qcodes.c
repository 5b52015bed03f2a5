/* qcodes — block formats as 8-bit codes and chunk factors (qcodes.h). Each
 * block function reads one stored block as dequant.c does and writes its
 * codes, and a scale and a minimum per chunk. */
#include "backends/qcodes.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/iq_blocks_impl.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QG_NO_IFUNC)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

static float h2f(const uint8_t *p)
{
    return quant_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Eight codes at a time in a 64-bit word (SWAR), so that the decoders
 * run without vector units too: B1 has 1 in every byte. */
#define B1 0x0101010101010101ull

static inline uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline void st64(int8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

/* u - k in each byte, for bytes u < 128 and k <= 128 (no borrow crosses
 * a byte: each byte is first raised by 128) */
static inline uint64_t sub_bytes(uint64_t u, uint64_t k)
{
    return ((u | 0x80 * B1) - k) ^ 0x80 * B1;
}

/* 32-element blocks: codes c[32], one scale, one minimum */
/* 1 in byte j of the result for bit j of b8 set, else 0 */
static inline uint64_t bit_bytes(unsigned b8)
{
    uint64_t x = ((uint64_t)(b8 & 0xFF) * B1) & 0x8040201008040201ull;
    return (((x + 0x7F * B1) | x) & 0x80 * B1) >> 7;
}

static inline __attribute__((always_inline)) void b_q4_0(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    (void)m;
    s[0] = h2f(b);
    for (int l = 0; l < 16; l += 8) { /* the low nibbles, then the high ones, less 8 */
        const uint64_t v = ld64(b + 2 + l);
        st64(c + l, sub_bytes(v & 0xF * B1, 8 * B1));
        st64(c + 16 + l, sub_bytes((v >> 4) & 0xF * B1, 8 * B1));
    }
}

static inline __attribute__((always_inline)) void b_q4_1(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    s[0] = h2f(b), m[0] = h2f(b + 2);
    for (int l = 0; l < 16; l += 8) {
        const uint64_t v = ld64(b + 4 + l);
        st64(c + l, v & 0xF * B1);
        st64(c + 16 + l, (v >> 4) & 0xF * B1);
    }
}

/* Q5_0 (off 16) and Q5_1 (off 0): 4 bytes of fifth bits, then the nibbles */
static inline __attribute__((always_inline)) void q5_codes(const uint8_t *qhp, const uint8_t *qs,
                                                           int off, int8_t *c)
{
    uint32_t qh = rd32(qhp);
    for (int l = 0; l < 16; l += 8) { /* element j's fifth bit is bit j of qh */
        const uint64_t v = ld64(qs + l);
        st64(c + l, sub_bytes((v & 0xF * B1) | bit_bytes(qh >> l) << 4, (uint64_t)off * B1));
        st64(c + 16 + l,
             sub_bytes(((v >> 4) & 0xF * B1) | bit_bytes(qh >> (16 + l)) << 4, (uint64_t)off * B1));
    }
}

static inline __attribute__((always_inline)) void b_q5_0(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    (void)m;
    s[0] = h2f(b);
    q5_codes(b + 2, b + 6, 16, c);
}

static inline __attribute__((always_inline)) void b_q5_1(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    s[0] = h2f(b), m[0] = h2f(b + 2);
    q5_codes(b + 4, b + 8, 0, c);
}

static inline __attribute__((always_inline)) void b_q8_0(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    (void)m;
    s[0] = h2f(b);
    memcpy(c, b + 2, 32);
}

/* the codes of 16 bytes of nibbles through a 16-entry table: the low
 * nibbles first, then the high ones (IQ4_NL, IQ4_XS, MXFP4) */
static inline void nibbles(const uint8_t *qs, const int8_t *tab, int8_t *c)
{
    for (int j = 0; j < 16; j++) {
        c[j] = tab[qs[j] & 0xF];
        c[j + 16] = tab[qs[j] >> 4];
    }
}

/* MXFP4's scale: E8M0 2^(e - 127) times E2M1 = 2^(e - 128) times twice
 * E2M1 */
static inline float mxfp4_scale(uint8_t e)
{
    return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 128);
}

/* IQ4_XS's scale of sub-block ib (d times its 6-bit scale less 32) */
static inline float iq4xs_scale(const uint8_t *b, int ib)
{
    unsigned scales_h = (unsigned)(b[2] | b[3] << 8);
    int ls = ((b[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((scales_h >> 2 * ib) & 3) << 4);
    return h2f(b) * (float)(ls - 32);
}

static inline __attribute__((always_inline)) void b_iq4_nl(const uint8_t *b, int8_t *c, float *s,
                                                           float *m)
{
    (void)m;
    s[0] = h2f(b);
    nibbles(b + 2, dequant_iq4nl_values, c);
}

static inline __attribute__((always_inline)) void b_mxfp4(const uint8_t *b, int8_t *c, float *s,
                                                          float *m)
{
    (void)m;
    s[0] = mxfp4_scale(b[0]);
    nibbles(b + 1, dequant_mxfp4_x2, c);
}

/* 256-element blocks: codes c[256], 8 (chunks of 32) or 16 (of 16) scales */

static inline __attribute__((always_inline)) void b_q2_k(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    const uint8_t *sc = b, *q = b + 16;
    float d = h2f(b + 80), dmin = h2f(b + 82);
    for (int r = 0; r < 16; r++, c += 16) { /* as dequant.c's runs of 16 */
        const uint8_t *qr = q + 32 * (r / 8) + 16 * (r % 2);
        const int shift = 2 * (r / 2 % 4);
        s[r] = d * (float)(sc[r] & 0xF);
        m[r] = -(dmin * (float)(sc[r] >> 4));
        for (int l = 0; l < 16; l += 8)
            st64(c + l, (ld64(qr + l) >> shift) & 3 * B1);
    }
}

static inline __attribute__((always_inline)) void b_q3_k(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    (void)m;
    const uint8_t *hm = b, *q = b + 32, *sc = b + 96;
    float d = h2f(b + 108);
    for (int r = 0; r < 16; r++, c += 16) {
        const int off = 16 * (r % 2), shift = 2 * (r / 2 % 4), hb = r / 2;
        const uint8_t *qr = q + 32 * (r / 8) + off, *hr = hm + off;
        s[r] = d * (float)dequant_q3k_scale(sc, r);
        for (int l = 0; l < 16; l += 8) /* low bits + 4 high bit, less 4 */
            st64(c + l,
                 sub_bytes(((ld64(qr + l) >> shift) & 3 * B1) | ((ld64(hr + l) >> hb) & B1) << 2,
                           4 * B1));
    }
}

/* Q4_K (qh NULL) and Q5_K: chunk 2i the low nibbles of q[32 i ..], chunk
 * 2i + 1 the high ones; Q5_K's fifth bits are bits 2i, 2i + 1 of qh */
static inline __attribute__((always_inline)) void
k4_codes(const uint8_t *b, const uint8_t *qh, const uint8_t *q, int8_t *c, float *s, float *m)
{
    float d = h2f(b), dmin = h2f(b + 2);
    for (int i = 0; i < 4; i++, q += 32) {
        for (int h = 0; h < 2; h++) {
            int sc, mn;
            dequant_k4_scale_min(2 * i + h, b + 4, &sc, &mn);
            s[2 * i + h] = d * (float)sc;
            m[2 * i + h] = -(dmin * (float)mn);
            int8_t *o = c + 64 * i + 32 * h;
            for (int l = 0; l < 32; l += 8)
                st64(o + l, ((ld64(q + l) >> (4 * h)) & 0xF * B1) |
                                (qh ? ((ld64(qh + l) >> (2 * i + h)) & B1) << 4 : 0));
        }
    }
}

static inline __attribute__((always_inline)) void b_q4_k(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    k4_codes(b, NULL, b + 16, c, s, m);
}

static inline __attribute__((always_inline)) void b_q5_k(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    k4_codes(b, b + 16, b + 48, c, s, m);
}

static inline __attribute__((always_inline)) void b_q6_k(const uint8_t *b, int8_t *c, float *s,
                                                         float *m)
{
    (void)m;
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = h2f(b + 208);
    for (int n = 0; n < 2; n++, c += 128, ql += 64, qh += 32)
        for (int k = 0; k < 4; k++) /* as dequant.c: quarter k of each 128 */
            for (int h = 0; h < 2; h++) {
                const uint8_t *lo = ql + 32 * (k % 2);
                const int ns = 4 * (k / 2), hs = 2 * k;
                s[8 * n + 2 * k + h] = d * (float)sc[8 * n + h + 2 * k];
                for (int l = 16 * h; l < 16 * h + 16; l += 8)
                    st64(c + 32 * k + l, sub_bytes(((ld64(lo + l) >> ns) & 0xF * B1) |
                                                       ((ld64(qh + l) >> hs) & 3 * B1) << 4,
                                                   32 * B1));
            }
}

static inline __attribute__((always_inline)) void b_iq4_xs(const uint8_t *b, int8_t *c, float *s,
                                                           float *m)
{
    (void)m;
    for (int ib = 0; ib < 8; ib++) {
        s[ib] = iq4xs_scale(b, ib);
        nibbles(b + 8 + 16 * ib, dequant_iq4nl_values, c + 32 * ib);
    }
}

static inline __attribute__((always_inline)) void b_tq1_0(const uint8_t *b, int8_t *c, float *s,
                                                          float *m)
{
    (void)m;
    const uint8_t *qs = b, *qh = b + 48;
    for (int i = 0; i < 8; i++)
        s[i] = h2f(b + 52);
    for (int n = 0; n < 5; n++)
        for (int j = 0; j < 32; j++)
            *c++ = (int8_t)dequant_trit(qs[j], n);
    for (int n = 0; n < 5; n++)
        for (int j = 0; j < 16; j++)
            *c++ = (int8_t)dequant_trit(qs[32 + j], n);
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 4; j++)
            *c++ = (int8_t)dequant_trit(qh[j], n);
}

static inline __attribute__((always_inline)) void b_tq2_0(const uint8_t *b, int8_t *c, float *s,
                                                          float *m)
{
    (void)m;
    for (int i = 0; i < 8; i++)
        s[i] = h2f(b + 64);
    for (int j = 0; j < 64; j += 32)
        for (int l = 0; l < 4; l++)
            for (int k = 0; k < 32; k++)
                *c++ = (int8_t)(((b[j + k] >> (l * 2)) & 3) - 1);
}

/* the grid formats, through iq_blocks_impl.h's sub-block reader: per 32,
 * runs of 8 grid bytes with their signs (IQ1: signed grid bytes and a
 * delta of +-1/8, as 8 g +- 1 with the scale over 8); chunk 16 or 32 */
/* a run of 8 grid bytes g (each below 128) with sign bit j negating byte
 * j: each code as 128 + g or 128 - g (no carry or borrow crosses a
 * byte), then less 128 */
static inline uint64_t signed_run(uint64_t g, unsigned signs)
{
    const uint64_t neg = bit_bytes(signs) * 0xFF; /* 0xFF in the negated bytes */
    uint64_t plus = 0x80 * B1 + g, minus = 0x80 * B1 - g;
    return ((plus & ~neg) | (minus & neg)) ^ 0x80 * B1;
}

/* IQ1's run: signed grid bytes g in -1..1, codes 8 g + 1 (delta up) or
 * 8 g - 1: 8 (g + 1) + 120 +- 1 in each byte (g + 1 added without carries
 * across bytes), then less 128 */
static inline uint64_t iq1_run(uint64_t g, int up)
{
    uint64_t g1 = ((g & 0x7F * B1) + B1) ^ (g & 0x80 * B1);
    return ((g1 << 3) + (uint64_t)(up ? 121 : 119) * B1) ^ 0x80 * B1;
}

static inline __attribute__((always_inline)) void b_grid(uint32_t type, const uint8_t *b, int8_t *c,
                                                         float *s, int chunk)
{
    const float d = iq_block_d(type, b);
    const int iq1 = type == GGML_IQ1_S || type == GGML_IQ1_M;
    for (int ib = 0; ib < 8; ib++) {
        struct iq_sub o;
        iq_sub(type, b, d, ib, &o);
        for (int l = 0; l < 4; l++, c += 8)
            st64(c, iq1 ? iq1_run(o.g[l], o.delta[l] > 0) : signed_run(o.g[l], o.s[l]));
        const float f = iq1 ? 0.125f : 1.0f;
        if (chunk == 16) {
            s[2 * ib] = o.db[0] * f;
            s[2 * ib + 1] = o.db[1] * f;
        } else {
            s[ib] = o.db[0] * f;
        }
    }
}

#define GRID_BLOCK(fn, T, C)                                                                       \
    static inline __attribute__((always_inline)) void fn(const uint8_t *b, int8_t *c, float *s,    \
                                                         float *m)                                 \
    {                                                                                              \
        (void)m;                                                                                   \
        b_grid(T, b, c, s, C);                                                                     \
    }
GRID_BLOCK(b_iq2_xxs, GGML_IQ2_XXS, 32)
GRID_BLOCK(b_iq2_xs, GGML_IQ2_XS, 16)
GRID_BLOCK(b_iq2_s, GGML_IQ2_S, 16)
GRID_BLOCK(b_iq3_xxs, GGML_IQ3_XXS, 32)
GRID_BLOCK(b_iq3_s, GGML_IQ3_S, 32)
GRID_BLOCK(b_iq1_s, GGML_IQ1_S, 32)
GRID_BLOCK(b_iq1_m, GGML_IQ1_M, 16)

/* the chunk length and minima of each type with codes (0: none) */
static void qc_of(uint32_t type, int *chunk, int *has_min)
{
    *has_min = type == GGML_Q4_1 || type == GGML_Q5_1 || type == GGML_Q2_K || type == GGML_Q4_K ||
               type == GGML_Q5_K;
    switch (type) {
    case GGML_Q4_0:
    case GGML_Q4_1:
    case GGML_Q5_0:
    case GGML_Q5_1:
    case GGML_Q8_0:
    case GGML_IQ4_NL:
    case GGML_MXFP4:
    case GGML_Q4_K:
    case GGML_Q5_K:
    case GGML_IQ4_XS:
    case GGML_TQ1_0:
    case GGML_TQ2_0:
    case GGML_IQ2_XXS:
    case GGML_IQ3_XXS:
    case GGML_IQ3_S:
    case GGML_IQ1_S:
        *chunk = 32;
        return;
    case GGML_Q2_K:
    case GGML_Q3_K:
    case GGML_Q6_K:
    case GGML_IQ2_XS:
    case GGML_IQ2_S:
    case GGML_IQ1_M:
        *chunk = 16;
        return;
    default:
        *chunk = 0;
    }
}

int qcodes_chunk(uint32_t type)
{
    int c, m;
    qc_of(type, &c, &m);
    return c;
}

int qcodes_has_min(uint32_t type)
{
    int c, m;
    qc_of(type, &c, &m);
    return c ? m : 0;
}

/* nb blocks of bytes B, elements E, chunk C through block function fn */
#define ROW(fn, B, E, C)                                                                           \
    for (int64_t i = 0; i < nb; i++)                                                               \
        fn(row + (size_t)i * (B), code + i * (E), s + i * ((E) / (C)), m + i * ((E) / (C)));       \
    return

/* every block of a row: the whole loop built for AVX2 and for the
 * baseline (picked at load), each block function inlined into it */
HOT static void row_blocks(uint32_t type, const uint8_t *row, int64_t nb, int8_t *code, float *s,
                           float *m)
{
    switch (type) {
    case GGML_Q4_0:
        ROW(b_q4_0, 18, 32, 32);
    case GGML_Q4_1:
        ROW(b_q4_1, 20, 32, 32);
    case GGML_Q5_0:
        ROW(b_q5_0, 22, 32, 32);
    case GGML_Q5_1:
        ROW(b_q5_1, 24, 32, 32);
    case GGML_Q8_0:
        ROW(b_q8_0, 34, 32, 32);
    case GGML_IQ4_NL:
        ROW(b_iq4_nl, 18, 32, 32);
    case GGML_MXFP4:
        ROW(b_mxfp4, 17, 32, 32);
    case GGML_Q2_K:
        ROW(b_q2_k, 84, 256, 16);
    case GGML_Q3_K:
        ROW(b_q3_k, 110, 256, 16);
    case GGML_Q4_K:
        ROW(b_q4_k, 144, 256, 32);
    case GGML_Q5_K:
        ROW(b_q5_k, 176, 256, 32);
    case GGML_Q6_K:
        ROW(b_q6_k, 210, 256, 16);
    case GGML_IQ4_XS:
        ROW(b_iq4_xs, 136, 256, 32);
    case GGML_TQ1_0:
        ROW(b_tq1_0, 54, 256, 32);
    case GGML_TQ2_0:
        ROW(b_tq2_0, 66, 256, 32);
    case GGML_IQ2_XXS:
        ROW(b_iq2_xxs, 66, 256, 32);
    case GGML_IQ2_XS:
        ROW(b_iq2_xs, 74, 256, 16);
    case GGML_IQ2_S:
        ROW(b_iq2_s, 82, 256, 16);
    case GGML_IQ3_XXS:
        ROW(b_iq3_xxs, 98, 256, 32);
    case GGML_IQ3_S:
        ROW(b_iq3_s, 110, 256, 32);
    case GGML_IQ1_S:
        ROW(b_iq1_s, 50, 256, 32);
    case GGML_IQ1_M:
        ROW(b_iq1_m, 56, 256, 16);
    default:
        return;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QC_SSSE3 1
/* nibbles() 16 bytes at a time (pshufb: the table in a register) */
__attribute__((target("ssse3"))) static inline void nibbles_ssse3(const uint8_t *qs, __m128i tab,
                                                                  int8_t *c)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)qs), f = _mm_set1_epi8(0xF);
    _mm_storeu_si128((__m128i *)(void *)c, _mm_shuffle_epi8(tab, _mm_and_si128(b, f)));
    _mm_storeu_si128((__m128i *)(void *)(c + 16),
                     _mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(b, 4), f)));
}

/* the rows of the table formats (IQ4_NL, IQ4_XS, MXFP4): row_blocks'
 * codes and scales, the table looked up by pshufb */
__attribute__((target("ssse3"))) static void table_row_ssse3(uint32_t type, const uint8_t *row,
                                                             int64_t nb, int8_t *code, float *s)
{
    const __m128i tab =
        _mm_loadu_si128((const __m128i *)(const void *)(type == GGML_MXFP4 ? dequant_mxfp4_x2
                                                                           : dequant_iq4nl_values));
    for (int64_t i = 0; i < nb; i++) {
        if (type == GGML_IQ4_NL) {
            const uint8_t *b = row + (size_t)i * 18;
            s[i] = h2f(b);
            nibbles_ssse3(b + 2, tab, code + 32 * i);
        } else if (type == GGML_MXFP4) {
            const uint8_t *b = row + (size_t)i * 17;
            s[i] = mxfp4_scale(b[0]);
            nibbles_ssse3(b + 1, tab, code + 32 * i);
        } else { /* IQ4_XS */
            const uint8_t *b = row + (size_t)i * 136;
            for (int ib = 0; ib < 8; ib++) {
                s[8 * i + ib] = iq4xs_scale(b, ib);
                nibbles_ssse3(b + 8 + 16 * ib, tab, code + 256 * i + 32 * ib);
            }
        }
    }
}
#endif

/* qcodes_row, with the SSSE3 table lookups where simd and the CPU has
 * them */
static int row_codes(uint32_t type, const uint8_t *row, int64_t in, int8_t *code, float *s,
                     float *m, int simd)
{
    const int C = qcodes_chunk(type);
    const struct ggml_type_info *ti = ggml_type_get(type);
    if (!C || !ti || in % ti->block) return -1;
    memset(m, 0, (size_t)(in / C) * sizeof *m);
#ifdef QC_SSSE3
    if (simd && (type == GGML_IQ4_NL || type == GGML_IQ4_XS || type == GGML_MXFP4) &&
        __builtin_cpu_supports("ssse3")) {
        table_row_ssse3(type, row, in / ti->block, code, s);
        return 0;
    }
#endif
    (void)simd;
    row_blocks(type, row, in / ti->block, code, s, m);
    return 0;
}

int qcodes_row(uint32_t type, const uint8_t *row, int64_t in, int8_t *code, float *s, float *m)
{
    return row_codes(type, row, in, code, s, m, 1);
}

int qcodes_row_c(uint32_t type, const uint8_t *row, int64_t in, int8_t *code, float *s, float *m)
{
    return row_codes(type, row, in, code, s, m, 0);
}

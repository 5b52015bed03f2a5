/* cols_copy — see cols_copy.h */
#include "backends/cols_copy.h"

#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/iq_copy.h"

#include <string.h>

/* IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: iq_copy's types */
static int cols_grid(uint32_t type)
{
    return iq_copy_block_bytes(type) != 0;
}

int cols_block_values(uint32_t type)
{
    return type == GGML_Q4_K || type == GGML_Q2_K || type == GGML_IQ4_XS || type == GGML_Q3_K ||
                   type == GGML_TQ1_0 || type == GGML_TQ2_0 || cols_grid(type)
               ? 256
           : cols_block_bytes(type) ? 32
                                    : 0;
}

int cols_lanes8(uint32_t type)
{
    return type == GGML_IQ4_XS || type == GGML_Q3_K || type == GGML_Q4_1 || type == GGML_Q5_0 ||
           type == GGML_Q5_1 || type == GGML_TQ1_0 || type == GGML_TQ2_0 || cols_grid(type);
}

size_t cols_block_bytes(uint32_t type)
{
    size_t more; /* a row's bytes a block past the stored ones */
    switch (type) {
    case GGML_Q4_0:
    case GGML_IQ4_NL:
    case GGML_MXFP4:
    case GGML_Q2_K:
    case GGML_Q4_1:
    case GGML_Q5_0:
    case GGML_Q5_1:
    case GGML_TQ2_0:
        more = 0;
        break;
    case GGML_TQ1_0: /* as TQ2_0 */
        more = 12;
        break;
    case GGML_Q4_K: /* the scales unpacked */
    case GGML_Q3_K:
        more = 4;
        break;
    case GGML_IQ4_XS:
        more = 2;
        break;
    case GGML_IQ1_S: /* the codes as 2 bits, the scales as bytes */
        more = 24;
        break;
    case GGML_IQ1_M:
        more = 30;
        break;
    case GGML_IQ2_XXS: /* codes, sign and (IQ3) level bits as masks, scales as bytes */
    case GGML_IQ2_XS:
    case GGML_IQ3_XXS:
        more = 40;
        break;
    case GGML_IQ2_S:
        more = 32;
        break;
    case GGML_IQ3_S:
        more = 28;
        break;
    default:
        return 0;
    }
    return 16 * (ggml_type_get(type)->type_size + more);
}

/* the stored block's nibble bytes (n of them, at qs) and place j of the
 * copy's slices at col: to the copy where to_copy, else back */
static inline __attribute__((always_inline)) void slices(uint8_t *col, uint8_t *qs, int n, int j,
                                                         int to_copy)
{
    for (int k = 0; k < n / 4; k++) {
        uint8_t *c = col + 64 * k + 4 * j, *s = qs + 4 * k;
        memcpy(to_copy ? c : s, to_copy ? s : c, 4);
    }
}

/* the 12-byte packing of Q4_K's 6-bit scales sc and minima mn
 * (dequant_k4_scale_min's inverse) */
static void k4_pack(const uint8_t *sc, const uint8_t *mn, uint8_t *q)
{
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        q[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        q[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
    }
}

/* IQ4_XS's 6-bit scale of run r, from scales_h (at 2) and scales_l (at
 * 4) */
static inline int xs_scale(const uint8_t *blk, int r)
{
    return (blk[4 + r / 2] >> 4 * (r % 2) & 0xF) | (blk[2 + r / 4] >> 2 * (r % 4) & 3) << 4;
}

/* the stored packing of IQ4_XS's 8 scales sc (xs_scale's inverse) */
static void xs_pack(const uint8_t *sc, uint8_t *blk)
{
    memset(blk + 2, 0, 6);
    for (int r = 0; r < 8; r++) {
        blk[4 + r / 2] |= (uint8_t)((sc[r] & 0xF) << 4 * (r % 2));
        blk[2 + r / 4] |= (uint8_t)((sc[r] >> 4) << 2 * (r % 4));
    }
}

/* the stored packing of Q3_K's 16 six-bit scales sc into 12 bytes at q
 * (dequant_q3k_scale's inverse, without its 32) */
static void q3_pack(const uint8_t *sc, uint8_t *q)
{
    for (int i = 0; i < 8; i++)
        q[i] = (uint8_t)((sc[i] & 0xF) | (sc[i + 8] & 0xF) << 4);
    for (int m = 0; m < 4; m++)
        q[8 + m] = (uint8_t)((sc[m] >> 4) | (sc[4 + m] >> 4) << 2 | (sc[8 + m] >> 4) << 4 |
                             (sc[12 + m] >> 4) << 6);
}

/* IQ4_XS and Q3_K (cols_lanes8) between stored and copy: the nibble (and
 * Q3_K's hmask) bytes in slices, the scales as bytes, d */
static inline __attribute__((always_inline)) void lanes8_block(uint32_t type, uint8_t *col,
                                                               uint8_t *blk, int j, int to_copy)
{
    const int xs = type == GGML_IQ4_XS, ns = xs ? 8 : 16;
    const size_t at_sc = xs ? 2048 : 1536, at_d = xs ? 2176 : 1792, d = xs ? 0 : 108;
    if (xs) {
        slices(col, blk + 8, 128, j, to_copy);
    } else {
        slices(col, blk + 32, 64, j, to_copy);
        slices(col + 1024, blk, 32, j, to_copy);
    }
    uint8_t *c = col + at_d + 2 * j;
    memcpy(to_copy ? c : blk + d, to_copy ? blk + d : c, 2);
    uint8_t sc[16];
    for (int s = 0; s < ns && to_copy; s++)
        col[at_sc + 16 * s + (size_t)j] =
            (uint8_t)(xs ? xs_scale(blk, s) : dequant_q3k_scale(blk + 96, s) + 32);
    for (int s = 0; s < ns && !to_copy; s++)
        sc[s] = col[at_sc + 16 * s + (size_t)j];
    if (!to_copy && xs) xs_pack(sc, blk);
    if (!to_copy && !xs) q3_pack(sc, blk + 96);
}

/* row j's nibble of a mask byte shared by rows 2 i and 2 i + 1 (j % 2:
 * high): written (the even row first, the whole byte: group_blocks and
 * the group builders take j ascending, so no byte is read unwritten), or
 * read */
static inline void put_nibble(uint8_t *p, int j, unsigned nib)
{
    *p = (uint8_t)(j % 2 ? (*p & 0xFu) | nib << 4 : nib);
}

static inline unsigned get_nibble(const uint8_t *p, int j)
{
    return (unsigned)(*p >> 4 * (j % 2) & 0xF);
}

/* Q4_1, Q5_0, Q5_1 between stored and copy: the nibble bytes in 4
 * slices; Q5's high bits as masks, slice t's low nibbles' (qh bits 4 t
 * .. 4 t + 3) at 256 + 16 t, nibble j of the 8 bytes row j's, its high
 * nibbles' (bits 16 + 4 t ..) 8 bytes on; d, then (Q4_1, Q5_1) m */
static inline __attribute__((always_inline)) void legacy_block(uint32_t type, uint8_t *col,
                                                               uint8_t *blk, int j, int to_copy)
{
    const int five = type != GGML_Q4_1, with_m = type != GGML_Q5_0;
    const size_t at_qh = with_m ? 4 : 2, at_qs = at_qh + (five ? 4 : 0), at_d = five ? 320 : 256;
    slices(col, blk + at_qs, 16, j, to_copy);
    for (int h = 0; h < 1 + with_m; h++) { /* d, m */
        uint8_t *c = col + at_d + 32 * h + 2 * j;
        memcpy(to_copy ? c : blk + 2 * h, to_copy ? blk + 2 * h : c, 2);
    }
    if (!five) return;
    uint32_t qh = 0;
    if (to_copy) memcpy(&qh, blk + at_qh, 4);
    for (int t = 0; t < 8; t++) { /* t < 4: slice t's low nibbles; else slice t - 4's high */
        uint8_t *m = col + 256 + 16 * (t % 4) + 8 * (t / 4) + j / 2;
        const int bit = 4 * (t % 4) + 16 * (t / 4);
        if (to_copy)
            put_nibble(m, j, qh >> bit & 0xF);
        else
            qh |= (uint32_t)get_nibble(m, j) << bit;
    }
    if (!to_copy) memcpy(blk + at_qh, &qh, 4);
}

/* block i of row j between its stored bytes blk and the group's block col
 * (inlined with type and to_copy constants, so that each memcpy is a
 * move; the side read is not written) */
static inline __attribute__((always_inline)) void one_block(uint32_t type, uint8_t *col,
                                                            uint8_t *blk, int j, int to_copy)
{
    if (type == GGML_Q2_K) { /* scales 0..15, qs 16..79, d 80, dmin 82 */
        slices(col, blk + 16, 64, j, to_copy);
        for (int g = 0; g < 16; g++) {
            uint8_t *c = col + 1024 + 16 * g + j;
            *(to_copy ? c : blk + g) = *(to_copy ? blk + g : c);
        }
        for (int h = 0; h < 2; h++) {
            uint8_t *c = col + 1280 + 32 * h + 2 * j;
            memcpy(to_copy ? c : blk + 80 + 2 * h, to_copy ? blk + 80 + 2 * h : c, 2);
        }
        return;
    }
    if (type == GGML_IQ4_XS || type == GGML_Q3_K) {
        lanes8_block(type, col, blk, j, to_copy);
        return;
    }
    if (cols_lanes8(type)) {
        legacy_block(type, col, blk, j, to_copy);
        return;
    }
    if (type != GGML_Q4_K) {
        const size_t sc = type == GGML_MXFP4 ? 1 : 2; /* the scale's bytes */
        slices(col, blk + sc, 16, j, to_copy);
        uint8_t *c = col + 256 + sc * (size_t)j;
        memcpy(to_copy ? c : blk, to_copy ? blk : c, sc);
        return;
    }
    slices(col, blk + 16, 128, j, to_copy);
    for (int h = 0; h < 2; h++) { /* d, dmin */
        uint8_t *c = col + 2304 + 32 * h + 2 * j;
        memcpy(to_copy ? c : blk + 2 * h, to_copy ? blk + 2 * h : c, 2);
    }
    uint8_t sc[8], mn[8];
    for (int s = 0; s < 8 && to_copy; s++) {
        int d, m;
        dequant_k4_scale_min(s, blk + 4, &d, &m);
        col[2048 + 16 * s + j] = (uint8_t)d, col[2176 + 16 * s + j] = (uint8_t)m;
    }
    for (int s = 0; s < 8 && !to_copy; s++)
        sc[s] = col[2048 + 16 * s + j], mn[s] = col[2176 + 16 * s + j];
    if (!to_copy) k4_pack(sc, mn, blk + 4);
}

/* IQ1_S and IQ1_M, through iq_copy's decoded blocks (their codes g + 1,
 * scales, signs and d): row j's share of a group's block col from or to
 * its decoded block dec (to_copy: from it) */
static void iq1_share(uint32_t type, uint8_t *col, uint8_t *dec, int j, int to_copy)
{
    if (type == GGML_IQ1_S) { /* nibble r of the word at 66: run r's scale, sign */
        uint32_t w = 0;
        if (to_copy) memcpy(&w, dec + 66, 4);
        for (int r = 0; r < 8; r++) {
            uint8_t *c = col + 1024 + 16 * r + j;
            if (to_copy)
                *c = (uint8_t)(w >> 4 * r & 0xF);
            else
                w |= (uint32_t)*c << 4 * r;
        }
        if (!to_copy) memcpy(dec + 66, &w, 4);
        memcpy(to_copy ? col + 1152 + 2 * j : dec + 64, to_copy ? dec + 64 : col + 1152 + 2 * j, 2);
        return;
    }
    /* IQ1_M: the 4 scale words (scale 4 p + i at bit 3 i of word p, d's
     * nibble p in its top 4), the sign word */
    uint16_t w[4] = {0, 0, 0, 0}, d = 0;
    if (to_copy) {
        memcpy(w, dec + 64, 8);
        d = (uint16_t)((w[0] >> 12) | (w[1] >> 8 & 0xF0) | (w[2] >> 4 & 0xF00) | (w[3] & 0xF000));
        memcpy(col + 1344 + 2 * j, &d, 2);
    } else {
        memcpy(&d, col + 1344 + 2 * j, 2);
    }
    for (int n = 0; n < 16; n++) {
        uint8_t *c = col + 1024 + 16 * n + j;
        if (to_copy)
            *c = (uint8_t)(w[n / 4] >> 3 * (n % 4) & 7);
        else
            w[n / 4] |= (uint16_t)(*c << 3 * (n % 4));
    }
    for (int p = 0; p < 4 && !to_copy; p++)
        w[p] |= (uint16_t)((d >> 4 * p & 0xF) << 12);
    if (!to_copy) memcpy(dec + 64, w, 8);
    memcpy(to_copy ? col + 1280 + 4 * j : dec + 72, to_copy ? dec + 72 : col + 1280 + 4 * j, 4);
}

/* the 16 rows' codes of a block (code[j][e] < 4: row j, value e) into
 * its 64 chunks at col: chunk c's byte n = rows n / 4, 4 + n / 4, 8 + n /
 * 4, 12 + n / 4's codes of value 4 c + n % 4, 4 bytes a word (each code
 * < 4, so a word shifted by up to 6 bits keeps its bytes apart) */
static void chunks_pack(uint8_t code[16][256], uint8_t *col)
{
    for (int c = 0; c < 64; c++)
        for (int r = 0; r < 4; r++) {
            uint32_t w[4];
            for (int l = 0; l < 4; l++)
                memcpy(&w[l], &code[4 * l + r][4 * c], 4);
            const uint32_t v = w[0] | w[1] << 2 | w[2] << 4 | w[3] << 6;
            memcpy(col + 16 * c + 4 * r, &v, 4);
        }
}

/* row j's 256 codes from the chunks at col: byte e of w (64 words) the
 * code of value e */
static void chunks_row(const uint8_t *col, int j, uint32_t w[64])
{
    for (int c = 0; c < 64; c++) {
        uint32_t v;
        memcpy(&v, col + 16 * c + 4 * (j % 4), 4);
        w[c] = v >> 2 * (j / 4) & 0x03030303u;
    }
}

/* TQ1_0's nb blocks at src as TQ2_0 blocks at dst: its trits
 * (dequant_trit's, plus 1) as 2-bit codes, value e of a block in byte
 * 32 (e / 128) + e % 32 at bit 2 ((e % 128) / 32), and d as stored; loops
 * over bytes side by side, which the compiler vectorises (a call per
 * block of qcodes_row took 0.8 s on the 1.1B model) */
static void tq1_as_tq2(const uint8_t *src, uint8_t *dst, int64_t nb)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t t[256];
    for (int64_t i = 0; i < nb; i++, src += 54, dst += 66) {
        for (int n = 0; n < 5; n++) /* qs[0..31]: values 32 n + j */
            for (int j = 0; j < 32; j++)
                t[32 * n + j] = (uint8_t)((uint8_t)(src[j] * pow3[n]) * 3 >> 8);
        for (int n = 0; n < 5; n++) /* qs[32..47]: values 160 + 16 n + j */
            for (int j = 0; j < 16; j++)
                t[160 + 16 * n + j] = (uint8_t)((uint8_t)(src[32 + j] * pow3[n]) * 3 >> 8);
        for (int n = 0; n < 4; n++) /* qh[0..3]: values 240 + 4 n + j */
            for (int j = 0; j < 4; j++)
                t[240 + 4 * n + j] = (uint8_t)((uint8_t)(src[48 + j] * pow3[n]) * 3 >> 8);
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 32; k++)
                dst[32 * h + k] = (uint8_t)(t[128 * h + k] | t[128 * h + 32 + k] << 2 |
                                            t[128 * h + 64 + k] << 4 | t[128 * h + 96 + k] << 6);
        memcpy(dst + 64, src + 52, 2);
    }
}

/* a block's 256 2-bit codes packed in runs of 4 w values to w bytes
 * (value 4 w p + w l + n in byte w p + n at bit 2 l: IQ1's decoded
 * blocks w = 16, TQ2_0's w = 32) to one byte each, and back */
static void codes_unpack(const uint8_t *packed, int w, uint8_t *code)
{
    for (int p = 0; p < 256 / (4 * w); p++)
        for (int l = 0; l < 4; l++)
            for (int n = 0; n < w; n++)
                code[4 * w * p + w * l + n] = (uint8_t)(packed[w * p + n] >> 2 * l & 3);
}

static void codes_pack(const uint8_t *code, int w, uint8_t *packed)
{
    for (int p = 0; p < 256 / (4 * w); p++)
        for (int n = 0; n < w; n++)
            packed[w * p + n] =
                (uint8_t)(code[4 * w * p + n] | code[4 * w * p + w + n] << 2 |
                          code[4 * w * p + 2 * w + n] << 4 | code[4 * w * p + 3 * w + n] << 6);
}

/* IQ2's and IQ3's layout in a group's block: the codes' chunks, then
 * masks of 8 bytes a chunk (bit 4 j + b: row j's value 4 c + b) of the
 * negated values at 1024 and (IQ3) of the levels' bit 2 at 1536, then
 * the 4-bit scales as bytes (scale n of row j at S + 16 n + j; one a 32
 * values, IQ2_XS and IQ2_S one a 16), then the 16 rows' fp16 d */
struct grid_at {
    int iq3, nsc;       /* IQ3; the scales a block */
    size_t s, d;        /* the group's scales and d */
    size_t neg, sc, dd; /* the decoded block's negation bits, scale nibbles, d */
};

static struct grid_at grid_at(uint32_t type)
{
    struct grid_at a;
    a.iq3 = type == GGML_IQ3_XXS || type == GGML_IQ3_S;
    a.nsc = type == GGML_IQ2_XS || type == GGML_IQ2_S ? 16 : 8;
    a.s = a.iq3 ? 2048 : 1536;
    a.d = a.s + 16 * (size_t)a.nsc;
    a.neg = a.iq3 ? 96 : 64;
    a.dd = a.neg + 32;
    a.sc = a.dd + 2;
    return a;
}

/* the 64 bit nibbles of bits (a decoded block's bit per value: value e
 * at bit e % 8 of byte e / 8) and row j's nibbles of the 64 masks at m */
static void mask_share(uint8_t *m, uint8_t *bits, int j, int to_copy)
{
    for (int c = 0; c < 64; c++) {
        uint8_t *p = m + 8 * c + j / 2;
        if (to_copy)
            put_nibble(p, j, bits[c / 2] >> 4 * (c % 2) & 0xFu);
        else
            bits[c / 2] |= (uint8_t)(get_nibble(p, j) << 4 * (c % 2));
    }
}

/* IQ2, IQ3: row j's share of a group's block col from or to its decoded
 * block dec (to_copy: from it; else dec zeroed before) */
static void grid_share(uint32_t type, uint8_t *col, uint8_t *dec, int j, int to_copy)
{
    const struct grid_at a = grid_at(type);
    mask_share(col + 1024, dec + a.neg, j, to_copy);
    if (a.iq3) mask_share(col + 1536, dec + 64, j, to_copy);
    for (int n = 0; n < a.nsc; n++) {
        uint8_t *c = col + a.s + 16 * n + j;
        if (to_copy)
            *c = (uint8_t)(dec[a.sc + n / 2] >> 4 * (n % 2) & 0xF);
        else
            dec[a.sc + n / 2] |= (uint8_t)(*c << 4 * (n % 2));
    }
    memcpy(to_copy ? col + a.d + 2 * j : dec + a.dd, to_copy ? dec + a.dd : col + a.d + 2 * j, 2);
}

/* the nb blocks of 16 IQ1, TQ1_0 or TQ2_0 rows (row_bytes apart from
 * rows) into the group at dst: per block each row's codes (IQ1's
 * decoded, TQ1_0's as TQ2_0's) as bytes with its share of the other
 * bytes (IQ1: iq1_share; TQ: d at 1024), then packed */
static void codes_group(uint32_t type, const uint8_t *rows, size_t row_bytes, int64_t nb,
                        uint8_t *dst)
{
    const size_t gb = cols_block_bytes(type), bs = ggml_type_get(type)->type_size;
    const int iq1 = type == GGML_IQ1_S || type == GGML_IQ1_M, grid = cols_grid(type);
    uint8_t blk[IQ3_COPY_BYTES], code[16][256];
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *col = dst + (size_t)i * gb;
        for (int j = 0; j < 16; j++) {
            const uint8_t *src = rows + (size_t)j * row_bytes + (size_t)i * bs;
            if (grid)
                iq_copy_blocks(type, src, blk, 1);
            else if (type == GGML_TQ1_0)
                tq1_as_tq2(src, blk, 1);
            else
                memcpy(blk, src, 66);
            codes_unpack(blk, grid ? 16 : 32, code[j]);
            if (iq1)
                iq1_share(type, col, blk, j, 1);
            else if (grid)
                grid_share(type, col, blk, j, 1);
            else
                memcpy(col + 1024 + 2 * j, blk + 64, 2);
        }
        chunks_pack(code, col);
    }
}

void cols_iq_decoded(uint32_t type, const uint8_t *group, int j, int64_t i, uint8_t *dec)
{
    uint8_t *col = (uint8_t *)(uintptr_t)(group + (size_t)i * cols_block_bytes(type)); /* read */
    uint32_t w[64];
    memset(dec, 0, iq_copy_block_bytes(type));
    chunks_row(col, j, w);
    codes_pack((const uint8_t *)w, 16, dec);
    if (type == GGML_IQ1_S || type == GGML_IQ1_M)
        iq1_share(type, col, dec, j, 0);
    else
        grid_share(type, col, dec, j, 0);
}

void cols_tq2_block(uint32_t type, const uint8_t *group, int j, int64_t i, uint8_t *blk)
{
    const uint8_t *col = group + (size_t)i * cols_block_bytes(type);
    uint32_t w[64];
    chunks_row(col, j, w);
    codes_pack((const uint8_t *)w, 32, blk);
    memcpy(blk + 64, col + 1024 + 2 * j, 2);
}

/* row j (j < 16) of the IQ1 group at group, as stored, into buf */
static void iq1_row(uint32_t type, const uint8_t *group, int64_t nb, int j, uint8_t *buf)
{
    const size_t bs = ggml_type_get(type)->type_size;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t dec[IQ1_COPY_M_BYTES] = {0};
        cols_iq_decoded(type, group, j, i, dec);
        iq_stored_blocks(type, dec, buf + (size_t)i * bs, 1);
    }
}

/* the nb blocks of rows[j] (j < 16) into or out of the group at col
 * (to_copy), row j's stored blocks bs bytes apart from blk, for a
 * constant type */
static inline __attribute__((always_inline)) void group_blocks(uint32_t type, uint8_t *col,
                                                               uint8_t *blk, size_t row_bytes,
                                                               int64_t nb, int j0, int j1,
                                                               int to_copy)
{
    const size_t bs = ggml_type_get(type)->type_size, gb = cols_block_bytes(type);
    for (int64_t i = 0; i < nb; i++)
        for (int j = j0; j < j1; j++)
            one_block(type, col + (size_t)i * gb, blk + (size_t)j * row_bytes + (size_t)i * bs, j,
                      to_copy);
}

/* group_blocks with the type a constant in each case (each case its own
 * inlined copy) */
static void group_any(uint32_t type, uint8_t *col, uint8_t *blk, size_t row_bytes, int64_t in,
                      int j0, int j1, int to_copy)
{
    const int64_t nb = in / cols_block_values(type);
#define GROUP_CASE(t)                                                                              \
    case t:                                                                                        \
        group_blocks(t, col, blk, row_bytes, nb, j0, j1, to_copy);                                 \
        break
    switch (type == GGML_IQ4_NL ? GGML_Q4_0 : type) { /* IQ4_NL: Q4_0's bytes' layout */
        GROUP_CASE(GGML_Q4_0);
        GROUP_CASE(GGML_MXFP4);
        GROUP_CASE(GGML_Q2_K);
        GROUP_CASE(GGML_Q4_K);
        GROUP_CASE(GGML_IQ4_XS);
        GROUP_CASE(GGML_Q3_K);
        GROUP_CASE(GGML_Q4_1);
        GROUP_CASE(GGML_Q5_0);
        GROUP_CASE(GGML_Q5_1);
    default:
        break;
    }
#undef GROUP_CASE
}

void cols_copy_group(uint32_t type, const uint8_t *rows, size_t row_bytes, int64_t in, uint8_t *dst)
{
    if (cols_grid(type) || type == GGML_TQ1_0 || type == GGML_TQ2_0) {
        codes_group(type, rows, row_bytes, in / 256, dst);
        return;
    }
    /* the rows are only read when to_copy */
    group_any(type, dst, (uint8_t *)(uintptr_t)rows, row_bytes, in, 0, 16, 1);
}

int cols_rebuilds(uint32_t type)
{
    return cols_block_values(type) && type != GGML_TQ1_0 &&
           (!cols_grid(type) || type == GGML_IQ1_S || type == GGML_IQ1_M);
}

void cols_stored_row(uint32_t type, const uint8_t *group, int64_t in, int j, uint8_t *buf)
{
    if (type == GGML_IQ1_S || type == GGML_IQ1_M) {
        iq1_row(type, group, in / 256, j, buf);
        return;
    }
    if (type == GGML_TQ2_0) { /* (TQ1_0's trits are not rebuilt) */
        for (int64_t i = 0; i < in / 256; i++)
            cols_tq2_block(type, group, j, i, buf + 66 * i);
        return;
    }
    /* the group is only read when !to_copy; row_bytes 0: buf holds row j's
     * blocks alone */
    group_any(type, (uint8_t *)(uintptr_t)group, buf, 0, in, j, j + 1, 0);
}

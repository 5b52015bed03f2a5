/* iq_blocks_impl — the 32-element sub-blocks of ggml's grid formats
 * (folder-private): one reading of each layout that the scalar decoder
 * (dequant_iq.c) and the fused decode kernels (matmul_avx2.c,
 * matmul_avx512.c) share, so the kernels decode exactly dequant's values.
 *
 * Sub-block ib (elements 32 ib .. 32 ib + 31 of a 256-element block) is
 * four runs of 8 elements. Run l holds 8 grid bytes g[l] (element j in
 * byte j; unsigned magnitudes, or for IQ1 signed bytes -1, 0, 1), a sign
 * byte s[l] (bit j set: element j negated; 0 for IQ1) and the scale
 * db[l / 2]; IQ1 adds delta[l]. The values:
 *   sign formats: y_j = db * g_j * (bit j ? -1 : 1)
 *   IQ1_S, IQ1_M: y_j = db * (g_j + delta)
 * with ggml's arithmetic, operation for operation (dequant_iq.h). */
#ifndef QG_IQ_BLOCKS_IMPL_H
#define QG_IQ_BLOCKS_IMPL_H

#include "backends/ggml_types.h"
#include "backends/iq_grids.h"
#include "backends/quant.h"

#include <stdint.h>

#define IQ1_DELTA 0.125f

struct iq_sub {
    uint64_t g[4];
    unsigned s[4];
    float db[2];
    float delta[4];
};

static inline uint16_t iqb_rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t iqb_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* the bytes of a block of one of the seven grid formats (0 for others) */
static inline int iq_block_bytes(uint32_t type)
{
    switch (type) {
    case GGML_IQ2_XXS:
        return 66;
    case GGML_IQ2_XS:
        return 74;
    case GGML_IQ2_S:
        return 82;
    case GGML_IQ3_XXS:
        return 98;
    case GGML_IQ3_S:
        return 110;
    case GGML_IQ1_S:
        return 50;
    case GGML_IQ1_M:
        return 56;
    default:
        return 0;
    }
}

static inline uint64_t iqb_rd64(const uint8_t *p)
{
    return (uint64_t)iqb_rd32(p) | (uint64_t)iqb_rd32(p + 4) << 32;
}

/* IQ1_M's block scale d from the top nibbles of its four scale words at
 * scp */
static inline __attribute__((always_inline)) float iq1m_d(const uint8_t *scp)
{
    uint16_t s16 = (uint16_t)((iqb_rd16(scp) >> 12) | ((iqb_rd16(scp + 2) >> 8) & 0x00F0) |
                              ((iqb_rd16(scp + 4) >> 4) & 0x0F00) | (iqb_rd16(scp + 6) & 0xF000));
    return quant_f16_to_f32(s16);
}

/* the block scale d of block b (IQ1_M: iq1m_d of its scale words) */
static inline __attribute__((always_inline)) float iq_block_d(uint32_t type, const uint8_t *b)
{
    return type != GGML_IQ1_M ? quant_f16_to_f32(iqb_rd16(b)) : iq1m_d(b + 48);
}

static inline __attribute__((always_inline)) void iq_sub_iq2(uint32_t type, const uint8_t *b,
                                                             float d, int ib, struct iq_sub *o)
{
    if (type == GGML_IQ2_XXS) {
        const uint8_t *qs = b + 2 + 8 * ib;
        uint32_t aux = iqb_rd32(qs + 4);
        o->db[0] = o->db[1] = d * (0.5f + (float)(aux >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            o->g[l] = iq2xxs_grid[qs[l]];
            o->s[l] = ksigns_iq2xs[(aux >> (7 * l)) & 127];
        }
        return;
    }
    const uint8_t sc = type == GGML_IQ2_XS ? b[66 + ib] : b[74 + ib];
    o->db[0] = d * (0.5f + (float)(sc & 0xF)) * 0.25f;
    o->db[1] = d * (0.5f + (float)(sc >> 4)) * 0.25f;
    for (int l = 0; l < 4; l++) {
        if (type == GGML_IQ2_XS) {
            uint16_t q = iqb_rd16(b + 2 + 2 * (4 * ib + l));
            o->g[l] = iq2xs_grid[q & 511];
            o->s[l] = ksigns_iq2xs[q >> 9];
        } else { /* IQ2_S */
            o->g[l] = iq2s_grid[b[2 + 4 * ib + l] | ((b[66 + ib] << (8 - 2 * l)) & 0x300)];
            o->s[l] = b[34 + 4 * ib + l];
        }
    }
}

static inline __attribute__((always_inline)) void iq_sub_iq3(uint32_t type, const uint8_t *b,
                                                             float d, int ib, struct iq_sub *o)
{
    const uint8_t *qs = b + 2 + 8 * ib;
    if (type == GGML_IQ3_XXS) {
        uint32_t aux = iqb_rd32(b + 66 + 4 * ib);
        o->db[0] = o->db[1] = d * (0.5f + (float)(aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            o->g[l] = iq3xxs_grid[qs[2 * l]] | (uint64_t)iq3xxs_grid[qs[2 * l + 1]] << 32;
            o->s[l] = ksigns_iq2xs[(aux >> (7 * l)) & 127];
        }
        return;
    }
    /* IQ3_S: 8 grid lows at qs, their 9th bits in qh[ib] */
    const int h = b[66 + ib];
    o->db[0] = o->db[1] = d * (float)(1 + 2 * ((b[106 + ib / 2] >> (4 * (ib % 2))) & 0xF));
    for (int l = 0; l < 4; l++) {
        o->g[l] = iq3s_grid[qs[2 * l] | ((h << (8 - 2 * l)) & 256)] |
                  (uint64_t)iq3s_grid[qs[2 * l + 1] | ((h << (7 - 2 * l)) & 256)] << 32;
        o->s[l] = b[74 + 4 * ib + l];
    }
}

/* IQ1's delta, negative for bit 1: computed, not branched on (the bits are
 * as good as random, and a mispredicted branch per run of 8 cost IQ1_M
 * two thirds of its decode speed); (1 - 2 bit) 0.125 is exact */
static inline float iq1_delta(unsigned bit)
{
    return (float)(1 - 2 * (int)bit) * IQ1_DELTA;
}

static inline __attribute__((always_inline)) void iq_sub_iq1(uint32_t type, const uint8_t *b,
                                                             float d, int ib, struct iq_sub *o)
{
    if (type == GGML_IQ1_S) {
        const uint8_t *qs = b + 2 + 4 * ib;
        uint16_t qh = iqb_rd16(b + 34 + 2 * ib);
        o->db[0] = o->db[1] = d * (float)(2 * ((qh >> 12) & 7) + 1);
        const float delta = iq1_delta(qh >> 15);
        for (int l = 0; l < 4; l++) {
            o->g[l] = iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
            o->s[l] = 0;
            o->delta[l] = delta;
        }
        return;
    }
    /* IQ1_M */
    const uint8_t *qs = b + 4 * ib, *qh = b + 32 + 2 * ib;
    const uint16_t sc = iqb_rd16(b + 48 + 2 * (ib / 2));
    const int sh = 6 * (ib % 2);
    o->db[0] = d * (float)(2 * ((sc >> sh) & 7) + 1);
    o->db[1] = d * (float)(2 * ((sc >> (sh + 3)) & 7) + 1);
    const int idx[4] = {qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                        qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700)};
    for (int l = 0; l < 4; l++) {
        o->g[l] = iq1s_grid[idx[l]];
        o->s[l] = 0;
        o->delta[l] = iq1_delta((qh[l / 2] >> (l % 2 ? 7 : 3)) & 1);
    }
}

/* sub-block ib of block b (its scale d from iq_block_d) into *o; type one
 * of the seven grid formats, a constant where this is inlined */
static inline __attribute__((always_inline)) void iq_sub(uint32_t type, const uint8_t *b, float d,
                                                         int ib, struct iq_sub *o)
{
    if (type == GGML_IQ2_XXS || type == GGML_IQ2_XS || type == GGML_IQ2_S)
        iq_sub_iq2(type, b, d, ib, o);
    else if (type == GGML_IQ3_XXS || type == GGML_IQ3_S)
        iq_sub_iq3(type, b, d, ib, o);
    else
        iq_sub_iq1(type, b, d, ib, o);
}

#endif

/* dequant_iq — grid-based IQ formats and MXFP4, scalar. */
#include "backends/dequant_iq.h"
#include "backends/iq_grids.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#define IQ1_DELTA 0.125f

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QG_NO_IFUNC)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

static float h2f(const uint8_t *p)
{
    return quant_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* byte j of a packed grid entry */
static int grid_u8(uint64_t g, int j)
{
    return (int)((g >> (8 * j)) & 0xFF);
}

static float sign_of(uint8_t signs, int j)
{
    return (signs & kmask_iq2xs[j]) ? -1.0f : 1.0f;
}

HOT void dequant_iq2_xxs(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 66) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            uint32_t aux = rd32(qs + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                uint64_t g = iq2xxs_grid[qs[l]];
                uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
                for (int j = 0; j < 8; j++)
                    y[j] = db * (float)grid_u8(g, j) * sign_of(signs, j);
            }
        }
    }
}

HOT void dequant_iq2_xs(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 74) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *scales = b + 66;
        for (int ib = 0; ib < 8; ib++) {
            const float db[2] = {d * (0.5f + (float)(scales[ib] & 0xF)) * 0.25f,
                                 d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                uint16_t q = rd16(qs + 2 * (4 * ib + l));
                uint64_t g = iq2xs_grid[q & 511];
                uint8_t signs = ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; j++)
                    y[j] = db[l / 2] * (float)grid_u8(g, j) * sign_of(signs, j);
            }
        }
    }
}

HOT void dequant_iq2_s(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 82) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
        for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4) {
            const float db[2] = {d * (0.5f + (float)(scales[ib] & 0xF)) * 0.25f,
                                 d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                uint64_t g = iq2s_grid[qs[l] | ((qh[ib] << (8 - 2 * l)) & 0x300)];
                for (int j = 0; j < 8; j++)
                    y[j] = db[l / 2] * (float)grid_u8(g, j) * sign_of(signs[l], j);
            }
        }
    }
}

HOT void dequant_iq3_xxs(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 98) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *sas = b + 66;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            uint32_t aux = rd32(sas + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
                uint32_t g1 = iq3xxs_grid[qs[2 * l]], g2 = iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * (float)grid_u8(g1, j) * sign_of(signs, j);
                    y[j + 4] = db * (float)grid_u8(g2, j) * sign_of(signs, j + 4);
                }
            }
        }
    }
}

/* 32 elements of IQ3_S: 8 grid lows at qs, their 9th bits in qh, 4 sign bytes */
static float *iq3_s_half(float *y, float db, const uint8_t *qs, uint8_t qh, const uint8_t *signs)
{
    for (int l = 0; l < 4; l++, y += 8) {
        uint32_t g1 = iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
        uint32_t g2 = iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
        for (int j = 0; j < 4; j++) {
            y[j] = db * (float)grid_u8(g1, j) * sign_of(signs[l], j);
            y[j + 4] = db * (float)grid_u8(g2, j) * sign_of(signs[l], j + 4);
        }
    }
    return y;
}

HOT void dequant_iq3_s(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 110) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int ib = 0; ib < 8; ib += 2, qs += 16, qh += 2, signs += 8) {
            const float db1 = d * (float)(1 + 2 * (scales[ib / 2] & 0xF));
            const float db2 = d * (float)(1 + 2 * (scales[ib / 2] >> 4));
            y = iq3_s_half(y, db1, qs, qh[0], signs);
            y = iq3_s_half(y, db2, qs + 8, qh[1], signs + 4);
        }
    }
}

static int grid_i8(uint64_t g, int j)
{
    return (int)(int8_t)(uint8_t)((g >> (8 * j)) & 0xFF);
}

HOT void dequant_iq1_s(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 50) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *qhp = b + 34;
        for (int ib = 0; ib < 8; ib++, qs += 4) {
            uint16_t qh = rd16(qhp + 2 * ib);
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = (qh & 0x8000) ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                uint64_t g = iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; j++)
                    y[j] = dl * ((float)grid_i8(g, j) + delta);
            }
        }
    }
}

HOT void dequant_iq1_m(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 56) {
        const uint8_t *qs = b, *qh = b + 32, *scp = b + 48;
        uint16_t sc[4] = {rd16(scp), rd16(scp + 2), rd16(scp + 4), rd16(scp + 6)};
        uint16_t s16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                  ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
        const float d = quant_f16_to_f32(s16);
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
            int sh = 6 * (ib % 2);
            const float dl1 = d * (float)(2 * ((sc[ib / 2] >> sh) & 7) + 1);
            const float dl2 = d * (float)(2 * ((sc[ib / 2] >> (sh + 3)) & 7) + 1);
            int idx[4] = {qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                          qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700)};
            float delta[4] = {
                (qh[0] & 0x08) ? -IQ1_DELTA : IQ1_DELTA, (qh[0] & 0x80) ? -IQ1_DELTA : IQ1_DELTA,
                (qh[1] & 0x08) ? -IQ1_DELTA : IQ1_DELTA, (qh[1] & 0x80) ? -IQ1_DELTA : IQ1_DELTA};
            for (int l = 0; l < 4; l++, y += 8) {
                uint64_t g = iq1s_grid[idx[l]];
                float dl = l < 2 ? dl1 : dl2;
                for (int j = 0; j < 8; j++)
                    y[j] = dl * ((float)grid_i8(g, j) + delta[l]);
            }
        }
    }
}

/* E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit. Code 8 (-0) decodes
 * to +0 as in ggml, so that values are bit-identical to the runtime's. */
static const float e2m1[16] = {0.0f, 0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                               0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

HOT void dequant_mxfp4(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 17, y += 32) {
        /* E8M0: 2^(e - 127), exact in f32 down to 2^-127 (a subnormal) */
        float s = b[0] == 0xFF ? NAN : ldexpf(1.0f, (int)b[0] - 127);
        for (int j = 0; j < 16; j++) {
            y[j] = e2m1[b[1 + j] & 0x0F] * s;
            y[j + 16] = e2m1[b[1 + j] >> 4] * s;
        }
    }
}

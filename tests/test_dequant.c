/* test_dequant — every supported block format on hand-built blocks whose
 * values can be checked by hand, and end to end on the real llama.cpp files. */
#include "backends/dequant.h"
#include "backends/iq_grids.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/quant.h"
#include "core/status.h"
#include "core/util.h"
#include "tests/test.h"

#include <stdlib.h>

static void put_h(uint8_t *p, float v)
{
    uint16_t h = quant_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

TEST(dequant_legacy_blocks, unit)
{
    uint8_t b[34] = {0};
    float y[256];
    /* Q4_0: y[j] = (lo - 8) d, y[j+16] = (hi - 8) d */
    put_h(b, 1.0f);
    b[2] = 0x39; /* lo 9, hi 3 */
    ASSERT_OK(dequant_row(GGML_Q4_0, b, y, 32));
    ASSERT_NEAR(y[0], 1.0, 0);
    ASSERT_NEAR(y[16], -5.0, 0);
    ASSERT_NEAR(y[1], -8.0, 0);
    /* Q4_1: y = q d + m */
    memset(b, 0, sizeof b);
    put_h(b, 0.5f);
    put_h(b + 2, -1.0f);
    b[4] = 0x52;
    ASSERT_OK(dequant_row(GGML_Q4_1, b, y, 32));
    ASSERT_NEAR(y[0], 0.0, 0);
    ASSERT_NEAR(y[16], 1.5, 0);
    ASSERT_NEAR(y[1], -1.0, 0);
    /* Q5_0: fifth bit of element j in qh bit j, of element j+16 in bit j+16 */
    memset(b, 0, sizeof b);
    put_h(b, 2.0f);
    b[2] = 0x01; /* qh bit 0: element 0 */
    b[4] = 0x02; /* qh bit 17: element 17 */
    b[6] = 0x03;
    b[7] = 0x50; /* qs[0] lo 3, qs[1] hi 5 */
    ASSERT_OK(dequant_row(GGML_Q5_0, b, y, 32));
    ASSERT_NEAR(y[0], (3 + 16 - 16) * 2.0, 0);
    ASSERT_NEAR(y[16], (0 - 16) * 2.0, 0);
    ASSERT_NEAR(y[17], (5 + 16 - 16) * 2.0, 0);
    ASSERT_NEAR(y[1], -32.0, 0);
    /* Q5_1 */
    memset(b, 0, sizeof b);
    put_h(b, 0.25f);
    put_h(b + 2, 1.0f);
    b[4] = 0x01;
    b[8] = 0x0F;
    ASSERT_OK(dequant_row(GGML_Q5_1, b, y, 32));
    ASSERT_NEAR(y[0], 31 * 0.25 + 1, 0);
    ASSERT_NEAR(y[16], 1.0, 0);
    /* Q8_0 */
    memset(b, 0, sizeof b);
    put_h(b, 0.5f);
    b[2] = (uint8_t)-7;
    b[33] = 100;
    ASSERT_OK(dequant_row(GGML_Q8_0, b, y, 32));
    ASSERT_NEAR(y[0], -3.5, 0);
    ASSERT_NEAR(y[31], 50.0, 0);
    /* IQ4_NL: non-linear table {-127,...,113} */
    memset(b, 0, sizeof b);
    put_h(b, 1.0f);
    b[2] = 0xF0;
    ASSERT_OK(dequant_row(GGML_IQ4_NL, b, y, 32));
    ASSERT_NEAR(y[0], -127.0, 0);
    ASSERT_NEAR(y[16], 113.0, 0);
    /* F16, BF16 */
    uint8_t h[4];
    put_h(h, -1.5f);
    put_h(h + 2, 65504.0f);
    ASSERT_OK(dequant_row(GGML_F16, h, y, 2));
    ASSERT_NEAR(y[0], -1.5, 0);
    ASSERT_NEAR(y[1], 65504.0, 0);
    uint8_t bf[2] = {0xC0, 0x3F}; /* 0x3FC0 = 1.5 */
    ASSERT_OK(dequant_row(GGML_BF16, bf, y, 1));
    ASSERT_NEAR(y[0], 1.5, 0);
    /* refused types and partial blocks */
    ASSERT_EQ(dequant_row(GGML_Q8_K, b, y, 256), QG_ERR_UNSUPPORTED);
    ASSERT_EQ(dequant_row(GGML_I32, b, y, 4), QG_ERR_UNSUPPORTED);
    ASSERT_EQ(dequant_row(999, b, y, 4), QG_ERR_UNSUPPORTED);
    ASSERT_EQ(dequant_row(GGML_Q8_0, b, y, 31), QG_ERR_UNSUPPORTED);
    ASSERT(!dequant_supported(GGML_Q8_1) && dequant_supported(GGML_IQ3_S));
    return 0;
}

TEST(dequant_k_blocks, unit)
{
    uint8_t b[210];
    float y[256];
    /* Q2_K: scales[16] (lo 4 bits scale, hi 4 bits min), qs[64], d, dmin.
     * element 0: q = qs[0] & 3 with sub-block 0; element 16: qs[16] & 3 with
     * sub-block 1; element 32: (qs[0] >> 2) & 3 with sub-block 2. */
    memset(b, 0, sizeof b);
    b[0] = 0x32;
    b[1] = 0x01;
    b[2] = 0x04;
    b[16 + 0] = 0x0B; /* q 3 at shift 0, q 2 at shift 2 */
    b[16 + 16] = 0x01;
    put_h(b + 80, 0.5f);
    put_h(b + 82, 0.25f);
    ASSERT_OK(dequant_row(GGML_Q2_K, b, y, 256));
    ASSERT_NEAR(y[0], 0.5 * 2 * 3 - 0.25 * 3, 0);
    ASSERT_NEAR(y[16], 0.5 * 1 * 1, 0);
    ASSERT_NEAR(y[32], 0.5 * 4 * 2, 0);
    /* Q3_K: hmask[32], qs[64], scales[12], d. Scale j = 6 bits - 32; a
     * clear hmask bit subtracts 4. */
    memset(b, 0, sizeof b);
    b[96 + 0] = 0x01 | 0x20; /* scale 0 lo 1; scale 8 lo 2 */
    b[96 + 8] = 0x02 | 0x30; /* scale 0 hi bits 2 -> 33; scale 8 hi (bits 4-5) 3 */
    b[32 + 0] = 0x03;        /* element 0: q 3 */
    b[0] = 0x01;             /* hmask bit 0 of element 0 set: no -4 */
    put_h(b + 108, 2.0f);
    ASSERT_OK(dequant_row(GGML_Q3_K, b, y, 256));
    ASSERT_NEAR(y[0], 2.0 * (33 - 32) * 3, 0);
    ASSERT_NEAR(y[1], 2.0 * (33 - 32) * (0 - 4), 0);        /* scale 0 again, q 0, no hmask */
    ASSERT_NEAR(y[128], 2.0 * ((2 | 3 << 4) - 32) * -4, 0); /* sub-block 8 */
    /* Q4_K: d, dmin, scales[12], qs[128]; sub-block j<4: scale sc[j]&63,
     * min sc[j+4]&63; j>=4: low 4 bits in sc[j+4], high 2 in sc[j-4]>>6. */
    memset(b, 0, sizeof b);
    put_h(b, 1.0f);
    put_h(b + 2, 0.5f);
    b[4 + 0] = 2;
    b[4 + 4] = 3;
    b[4 + 8] = 0x21;   /* sub-block 4: scale 1, min 2 */
    b[16 + 0] = 0x75;  /* element 0: 5 (sub-block 0), element 32: 7 (sub-block 1) */
    b[16 + 64] = 0x04; /* element 128: 4 (sub-block 4) */
    ASSERT_OK(dequant_row(GGML_Q4_K, b, y, 256));
    ASSERT_NEAR(y[0], 2 * 5 - 0.5 * 3, 0);
    ASSERT_NEAR(y[32], 0.0, 0);
    ASSERT_NEAR(y[128], 1 * 4 - 0.5 * 2, 0);
    /* Q5_K: as Q4_K plus qh[32]: bit 2i of qh[l] adds 16 to element 64i+l,
     * bit 2i+1 to element 64i+32+l */
    memset(b, 0, sizeof b);
    put_h(b, 1.0f);
    put_h(b + 2, 1.0f);
    b[4 + 0] = 1;
    b[4 + 1] = 1;
    b[4 + 2] = 1;
    b[16 + 0] = 0x02 | 0x04; /* element 32 (+16), element 64 (+16) */
    b[48 + 0] = 0x31;        /* element 0: 1, element 32: 3 */
    ASSERT_OK(dequant_row(GGML_Q5_K, b, y, 256));
    ASSERT_NEAR(y[0], 1.0, 0);
    ASSERT_NEAR(y[32], 19.0, 0);
    ASSERT_NEAR(y[64], 16.0, 0);
    /* Q6_K: ql[128], qh[64], int8 scales[16], d; q = 6 bits - 32 */
    memset(b, 0, sizeof b);
    b[0] = 0x21;              /* element 0 low 1, element 64 low 2 */
    b[128 + 0] = 0x01 | 0x0C; /* element 0 high 1 (+16), element 32 high 3 (+48) */
    b[192 + 0] = 2;
    b[192 + 2] = -1;
    b[192 + 4] = 3;
    put_h(b + 208, 0.5f);
    ASSERT_OK(dequant_row(GGML_Q6_K, b, y, 256));
    ASSERT_NEAR(y[0], 0.5 * 2 * (17 - 32), 0);
    ASSERT_NEAR(y[32], 0.5 * -1 * (48 - 32), 0);
    ASSERT_NEAR(y[64], 0.5 * 3 * (2 - 32), 0);
    /* IQ4_XS: d, scales_h, scales_l[4], qs[128]; sub-block scale = 6 bits - 32 */
    memset(b, 0, sizeof b);
    put_h(b, 1.0f);
    b[2] = 0x02; /* scales_h: sub-block 0 high bits 2 -> 32 + lo */
    b[4] = 0x03; /* sub-block 0 lo 3 -> ls 35 -> scale 3 */
    b[8] = 0x8F; /* element 0: index 15 (113), element 16: index 8 (1) */
    ASSERT_OK(dequant_row(GGML_IQ4_XS, b, y, 256));
    ASSERT_NEAR(y[0], 3 * 113.0, 0);
    ASSERT_NEAR(y[16], 3 * 1.0, 0);
    ASSERT_NEAR(y[32], -32 * -127.0, 0); /* sub-block 1: ls 0 */
    return 0;
}

TEST(dequant_ternary_blocks, unit)
{
    uint8_t b[66];
    float y[256];
    /* TQ2_0: 2-bit codes 0,1,2 -> -1,0,1 times d; element 32l+m from bits 2l of qs[m] */
    memset(b, 0, sizeof b);
    b[0] = 0x00 | 0x01 << 2 | 0x02 << 4; /* elements 0, 32, 64: -1, 0, 1 */
    put_h(b + 64, 0.5f);
    ASSERT_OK(dequant_row(GGML_TQ2_0, b, y, 256));
    ASSERT_NEAR(y[0], -0.5, 0);
    ASSERT_NEAR(y[32], 0.0, 0);
    ASSERT_NEAR(y[64], 0.5, 0);
    ASSERT_NEAR(y[96], -0.5, 0);
    /* TQ1_0: 5 trits per byte as a base-3 fixed-point fraction; byte
     * ceil(t * 256 / 243) for the trit string t = (t0 t1 t2 t3 t4)_3 */
    memset(b, 0, sizeof b);
    int trits[5] = {2, 0, 1, 2, 1}; /* digits, most significant first */
    int t = 0;
    for (int i = 0; i < 5; i++)
        t = t * 3 + trits[i];
    b[0] = (uint8_t)((t * 256 + 242) / 243);
    put_h(b + 52, 1.0f);
    ASSERT_OK(dequant_row(GGML_TQ1_0, b, y, 256));
    for (int n = 0; n < 5; n++)
        if (y[32 * n] != (float)(trits[n] - 1))
            T_FAIL_("trit %d: %g != %d", n, y[32 * n], trits[n] - 1);
    ASSERT_NEAR(y[1], -1.0, 0); /* byte 0: all trits 0 */
    return 0;
}

/* Dequantises a whole tensor; malloc'd, NULL when unsupported. */
static float *tensor_f32(const struct gguf_tensor *t)
{
    int64_t n = gguf_tensor_nelements(t);
    float *y = malloc((size_t)n * sizeof *y);
    if (y && dequant_row(t->type, t->data, y, n) != QG_OK) {
        free(y);
        return NULL;
    }
    return y;
}

TEST(dequant_real_files, shared)
{
    /* Each pad256 file is the F32 model zero-padded to 256-wide rows, then
     * quantized by llama-quantize: its dequantised tensors must equal the
     * original values up to quantisation error and be zero in the padding. */
    const char *base_path = t_shared("models/stories260K/gguf/stories260K-F32.gguf");
    if (!base_path) SKIP("../shared/models/stories260K is absent");
    const char *files[] = {"Q8_0",  "Q6_K",   "Q5_K_M",  "Q5_1",   "Q5_0",  "Q4_K_M", "Q4_1",
                           "Q4_0",  "IQ4_NL", "IQ4_XS",  "Q3_K_M", "IQ3_S", "IQ3_XS", "IQ3_XXS",
                           "IQ2_M", "IQ2_XS", "IQ2_XXS", "IQ1_M",  "IQ1_S", "Q2_K"};
    /* the grid formats, coarser and coarser: each file's error above the last */
    const char *ladder[] = {"IQ3_S", "IQ3_XXS", "IQ2_M", "IQ2_XS", "IQ2_XXS", "IQ1_S"};
    double ladder_err[6] = {0};
    char err[QG_ERRMSG_MAX];
    struct gguf *base;
    ASSERT_OK(gguf_open(base_path, &base, err, sizeof err));
    double prev_err = 0;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/stories260K-pad256/stories260K-pad256-%s.gguf", files[f]);
        const char *path = t_shared(rel);
        if (!path) SKIP("%s is absent", rel);
        struct gguf *g;
        ASSERT_OK(gguf_open(path, &g, err, sizeof err));
        double se = 0, ss = 0, pad_max = 0, real_max = 0;
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(g, i);
            const struct gguf_tensor *o = gguf_find_tensor(base, t->name);
            ASSERT(o && o->type == GGML_F32);
            float *y = tensor_f32(t);
            if (!y)
                T_FAIL_("%s: %s (%s) not dequantised", files[f], t->name, ggml_type_name(t->type));
            const float *x = o->data;
            double scale = strstr(t->name, "norm") ? 0.5 : 1.0;
            for (int64_t r = 0; r < t->ne[1]; r++)
                for (int64_t c = 0; c < t->ne[0]; c++) {
                    float v = y[r * t->ne[0] + c];
                    if (r < o->ne[1] && c < o->ne[0]) {
                        double want = x[r * o->ne[0] + c] * scale;
                        se += (v - want) * (v - want);
                        ss += want * want;
                        if (fabs(want) > real_max) real_max = fabs(want);
                    } else if ((r >= o->ne[1] || c >= (o->ne[0] + 31) / 32 * 32) &&
                               fabs(v) > pad_max) {
                        /* padding outside any block that holds real values */
                        pad_max = fabs(v);
                    }
                }
            free(y);
        }
        double rel_rmse = sqrt(se / ss);
        printf("%-7s relative RMSE %.5f, largest padding value %g\n", files[f], rel_rmse, pad_max);
        /* a layout error gives ~1 or more; 1.6-bit IQ1 on a model quantized
         * without an importance matrix loses about half */
        ASSERT(rel_rmse < (strstr(files[f], "IQ1") ? 0.6 : 0.4));
        /* grid formats have no zero code and no zero sub-block scale: zero
         * padding decodes to the block's smallest magnitude */
        int grid = files[f][0] == 'I' && files[f][2] != '4';
        if (pad_max > (grid ? 0.1 : 1e-6) * real_max)
            T_FAIL_("%s: padding decodes to %g (real values up to %g)", files[f], pad_max,
                    real_max);
        if (f == 0) ASSERT(rel_rmse < 0.01);                        /* Q8_0 */
        if (!strcmp(files[f], "Q2_K")) ASSERT(rel_rmse > prev_err); /* coarser than Q3_K_M */
        if (!strcmp(files[f], "Q3_K_M")) prev_err = rel_rmse;
        for (int k = 0; k < 6; k++)
            if (!strcmp(files[f], ladder[k])) ladder_err[k] = rel_rmse;
        gguf_close(g);
    }
    for (int k = 1; k < 6; k++)
        if (!(ladder_err[k] > ladder_err[k - 1]))
            T_FAIL_("%s (error %.4f) is not coarser than %s (%.4f)", ladder[k], ladder_err[k],
                    ladder[k - 1], ladder_err[k - 1]);
    gguf_close(base);
    return 0;
}

/* the 8 values of a packed grid entry (unsigned bytes, or signed for iq1s) */
static int grid_at(uint64_t g, int j, int is_signed)
{
    int v = (int)((g >> (8 * j)) & 0xFF);
    return is_signed && v > 127 ? v - 256 : v;
}

/* grid entry e's byte j from its level code (iq_grids.h's derived tables) */
static unsigned code_byte(const uint8_t *c, int count, const uint8_t *lv, int e, int j, int bits)
{
    const unsigned code = c[e] | (unsigned)c[count + e] << 8;
    return lv[(code >> (bits * j)) & ((1u << bits) - 1)];
}

TEST(iq_grid_codes_decode_to_grids, unit)
{
    /* the level-code tables gen_iq_grids.py derives (which the avx512vnni
     * grid kernels look their indices up in) give back every byte of
     * every entry of ggml's grids, and the levels are distinct and
     * ascending */
    static const struct {
        const char *name;
        const uint8_t *codes, *lv;
        int count, bytes;
        const void *grid;
    } g[] = {{"iq2xxs", &iq2xxs_codes[0][0], iq2xxs_levels, 256, 8, iq2xxs_grid},
             {"iq2xs", &iq2xs_codes[0][0], iq2xs_levels, 512, 8, iq2xs_grid},
             {"iq2s", &iq2s_codes[0][0], iq2s_levels, 1024, 8, iq2s_grid},
             {"iq3xxs", &iq3xxs_codes[0][0], iq3xxs_levels, 256, 4, iq3xxs_grid},
             {"iq3s", &iq3s_codes[0][0], iq3s_levels, 512, 4, iq3s_grid}};
    for (size_t t = 0; t < sizeof g / sizeof *g; t++) {
        const int bits = g[t].bytes == 8 ? 2 : 3, nlv = g[t].bytes == 8 ? 3 : 8;
        for (int i = 1; i < nlv; i++)
            if (g[t].lv[i] <= g[t].lv[i - 1]) T_FAIL_("%s: levels not ascending", g[t].name);
        for (int e = 0; e < g[t].count; e++)
            for (int j = 0; j < g[t].bytes; j++) {
                const unsigned want =
                    g[t].bytes == 8 ? (unsigned)(((const uint64_t *)g[t].grid)[e] >> 8 * j) & 0xFF
                                    : (unsigned)(((const uint32_t *)g[t].grid)[e] >> 8 * j) & 0xFF;
                const unsigned got = code_byte(g[t].codes, g[t].count, g[t].lv, e, j, bits);
                if (got != want)
                    T_FAIL_("%s entry %d byte %d: code gives %u, grid %u", g[t].name, e, j, got,
                            want);
            }
    }
    return 0;
}

TEST(dequant_grid_blocks, unit)
{
    uint8_t b[128];
    float y[256];
    /* IQ2_XXS, group 0: grid bytes 1, 0, 0, 0; a u32 with sign index 1
     * (element 0 negative) for l = 0 and scale nibble 3: db = d (0.5 + 3) / 4 */
    memset(b, 0, sizeof b);
    put_h(b, 2.0f);
    b[2] = 1;
    uint32_t aux = 1u | 3u << 28;
    memcpy(b + 6, &aux, 4);
    ASSERT_OK(dequant_row(GGML_IQ2_XXS, b, y, 256));
    float db = 2.0f * 3.5f * 0.25f;
    ASSERT_EQ(ksigns_iq2xs[1], 129); /* element 0 and element 7 negative */
    ASSERT_NEAR(y[0], -db * grid_at(iq2xxs_grid[1], 0, 0), 0);
    ASSERT_NEAR(y[0], -db * 43, 0);
    ASSERT_NEAR(y[7], -db * 8, 0);
    ASSERT_NEAR(y[1], db * 8, 0);
    ASSERT_NEAR(y[8], db * grid_at(iq2xxs_grid[0], 0, 0), 0);
    ASSERT_NEAR(y[32], 2.0f * 0.5f * 0.25f * 8, 0); /* group 1: scale nibble 0 */
    /* IQ2_XS: u16 = 9-bit index | 7-bit sign index << 9; scales: low nibble
     * for l = 0, 1, high for l = 2, 3 */
    memset(b, 0, sizeof b);
    put_h(b, 1.0f);
    uint16_t q = 300 | 2 << 9;
    memcpy(b + 2 + 2 * 2, &q, 2); /* group 0, l = 2 */
    b[66] = 0x51;                 /* scales of group 0: low 1, high 5 */
    ASSERT_OK(dequant_row(GGML_IQ2_XS, b, y, 256));
    ASSERT_EQ(ksigns_iq2xs[2], 130); /* elements 1 and 7 negative */
    float hi = 1.0f * 5.5f * 0.25f, lo = 1.0f * 1.5f * 0.25f;
    for (int j = 0; j < 8; j++) {
        float sign = (j == 1 || j == 7) ? -1.0f : 1.0f;
        ASSERT_NEAR(y[16 + j], hi * grid_at(iq2xs_grid[300], j, 0) * sign, 0);
    }
    ASSERT_NEAR(y[0], lo * 8, 0);
    /* IQ2_S: index = qs | 2 high bits from qh (bits 2l, 2l+1), signs as bytes */
    memset(b, 0, sizeof b);
    put_h(b, 1.0f);
    b[2 + 1] = 7;     /* group 0, l = 1: low byte 7 */
    b[66] = 0x3 << 2; /* qh of group 0: high bits 3 for l = 1 -> index 0x307 */
    b[34 + 1] = 0x80; /* its signs: element 7 negative */
    b[74] = 0x02;     /* scale low nibble 2 */
    ASSERT_OK(dequant_row(GGML_IQ2_S, b, y, 256));
    float d2 = 2.5f * 0.25f;
    for (int j = 0; j < 8; j++)
        ASSERT_NEAR(y[8 + j], d2 * grid_at(iq2s_grid[0x307], j, 0) * (j == 7 ? -1 : 1), 0);
    /* IQ3_XXS: two 4-value grid entries per 8 elements; u32 of signs + scale */
    memset(b, 0, sizeof b);
    put_h(b, 1.0f);
    b[2] = 5, b[3] = 200; /* group 0, l = 0 */
    aux = 3u | 1u << 28;  /* sign index 3: elements 0, 1 negative (and 7 for parity) */
    memcpy(b + 66, &aux, 4);
    ASSERT_OK(dequant_row(GGML_IQ3_XXS, b, y, 256));
    uint8_t sg = ksigns_iq2xs[3];
    float d3 = 1.5f * 0.5f;
    for (int j = 0; j < 4; j++) {
        ASSERT_NEAR(y[j], d3 * grid_at(iq3xxs_grid[5], j, 0) * ((sg >> j) & 1 ? -1 : 1), 0);
        ASSERT_NEAR(y[4 + j], d3 * grid_at(iq3xxs_grid[200], j, 0) * ((sg >> (j + 4)) & 1 ? -1 : 1),
                    0);
    }
    /* IQ3_S: 9-bit indexes (bit 8 from qh), scale 1 + 2 x nibble, per 64 */
    memset(b, 0, sizeof b);
    put_h(b, 0.5f);
    b[2 + 1] = 17; /* group 0, second grid of l = 0 */
    b[66] = 0x02;  /* qh[0] bit 1: that index + 256 */
    b[74] = 0x10;  /* signs[0]: element 4 negative */
    b[106] = 0x03; /* scale of groups 0-1: 1 + 2 x 3 = 7 */
    ASSERT_OK(dequant_row(GGML_IQ3_S, b, y, 256));
    for (int j = 0; j < 4; j++)
        ASSERT_NEAR(y[4 + j], 0.5f * 7 * grid_at(iq3s_grid[256 + 17], j, 0) * (j == 0 ? -1 : 1), 0);
    ASSERT_NEAR(y[0], 0.5f * 7 * grid_at(iq3s_grid[0], 0, 0), 0);
    /* IQ1_S: 11-bit index (3 high bits per l in qh), scale 2 x s + 1, delta +-1/8 */
    memset(b, 0, sizeof b);
    put_h(b, 0.25f);
    b[2 + 2] = 9;                                           /* group 0, l = 2 */
    uint16_t qh = (uint16_t)(5u << 6 | 2u << 12 | 0x8000u); /* l = 2: 5; s = 2; delta < 0 */
    memcpy(b + 34, &qh, 2);
    ASSERT_OK(dequant_row(GGML_IQ1_S, b, y, 256));
    for (int j = 0; j < 8; j++)
        ASSERT_NEAR(y[16 + j], 0.25f * 5 * (grid_at(iq1s_grid[5 << 8 | 9], j, 1) - 0.125f), 0);
    ASSERT_NEAR(y[0], 0.25f * 5 * (grid_at(iq1s_grid[0], 0, 1) - 0.125f), 0);
    /* IQ1_M: the fp16 block scale in the top nibbles of the 4 scale words */
    memset(b, 0, sizeof b);
    uint16_t half = quant_f32_to_f16(0.5f), sc[4];
    for (int k = 0; k < 4; k++)
        sc[k] = (uint16_t)(((half >> (4 * k)) & 0xF) << 12);
    sc[0] |= 3u << 3; /* group 0: dl1 from bits 0-2 (0 -> 1), dl2 from bits 3-5 (3 -> 7) */
    memcpy(b + 48, sc, 8);
    b[3] = 33;                   /* group 0, l = 3: low byte */
    b[32 + 1] = 0x2 << 4 | 0x80; /* qh[1]: high bits of l = 3 are 2, its delta negative */
    ASSERT_OK(dequant_row(GGML_IQ1_M, b, y, 256));
    for (int j = 0; j < 8; j++)
        ASSERT_NEAR(y[24 + j], 0.5f * 7 * (grid_at(iq1s_grid[2 << 8 | 33], j, 1) - 0.125f), 0);
    ASSERT_NEAR(y[0], 0.5f * 1 * (grid_at(iq1s_grid[0], 0, 1) + 0.125f), 0);
    return 0;
}

TEST(dequant_mxfp4_blocks, unit)
{
    /* OCP MX: 32 E2M1 values (low nibbles first 16, high nibbles last 16)
     * times 2^(e - 127); e = 255 is NaN */
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    uint8_t b[17];
    float y[32];
    for (int e = 0; e < 256; e++) {
        b[0] = (uint8_t)e;
        for (int j = 0; j < 16; j++)
            b[1 + j] = (uint8_t)(j | (15 - j) << 4);
        ASSERT_OK(dequant_row(GGML_MXFP4, b, y, 32));
        for (int j = 0; j < 32; j++) {
            int code = j < 16 ? j : 15 - (j - 16);
            /* -0 (code 8) decodes to +0, as ggml does */
            float want = (code & 8 ? -1.0f : 1.0f) * e2m1[code & 7] * ldexpf(1.0f, e - 127);
            if (code == 8) want = 0.0f;
            if (e == 255 ? !isnan(y[j]) : memcmp(&y[j], &want, 4) != 0)
                T_FAIL_("e %d element %d: %g, want %g", e, j, y[j], want);
        }
    }
    /* a block by hand: scale 2^1, values 6 and -0.5 */
    b[0] = 128;
    memset(b + 1, 0, 16);
    b[1] = 0x7 | 0x9 << 4;
    ASSERT_OK(dequant_row(GGML_MXFP4, b, y, 32));
    ASSERT_NEAR(y[0], 12.0, 0);
    ASSERT_NEAR(y[16], -1.0, 0);
    ASSERT_NEAR(y[1], 0.0, 0);
    return 0;
}

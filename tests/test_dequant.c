/* test_dequant — every supported block format on hand-built blocks whose
 * values can be checked by hand, and end to end on the real llama.cpp files. */
#include "backends/dequant.h"
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

TEST(dequant_legacy_blocks)
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
    ASSERT_EQ(dequant_row(GGML_IQ2_XXS, b, y, 256), QG_ERR_UNSUPPORTED);
    ASSERT_EQ(dequant_row(GGML_Q8_0, b, y, 31), QG_ERR_UNSUPPORTED);
    ASSERT(!dequant_supported(GGML_IQ3_S) && dequant_supported(GGML_TQ1_0));
    return 0;
}

TEST(dequant_k_blocks)
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

TEST(dequant_ternary_blocks)
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

TEST(dequant_real_files)
{
    /* Each pad256 file is the F32 model zero-padded to 256-wide rows, then
     * quantized by llama-quantize: its dequantised tensors must equal the
     * original values up to quantisation error and be zero in the padding. */
    const char *base_path = t_shared("models/stories260K/gguf/stories260K-F32.gguf");
    if (!base_path) SKIP("../shared/models/stories260K is absent");
    const char *files[] = {"Q8_0", "Q6_K", "Q5_K_M", "Q5_1",   "Q5_0",   "Q4_K_M",
                           "Q4_1", "Q4_0", "IQ4_NL", "IQ4_XS", "Q3_K_M", "Q2_K"};
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
        ASSERT(rel_rmse < 0.35); /* a layout error gives ~1 or more */
        ASSERT(pad_max <= 1e-6 * real_max);
        if (f == 0) ASSERT(rel_rmse < 0.01); /* Q8_0 */
        if (f + 1 == sizeof files / sizeof *files)
            ASSERT(rel_rmse > prev_err); /* Q2_K is coarsest */
        prev_err = rel_rmse;
        gguf_close(g);
    }
    gguf_close(base);
    return 0;
}

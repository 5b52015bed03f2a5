/* test_simfmt — the simulated formats against their specifications: every
 * FP8 code, ties to even, saturation, every E2M1 value, hand-built MX and
 * NVFP4 blocks, integer groups, and the names a model spec uses. */
#include "backends/simfmt.h"
#include "backends/act8.h"
#include "backends/matmul.h"
#include "core/status.h"
#include "core/rng.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

TEST(simfmt_fp8_every_code, unit)
{
    for (int c = 0; c < 256; c++) {
        float v = fp8_e4m3_to_f32((uint8_t)c);
        if ((c & 0x7F) == 0x7F) { /* E4M3FN's only NaN pattern */
            ASSERT(isnan(v));
            ASSERT_EQ(fp8_e4m3_from_f32(v) & 0x7F, 0x7F);
            continue;
        }
        ASSERT(isfinite(v));
        ASSERT_EQ(fp8_e4m3_from_f32(v), c);
    }
    for (int c = 0; c < 256; c++) {
        float v = fp8_e5m2_to_f32((uint8_t)c);
        if ((c & 0x7C) == 0x7C) { /* exponent all ones: infinities and NaNs */
            ASSERT((c & 3) ? isnan(v) : isinf(v));
            continue;
        }
        ASSERT_EQ(fp8_e5m2_from_f32(v), c);
    }
    /* landmarks */
    ASSERT(fp8_e4m3_to_f32(0x7E) == 448.0f && fp8_e4m3_to_f32(0x38) == 1.0f);
    ASSERT(fp8_e4m3_to_f32(0x01) == 0x1p-9f && fp8_e4m3_to_f32(0x08) == 0x1p-6f);
    ASSERT(fp8_e5m2_to_f32(0x7B) == 57344.0f && fp8_e5m2_to_f32(0x3C) == 1.0f);
    ASSERT(fp8_e5m2_to_f32(0x01) == 0x1p-16f && fp8_e5m2_to_f32(0x7C) == INFINITY);
    ASSERT(fp8_e4m3_to_f32(0x80) == 0.0f && signbit(fp8_e4m3_to_f32(0x80)));
    return 0;
}

TEST(simfmt_fp8_ties_and_saturation, unit)
{
    /* halfway between two codes: the even mantissa wins */
    ASSERT_EQ(fp8_e4m3_from_f32(1.0625f), 0x38); /* 1.0 | 1.125 -> 1.0 */
    ASSERT_EQ(fp8_e4m3_from_f32(1.1875f), 0x3A); /* 1.125 | 1.25 -> 1.25 */
    ASSERT_EQ(fp8_e4m3_from_f32(-1.0625f), 0xB8);
    ASSERT_EQ(fp8_e4m3_from_f32(0x1p-10f), 0x00);  /* half the smallest subnormal -> 0 */
    ASSERT_EQ(fp8_e4m3_from_f32(0x3p-10f), 0x02);  /* 1.5 subnormal steps -> 2 */
    ASSERT_EQ(fp8_e4m3_from_f32(0x0.fp-6f), 0x08); /* rounds up into the smallest normal */
    ASSERT_EQ(fp8_e5m2_from_f32(1.125f), 0x3C);    /* 1.0 | 1.25 -> 1.0 */
    ASSERT_EQ(fp8_e5m2_from_f32(1.375f), 0x3E);    /* 1.25 | 1.5 -> 1.5 */
    /* beyond the largest finite value: saturate, never infinity */
    ASSERT_EQ(fp8_e4m3_from_f32(464.0f), 0x7E);
    ASSERT_EQ(fp8_e4m3_from_f32(1e9f), 0x7E);
    ASSERT_EQ(fp8_e4m3_from_f32(-INFINITY), 0xFE);
    ASSERT_EQ(fp8_e5m2_from_f32(60000.0f), 0x7B);
    ASSERT_EQ(fp8_e5m2_from_f32(INFINITY), 0x7B);
    ASSERT_EQ(fp8_e5m2_from_f32(-1e30f), 0xFB);
    ASSERT_EQ(fp8_e4m3_from_f32(NAN), 0x7F);
    ASSERT_EQ(fp8_e5m2_from_f32(NAN) & 0x7F, 0x7F);
    /* every float between two neighbours goes to the nearer one */
    for (int c = 0; c < 0x7E; c++) {
        float a = fp8_e4m3_to_f32((uint8_t)c), b = fp8_e4m3_to_f32((uint8_t)(c + 1));
        ASSERT_EQ(fp8_e4m3_from_f32(a + (b - a) * 0.49f), c);
        ASSERT_EQ(fp8_e4m3_from_f32(a + (b - a) * 0.51f), c + 1);
        ASSERT_EQ(fp8_e4m3_from_f32(a + (b - a) * 0.5f), (c & 1) ? c + 1 : c);
    }
    return 0;
}

TEST(simfmt_fp4_fp6_every_value, unit)
{
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 16; c++) {
        float v = fp4_e2m1_to_f32((uint8_t)c);
        ASSERT(v == (c & 8 ? -e2m1[c & 7] : e2m1[c & 7]));
        ASSERT_EQ(fp4_e2m1_from_f32(v), c);
    }
    /* ties to even, saturation */
    static const struct {
        float x;
        int code;
    } t[] = {{0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4}, {2.5f, 4},
             {3.5f, 6},  {5.0f, 6},  {7.0f, 7},  {100, 7},   {-5.0f, 14}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        ASSERT_EQ(fp4_e2m1_from_f32(t[i].x), t[i].code);
    for (int c = 0; c < 64; c++)
        ASSERT_EQ(fp6_e3m2_from_f32(fp6_e3m2_to_f32((uint8_t)c)), c);
    ASSERT(fp6_e3m2_to_f32(0x1F) == 28.0f && fp6_e3m2_to_f32(0x01) == 0.0625f);
    ASSERT_EQ(fp6_e3m2_from_f32(30.0f), 0x1F);
    ASSERT_EQ(fp6_e3m2_from_f32(-1e6f), 0x3F);
    return 0;
}

TEST(simfmt_mx_blocks_by_hand, unit)
{
    float x[32] = {0};
    uint8_t scale, c[32];
    /* MXFP4, amax 6: shared exponent floor(log2 6) - 2 = 0, scale code 127 */
    x[0] = 1.0f, x[1] = -2.5f, x[2] = 6.0f, x[3] = 0.3f, x[4] = -0.2f;
    mx_block_encode(x, 32, SIMFMT_E2M1, &scale, c);
    ASSERT_EQ(scale, 127);
    ASSERT_EQ(c[0], 0x2);
    ASSERT_EQ(c[1], 0xC); /* -2.5: a tie, to -2 */
    ASSERT_EQ(c[2], 0x7);
    ASSERT_EQ(c[3], 0x1); /* 0.3 -> 0.5 */
    ASSERT_EQ(c[4], 0x8); /* -0.2 -> -0 */
    ASSERT_EQ(c[5], 0x0);
    ASSERT(mx_value(scale, c[1], SIMFMT_E2M1) == -2.0f);
    /* amax 100: floor(log2 100) = 6, shared 4, scale 131; 100 / 16 = 6.25 -> 6 -> 96 */
    x[0] = 100.0f, x[1] = -7.0f, x[2] = 1.0f;
    mx_block_encode(x, 32, SIMFMT_E2M1, &scale, c);
    ASSERT_EQ(scale, 131);
    ASSERT_EQ(c[0], 0x7);
    ASSERT(mx_value(scale, c[0], SIMFMT_E2M1) == 96.0f);
    ASSERT(mx_value(scale, c[1], SIMFMT_E2M1) == -8.0f); /* -7/16 = -0.4375 -> -0.5 */
    ASSERT(mx_value(scale, c[2], SIMFMT_E2M1) == 0.0f);  /* 1/16 -> 0 */
    /* MXFP8: amax 1000, shared floor(log2 1000) - 8 = 1; 500 saturates to 448 */
    float y[32] = {1000.0f, 3.0f, -0.0078125f};
    mx_block_encode(y, 32, SIMFMT_E4M3, &scale, c);
    ASSERT_EQ(scale, 128);
    ASSERT_EQ(c[0], 0x7E);
    ASSERT(mx_value(scale, c[0], SIMFMT_E4M3) == 896.0f);
    ASSERT(mx_value(scale, c[1], SIMFMT_E4M3) == 3.0f);
    ASSERT_EQ(c[2], 0x80 | 0x02); /* -2^-8 = -2 subnormal steps of 2^-9 */
    /* MXFP6 (E3M2): amax 1, shared 0 - 4 = -4, scale 123 */
    float z[32] = {1.0f, 0.1f};
    mx_block_encode(z, 32, SIMFMT_E3M2, &scale, c);
    ASSERT_EQ(scale, 123);
    ASSERT(mx_value(scale, c[0], SIMFMT_E3M2) == 1.0f);
    ASSERT(mx_value(scale, c[1], SIMFMT_E3M2) == 0.09375f); /* 1.6 -> 1.5, times 2^-4 */
    /* all zero: the smallest scale; a NaN: the NaN scale */
    float zero[32] = {0};
    mx_block_encode(zero, 32, SIMFMT_E2M1, &scale, c);
    ASSERT_EQ(scale, 0);
    zero[7] = NAN;
    mx_block_encode(zero, 32, SIMFMT_E2M1, &scale, c);
    ASSERT_EQ(scale, 0xFF);
    ASSERT(isnan(mx_value(scale, c[0], SIMFMT_E2M1)));
    return 0;
}

TEST(simfmt_nvfp4_blocks_by_hand, unit)
{
    /* tensor amax 2688 = 448 * 6: tensor scale 1; block amax 6: block scale 1.0 (0x38) */
    ASSERT(nvfp4_tensor_scale(2688.0f) == 1.0f);
    float x[16] = {6.0f, -3.0f, 0.5f, 1.25f};
    uint8_t scale, c[16];
    nvfp4_block_encode(x, 16, 1.0f, &scale, c);
    ASSERT_EQ(scale, 0x38);
    ASSERT_EQ(c[0], 0x7);
    ASSERT_EQ(c[1], 0xD);
    ASSERT_EQ(c[2], 0x1);
    ASSERT_EQ(c[3], 0x2); /* 1.25: a tie, to 1.0 */
    /* tensor scale 0.5 (amax 1344); block amax 30: 30 / 6 / 0.5 = 10 = 0x52 (1.25 * 2^3) */
    float ts = nvfp4_tensor_scale(1344.0f);
    ASSERT(ts == 0.5f);
    float y[16] = {30.0f, 12.5f, -2.5f};
    nvfp4_block_encode(y, 16, ts, &scale, c);
    ASSERT_EQ(scale, 0x52);
    ASSERT(nvfp4_value(scale, c[0], ts) == 30.0f);
    ASSERT(nvfp4_value(scale, c[1], ts) == 10.0f); /* 2.5: a tie, to 2 */
    ASSERT_EQ(c[2], 0x9);                          /* -0.5 */
    ASSERT(nvfp4_value(scale, c[2], ts) == -2.5f);
    /* the tensor scale of a real amax, as NVIDIA defines it */
    ASSERT(fabsf(nvfp4_tensor_scale(26.88f) - 0.01f) < 1e-9f);
    return 0;
}

TEST(simfmt_integer_groups_and_names, unit)
{
    struct simfmt f;
    char err[256], name[64];
    ASSERT_OK(simfmt_parse("int4:group:32:asym", &f, err, sizeof err));
    ASSERT(f.kind == SIMFMT_INT4 && f.gran == SIMFMT_GROUP && f.group == 32 && f.asym);
    simfmt_name(&f, name, sizeof name);
    ASSERT_STR_EQ(name, "int4:group:32:asym");
    ASSERT_OK(simfmt_parse("int8", &f, err, sizeof err));
    ASSERT(f.gran == SIMFMT_CHANNEL && !f.asym);
    ASSERT_OK(simfmt_parse("fp8", &f, err, sizeof err));
    ASSERT(f.kind == SIMFMT_FP8_E4M3 && f.gran == SIMFMT_TENSOR);
    ASSERT(fabs(simfmt_bits(&f) - 8) < 1e-12);
    ASSERT_OK(simfmt_parse("nvfp4", &f, err, sizeof err));
    ASSERT(fabs(simfmt_bits(&f) - 4.5) < 1e-12);
    static const char *const bad[][2] = {{"fp7", "unknown format 'fp7'"},
                                         {"int4:group:0", "group size"},
                                         {"nvfp4:channel", "block formats take no options"},
                                         {"fp8:asym", "only int8 and int4"},
                                         {"int8:row", "unknown option 'row'"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ASSERT_EQ(simfmt_parse(bad[i][0], &f, err, sizeof err), -1);
        ASSERT_CONTAINS(err, bad[i][1]);
    }
    /* a random matrix: symmetric int8 per channel is within half a step per
     * row, idempotent, and finer than int4 per tensor; groups are finer */
    enum { R = 8, C = 96 };
    static float w[R * C], a[R * C], b[R * C], g[R * C];
    uint64_t r = 7;
    for (int i = 0; i < R * C; i++)
        w[i] = (float)(rng_unit(&r) * 2 - 1) * (float)(1 + (i / C));
    memcpy(a, w, sizeof w);
    ASSERT_OK(simfmt_parse("int8:channel", &f, err, sizeof err));
    ASSERT_OK(simfmt_apply(&f, a, R, C));
    double e8 = 0, e4 = 0, eg = 0;
    for (int row = 0; row < R; row++) {
        float amax = 0;
        for (int j = 0; j < C; j++)
            amax = fmaxf(amax, fabsf(w[row * C + j]));
        for (int j = 0; j < C; j++)
            ASSERT(fabsf(a[row * C + j] - w[row * C + j]) <= amax / 127 / 2 * 1.0001f);
    }
    memcpy(b, a, sizeof a);
    ASSERT_OK(simfmt_apply(&f, b, R, C));
    ASSERT(!memcmp(a, b, sizeof a));
    memcpy(b, w, sizeof w);
    memcpy(g, w, sizeof w);
    ASSERT_OK(simfmt_parse("int4:tensor", &f, err, sizeof err));
    ASSERT_OK(simfmt_apply(&f, b, R, C));
    ASSERT_OK(simfmt_parse("int4:group:32:asym", &f, err, sizeof err));
    ASSERT_OK(simfmt_apply(&f, g, R, C));
    for (int i = 0; i < R * C; i++) {
        e8 += fabs(a[i] - w[i]);
        e4 += fabs(b[i] - w[i]);
        eg += fabs(g[i] - w[i]);
    }
    printf("mean |error|: int8:channel %.5f, int4:group:32:asym %.5f, int4:tensor %.5f\n",
           e8 / (R * C), eg / (R * C), e4 / (R * C));
    ASSERT(e8 < eg && eg < e4);
    /* asymmetric codes keep zero exact */
    float z[4] = {0, 1, 2, 3};
    ASSERT_OK(simfmt_apply(&f, z, 1, 4));
    ASSERT(z[0] == 0.0f && z[3] == 3.0f);
    return 0;
}

/* A row for act8_sets_agree: blocks of `bs` values, block k of kind
 * k % kinds (ordinary values at scales from 1e-30 to 1e30, halves that tie,
 * the largest magnitude twice with both signs, zeros, a NaN, NaNs only, an
 * Inf, a largest magnitude so small that 127 / it overflows) and a tail */
static void act8_row(float *x, int n, int bs, int kinds, uint64_t *s)
{
    static const float scales[] = {1.0f, 1e-30f, 1e30f, 3e-3f};
    for (int i = 0; i < n; i++)
        x[i] = (float)(rng_unit(s) * 2 - 1) * scales[(i / bs) % 4];
    for (int b = 0; b + bs <= n; b += bs) {
        float *v = x + b;
        switch ((b / bs) % kinds) {
        case 4: /* amax 127: x * id = x, and the halves tie */
            for (int j = 0; j < bs; j++)
                v[j] = (float)((j % 9) - 4) + 0.5f;
            v[bs - 1] = 127.0f;
            break;
        case 5: /* the largest magnitude first negative, then positive: far apart, close */
            v[b / bs % 20 == 5 ? 3 : 9] = -2 * scales[(b / bs) % 4];
            v[b / bs % 20 == 5 ? bs - 2 : 12] = 2 * scales[(b / bs) % 4];
            break;
        case 6:
            memset(v, 0, (size_t)bs * sizeof *v);
            break;
        case 7:
            v[bs / 2] = NAN;
            break;
        case 8: /* NaNs only */
            for (int j = 0; j < bs; j++)
                v[j] = NAN;
            break;
        case 9: /* an Inf, or a largest magnitude of 4e-41 (127 / it: Inf) */
            for (int j = 0; j < bs; j++)
                v[j] = b / bs % 20 == 9 ? (j == 1 ? -INFINITY : v[j]) : (float)(j % 5) * 1e-41f;
            break;
        default:
            break;
        }
    }
}

static int same_float(float a, float b)
{
    uint32_t u, v;
    memcpy(&u, &a, 4), memcpy(&v, &b, 4);
    return u == v || (isnan(a) && isnan(b));
}

enum { A8_N = 256 * 20 + 45, A8_ROWS = 8 };

struct act8_out {
    int rc;
    float x[A8_N], f[A8_N];
    int8_t q[A8_N];
};

/* act8 under set `set` on a copy of row (kind 0: Q8_0, 1: Q8_K) with
 * codes into o (f: d, sum16, s); QG_OK, or not when the CPU lacks the set */
static int act8_run(const char *set, int kind, const float *row, int n, struct act8_out *o)
{
    char was[16];
    snprintf(was, sizeof was, "%s", matmul_kernel_name());
    if (matmul_use_kernel(set) != QG_OK) return -1;
    memset(o, 0, sizeof *o);
    memcpy(o->x, row, (size_t)n * sizeof *row);
    struct simfmt_codes c = {o->q, o->f, (int32_t *)(void *)(o->f + n / 32),
                             o->f + n / 32 + n / 16};
    o->rc = kind ? act8_q8_k(o->x, n, &c) : act8_q8_0(o->x, n, &c);
    return matmul_use_kernel(was);
}

/* every vector set's rounding and codes against the portable set's (C),
 * bit for bit, the codes where there are any; NaN against NaN */
TEST(act8_sets_agree, unit)
{
    static float row[A8_N];
    static struct act8_out want, got;
    const char *const sets[] = {"avx2", "avx512", "avx512vnni"};
    uint64_t s = 33;
    int compared = 0, coded = 0;
    for (int kind = 0; kind < 2; kind++)
        for (int r = 0; r < A8_ROWS; r++) {
            const int n = A8_N - 13 * r, kinds = r % 2 ? (kind ? 9 : 7) : 10;
            act8_row(row, n, kind ? 256 : 32, kinds, &s);
            ASSERT_OK(act8_run("portable", kind, row, n, &want));
            ASSERT_EQ(want.rc, r % 2 ? 0 : -1); /* the rows with bad blocks say so */
            for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
                if (act8_run(sets[k], kind, row, n, &got)) continue;
                ASSERT_EQ(got.rc, want.rc);
                for (int j = 0; j < n; j++)
                    if (!same_float(got.x[j], want.x[j]))
                        T_FAIL_("%s, %s row %d: x[%d] = %a, portable %a", sets[k],
                                kind ? "Q8_K" : "Q8_0", r, j, (double)got.x[j], (double)want.x[j]);
                if (!want.rc) {
                    ASSERT(!memcmp(got.q, want.q, (size_t)n));
                    ASSERT(!memcmp(got.f, want.f, sizeof got.f));
                    coded++;
                }
                compared++;
            }
        }
    if (!compared) SKIP("no vector kernel set on this CPU: nothing to compare");
    printf("%d rows compared with the portable set's, %d with codes\n", compared, coded);
    return 0;
}

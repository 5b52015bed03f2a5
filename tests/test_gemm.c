/* test_gemm — a=llamacpp's int8 prefill product: the weights' 8-bit codes
 * (qcodes.h) against dequant's values, and gemm_q8 against its plain C
 * reference (to the bit, every kernel set, thread count and tiling) and
 * against the double product of the decoded weights and rounded inputs. */
#include "backends/dequant.h"
#include "backends/gemm_q8.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/llama.h"
#include "backends/matmul.h"
#include "backends/parallel.h"
#include "backends/qcodes.h"
#include "backends/quant.h"
#include "backends/simfmt.h"
#include "backends/synth.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/util.h"
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* every type with codes is a GGUF block format whose a=llamacpp inputs
 * are 8-bit blocks; its rows decode as s * code + m to dequant's value,
 * to the bit (each format's factors are the ones dequant multiplies) */
TEST(qcodes_match_dequant, unit)
{
    enum { IN = 512, ROWS = 5 };
    uint64_t st = 7;
    int types = 0;
    for (uint32_t type = 0; type < QG_F8_E4M3_S32; type++) {
        const struct ggml_type_info *ti = ggml_type_get(type);
        const int C = qcodes_chunk(type);
        const uint32_t kind = simfmt_llamacpp_act_class(type);
        const int eightbit =
            ti && dequant_supported(type) && (kind == GGML_Q8_0 || kind == GGML_Q8_K);
        if (!C) {
            if (eightbit) T_FAIL_("%s: 8-bit inputs but no codes", ti->name);
            continue;
        }
        ASSERT(eightbit);
        ASSERT(C == 16 || C == 32);
        const size_t rb = (size_t)(IN / ti->block) * ti->type_size;
        uint8_t *q = malloc(rb * ROWS);
        int8_t code[IN], code2[IN];
        float s[IN / 16], m[IN / 16], w[IN], s2[IN / 16], m2[IN / 16];
        synth_random_blocks(type, q, (int64_t)IN * ROWS, 0.5f, &st);
        for (size_t o = 0; type == GGML_MXFP4 && o < rb * ROWS; o += 17)
            q[o] = (uint8_t)(120 + q[o] % 12); /* scales near 1 (E8M0 255 is NaN) */
        int nonzero_min = 0;
        for (int r = 0; r < ROWS; r++) {
            ASSERT_OK(qcodes_row_c(type, q + r * rb, IN, code2, s2, m2));
            ASSERT_OK(qcodes_row(type, q + r * rb, IN, code, s, m));
            ASSERT_OK(dequant_row(type, q + r * rb, w, IN));
            if (memcmp(code, code2, IN) || memcmp(s, s2, sizeof(float) * (size_t)(IN / C)) ||
                memcmp(m, m2, sizeof(float) * (size_t)(IN / C)))
                T_FAIL_("%s row %d: qcodes_row and qcodes_row_c differ", ti->name, r);
            for (int j = 0; j < IN; j++) {
                const float v = s[j / C] * (float)code[j] + m[j / C];
                if (v != w[j])
                    T_FAIL_("%s row %d element %d: s %g * code %d + m %g = %.9g, dequant %.9g",
                            ti->name, r, j, s[j / C], code[j], m[j / C], v, w[j]);
                nonzero_min |= m[j / C] != 0.0f;
            }
        }
        ASSERT_EQ(nonzero_min, qcodes_has_min(type));
        free(q);
        types++;
    }
    printf("%d types: codes times scales plus minima are dequant's values\n", types);
    ASSERT_EQ(types, 22);
    int8_t c[32];
    float s[2], m[2];
    ASSERT_EQ(qcodes_row(GGML_F16, (const uint8_t *)c, 32, c, s, m), -1);
    ASSERT_EQ(qcodes_row(GGML_Q4_K, (const uint8_t *)c, 32, c, s, m), -1); /* not a block */
    return 0;
}

/* n inputs of `in` values in llama.cpp's 8-bit blocks for weights of
 * `type`: x rounded in place, the codes into bufs, one matmul_q8 each */
struct q8_inputs {
    int8_t *q;
    float *figs;
    struct matmul_q8 *a;
};

static int make_inputs(uint32_t type, float *x, int n, int64_t in, struct q8_inputs *b)
{
    const size_t F = (size_t)(in / 32 * 2 + in / 16);
    b->q = malloc((size_t)n * (size_t)in);
    b->figs = malloc((size_t)n * F * sizeof(float));
    b->a = malloc((size_t)n * sizeof *b->a);
    ASSERT(b->q && b->figs && b->a);
    for (int t = 0; t < n; t++) {
        float *f = b->figs + (size_t)t * F;
        struct simfmt_codes c = {b->q + (size_t)t * (size_t)in, f, (int32_t *)(void *)(f + in / 32),
                                 f + in / 32 + in / 16};
        ASSERT_OK(simfmt_llamacpp_codes(type, x + (size_t)t * (size_t)in, in, &c));
        b->a[t] = (struct matmul_q8){simfmt_llamacpp_act_class(type), c.q, c.d, c.sum16, c.s};
    }
    return 0;
}

static void free_inputs(struct q8_inputs *b)
{
    free(b->q), free(b->figs), free(b->a);
}

struct gemm_case {
    uint32_t type;
    int64_t in;
};

/* y for one case under the kernel set in use, threads 1 and 2 equal */
static int gemm_run(const struct wmat *W, const struct q8_inputs *b, int n, const float *bias,
                    float beta, const float *y0, float *y)
{
    float *scratch = qg_alloc_aligned(2 * matmul_scratch_floats(W->in) * sizeof(float));
    float *y2 = malloc((size_t)n * (size_t)W->out * sizeof *y2);
    ASSERT(scratch && y2);
    const size_t ny = (size_t)n * (size_t)W->out * sizeof *y;
    memcpy(y, y0, ny), memcpy(y2, y0, ny);
    ASSERT_OK(gemm_q8(y, W, bias, beta, b->a, n, 1, scratch));
    ASSERT_OK(gemm_q8(y2, W, bias, beta, b->a, n, 2, scratch));
    if (memcmp(y, y2, ny)) T_FAIL_("%s: 1 and 2 threads differ", matmul_kernel_name());
    free(scratch), free(y2);
    return 0;
}

/* ref[t][r], the double product of dequant's weights and the n rounded
 * inputs xr, Q4_1's and Q5_1's minima times Q8_1's sums instead of the
 * codes' sums; and mag[t][r], the sum of |w x| (each row decoded once) */
static void gemm_double(const struct wmat *W, const struct q8_inputs *b, const float *xr, int n,
                        double *ref, double *mag)
{
    const int64_t in = W->in;
    const int C = qcodes_chunk(W->type);
    float *w = malloc((size_t)in * sizeof *w);
    int8_t *code = malloc((size_t)in);
    float *s = malloc((size_t)in / 16 * sizeof *s), *m = malloc((size_t)in / 16 * sizeof *m);
    for (int64_t r = 0; r < W->out; r++) {
        dequant_row(W->type, W->data + (size_t)r * W->row_bytes, w, in);
        qcodes_row(W->type, W->data + (size_t)r * W->row_bytes, in, code, s, m);
        for (int t = 0; t < n; t++) {
            const float *x = xr + (size_t)t * (size_t)in;
            double acc = 0, abs = 0;
            for (int64_t k = 0; k < in; k++) {
                acc += (double)w[k] * x[k];
                abs += fabs((double)w[k] * x[k]);
            }
            if (b->a[t].kind == GGML_Q8_0 && qcodes_has_min(W->type))
                for (int64_t c = 0; c < in / C; c++) {
                    const int32_t sum = b->a[t].sum16[2 * c] + b->a[t].sum16[2 * c + 1];
                    acc += (double)m[c] * ((double)b->a[t].s[c] - (double)b->a[t].d[c] * sum);
                }
            ref[(size_t)t * (size_t)W->out + (size_t)r] = acc;
            mag[(size_t)t * (size_t)W->out + (size_t)r] = abs;
        }
    }
    free(w), free(code), free(s), free(m);
}

static int gemm_case_check(const struct gemm_case *gc, uint64_t *st)
{
    /* two panels (64 + 16 rows, the last tile 4 rows short... of 16), two
     * blocks of inputs (64 + 6, the last pass 2 short of 8) */
    enum { ROWS = 76, N = 70 };
    const struct ggml_type_info *ti = ggml_type_get(gc->type);
    const int64_t in = gc->in;
    const size_t rb = (size_t)(in / ti->block) * ti->type_size;
    uint8_t *q = malloc(rb * ROWS);
    float *x = malloc((size_t)N * (size_t)in * sizeof *x), bias[ROWS];
    float *y0 = malloc((size_t)N * ROWS * sizeof *y0);
    float *ya = malloc((size_t)N * ROWS * sizeof *ya), *yb = malloc((size_t)N * ROWS * sizeof *yb);
    ASSERT(q && x && y0 && ya && yb);
    synth_random_blocks(gc->type, q, in * ROWS, 0.5f, st);
    for (size_t o = 0; gc->type == GGML_MXFP4 && o < rb * ROWS; o += 17)
        q[o] = (uint8_t)(120 + q[o] % 12);
    for (int64_t k = 0; k < N * in; k++)
        x[k] = (float)(rng_unit(st) * 2 - 1) * (k % 7 == 0 ? 8.0f : 1.0f);
    for (int r = 0; r < ROWS; r++)
        bias[r] = (float)(rng_unit(st) - 0.5);
    for (int k = 0; k < N * ROWS; k++)
        y0[k] = (float)(rng_unit(st) - 0.5);
    struct q8_inputs b;
    if (make_inputs(gc->type, x, N, in, &b)) return 1;
    struct wmat W = {"w", gc->type, q, in, ROWS, rb, 0, NULL, 0};
    const char *const sets[] = {"avx2", "avx512", "avx512vnni"};
    char was[16];
    snprintf(was, sizeof was, "%s", matmul_kernel_name());
    double *ref = malloc((size_t)N * ROWS * sizeof *ref),
           *mag = malloc((size_t)N * ROWS * sizeof *mag);
    ASSERT(ref && mag);
    gemm_double(&W, &b, x, N, ref, mag);
    for (int v = 0; v < 2; v++) { /* plain; then beta 0.5 over y0, with a bias */
        const float *bs = v ? bias : NULL;
        const float beta = v ? 0.5f : 0.0f;
        ASSERT_OK(matmul_use_kernel("portable"));
        ASSERT_EQ(gemm_q8_fast(&W), 0);
        if (gemm_run(&W, &b, N, bs, beta, y0, ya)) return 1;
        double worst = 0;
        for (int t = 0; t < N; t++)
            for (int r = 0; r < ROWS; r++) {
                const int k = t * ROWS + r;
                const double want = ref[k] + (v ? 0.5 * (double)y0[k] + (double)bias[r] : 0.0);
                double e = fabs(ya[k] - want) / (mag[k] > 0 ? mag[k] : 1);
                if (e > worst) worst = e;
            }
        if (!(worst < 1e-5))
            T_FAIL_("%s in %lld: %.2e from the double product", ti->name, (long long)in, worst);
        int sets_run = 0;
        for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
            if (matmul_use_kernel(sets[k]) != QG_OK) continue;
            ASSERT_EQ(gemm_q8_fast(&W), !strcmp(sets[k], "avx512vnni"));
            if (gemm_run(&W, &b, N, bs, beta, y0, yb)) return 1;
            if (memcmp(ya, yb, (size_t)N * ROWS * sizeof *ya))
                T_FAIL_("%s in %lld: %s differs from the portable set's bits", ti->name,
                        (long long)in, sets[k]);
            sets_run++;
        }
        if (v == 0)
            printf("%s in %lld: within %.2e of the double product; %d other sets, the same bits\n",
                   ti->name, (long long)in, worst, sets_run);
    }
    ASSERT_OK(matmul_use_kernel(was));
    free_inputs(&b);
    free(q), free(x), free(y0), free(ya), free(yb), free(ref), free(mag);
    return 0;
}

/* gemm_q8 for every type with codes, at one block and at odd chunk counts,
 * against the double product (within 1e-5 of the sum of |w x|) and every
 * kernel set against the portable set's bits (1 and 2 threads with a
 * panel each; rows and inputs that leave partial tiles and passes) */
TEST(gemm_q8_matches_reference, unit)
{
    static const struct gemm_case cases[] = {
        {GGML_Q4_0, 32},    {GGML_Q4_0, 1056},  {GGML_Q4_1, 96},     {GGML_Q5_0, 160},
        {GGML_Q5_1, 1024},  {GGML_Q8_0, 96},    {GGML_Q8_0, 1024},   {GGML_IQ4_NL, 224},
        {GGML_IQ4_NL, 512}, {GGML_MXFP4, 1024}, {GGML_Q2_K, 256},    {GGML_Q3_K, 768},
        {GGML_Q4_K, 512},   {GGML_Q5_K, 768},   {GGML_Q6_K, 256},    {GGML_Q6_K, 1280},
        {GGML_IQ4_XS, 768}, {GGML_TQ1_0, 512},  {GGML_TQ2_0, 256},   {GGML_IQ2_XXS, 512},
        {GGML_IQ2_XS, 256}, {GGML_IQ2_S, 768},  {GGML_IQ3_XXS, 256}, {GGML_IQ3_S, 512},
        {GGML_IQ1_S, 768},  {GGML_IQ1_M, 512}};
    uint64_t st = 11;
    parallel_set_adaptive(0); /* 2 threads take a panel each, whatever the load */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (gemm_case_check(&cases[i], &st)) return 1;
    parallel_set_adaptive(1);
    return 0;
}

/* Where llama.cpp repacks (matmul_q8_blockwise: Q4_0, IQ4_NL, MXFP4, Q4_K,
 * Q2_K with a multiple of 8 rows), prefill (gemm_q8) follows its repacked
 * GEMM for the inputs in whole groups of 4 and its gemv for the n % 4
 * last, to the bit, under every kernel set: repacked_ref with the GEMM's
 * and the gemv's step; an MoE expert's (WMAT_EXPERT: llama.cpp's
 * MUL_MAT_ID) with the gemv's for every input; decode (matmul_w_group_q8, the avx512vnni integer
 * kernels) follows the gemv; 72 rows and 11 inputs (8 in groups, 3 not)
 * leave a partial tile and a partial pass */
TEST(gemm_q8_repacked_order, unit)
{
    if (strcmp(matmul_kernel_name(), "avx512vnni"))
        SKIP("decode's integer kernels need avx512vnni");
    static const struct gemm_case cases[] = {
        {GGML_Q4_0, 1024}, {GGML_IQ4_NL, 224}, {GGML_MXFP4, 512}, {GGML_Q4_K, 512},
        {GGML_Q4_K, 1280}, {GGML_Q2_K, 256},   {GGML_Q2_K, 768},  {GGML_Q4_K, 512},
        {GGML_Q2_K, 256}}; /* the last two as an MoE expert's (WMAT_EXPERT) */
    enum { ROWS = 72, N = 11 };
    const char *const sets[] = {"portable", "avx2", "avx512", "avx512vnni"};
    uint64_t st = 23;
    parallel_set_adaptive(0);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const uint32_t type = cases[i].type;
        const struct ggml_type_info *ti = ggml_type_get(type);
        const int64_t in = cases[i].in;
        const size_t rb = (size_t)(in / ti->block) * ti->type_size;
        uint8_t *q = malloc(rb * ROWS);
        float *x = malloc((size_t)N * (size_t)in * sizeof *x),
              *yd = malloc((size_t)N * ROWS * sizeof *yd),
              *yg = malloc((size_t)N * ROWS * sizeof *yg),
              *ref = malloc((size_t)N * ROWS * sizeof *ref),
              *scratch = qg_alloc_aligned(2 * matmul_scratch_floats(in) * sizeof(float));
        ASSERT(q && x && yd && yg && ref && scratch);
        synth_random_blocks(type, q, in * ROWS, 0.5f, &st);
        for (size_t o = 0; type == GGML_MXFP4 && o < rb * ROWS; o += 17)
            q[o] = (uint8_t)(120 + q[o] % 12);
        for (int64_t k = 0; k < N * in; k++)
            x[k] = (float)(rng_unit(&st) * 2 - 1) * (k % 7 == 0 ? 8.0f : 1.0f);
        struct q8_inputs b;
        if (make_inputs(type, x, N, in, &b)) return 1;
        const int expert = i + 2 >= sizeof cases / sizeof *cases;
        struct wmat W = {"w", type, q, in, ROWS, rb, 0, NULL, expert ? WMAT_EXPERT : 0};
        ASSERT(matmul_q8_blockwise(&W));
        for (int t = 0; t < N; t++) {
            struct matmul_part part = {yd + (size_t)t * ROWS, &W, NULL, 0.0f};
            matmul_w_group_q8(&part, 1, x + (size_t)t * (size_t)in, &b.a[t], 2, scratch);
        }
        const int gemm_per = ti->block == 32 ? 32 : type == GGML_Q4_K ? 64 : 128;
        int sets_run = 0, unlike_gemv = 0;
        for (int e = 0; e < N * ROWS; e++) {
            const int t = e / ROWS;
            const float gemv = t_repacked_dot(&W, e % ROWS, &b.a[t], ti->block);
            if (memcmp(&yd[e], &gemv, sizeof gemv))
                T_FAIL_("%s in %lld: decode of input %d row %d %a, the gemv's order %a", ti->name,
                        (long long)in, t, e % ROWS, (double)yd[e], (double)gemv);
            ref[e] =
                t < N / 4 * 4 && !expert ? t_repacked_dot(&W, e % ROWS, &b.a[t], gemm_per) : gemv;
            unlike_gemv += memcmp(&ref[e], &gemv, sizeof gemv) != 0;
        }
        for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
            if (matmul_use_kernel(sets[k]) != QG_OK) continue;
            ASSERT_OK(gemm_q8(yg, &W, NULL, 0.0f, b.a, N, 2, scratch));
            for (int e = 0; e < N * ROWS; e++)
                if (memcmp(&yg[e], &ref[e], sizeof *yg))
                    T_FAIL_("%s in %lld, %s: input %d row %d: prefill %a, llama.cpp's order %a",
                            ti->name, (long long)in, sets[k], e / ROWS, e % ROWS, (double)yg[e],
                            (double)ref[e]);
            sets_run++;
        }
        ASSERT_OK(matmul_use_kernel("avx512vnni"));
        printf("%s in %lld%s: prefill under %d kernel sets in the repacked GEMM's and gemv's "
               "order on %d x %d products (%d of them unlike the gemv's), decode in the gemv's\n",
               ti->name, (long long)in, expert ? " (an expert: the gemv's alone)" : "", sets_run, N,
               ROWS, unlike_gemv);
        free_inputs(&b);
        free(q), free(x), free(yd), free(yg), free(ref), free(scratch);
    }
    parallel_set_adaptive(1);
    return 0;
}

/* The repacked-order decode of a matrix without its copy gathers each
 * row's bytes from the file, 16 rows a step, the last group of 8 rows
 * masked: with the matrix's last byte just before an unreadable page
 * (PROT_NONE), no read passes it (a gather past the last row or block
 * faults), and the products are those of the same bytes elsewhere */
TEST(cols_file_reads_stay_in_the_matrix, unit)
{
    if (strcmp(matmul_kernel_name(), "avx512vnni")) SKIP("the integer kernels need avx512vnni");
    static const uint32_t types[] = {GGML_Q4_0, GGML_IQ4_NL, GGML_MXFP4, GGML_Q4_K, GGML_Q2_K};
    static const int ins[] = {256, 512}, rows_of[] = {8, 24, 40};
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t st = 29;
    int cases = 0;
    for (size_t ti_ = 0; ti_ < sizeof types / sizeof *types; ti_++)
        for (size_t k = 0; k < 2; k++)
            for (size_t m = 0; m < 3; m++) {
                const uint32_t type = types[ti_];
                const struct ggml_type_info *ti = ggml_type_get(type);
                const int in = ins[k], rows = rows_of[m];
                const size_t rb = (size_t)(in / ti->block) * ti->type_size, bytes = rb * rows;
                const size_t span = (bytes + page - 1) / page * page;
                uint8_t *map = mmap(NULL, span + page, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                ASSERT(map != MAP_FAILED);
                uint8_t *q = map + span - bytes, *q2 = malloc(bytes); /* ends at the guard */
                float *x = malloc(sizeof(float) * (size_t)in), *y = malloc(sizeof(float) * 2 * 40);
                float *scratch = qg_alloc_aligned(2 * matmul_scratch_floats(in) * sizeof(float));
                ASSERT(q2 && x && y && scratch);
                synth_random_blocks(type, q, (int64_t)in * rows, 0.5f, &st);
                for (size_t o = 0; type == GGML_MXFP4 && o < bytes; o += 17)
                    q[o] = (uint8_t)(120 + q[o] % 12);
                memcpy(q2, q, bytes);
                ASSERT(mprotect(map + span, page, PROT_NONE) == 0);
                for (int e = 0; e < in; e++)
                    x[e] = (float)(rng_unit(&st) * 2 - 1);
                struct q8_inputs b;
                if (make_inputs(type, x, 1, in, &b)) return 1;
                for (int v = 0; v < 2; v++) { /* at the guard, then elsewhere */
                    struct wmat W = {"w", type, v ? q2 : q, in, rows, rb, 0, NULL, 0};
                    ASSERT(matmul_q8_blockwise(&W));
                    struct matmul_part part = {y + v * 40, &W, NULL, 0.0f};
                    matmul_w_group_q8(&part, 1, x, &b.a[0], 2, scratch);
                }
                if (memcmp(y, y + 40, sizeof(float) * (size_t)rows))
                    T_FAIL_("%s in %d, %d rows: the products at the guard differ", ti->name, in,
                            rows);
                free_inputs(&b);
                munmap(map, span + page);
                free(q2), free(x), free(y), free(scratch);
                cases++;
            }
    printf("%d matrices read to their last byte before an unreadable page, nothing past it\n",
           cases);
    return 0;
}

/* what gemm_q8 refuses, writing nothing: a type without codes, inputs of
 * another kind, a width that is not a whole block */
TEST(gemm_q8_refuses, unit)
{
    uint8_t q[2 * 34] = {0};
    int8_t codes[64] = {0};
    float d[2] = {1, 1}, s[2] = {0, 0}, y[2] = {7, 7};
    int32_t sum16[4] = {0};
    float *scratch = qg_alloc_aligned(matmul_scratch_floats(256) * sizeof(float));
    ASSERT(scratch);
    struct matmul_q8 a = {GGML_Q8_0, codes, d, sum16, s};
    struct wmat f16 = {"w", GGML_F16, q, 32, 1, 64, 0, NULL, 0},
                q80 = {"w", GGML_Q8_0, q, 64, 1, 68, 0, NULL, 0},
                q4k = {"w", GGML_Q4_K, q, 64, 1, 68, 0, NULL, 0};
    ASSERT_EQ(gemm_q8(y, &f16, NULL, 0, &a, 1, 1, scratch), QG_ERR_UNSUPPORTED);
    ASSERT_EQ(gemm_q8(y, &q4k, NULL, 0, &a, 1, 1, scratch), QG_ERR_UNSUPPORTED);
    a.kind = GGML_Q8_K;
    ASSERT_EQ(gemm_q8(y, &q80, NULL, 0, &a, 1, 1, scratch), QG_ERR_UNSUPPORTED);
    ASSERT(y[0] == 7 && y[1] == 7);
    ASSERT_EQ(gemm_q8_fast(&f16), 0);
    a.kind = GGML_Q8_0;
    ASSERT_OK(gemm_q8(y, &q80, NULL, 0, &a, 1, 1, scratch)); /* zero weights: 0 */
    ASSERT(y[0] == 0 && y[1] == 7);
    free(scratch);
    return 0;
}

/* the mean over n positions of the total variation distance between the
 * softmaxes of two logit rows of V */
static double mean_tv(const float *a, const float *b, int n, int V)
{
    double sum = 0;
    for (int t = 0; t < n; t++) {
        double ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0, tv = 0;
        for (int v = 0; v < V; v++) {
            ma = fmax(ma, a[t * V + v]);
            mb = fmax(mb, b[t * V + v]);
        }
        for (int v = 0; v < V; v++) {
            za += exp(a[t * V + v] - ma);
            zb += exp(b[t * V + v] - mb);
        }
        for (int v = 0; v < V; v++)
            tv += fabs(exp(a[t * V + v] - ma) / za - exp(b[t * V + v] - mb) / zb);
        sum += tv / 2;
    }
    return sum / n;
}

/* the model's prompt products under a=llamacpp through gemm_q8 (the
 * avx512vnni set): the same bits on 1 and 2 threads, and as near plain
 * mode's f32 logits as the float path is (sgemm on the same rounded
 * input, the avx512 set): the mean total variation distance of the
 * softmaxes from plain mode's within 1.5 times the float path's plus
 * 1e-4. Both stand apart from plain mode by the 8-bit rounding of every
 * product's input, which also turns any last-bit difference between the
 * two into whole steps, so they are not compared with each other. */
TEST(gemm_q8_in_the_forward_pass, unit)
{
    if (matmul_use_kernel("avx512vnni") != QG_OK) SKIP("this CPU lacks the avx512vnni set");
    static const uint32_t types[] = {GGML_Q4_K, GGML_Q6_K, GGML_Q4_1, GGML_IQ4_NL, GGML_Q3_K};
    enum { N = 40 };
    struct synth_params p = synth_default_params();
    p.dim = 256, p.ffn = 512; /* whole 256-blocks; two widths of input */
    const int V = p.n_vocab;
    char err[QG_ERRMSG_MAX];
    const size_t nl = (size_t)N * (size_t)V;
    float *a = malloc(sizeof(float) * nl), *b = malloc(sizeof(float) * nl),
          *f = malloc(sizeof(float) * nl), *pl = malloc(sizeof(float) * nl);
    ASSERT(a && b && f && pl);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        p.wtype = types[i], p.seed = 5;
        ASSERT_OK(synth_write(&p, t_path("g.gguf"), err, sizeof err));
        ASSERT_OK(matmul_use_kernel("avx512vnni"));
        const struct wmat W = {"w", types[i], NULL, p.dim, p.dim, 0, 0, NULL, 0};
        ASSERT(gemm_q8_fast(&W));
        ASSERT_OK(t_logits(t_path("g.gguf"), LLAMA_ACT_LLAMACPP, NULL, 1, N, a));
        ASSERT_OK(t_logits(t_path("g.gguf"), LLAMA_ACT_LLAMACPP, NULL, 2, N, b));
        ASSERT(!memcmp(a, b, sizeof(float) * nl));
        ASSERT_OK(t_logits(t_path("g.gguf"), LLAMA_ACT_NONE, NULL, 1, N, pl));
        ASSERT_OK(matmul_use_kernel("avx512"));
        ASSERT_OK(t_logits(t_path("g.gguf"), LLAMA_ACT_LLAMACPP, NULL, 1, N, f));
        const double dg = mean_tv(a, pl, N, V), df = mean_tv(f, pl, N, V);
        printf("%s: from plain mode's softmax, mean TV: int8 prefill %.2e, float path %.2e\n",
               ggml_type_get(types[i])->name, dg, df);
        if (!(dg <= 1.5 * df + 1e-4))
            T_FAIL_("%s: the int8 prefill is %.2e from plain mode, the float path %.2e",
                    ggml_type_get(types[i])->name, dg, df);
    }
    ASSERT_OK(matmul_use_kernel("avx512vnni"));
    free(a), free(b), free(f), free(pl);
    return 0;
}

/* rows4_copy_alone_suffices for one type and row count */
static int copy_alone_case(uint32_t type, int rows)
{
    enum { IN = 2048, N = 5 };
    const struct ggml_type_info *ti = ggml_type_get(type);
    const size_t rb = IN / ti->block * ti->type_size, bytes = rb * rows;
    const long page = sysconf(_SC_PAGESIZE);
    const size_t mapped = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    uint8_t *q = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(q != MAP_FAILED);
    uint64_t st = 41;
    synth_random_blocks(type, q, (int64_t)IN * rows, 0.5f, &st);
    for (size_t b = 0; type != GGML_MXFP4 && b < (size_t)rows * IN / ti->block; b++)
        t_set_block_d(type, q + b * ti->type_size, /* each its own */
                      quant_f32_to_f16((float)(rng_unit(&st) * 0.1 + 0.01)));
    float *x = malloc(sizeof(float) * N * IN), *want = malloc(sizeof(float) * (N + 1) * rows),
          *got = malloc(sizeof(float) * (N + 1) * rows);
    float *scratch = qg_alloc_aligned(2 * matmul_scratch_floats(IN) * sizeof(float));
    uint8_t *saved = malloc(bytes), *buf = malloc(rb);
    ASSERT(x && want && got && scratch && saved && buf);
    memcpy(saved, q, bytes);
    for (int i = 0; i < N * IN; i++)
        x[i] = (float)(rng_unit(&st) * 2 - 1);
    struct q8_inputs b;
    ASSERT_OK(make_inputs(type, x, N, IN, &b));
    struct wmat W = {"w", type, q, IN, rows, rb, 0, NULL, 0};
    ASSERT(gemm_q8_fast(&W) && matmul_copy_bytes(&W) > 0);
    for (int copy = 0; copy < 2; copy++) {
        float *y = copy ? got : want;
        uint8_t *packed = NULL;
        size_t whole = 0; /* the whole pages of the copied rows */
        if (copy) {
            ASSERT((packed = qg_alloc_aligned(matmul_copy_bytes(&W))));
            matmul_copy(&W, packed, 2);
            W.copy = packed;
            whole = (size_t)matmul_copy_rows(&W) * rb / (size_t)page * (size_t)page;
            ASSERT(whole > 0 && mprotect(q, whole, PROT_NONE) == 0);
        }
        struct matmul_part part = {y, &W, NULL, 0.0f};
        matmul_w_group_q8(&part, 1, x, &b.a[0], 2, scratch);              /* decode: input 0 */
        ASSERT_OK(gemm_q8(y + rows, &W, NULL, 0.0f, b.a, N, 2, scratch)); /* prefill */
        /* matmul_row rebuilds the stored rows from the columns and
         * interleaved copies (not TQ1_0's), reads the decoded types' from
         * the file */
        const int stored = type == GGML_Q4_0 || type == GGML_IQ4_NL || type == GGML_MXFP4 ||
                           type == GGML_Q4_K || type == GGML_Q2_K || type == GGML_IQ1_S ||
                           type == GGML_IQ1_M || type == GGML_IQ4_XS || type == GGML_Q3_K ||
                           type == GGML_Q4_1 || type == GGML_Q5_0 || type == GGML_Q5_1 ||
                           type == GGML_TQ2_0;
        for (int64_t r = 0; copy && stored && r < rows; r++)
            if (memcmp(matmul_row(&W, r, buf), saved + (size_t)r * rb, rb))
                T_FAIL_("%s row %lld: matmul_row differs from the stored row", ti->name,
                        (long long)r);
        if (copy) {
            ASSERT(mprotect(q, whole, PROT_READ | PROT_WRITE) == 0);
            free(packed);
        }
    }
    if (memcmp(want, got, sizeof(float) * (N + 1) * rows))
        T_FAIL_("%s: products from the copy alone differ from those from the file", ti->name);
    printf("%s: decode and prefill of %d rows from the copy alone: the file's bits\n", ti->name,
           rows);
    free_inputs(&b);
    munmap(q, mapped);
    free(x), free(want), free(got), free(scratch), free(saved), free(buf);
    return 0;
}

TEST(rows4_copy_alone_suffices, unit)
{
    /* issue 33: with decode's copy made (columns: Q4_0, IQ4_NL, MXFP4,
     * Q4_K, Q2_K with a multiple of 8 rows, IQ4_XS, Q3_K, Q4_1, Q5_0,
     * Q5_1, IQ1_S, IQ1_M, TQ1_0, TQ2_0; interleaved: Q4_0, IQ4_NL, MXFP4
     * otherwise; decoded: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S; under
     * avx512vnni), a=llamacpp reads W's rows from it alone, so that the
     * file's pages can go (llama_pack_decode): decode, prefill's packing
     * (gemm_q8) and matmul_row (the stored bytes, rebuilt from the
     * columns and interleaved copies; IQ2's, IQ3's and TQ1_0's read from
     * the file) give the bits they gave from the file
     * while every whole page of the copied rows is unreadable (PROT_NONE:
     * a read would crash); the rows past the last group of 4 of an
     * interleaved copy, or of 16 of a columns copy, still come from the
     * file */
    if (strcmp(matmul_kernel_name(), "avx512vnni")) SKIP("the copy is made under avx512vnni only");
    static const uint32_t types[] = {GGML_Q4_0,  GGML_IQ4_NL,  GGML_MXFP4,   GGML_IQ1_S,
                                     GGML_IQ1_M, GGML_TQ1_0,   GGML_IQ2_XXS, GGML_IQ2_XS,
                                     GGML_IQ2_S, GGML_IQ3_XXS, GGML_IQ3_S};
    parallel_set_adaptive(0);
    int rc = 0;
    for (size_t i = 0; i < sizeof types / sizeof *types && !rc; i++)
        /* 603 rows: 150 groups of 4 and 3 more; 600 (a multiple of 8): the
         * columns copy, 37 groups of 16 and 8 more */
        rc = copy_alone_case(types[i], 603) || (i < 3 && copy_alone_case(types[i], 600));
    /* Q4_K and Q2_K have the columns copy only (a multiple of 8 rows);
     * IQ4_XS, Q3_K, Q4_1, Q5_0, Q5_1, TQ2_0 at any row count (vec_dot's
     * order) */
    if (!rc) rc = copy_alone_case(GGML_Q4_K, 600);
    if (!rc) rc = copy_alone_case(GGML_Q2_K, 600);
    if (!rc) rc = copy_alone_case(GGML_IQ4_XS, 603);
    if (!rc) rc = copy_alone_case(GGML_Q3_K, 603);
    if (!rc) rc = copy_alone_case(GGML_Q4_1, 603);
    if (!rc) rc = copy_alone_case(GGML_Q5_0, 603);
    if (!rc) rc = copy_alone_case(GGML_Q5_1, 603);
    if (!rc) rc = copy_alone_case(GGML_TQ2_0, 603);
    parallel_set_adaptive(1);
    return rc;
}



/* matmul_x86 — choosing among the x86 decode kernels behind matmul.c
 * (matmul_avx2.c, matmul_avx512.c, matmul_vnni.c) by kernel set.
 *
 * Each kernel computes dot(row r of W, x) for a stored block format,
 * decoding in registers. Summation orders differ from the portable C
 * kernel's (the tests compare the two within a tolerance); every kernel
 * decodes exactly the values dequant.c does. */
#include "backends/matmul_impl.h"
#include "backends/matmul_x86_impl.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

enum mv_isa mv_isa_detect(void)
{
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && quant_has_f16c();
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi") &&
                       __builtin_cpu_supports("gfni")
                   ? MV_AVX512_VNNI
                   : MV_AVX512;
    return avx2 ? MV_AVX2 : MV_PORTABLE;
}

mv_dot_fn mv_x86_dot(enum mv_isa isa)
{
    return isa >= MV_AVX512 ? mx_dot_avx512 : isa == MV_AVX2 ? mx_dot_avx2 : NULL;
}

mv_dots_fn mv_x86_dots(enum mv_isa isa)
{
    return isa >= MV_AVX512 ? mx_dots_avx512 : isa == MV_AVX2 ? mx_dots_avx2 : NULL;
}

mv_dots_f16_fn mv_x86_dots_f16(enum mv_isa isa)
{
    return isa >= MV_AVX512 ? mx_dots_f16_avx512 : isa == MV_AVX2 ? mx_dots_f16_avx2 : NULL;
}

size_t mv_x86_prep_floats(enum mv_isa isa, uint32_t type, int64_t in)
{
    int k = type == GGML_Q4_K || type == GGML_Q5_K || type == GGML_Q6_K ||
            (isa == MV_AVX512_VNNI && vnni_only_prep(type));
    if (isa >= MV_AVX512 ? !k || in % 64 : isa != MV_AVX2 || (!k && type != GGML_Q4_0) || in % 32)
        return 0;
    /* and on avx512vnni the flag after the rest (vnni_flag_at) */
    return (size_t)(in / 32 + in) + (isa == MV_AVX512_VNNI);
}

void mv_x86_prep(enum mv_isa isa, uint32_t type, const float *x, int64_t n, float *prep)
{
    float *lanes = prep, *sums = prep + n;
    if (isa == MV_AVX512_VNNI) { /* the K-quants and vnni_only_prep's */
        mx_prep_vnni(type, x, n, prep);
        return;
    }
    if (isa >= MV_AVX512) {
        mx_prep_avx512(type == GGML_Q4_K, x, n, lanes, sums);
        return;
    }
    mx_prep_avx2(x, n, lanes, sums);
}

/* with W->copy: whole groups of four by fn4(y, W, r, a), the other rows
 * by expr */
#define ROWS4(fn4, expr)                                                                           \
    do {                                                                                           \
        const int64_t full = W->out / 4 * 4;                                                       \
        int64_t r = r0;                                                                            \
        for (; r < r1 && r % 4; r++)                                                               \
            y[r - r0] = (expr);                                                                    \
        for (; r + 4 <= r1 && r + 4 <= full; r += 4)                                               \
            fn4(y + (r - r0), W, r, a);                                                            \
        for (; r < r1; r++)                                                                        \
            y[r - r0] = (expr);                                                                    \
        return 1;                                                                                  \
    } while (0)

/* llama.cpp's repacked order (matmul_q8_blockwise): 16 rows at a time,
 * each group from W->copy where it is one of its whole groups, else from
 * the file (mx_q8_cols_vnni) */
#define COLS()                                                                                     \
    do {                                                                                           \
        for (int64_t r = r0, n; r < r1; r += n) {                                                  \
            n = 16 - r % 16 < r1 - r ? 16 - r % 16 : r1 - r;                                       \
            mx_q8_cols_vnni(y + (r - r0), W, r, (int)n, a);                                        \
        }                                                                                          \
        return 1;                                                                                  \
    } while (0)

/* the cols_lanes8 types (IQ4_XS, Q3_K, Q4_1, Q5_0, Q5_1, TQ1_0, TQ2_0,
 * the grid formats): W->copy's whole groups of 16 by mx_q8_lanes_vnni,
 * the other rows (all of them without a copy) by expr, from the file */
#define LANES8(expr)                                                                               \
    do {                                                                                           \
        const int64_t full = W->copy ? W->out / 16 * 16 : 0;                                       \
        for (int64_t r = r0; r < r1;) {                                                            \
            if (r % 16 == 0 && r + 16 <= r1 && r + 16 <= full) {                                   \
                mx_q8_lanes_vnni(y + (r - r0), W, r, a);                                           \
                r += 16;                                                                           \
            } else {                                                                               \
                y[r - r0] = (expr);                                                                \
                r++;                                                                               \
            }                                                                                      \
        }                                                                                          \
        return 1;                                                                                  \
    } while (0)

#define ROWS(expr)                                                                                 \
    do {                                                                                           \
        for (int64_t r = r0; r < r1; r++)                                                          \
            y[r - r0] = (expr);                                                                    \
        return 1;                                                                                  \
    } while (0)

static int rows_avx512(enum mv_isa isa, float *y, const float *x, const float *prep,
                       const struct wmat *W, int64_t r0, int64_t r1)
{
    /* the K-quants' and grid formats' preparation in the integer layout
     * (prep_vnni) */
    const int ints = prep && isa == MV_AVX512_VNNI && prep[vnni_flag_at(W->in)] != 0.0f;
    switch (W->type) {
    case GGML_Q8_0:
        ROWS(mx_row_q8_0_avx512(W, r, x));
    case GGML_Q4_0:
        ROWS(mx_row_nib32_avx512(W, r, x, 0));
    case GGML_IQ4_NL:
        ROWS(mx_row_nib32_avx512(W, r, x, 1));
    case GGML_Q4_1:
    case GGML_Q5_0:
    case GGML_Q5_1:
        ROWS(mx_row_legacy_avx512(W, r, x));
    case GGML_Q2_K:
        if (ints) ROWS(mx_row_q2_k_vnni(W, r, prep));
        ROWS(mx_row_q2_k_avx512(W, r, x));
    case GGML_Q3_K:
        if (ints) ROWS(mx_row_q3_k_vnni(W, r, prep));
        ROWS(mx_row_q3_k_avx512(W, r, x));
    case GGML_TQ1_0:
        if (ints) ROWS(mx_row_iq_vnni(W, r, prep));
        ROWS(mx_row_tq1_0_avx512(W, r, x));
    case GGML_TQ2_0:
        if (ints) ROWS(mx_row_iq_vnni(W, r, prep));
        ROWS(mx_row_tq2_0_avx512(W, r, x));
    case GGML_MXFP4:
        ROWS(mx_row_mxfp4_avx512(W, r, x));
    case GGML_IQ4_XS:
        ROWS(mx_row_iq4_xs_avx512(W, r, x));
    case GGML_IQ2_XXS:
    case GGML_IQ2_XS:
    case GGML_IQ2_S:
    case GGML_IQ3_XXS:
    case GGML_IQ3_S:
        if (ints) ROWS(mx_row_iq_vnni(W, r, prep));
        ROWS(mx_row_iq_avx512(W, r, x));
    case GGML_IQ1_S:
    case GGML_IQ1_M:
        ROWS(mx_row_iq_avx512(W, r, x));
    case GGML_F16:
    case GGML_BF16:
        ROWS(mx_row_half_avx512(W, r, x, W->type == GGML_BF16));
    case GGML_Q4_K:
        if (ints) ROWS(mx_row_q4_k_vnni(W, r, prep));
        if (prep) ROWS(mx_row_q4_k_avx512(W, r, prep));
        return 0;
    case GGML_Q5_K:
        if (ints) ROWS(mx_row_q5_k_vnni(W, r, prep));
        if (prep) ROWS(mx_row_q5_k_avx512(W, r, prep));
        return 0;
    case GGML_Q6_K:
        if (ints) ROWS(mx_row_q6_k_vnni(W, r, prep));
        if (prep) ROWS(mx_row_q6_k_avx512(W, r, prep));
        return 0;
    default:
        return 0;
    }
}

static int rows_avx2(float *y, const float *x, const float *prep, const struct wmat *W, int64_t r0,
                     int64_t r1)
{
    switch (W->type) {
    case GGML_Q8_0:
        ROWS(mx_row_q8_0_avx2(W, r, x));
    case GGML_IQ4_NL:
        ROWS(mx_row_iq4_nl_avx2(W, r, x));
    case GGML_IQ4_XS:
        ROWS(mx_row_iq4_xs_avx2(W, r, x));
    case GGML_IQ2_XXS:
    case GGML_IQ2_XS:
    case GGML_IQ2_S:
    case GGML_IQ3_XXS:
    case GGML_IQ3_S:
    case GGML_IQ1_S:
    case GGML_IQ1_M:
        ROWS(mx_row_iq_avx2(W, r, x));
    case GGML_F16:
    case GGML_BF16:
        ROWS(mx_row_half_avx2(W, r, x, W->type == GGML_BF16));
    case GGML_Q4_0:
        if (prep) ROWS(mx_row_q4_0_avx2(W, r, x, prep));
        return 0;
    case GGML_Q4_1:
    case GGML_Q5_0:
    case GGML_Q5_1:
        ROWS(mx_row_legacy_avx2(W, r, x));
    case GGML_Q2_K:
        ROWS(mx_row_q2_k_avx2(W, r, x));
    case GGML_Q3_K:
        ROWS(mx_row_q3_k_avx2(W, r, x));
    case GGML_TQ1_0:
        ROWS(mx_row_tq1_0_avx2(W, r, x));
    case GGML_TQ2_0:
        ROWS(mx_row_tq2_0_avx2(W, r, x));
    case GGML_MXFP4:
        ROWS(mx_row_mxfp4_avx2(W, r, x));
    case GGML_Q4_K:
        if (prep) ROWS(mx_row_q4_k_avx2(W, r, prep));
        return 0;
    case GGML_Q5_K:
        if (prep) ROWS(mx_row_q5_k_avx2(W, r, prep));
        return 0;
    case GGML_Q6_K:
        if (prep) ROWS(mx_row_q6_k_avx2(W, r, prep));
        return 0;
    default:
        return 0;
    }
}

int mv_x86_rows(enum mv_isa isa, float *y, const float *x, const float *prep, const struct wmat *W,
                int64_t r0, int64_t r1)
{
    if (isa >= MV_AVX512 && rows_avx512(isa, y, x, prep, W, r0, r1)) return 1;
    /* the AVX2 kernels without an AVX-512 one read no preparation */
    return isa != MV_PORTABLE && rows_avx2(y, x, isa == MV_AVX2 ? prep : NULL, W, r0, r1);
}

/* mv_x86_q8_rows for the formats multiplied by Q8_0 codes */
static int q8_0_rows(float *y, const struct matmul_q8 *a, const struct wmat *W, int64_t r0,
                     int64_t r1)
{
    const int blockwise = matmul_q8_blockwise(W);
    switch (W->type) {
    case GGML_Q4_0:
        if (blockwise) COLS();
        if (W->copy) ROWS4(mx_q8_q4_0_rows4_vnni, mx_q8_q4_0_vnni(W, r, a));
        ROWS(mx_q8_q4_0_vnni(W, r, a));
    case GGML_Q8_0:
        ROWS(mx_q8_q8_0_vnni(W, r, a));
    case GGML_Q4_1:
        LANES8(mx_q8_q4_1_vnni(W, r, a));
    case GGML_Q5_0:
        LANES8(mx_q8_q5_0_vnni(W, r, a));
    case GGML_Q5_1:
        LANES8(mx_q8_q5_1_vnni(W, r, a));
    case GGML_IQ4_NL:
        if (blockwise) COLS();
        if (W->copy) ROWS4(mx_q8_iq4_nl_rows4_vnni, mx_q8_iq4_nl_vnni(W, r, a));
        ROWS(mx_q8_iq4_nl_vnni(W, r, a));
    case GGML_MXFP4:
        if (blockwise) COLS();
        if (W->copy) ROWS4(mx_q8_mxfp4_rows4_vnni, mx_q8_mxfp4_vnni(W, r, a));
        ROWS(mx_q8_mxfp4_vnni(W, r, a));
    default:
        return 0;
    }
}

int mv_x86_q8_rows(enum mv_isa isa, float *y, const struct matmul_q8 *a, const struct wmat *W,
                   int64_t r0, int64_t r1)
{
    if (isa != MV_AVX512_VNNI || (a->kind != GGML_Q8_0 && a->kind != GGML_Q8_K)) return 0;
    if (a->kind == GGML_Q8_0) return q8_0_rows(y, a, W, r0, r1);
    switch (W->type) {
    case GGML_Q4_K:
        if (matmul_q8_blockwise(W)) COLS();
        ROWS(mx_q8_q4_k_vnni(W, r, a));
    case GGML_Q2_K:
        if (matmul_q8_blockwise(W)) COLS();
        ROWS(mx_q8_q2_k_vnni(W, r, a));
    case GGML_IQ1_S:
        LANES8(mx_q8_iq1_s_vnni(W, r, a));
    case GGML_IQ1_M:
        LANES8(mx_q8_iq1_m_vnni(W, r, a));
    case GGML_IQ2_XXS:
        LANES8(mx_q8_iq2_xxs_vnni(W, r, a));
    case GGML_IQ2_XS:
        LANES8(mx_q8_iq2_xs_vnni(W, r, a));
    case GGML_IQ2_S:
        LANES8(mx_q8_iq2_s_vnni(W, r, a));
    case GGML_IQ3_XXS:
        LANES8(mx_q8_iq3_xxs_vnni(W, r, a));
    case GGML_IQ3_S:
        LANES8(mx_q8_iq3_s_vnni(W, r, a));
    case GGML_TQ1_0:
        LANES8(mx_q8_tq1_0_vnni(W, r, a));
    case GGML_TQ2_0:
        LANES8(mx_q8_tq2_0_vnni(W, r, a));
    case GGML_Q3_K:
        LANES8(mx_q8_q3_k_vnni(W, r, a));
    case GGML_Q5_K:
        ROWS(mx_q8_q5_k_vnni(W, r, a));
    case GGML_IQ4_XS:
        LANES8(mx_q8_iq4_xs_vnni(W, r, a));
    case GGML_Q6_K:
        ROWS(mx_q8_q6_k_vnni(W, r, a));
    default:
        return 0;
    }
}

#else /* not x86: the portable kernel only */

enum mv_isa mv_isa_detect(void)
{
    return MV_PORTABLE;
}

mv_dot_fn mv_x86_dot(enum mv_isa isa)
{
    (void)isa;
    return NULL;
}

mv_dots_fn mv_x86_dots(enum mv_isa isa)
{
    (void)isa;
    return NULL;
}

mv_dots_f16_fn mv_x86_dots_f16(enum mv_isa isa)
{
    (void)isa;
    return NULL;
}

size_t mv_x86_prep_floats(enum mv_isa isa, uint32_t type, int64_t in)
{
    (void)isa, (void)type, (void)in;
    return 0;
}

void mv_x86_prep(enum mv_isa isa, uint32_t type, const float *x, int64_t n, float *prep)
{
    (void)isa, (void)x, (void)n, (void)prep;
}

int mv_x86_rows(enum mv_isa isa, float *y, const float *x, const float *prep, const struct wmat *W,
                int64_t r0, int64_t r1)
{
    (void)isa, (void)y, (void)x, (void)prep, (void)W, (void)r0, (void)r1;
    return 0;
}

int mv_x86_q8_rows(enum mv_isa isa, float *y, const struct matmul_q8 *a, const struct wmat *W,
                   int64_t r0, int64_t r1)
{
    (void)isa, (void)y, (void)a, (void)W, (void)r0, (void)r1;
    return 0;
}
#endif

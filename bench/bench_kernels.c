/* bench_kernels — one decode kernel alone, one thread, per weight format.
 *
 * usage: bench_kernels [--in N] [--rows N] [--reps N] [--types LIST]
 *                      [--no-copy] [--cpu avx512vnni|avx512|avx2|portable]
 *
 * For each type, ROWS random rows of N inputs (random blocks, as the
 * tests' synth_random_blocks makes them; ROWS x N small enough to stay in
 * L2 by default, so the figures are the kernels' compute, not memory) are
 * multiplied by one random x, REPS times ten passes, the fastest kept:
 * plain mode (matmul_rows_fused: the kernel set's fused kernel with its
 * preparation of x) and, where the set has one, a=llamacpp's integer
 * kernel (matmul_w_group_q8 against x rounded to llama.cpp's 8-bit blocks,
 * reading decode's copy where the type has one, matmul_copy; with
 * --no-copy the stored rows in ggml's vec_dot order, as a model spec's
 * repack=0 does: llama.cpp's --no-repack).
 * Reported: G weights/s and the weight bytes that is per second, and
 * whether the set has a fused kernel for the type (else the generic
 * decode-then-dot path). Two threads streaming from memory need about
 * 0.6 x the measured bandwidth / 2 per thread to reach issue 33's 60 %.
 */
#include "bench/bench_args.h"
#include "backends/ggml_types.h"
#include "backends/matmul.h"
#include "backends/simfmt.h"
#include "backends/synth.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* seconds of the fastest of reps runs of 10 plain passes over W */
static double time_plain(const struct wmat *W, const float *x, float *y, float *row, int reps)
{
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        for (int k = 0; k < 10; k++)
            matmul_rows_fused(y, x, W, 0, W->out, row);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* the same for a=llamacpp's integer kernel, or -1 where the set has none */
static double time_q8(const struct wmat *W, const float *x, float *y, int reps, int use_copy)
{
    const uint32_t kind = simfmt_llamacpp_act_class(W->type);
    if ((kind != GGML_Q8_0 && kind != GGML_Q8_K) || !matmul_has_q8(W->type, kind)) return -1;
    const size_t in = (size_t)W->in;
    float *xr = qg_alloc_aligned(in * sizeof *xr), *d = malloc(in / 32 * sizeof *d),
          *s = malloc(in / 32 * sizeof *s);
    float *scratch = qg_alloc_aligned(matmul_scratch_floats(W->in) * sizeof *scratch);
    int8_t *q = malloc(in);
    int32_t *s16 = malloc(in / 16 * sizeof *s16);
    double best = -1;
    if (xr && d && s && scratch && q && s16) {
        memcpy(xr, x, in * sizeof *xr);
        struct simfmt_codes c = {q, d, s16, kind == GGML_Q8_0 ? s : NULL};
        if (!simfmt_llamacpp_codes(W->type, xr, W->in, &c)) {
            struct matmul_q8 a = {kind, q, d, s16, c.s};
            struct wmat Wp = *W; /* with decode's copy, where it has one */
            Wp.flags = use_copy ? 0 : WMAT_NO_REPACK;
            const size_t packed = use_copy ? matmul_copy_bytes(W) : 0;
            uint8_t *copy = packed ? qg_alloc_aligned(packed) : NULL;
            if (copy) matmul_copy(W, copy, 1);
            Wp.copy = copy;
            struct matmul_part part = {y, &Wp, NULL, 0.0f};
            best = 1e30;
            for (int i = 0; i < reps; i++) {
                double t0 = now();
                for (int k = 0; k < 10; k++)
                    matmul_w_group_q8(&part, 1, xr, &a, 1, scratch);
                double t = now() - t0;
                if (t < best) best = t;
            }
            free(copy);
        }
    }
    free(xr), free(d), free(s), free(scratch), free(q), free(s16);
    return best;
}

int main(int argc, char **argv)
{
    const char *types = "F16,Q8_0,Q6_K,Q5_K,Q4_K,Q3_K,Q2_K,Q4_0,Q4_1,Q5_0,Q5_1,IQ4_NL,IQ4_XS,"
                        "IQ3_S,IQ3_XXS,IQ2_S,IQ2_XS,IQ2_XXS,IQ1_M,IQ1_S,TQ1_0,TQ2_0,MXFP4";
    int in = 2048, rows = 256, reps = 15, use_copy = 1;
    bench_cpu(NULL, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--in") && i + 1 < argc)
            in = bench_int_arg("--in", argv[++i], 256, 1 << 20);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = bench_int_arg("--rows", argv[++i], 1, 1 << 20);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = bench_int_arg("--reps", argv[++i], 1, 10000);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            types = argv[++i];
        else if (!strcmp(argv[i], "--no-copy"))
            use_copy = 0; /* a=llamacpp from the stored rows, as repack=0 */
        else if (!strcmp(argv[i], "--cpu") && i + 1 < argc)
            bench_cpu(argv[++i], argv);
        else {
            fprintf(stderr, "usage: bench_kernels [--in N] [--rows N] [--reps N] [--types LIST] "
                            "[--no-copy] [--cpu avx512vnni|avx512|avx2|portable]\n");
            return 64;
        }
    }
    if (in % 256) {
        fprintf(stderr, "--in: %d is not a multiple of 256\n", in);
        return 64;
    }
    float *x = qg_alloc_aligned((size_t)in * sizeof *x), *y = malloc((size_t)rows * sizeof *y),
          *row = malloc((size_t)in * sizeof *row);
    if (!x || !y || !row) return 70;
    uint64_t st = 5;
    for (int i = 0; i < in; i++)
        x[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
    printf("bench/kernels: %d rows x %d inputs, one thread, kernels %s, best of %d x 10 passes%s\n",
           rows, in, matmul_kernel_name(), reps,
           use_copy ? "" : ", a=llamacpp without decode's copies");
    printf("%-8s %6s %10s %9s %14s %9s\n", "type", "fused", "plain Gw/s", "GB/s", "llamacpp Gw/s",
           "GB/s");
    char list[512];
    snprintf(list, sizeof list, "%s", types);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        struct wmat W;
        bench_random_matrix(t, in, rows, &st, &W);
        const struct ggml_type_info *ti = ggml_type_get(W.type);
        const double w = 10.0 * rows * in, bpw = (double)ti->type_size / ti->block;
        const double tp = time_plain(&W, x, y, row, reps), tq = time_q8(&W, x, y, reps, use_copy);
        printf("%-8s %6s %10.2f %9.2f", t, matmul_has_fused(W.type, in) ? "yes" : "no",
               w / tp / 1e9, w / tp / 1e9 * bpw);
        if (tq > 0)
            printf(" %14.2f %9.2f\n", w / tq / 1e9, w / tq / 1e9 * bpw);
        else
            printf(" %14s %9s\n", "-", "-");
        free((void *)W.data);
    }
    free(x), free(y), free(row);
    return 0;
}

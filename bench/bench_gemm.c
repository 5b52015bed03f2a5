/* bench_gemm — one prefill product alone, per weight format: plain mode's
 * sgemm on decoded panels against a=llamacpp's int8 GEMM (gemm_q8).
 *
 * usage: bench_gemm [--in N] [--rows N] [--n N] [--threads T] [--reps N]
 *                   [--types LIST] [--cpu avx512vnni|avx512|avx2|portable]
 *
 * For each type, ROWS random rows of IN inputs (random blocks, as the
 * tests' synth_random_blocks makes them) times N input rows (a window of
 * a prompt), the fastest of REPS: matmul_w (decode each panel to f32, then
 * OpenBLAS sgemm over the N rows) and gemm_q8 on the same inputs rounded
 * to llama.cpp's 8-bit blocks (their rounding done once, outside the
 * timing, as the forward pass does it once per product's input; the
 * decoding and packing of the weights inside it, as in a forward pass).
 * Reported: G multiply-adds per second (rows x IN x N over the time) and
 * the ratio. Types without codes (F16, BF16, F32) have sgemm only; where
 * the kernel set is not avx512vnni gemm_q8 runs as its plain C reference,
 * which the table marks "(C)".
 */
#include "bench/bench_args.h"
#include "backends/gemm_q8.h"
#include "backends/ggml_types.h"
#include "backends/matmul.h"
#include "backends/qcodes.h"
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

struct bench_in {
    int n, threads, reps;
    const float *x;
    float *y, *scratch;
    const struct matmul_q8 *a; /* NULL: the type has no codes */
};

/* seconds of the fastest of reps products, sgemm (q8 0) or gemm_q8 */
static double time_product(const struct wmat *W, const struct bench_in *b, int q8)
{
    double best = 1e30;
    for (int i = 0; i < b->reps; i++) {
        double t0 = now();
        if (q8)
            gemm_q8(b->y, W, NULL, 0.0f, b->a, b->n, b->threads, b->scratch);
        else
            matmul_w(b->y, b->x, W, NULL, b->n, 0.0f, b->threads, b->scratch);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* the n rows of x in llama.cpp's 8-bit blocks for weights of `type` into
 * a[0..n) (codes and figures in one allocation, *mem, for the caller to
 * free); 0, or -1 */
static int round_inputs(uint32_t type, const float *x, int n, int in, struct matmul_q8 *a,
                        void **mem)
{
    const size_t F = (size_t)(in / 32 * 2 + in / 16), per = (size_t)in * sizeof(float);
    float *xr = malloc(per);
    char *m = malloc((size_t)n * ((size_t)in + F * sizeof(float)));
    *mem = m;
    if (!xr || !m) return free(xr), -1;
    for (int t = 0; t < n; t++) {
        int8_t *q = (int8_t *)(m + (size_t)t * (size_t)in);
        float *f = (float *)(void *)(m + (size_t)n * (size_t)in) + (size_t)t * F;
        struct simfmt_codes c = {q, f, (int32_t *)(void *)(f + in / 32), f + in / 32 + in / 16};
        memcpy(xr, x + (size_t)t * (size_t)in, per);
        if (simfmt_llamacpp_codes(type, xr, in, &c)) return free(xr), -1;
        a[t] = (struct matmul_q8){simfmt_llamacpp_act_class(type), c.q, c.d, c.sum16, c.s};
    }
    free(xr);
    return 0;
}

int main(int argc, char **argv)
{
    const char *types = "F16,Q8_0,Q6_K,Q5_K,Q4_K,Q3_K,Q2_K,Q4_0,Q4_1,Q5_0,Q5_1,IQ4_NL,IQ4_XS,"
                        "IQ3_S,IQ3_XXS,IQ2_S,IQ2_XS,IQ2_XXS,IQ1_M,IQ1_S,TQ1_0,TQ2_0,MXFP4";
    int in = 2048, rows = 2048, n = 256, threads = 1, reps = 3;
    bench_cpu(NULL, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--in") && i + 1 < argc)
            in = bench_int_arg("--in", argv[++i], 256, 1 << 16);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = bench_int_arg("--rows", argv[++i], 1, 1 << 16);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = bench_int_arg("--n", argv[++i], 2, 4096);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = bench_int_arg("--threads", argv[++i], 1, 256);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = bench_int_arg("--reps", argv[++i], 1, 1000);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            types = argv[++i];
        else if (!strcmp(argv[i], "--cpu") && i + 1 < argc)
            bench_cpu(argv[++i], argv);
        else {
            fprintf(stderr, "usage: bench_gemm [--in N] [--rows N] [--n N] [--threads T] "
                            "[--reps N] [--types LIST] [--cpu avx512vnni|avx512|avx2|portable]\n");
            return 64;
        }
    }
    if (in % 256) {
        fprintf(stderr, "--in: %d is not a multiple of 256\n", in);
        return 64;
    }
    const size_t nx = (size_t)n * (size_t)in;
    float *x = qg_alloc_aligned(nx * sizeof *x), *y = malloc((size_t)n * rows * sizeof *y);
    float *scratch = qg_alloc_aligned((size_t)threads * matmul_scratch_floats(in) * sizeof(float));
    struct matmul_q8 *a = malloc((size_t)n * sizeof *a);
    if (!x || !y || !scratch || !a) return 70;
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
    printf("bench/gemm: %d rows x %d inputs x %d input rows, %d thread(s), kernels %s, best of "
           "%d\n",
           rows, in, n, threads, matmul_kernel_name(), reps);
    printf("%-8s %13s %13s %7s\n", "type", "sgemm GMAC/s", "int8 GMAC/s", "ratio");
    uint64_t st = 5;
    char list[512];
    snprintf(list, sizeof list, "%s", types);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        struct wmat W;
        bench_random_matrix(t, in, rows, &st, &W);
        void *mem = NULL;
        const int codes = qcodes_chunk(W.type) != 0;
        if (codes && round_inputs(W.type, x, n, in, a, &mem)) return 70;
        struct bench_in b = {n, threads, reps, x, y, scratch, codes ? a : NULL};
        const double macs = (double)rows * in * n, ts = time_product(&W, &b, 0);
        printf("%-8s %13.1f", t, macs / ts / 1e9);
        if (codes) {
            const double tq = time_product(&W, &b, 1);
            printf(" %13.1f %7.2f%s\n", macs / tq / 1e9, ts / tq, gemm_q8_fast(&W) ? "" : " (C)");
        } else {
            printf(" %13s %7s\n", "-", "-");
        }
        free(mem);
        free((void *)W.data);
    }
    free(x), free(y), free(scratch), free(a);
    return 0;
}

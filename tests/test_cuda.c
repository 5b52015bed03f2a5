/* test_cuda — the CUDA backend. Its block decoders (backends/cuda/blocks.h,
 * the same code the GPU kernels run) are checked here on the host against
 * dequant_row for every format they claim, on random blocks and on every
 * tensor of the shared GGUF files; the GPU tests skip, saying so, where no
 * CUDA device (or no CUDA build) is present. */
#include "backends/backend.h"
#include "backends/cuda/blocks.h"
#ifdef QG_HAVE_CUDA
#include "backends/cuda/kernels.h"
#endif
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/util.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when the decoders agree with dequant_row on n values of row (bitwise,
 * or both NaN); the first difference is printed. */
static int same_row(uint32_t t, const uint8_t *row, int64_t n, const char *what)
{
    float *ref = malloc((size_t)n * sizeof *ref);
    if (!ref || dequant_row(t, row, ref, n)) {
        free(ref);
        printf("%s: dequant_row refused type %u\n", what, t);
        return 0;
    }
    for (int64_t j = 0; j < n; j++) {
        float v = blk_value(t, row, j);
        if (memcmp(&v, &ref[j], 4) && !(isnan(v) && isnan(ref[j]))) {
            printf("%s (%s): element %lld: blocks.h %.9g, dequant_row %.9g\n", what,
                   ggml_type_name(t), (long long)j, v, ref[j]);
            free(ref);
            return 0;
        }
    }
    free(ref);
    return 1;
}

TEST(cuda_block_decoders_match_dequant, unit)
{
    static const uint32_t types[] = {GGML_F32,  GGML_F16,  GGML_BF16, GGML_Q4_0,   GGML_Q4_1,
                                     GGML_Q5_0, GGML_Q5_1, GGML_Q8_0, GGML_Q2_K,   GGML_Q3_K,
                                     GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_IQ4_NL, GGML_IQ4_XS};
    uint64_t rng = 20261201;
    uint8_t row[8 * 256 * 4];
    int checked = 0;
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        uint32_t t = types[k];
        ASSERT(blk_supported(t));
        int values, bytes = blk_bytes(t, &values);
        ASSERT(bytes > 0);
        int64_t n = values == 1 ? 256 : 8 * values, nb = n / values;
        for (int trial = 0; trial < 50; trial++) {
            for (size_t i = 0; i < sizeof row; i++)
                row[i] = (uint8_t)(rng_next(&rng) >> 56);
            /* half scales kept finite and modest: random bytes would make
             * infinities whose products are NaN on both sides anyway */
            for (int64_t b = 0; b < nb && values > 1; b++) {
                uint8_t *blk = row + b * bytes;
                static const int at[][2] = {{GGML_Q2_K, 80}, {GGML_Q3_K, 108}, {GGML_Q6_K, 208}};
                int off = 0, two = t == GGML_Q4_1 || t == GGML_Q5_1 || t == GGML_Q4_K ||
                                   t == GGML_Q5_K || t == GGML_Q2_K;
                for (size_t a = 0; a < 3; a++)
                    if ((uint32_t)at[a][0] == t) off = at[a][1];
                blk[off + 1] = (uint8_t)(0x30 | (blk[off + 1] & 0x83));
                if (two) blk[off + 3] = (uint8_t)(0x30 | (blk[off + 3] & 0x83));
            }
            if (t == GGML_F16)
                for (int64_t i = 0; i < n; i++)
                    row[2 * i + 1] &= 0x7B; /* no infinities or NaN */
            if (t == GGML_F32 || t == GGML_BF16) {
                for (int64_t i = 0; i < n; i++) {
                    float v = (float)((int)(rng_next(&rng) % 2001) - 1000) / 97.0f;
                    if (t == GGML_F32)
                        memcpy(row + 4 * i, &v, 4);
                    else {
                        uint32_t u;
                        memcpy(&u, &v, 4);
                        row[2 * i] = (uint8_t)(u >> 16), row[2 * i + 1] = (uint8_t)(u >> 24);
                    }
                }
            }
            ASSERT(same_row(t, row, n, "random blocks"));
            checked++;
        }
    }
    printf("%d random rows of 15 formats decode bit for bit as dequant_row\n", checked);
    ASSERT(!blk_supported(GGML_IQ2_XXS) && !blk_supported(GGML_MXFP4) &&
           !blk_supported(GGML_TQ1_0));
    return 0;
}

/* Every tensor of every shared GGUF file whose type the decoders claim. */
TEST(cuda_block_decoders_on_shared_files, shared)
{
    static const char *const files[] = {"Q8_0",   "Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",
                                        "Q2_K",   "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K",
                                        "IQ4_NL", "IQ4_XS", "BF16",   "F32"};
    const char *d = t_shared("models/stories260K-pad256");
    if (!d) SKIP("../shared/models/stories260K-pad256 is absent");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", d);
    int tensors = 0;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char path[4300], err[QG_ERRMSG_MAX];
        snprintf(path, sizeof path, "%s/stories260K-pad256-%s.gguf", dir, files[f]);
        struct gguf *g;
        ASSERT_OK(gguf_open(path, &g, err, sizeof err));
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(g, i);
            if (!blk_supported(t->type)) continue;
            ASSERT(same_row(t->type, t->data, gguf_tensor_nelements(t), t->name));
            tensors++;
        }
        gguf_close(g);
    }
    printf("%d tensors of %zu files decode bit for bit as dequant_row\n", tensors,
           sizeof files / sizeof *files);
    ASSERT(tensors > 200);
    return 0;
}

/* A spec asking for the GPU: refused by name where it cannot run (a build
 * without CUDA, no device, a format the GPU code lacks), never run on the
 * CPU instead. */
TEST(cuda_refusals_say_why, e2e)
{
    ASSERT_OK(t_synth("m.gguf", GGML_Q8_0, 1));
    char spec[4300];
    snprintf(spec, sizeof spec, "%s?device=cuda", t_path("m.gguf"));
    struct backend b;
    char err[QG_ERRMSG_MAX];
    int rc = backend_open(spec, NULL, &b, err, sizeof err);
#ifndef QG_HAVE_CUDA
    ASSERT_EQ(rc, QG_ERR_UNAVAILABLE);
    ASSERT_CONTAINS(err, "built without the CUDA backend");
#else
    if (qcu_device_count() == 0) {
        ASSERT_EQ(rc, QG_ERR_UNAVAILABLE);
        ASSERT_CONTAINS(err, "CUDA device 0 asked for, 0 present");
    } else {
        ASSERT_OK(rc);
        backend_close(&b);
    }
    snprintf(spec, sizeof spec, "%s?device=cuda&precision=fp64", t_path("m.gguf"));
    ASSERT_EQ(backend_open(spec, NULL, &b, err, sizeof err), QG_ERR_USAGE);
    ASSERT_CONTAINS(err, "want fp32, tf32 or bf16");
    const char *iq = t_shared("models/stories260K-pad256/stories260K-pad256-IQ2_XXS.gguf");
    if (iq) {
        snprintf(spec, sizeof spec, "%s?device=cuda", iq);
        ASSERT_EQ(backend_open(spec, NULL, &b, err, sizeof err), QG_ERR_UNSUPPORTED);
        ASSERT_CONTAINS(err, "is IQ2_XXS, which the CUDA backend does not decode");
    }
#endif
    struct t_out o;
    ASSERT_OK(t_write_file(t_path("t.txt"), "the girl saw the dog", 20));
    ASSERT_OK(
        t_qgate(&o, "ppl", t_path("m.gguf"), "--text", t_path("t.txt"), "--device", "gpu", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "--device must be cpu, cuda or cuda:N");
    t_out_free(&o);
    int gpu = 0;
#ifdef QG_HAVE_CUDA
    gpu = qcu_device_count() > 0;
#endif
    if (!gpu) { /* --device reaches the backend: the file itself is found and hashed */
        char db[4200];
        snprintf(db, sizeof db, "%s", t_path("g.db"));
        ASSERT_OK(t_qgate(&o, "gate", t_path("m.gguf"), t_path("m.gguf"), "--allow-identical",
                          "--device", "cuda", "--sample-tokens", "300", "--db", db, "-q", NULL));
        ASSERT_EQ(o.code, 69);
        ASSERT_CONTAINS(o.err, "CUDA");
        t_out_free(&o);
    }
    return 0;
}

#ifdef QG_HAVE_CUDA
/* The per-token log-probs of one window on the CPU and on the GPU (fp32),
 * their full rows and the KLD of each against the F32 model's rows. */
static int compare_window(uint32_t type, double *worst_nll, double *kld_cpu, double *kld_gpu)
{
    char name[64], cpu_spec[4300], gpu_spec[4300], base_spec[4300], err[QG_ERRMSG_MAX];
    snprintf(name, sizeof name, "m%u.gguf", type);
    if (t_synth(name, type, 7) || t_synth("base.gguf", GGML_F32, 7)) return -1;
    snprintf(cpu_spec, sizeof cpu_spec, "%s", t_path(name));
    snprintf(gpu_spec, sizeof gpu_spec, "%s?device=cuda", t_path(name));
    snprintf(base_spec, sizeof base_spec, "%s", t_path("base.gguf"));
    enum { N = 64 };
    int32_t tok[N];
    uint64_t rng = 99;
    for (int i = 0; i < N; i++)
        tok[i] = 3 + (int32_t)(rng_next(&rng) % 300);
    const char *specs[3] = {base_spec, cpu_spec, gpu_spec};
    double lp[3][N];
    static float rows[3][N * 320];
    for (int k = 0; k < 3; k++) {
        struct backend b;
        if (backend_open(specs[k], NULL, &b, err, sizeof err)) return printf("%s\n", err), -1;
        struct backend_score r = {
            .tokens = tok, .n_tokens = N, .from = 1, .logprob = lp[k], .rows = rows[k]};
        int rc = backend_score(&b, &r);
        backend_close(&b);
        if (rc) return printf("%s: score failed\n", specs[k]), -1;
    }
    *worst_nll = 0, *kld_cpu = 0, *kld_gpu = 0;
    for (int i = 0; i < N - 1; i++) {
        double rel = fabs(lp[2][i] - lp[1][i]) / fmax(1e-3, fabs(lp[1][i]));
        if (rel > *worst_nll) *worst_nll = rel;
        for (int v = 0; v < 320; v++) {
            double pb = exp(rows[0][i * 320 + v]);
            *kld_cpu += pb * (rows[0][i * 320 + v] - rows[1][i * 320 + v]);
            *kld_gpu += pb * (rows[0][i * 320 + v] - rows[2][i * 320 + v]);
        }
    }
    return 0;
}
#endif

/* On a GPU (fp32): per-token NLL within 1e-5 relative of the CPU backend
 * for every format synth writes, and the KLD against a CPU baseline within
 * 1e-4 relative. */
TEST(cuda_matches_cpu, e2e)
{
#ifndef QG_HAVE_CUDA
    SKIP("this build has no CUDA backend (cmake -DQG_CUDA=ON)");
#else
    if (qcu_device_count() == 0) SKIP("no CUDA device on this machine");
    static const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0, GGML_Q4_0, GGML_Q4_K};
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        double worst, kc, kg;
        ASSERT_OK(compare_window(types[k], &worst, &kc, &kg));
        printf("%-5s NLL worst relative difference %.3g; KLD vs F32: CPU %.6g, GPU %.6g\n",
               ggml_type_name(types[k]), worst, kc, kg);
        ASSERT(worst < 1e-5);
        ASSERT(fabs(kg - kc) <= 1e-4 * fabs(kc) + 1e-9);
    }
    return 0;
#endif
}

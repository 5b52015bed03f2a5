/* bench_decode — single-stream decode speed against memory bandwidth.
 *
 * usage: bench_decode [--quick | --1b | --moe] [--dir DIR] [--threads T] [--tokens N] [--types
 * LIST]
 *                     [--cpu avx512vnni|avx512|avx2|portable] [--llamacpp]
 *
 * For each type, a random Llama model (the shapes of bench_ppl, written
 * there or here into DIR) is mapped, a one-token prompt evaluated, then N
 * tokens decoded one at a time through the KV cache (the path generation
 * tasks and `qgate generate` take). Reported: tokens/s of the median
 * token, the bytes of
 * weights one token reads (every stored matrix but the embedding) times
 * tokens/s as GB/s, and that against the memory-read bandwidth measured in
 * the same run (a T-thread sum over a 1 GiB buffer, best of 3); then the
 * same matrices' products alone, one after another as in a decode step
 * (the kernels and fork-joins without attention, norms and the rest), as
 * GB/s and against the bandwidth. --llamacpp decodes as a=llamacpp does
 * (activations rounded as llama.cpp rounds them, llama.cpp's f16 cache);
 * the products-alone columns stay plain. --moe: a Mixtral-shaped model,
 * whose token reads its 2 chosen experts of 8 (MiB read/tok counts those;
 * products alone are not measured, "-").
 */
#include "backends/kernel_set.h"
#include "bench/bench_args.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/llama.h"
#include "backends/matmul.h"
#include "backends/parallel.h"
#include "backends/synth.h"
#include "core/status.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct shape {
    const char *name, *text;
    int dim, layers, heads, kv_heads, ffn, vocab, experts, used;
} shapes[] = {
    {"quick", "dim 256, 4 layers, 8 heads, ffn 512, vocab 4096", 256, 4, 8, 8, 512, 4096, 0, 0},
    {"base", "dim 768, 12 layers, 12 heads, ffn 2048, vocab 32000", 768, 12, 12, 12, 2048, 32000, 0,
     0},
    {"1b", "TinyLlama's shape: dim 2048, 22 layers, 32 heads, 4 KV heads, ffn 5632, vocab 32000",
     2048, 22, 32, 4, 5632, 32000, 0, 0},
    {"moe",
     "Mixtral's layout: dim 768, 12 layers, 12 heads, 8 experts of ffn 1024 (2 used), vocab 32000",
     768, 12, 12, 12, 1024, 32000, 8, 2},
};

struct bw_job {
    const double *buf;
    double sum[64];
};

static void bw_part(void *arg, int64_t b, int64_t e, int t)
{
    struct bw_job *j = arg;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t i = b; i + 4 <= e; i += 4) {
        s0 += j->buf[i];
        s1 += j->buf[i + 1];
        s2 += j->buf[i + 2];
        s3 += j->buf[i + 3];
    }
    j->sum[t] += s0 + s1 + s2 + s3; /* a thread may take several chunks */
}

/* GB/s of reading a 1 GiB buffer with T threads, best of 3 */
static double read_bandwidth(int threads)
{
    size_t n = ((size_t)1 << 30) / sizeof(double);
    double *buf = malloc(n * sizeof *buf), best = 0;
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++)
        buf[i] = (double)(i & 7);
    struct bw_job j = {buf, {0}};
    for (int rep = 0; rep < 3; rep++) {
        double t0 = qg_now_s();
        parallel_for(threads, (int64_t)n, bw_part, &j);
        double gbs = (double)(n * sizeof *buf) / (qg_now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    free(buf);
    return best;
}

/* GB/s of the model's matrix-vector products alone, in a decode step's
 * order (each layer's Q, K, V, O, gate, up, down, then the output head)
 * on a fixed x: the speed of the kernels and the fork-joins, without
 * attention, norms and the rest of a step. Best of 3 passes. */
static double products_gbs(const struct llama_model *m, int threads)
{
    const struct llama_hparams *h = llama_hparams(m);
    int64_t wide = h->ffn > h->dim ? h->ffn : h->dim, outs = h->n_vocab > wide ? h->n_vocab : wide;
    float *x = qg_alloc_aligned((size_t)wide * sizeof *x), *y = qg_alloc_aligned((size_t)outs * 4);
    float *scratch = qg_alloc_aligned((size_t)threads * matmul_scratch_floats(wide) * 4);
    double best = 0;
    if (h->n_expert) goto out; /* the experts' products depend on the routing: not measured */
    if (!x || !y || !scratch) goto out;
    for (int64_t i = 0; i < wide; i++)
        x[i] = (float)(i % 13) / 13.0f - 0.5f;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = qg_now_s();
        for (int l = 0; l < h->n_layers; l++) {
            struct llama_layer_view v;
            llama_layer_view(m, l, &v);
            const struct wmat *w[] = {v.wq, v.wk, v.wv, v.wo, v.w_gate, v.w_up, v.w_down};
            for (int k = 0; k < 7; k++)
                matmul_w(y, x, w[k], NULL, 1, 0.0f, threads, scratch);
        }
        matmul_w(y, x, llama_output_mat(m), NULL, 1, 0.0f, threads, scratch);
        double gbs = (double)llama_decode_bytes(m) / (qg_now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
out:
    free(x);
    free(y);
    free(scratch);
    return best;
}

static int decode_row(const char *path, const char *t, int threads, int tokens, double bw,
                      int llamacpp)
{
    struct gguf *g;
    struct llama_model *m;
    struct llama_ctx *c;
    char err[QG_ERRMSG_MAX];
    if (gguf_open(path, &g, err, sizeof err) || llama_load(g, path, &m, err, sizeof err))
        return fprintf(stderr, "%s\n", err), 1;
    if (llama_ctx_new(m, tokens + 2, &c)) return fprintf(stderr, "out of memory\n"), 1;
    llama_ctx_set_threads(c, threads);
    if (llamacpp &&
        (llama_pack_decode(m, threads) || llama_ctx_set_act(c, LLAMA_ACT_LLAMACPP, NULL))) {
        llama_ctx_free(c);
        llama_free(m);
        return fprintf(stderr, "out of memory\n"), 1;
    }
    int V = llama_hparams(m)->n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits);
    int32_t tok = 1;
    int rc = llama_eval(c, &tok, 1, 0, logits);
    double *dt = malloc((size_t)tokens * sizeof *dt);
    for (int i = 0; i < tokens && !rc && dt; i++) {
        tok = (int32_t)((i * 7919 + 13) % V);
        double t0 = qg_now_s();
        rc = llama_eval(c, &tok, 1, 0, logits);
        dt[i] = qg_now_s() - t0;
    }
    if (!dt) rc = QG_ERR_NOMEM;
    if (rc) { /* e.g. a=llamacpp's fp16 sums overflowing on a random model, as llama.cpp's do */
        printf("%-7s decode failed: %s (%s)\n", t, qg_strerror(rc),
               rc == QG_ERR_DATA ? "the activations became non-finite" : "see above");
        free(dt);
        free(logits);
        llama_ctx_free(c);
        llama_free(m);
        return rc == QG_ERR_NOMEM ? 1 : 0; /* the next type may run */
    }
    /* the median token: this VM's neighbours stall single tokens by up to
     * 2x; a token's time grows by one cached key per step, far less */
    double tps = 1.0 / bench_median(dt, tokens);
    free(dt);
    double gbs = (double)llama_decode_bytes(m) * tps / 1e9;
    struct stat st;
    stat(path, &st);
    double prod = products_gbs(m, threads);
    printf("%-7s %9.1f %10.2f %14.1f %11.2f %10.2f %9.0f%%", t, (double)st.st_size / 1048576, tps,
           (double)llama_decode_bytes(m) / 1048576, gbs, bw, 100 * gbs / bw);
    if (prod > 0)
        printf(" %13.2f %9.0f%%\n", prod, 100 * prod / bw);
    else
        printf(" %13s %10s\n", "-", "-");
    fflush(stdout);
    free(logits);
    llama_ctx_free(c);
    llama_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp/qgate-bench", *types = "F32,F16,BF16,Q8_0,Q6_K,Q4_0,Q4_K,IQ4_XS,IQ3_S";
    int threads = parallel_cpus(), tokens = 32, shape = 1, llamacpp = 0;
    bench_cpu(NULL, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            shape = 0;
        else if (!strcmp(argv[i], "--1b"))
            shape = 2;
        else if (!strcmp(argv[i], "--moe"))
            shape = 3;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = bench_int_arg("--threads", argv[++i], 1, 256);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            tokens = bench_int_arg("--tokens", argv[++i], 1, 100000);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            types = argv[++i];
        else if (!strcmp(argv[i], "--llamacpp"))
            llamacpp = 1;
        else if ((!strcmp(argv[i], "--cpu") || !strcmp(argv[i], "--kernel")) && i + 1 < argc)
            bench_cpu(argv[++i], argv);
        else
            return fprintf(stderr,
                           "usage: bench_decode [--quick | --1b | --moe] [--dir DIR] [--threads T] "
                           "[--tokens N] [--types LIST] [--cpu avx512vnni|avx512|avx2|portable] "
                           "[--llamacpp]\n"),
                   64;
    }
    mkdir(dir, 0777);
    const struct shape *sh = &shapes[shape];
    double bw = read_bandwidth(threads);
    char kernels[128];
    kernel_set_describe(kernels, sizeof kernels);
    printf("bench/decode: random Llama %s, %d thread(s), %d tokens (tokens/s: of the median "
           "token), kernels %s, models in %s%s\n",
           sh->text, threads, tokens, kernels, dir, llamacpp ? ", decode as a=llamacpp" : "");
    printf("%-7s %9s %10s %14s %11s %10s %10s %13s %10s\n", "type", "file MiB", "tokens/s",
           "MiB read/tok", "weights GB/s", "mem GB/s", "of memory", "products GB/s", "of memory");
    char list[256];
    snprintf(list, sizeof list, "%s", types);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int type = ggml_type_from_name(t);
        if (type < 0) return fprintf(stderr, "unknown type %s\n", t), 64;
        char path[4096];
        snprintf(path, sizeof path, "%s/bench-%s-%s.gguf", dir, sh->name, t);
        struct stat st;
        if (stat(path, &st) != 0) {
            struct synth_params p = synth_default_params();
            p.dim = sh->dim, p.n_layers = sh->layers, p.n_heads = sh->heads;
            p.n_kv_heads = sh->kv_heads, p.ffn = sh->ffn, p.n_vocab = sh->vocab, p.ctx = 512;
            p.wtype = (uint32_t)type;
            p.n_expert = sh->experts, p.n_expert_used = sh->used;
            char err[QG_ERRMSG_MAX];
            if (synth_write(&p, path, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
        }
        if (decode_row(path, t, threads, tokens, bw, llamacpp)) return 1;
    }
    return 0;
}

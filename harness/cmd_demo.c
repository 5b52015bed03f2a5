/* cmd_demo — `qgate demo`: the built-in end-to-end example, no downloads.
 *
 * Generates a small seeded Llama model stored as F32 (the "original") and as
 * F16, Q8_0 and Q4_0 (the quantized candidates), samples a corpus from the
 * original with a fixed seed, and scores every variant on it with the
 * rolling protocol: PPL with its per-window standard error and the paired
 * log-PPL difference against the original. The statistical verdict (noise
 * floor, margin, PASS/FAIL) joins the demo when the runner exists.
 */
#include "backends/backend.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/model_info.h"
#include "backends/synth.h"
#include "harness/commands.h"
#include "harness/status.h"
#include "harness/util.h"
#include "tasks/perplexity.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct cli_opt opts[] = {
    {"dir", 'd', CLI_STR, "DIR", "where to write the demo models and corpus (default ./qgate-demo)", 0},
    {"seed", 0, CLI_INT, "N", "seed of the random weights and of the corpus (default 1)", 0},
    CLI_OPT_END,
};

static const struct {
    const char *file;
    uint32_t type;
} variants[] = {{"base-f32.gguf", GGML_F32}, {"cand-f16.gguf", GGML_F16}, {"cand-q8_0.gguf", GGML_Q8_0},
                {"cand-q4_0.gguf", GGML_Q4_0}};
enum { N_VARIANTS = 4, CTX = 128 };

/* Samples a corpus from the base model: BOS, then 32 continuations of up to
 * 120 tokens each. The token stream is what every model is scored on (the
 * synthetic vocabulary does not re-tokenize its own text identically); the
 * text goes to `path` for people to look at. */
static int make_corpus(const char *model, const char *path, uint64_t seed, int32_t **ids, int64_t *n,
                       char *err, size_t errlen)
{
    struct backend b;
    struct backend_open_params bp = {.n_ctx = CTX};
    int rc = backend_open(model, &bp, &b, err, errlen);
    if (rc) return rc;
    struct sbuf text;
    sbuf_init(&text, 0);
    struct backend_info info;
    backend_info(&b, &info);
    int64_t cap = 1 + 32 * 120;
    *ids = malloc((size_t)cap * sizeof **ids);
    *n = 0;
    if (!*ids) rc = QG_ERR_NOMEM;
    else (*ids)[(*n)++] = info.bos;
    for (int i = 0; i < 32 && !rc; i++) {
        struct backend_gen_params gp = {.max_tokens = 120, .temperature = 1.0f, .top_p = 1.0f, .seed = seed * 1000 + (uint64_t)i};
        char *t = NULL;
        int32_t *g = NULL;
        int64_t ng = 0;
        rc = backend_generate(&b, &info.bos, 1, &gp, &t, &g, &ng);
        if (!rc) {
            sbuf_printf(&text, "%s\n", t);
            for (int64_t k = 0; k < ng && *n < cap; k++) (*ids)[(*n)++] = g[k];
        }
        free(t);
        free(g);
    }
    if (!rc) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(text.data, 1, text.len, f) != text.len) rc = qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: cannot write", path);
        if (f && fclose(f) != 0) rc = qg_errf(err, errlen, QG_ERR_IO, "%s: write failed", path);
    } else {
        qg_errf(err, errlen, rc, "sampling the corpus failed: %s", backend_errmsg(&b));
    }
    sbuf_release(&text);
    backend_close(&b);
    return rc;
}

/* Scores path on the token stream with the rolling protocol. */
static int score(const char *path, const int32_t *ids, int64_t n, struct ppl_run *r, char *err, size_t errlen)
{
    struct backend b;
    struct backend_open_params bp = {.n_ctx = CTX};
    int rc = backend_open(path, &bp, &b, err, errlen);
    if (rc) return rc;
    struct ppl_params p = {.protocol = PPL_ROLLING, .n_ctx = CTX};
    rc = ppl_evaluate(&b, ids, n, &p, NULL, NULL, r, err, errlen);
    backend_close(&b);
    return rc;
}

static void stored_types(const char *path, char *out, size_t n)
{
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    out[0] = '\0';
    if (gguf_open(path, &g, err, sizeof err)) return;
    struct model_info m;
    model_info_read(g, &m);
    size_t k = 0;
    for (int i = 0; i < m.n_types && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%s x%lld", i ? ", " : "", ggml_type_name(m.types[i].type),
                              (long long)m.types[i].count);
    gguf_close(g);
}

static int cmd_demo(const struct cli_args *a)
{
    const char *dir = cli_str(a, "dir") ? cli_str(a, "dir") : "qgate-demo";
    int64_t seed = cli_int(a, "seed", 1);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return qg_error("cannot create '%s': %s", dir, strerror(errno)), QG_EX_CANTCREAT;
    char paths[N_VARIANTS][4096], corpus[4096], err[QG_ERRMSG_MAX];
    for (int i = 0; i < N_VARIANTS; i++) {
        struct synth_params p = synth_default_params();
        p.seed = (uint64_t)seed;
        p.wtype = variants[i].type;
        p.name = "qgate-demo";
        p.logit_scale = 24.0f; /* peaked, language-like next-token distributions */
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, variants[i].file);
        int rc = synth_write(&p, paths[i], err, sizeof err);
        if (rc) return cmd_fail(rc, err);
    }
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    int rc = make_corpus(paths[0], corpus, (uint64_t)seed, &ids, &n_ids, err, sizeof err);
    if (rc) {
        free(ids);
        return cmd_fail(rc, err);
    }
    printf("qgate demo: one seeded Llama model (dim 64, 2 layers, vocab 320) stored four ways,\n"
           "scored on %lld tokens sampled from the F32 model (text in %s),\nrolling protocol, ctx %d.\n\n",
           (long long)n_ids, corpus, CTX);
    printf("%-28s %-24s %10s %10s %14s %16s\n", "model", "stored tensors", "PPL", "+/- (SE)", "ln PPL ratio",
           "+/- (paired SE)");
    struct ppl_run base = {0};
    for (int i = 0; i < N_VARIANTS; i++) {
        struct ppl_run r;
        if ((rc = score(paths[i], ids, n_ids, &r, err, sizeof err))) {
            ppl_run_release(&base);
            free(ids);
            return cmd_fail(rc, err);
        }
        char types[96];
        stored_types(paths[i], types, sizeof types);
        printf("%-28s %-24s %10.4f %10.4f", paths[i], types, r.result.ppl, r.result.ppl_se_cluster);
        if (i == 0) {
            printf(" %14s %16s\n", "(baseline)", "");
            base = r;
            continue;
        }
        /* paired over windows: d_w = (NLL_cand - NLL_base) per window */
        double sum_d = 0, sum_d2 = 0, tokens = 0;
        int64_t W = r.n_windows < base.n_windows ? r.n_windows : base.n_windows;
        for (int64_t w = 0; w < W; w++) {
            double d = r.windows[w].nll - base.windows[w].nll;
            sum_d += d;
            sum_d2 += d * d;
            tokens += (double)r.windows[w].tokens;
        }
        double mean = sum_d / tokens; /* per token */
        double var = W > 1 ? (sum_d2 - sum_d * sum_d / (double)W) / (double)(W - 1) : NAN;
        double se = sqrt(var * (double)W) / tokens;
        printf(" %+14.6f %16.6f\n", mean, se);
        ppl_run_release(&r);
    }
    ppl_run_release(&base);
    free(ids);
    printf("\nA positive ln PPL ratio is a quality loss; compare it with its paired standard error.\n"
           "Next: 'qgate inspect %s' shows a file in full; 'qgate ppl MODEL --text FILE' scores your own.\n",
           paths[3]);
    return 0;
}

const struct cli_cmd cmd_demo_def = {
    .name = "demo",
    .fn = cmd_demo,
    .summary = "built-in end-to-end example (no downloads): original vs quantized models, perplexity",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};

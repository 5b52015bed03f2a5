/* cmd_sweep — `qgate sweep BASE.gguf --formats F,G,...`: what each format
 * would do to the model, before anyone quantizes it for real.
 *
 * For every format the ladder W (weights), W+A (and every matrix input),
 * W+A+KV (and the KV cache); for the first format a sensitivity scan, one
 * tensor class simulated at a time. All candidates run in lockstep with
 * the baseline in one pass (the default measurement is `gate`'s: text
 * sampled from the baseline), every verdict is stored, and the result is a
 * table ranked by bits per weight with a recommendation: the cheapest
 * configuration that PASSes and which tensor classes cost the most.
 */
#include "backends/gguf.h"
#include "backends/model_info.h"
#include "backends/simfmt.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"
#include "harness/commands.h"
#include "harness/runner.h"
#include "harness/sampled.h"
#include "metrics/verdict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"formats", 'f', CLI_STR, "F,G,...",
     "formats to simulate (e.g. nvfp4,mxfp4,fp8_e4m3,int4:group:128)", 0},
    {"suite", 's', CLI_STR, "FILE", "the suite (default: text sampled from the baseline)", 0},
    {"no-scan", 0, CLI_FLAG, NULL, "skip the one-class-at-a-time sensitivity scan", 0},
    {"per-layer", 0, CLI_FLAG, NULL, "also scan one layer at a time (the first format)", 0},
    {"sample-tokens", 0, CLI_INT, "N", "without --suite: tokens to sample", 0},
    {"ctx", 0, CLI_INT, "N", "without --suite: window length in tokens", 0},
    {"seed", 0, CLI_INT, "N", "bootstrap and sampling seed (default 20261130)", 0},
    {"threads", 't', CLI_INT, "T", "threads per model", 0},
    CLI_OPT_DB,
    {"quiet", 'q', CLI_FLAG, NULL, "only the table and the recommendation", 0},
    CLI_OPT_END,
};

#define MAX_FORMATS 6
static const char *const classes[][2] = {
    {"attn_q", "*attn_q.*"},     {"attn_k", "*attn_k.*"},
    {"attn_v", "*attn_v.*"},     {"attn_output", "*attn_output.*"},
    {"ffn_gate", "*ffn_gate.*"}, {"ffn_up", "*ffn_up.*"},
    {"ffn_down", "*ffn_down.*"}, {"token_embd/output", "token_embd*,output*"}};
#define N_CLASSES 8

struct cand {
    char name[128], spec[4400];
    double bits; /* of the simulated weights; activations and cache are not storage */
    int klass;   /* the class scanned (-1: a ladder step) */
    int layer;   /* the layer scanned (-1: none) */
};

/* The candidates: each format's ladder, then the first format one class at a time. */
static int plan(const char *base, const struct simfmt *f, int nf, int scan, struct cand *c, int *n)
{
    static const char *const steps[] = {"W", "W+A", "W+A+KV"};
    *n = 0;
    for (int i = 0; i < nf; i++) {
        char fn[64];
        simfmt_name(&f[i], fn, sizeof fn);
        for (int s = 0; s < 3; s++, (*n)++) {
            struct cand *x = &c[*n];
            snprintf(x->name, sizeof x->name, "%s %s", fn, steps[s]);
            snprintf(x->spec, sizeof x->spec, "%s?w=%s%s%s%s%s", base, fn, s ? "&a=" : "",
                     s ? fn : "", s > 1 ? "&kv=" : "", s > 1 ? fn : "");
            x->bits = simfmt_bits(&f[i]);
            x->klass = x->layer = -1;
        }
    }
    char fn[64];
    simfmt_name(&f[0], fn, sizeof fn);
    for (int k = 0; scan && k < N_CLASSES; k++, (*n)++) {
        struct cand *x = &c[*n];
        char keep[512] = "";
        for (int j = 0; j < N_CLASSES; j++)
            if (j != k)
                snprintf(keep + strlen(keep), sizeof keep - strlen(keep), "%s%s",
                         keep[0] ? "," : "", classes[j][1]);
        snprintf(x->name, sizeof x->name, "%s only %s", fn, classes[k][0]);
        snprintf(x->spec, sizeof x->spec, "%s?w=%s&keep=%s", base, fn, keep);
        x->bits = NAN;
        x->klass = k;
        x->layer = -1;
    }
    return 0;
}

/* One layer at a time: blk.L simulated, every other tensor kept. */
static int plan_layers(const char *base, const struct simfmt *f, int n_layers, struct cand *c,
                       int *n)
{
    char fn[64];
    simfmt_name(f, fn, sizeof fn);
    if (*n + n_layers + 1 > RUNNER_MAX_MODELS)
        return cmd_usage("--per-layer: %d layers and %d other candidates are more than %d models",
                         n_layers, *n, RUNNER_MAX_MODELS);
    for (int l = 0; l < n_layers; l++, (*n)++) {
        struct cand *x = &c[*n];
        char keep[2048] = "token_embd*,output*";
        for (int j = 0; j < n_layers; j++)
            if (j != l) snprintf(keep + strlen(keep), sizeof keep - strlen(keep), ",blk.%d.*", j);
        snprintf(x->name, sizeof x->name, "%s only blk.%d", fn, l);
        snprintf(x->spec, sizeof x->spec, "%s?w=%s&keep=%s", base, fn, keep);
        x->bits = NAN;
        x->klass = -1;
        x->layer = l;
    }
    return 0;
}

struct result {
    int verdict;
    double ppl_ratio, kld, top1;
};

/* The summary JSON of comparison cid: PPL ratio, KLD and top-1 of its first perplexity task. */
static void read_result(struct store *s, int64_t cid, struct result *r)
{
    int64_t found, run;
    char *sj = NULL, *created = NULL;
    r->ppl_ratio = r->kld = r->top1 = NAN;
    if (store_comparison_get(s, cid, &found, &run, &sj, &created) == QG_OK && sj) {
        cJSON *j = cJSON_Parse(sj);
        const cJSON *t;
        cJSON_ArrayForEach(t, json_get(j, "tasks")) if (isnan(r->ppl_ratio) &&
                                                        !isnan(json_num(t, "ppl_ratio", NAN)))
        {
            r->ppl_ratio = json_num(t, "ppl_ratio", NAN);
            r->kld = json_num(t, "kld_mean", NAN);
            r->top1 = json_num(t, "same_top1", NAN);
        }
        cJSON_Delete(j);
    }
    free(sj);
    free(created);
}

static int by_bits(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    double bx = isnan(x->bits) ? 1e9 : x->bits, by = isnan(y->bits) ? 1e9 : y->bits;
    return (bx > by) - (bx < by);
}

static void print_table(const struct cand *c, const struct result *r, int n)
{
    printf("%-36s %9s %10s %10s %9s  %s\n", "candidate (simulated)", "bits/w", "PPL ratio", "KLD",
           "same top1", "verdict");
    int order[64];
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) /* by bits, ladder before scan, stable */
        for (int j = i; j > 0 && by_bits(&c[order[j - 1]], &c[order[j]]) > 0; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (int k = 0; k < n; k++) {
        int i = order[k];
        char bits[16] = "-";
        if (!isnan(c[i].bits)) snprintf(bits, sizeof bits, "%.2f", c[i].bits);
        printf("%-36s %9s %10.4f %10.4g %8.1f%%  %s\n", cmd_term_cut(c[i].name, 36), bits,
               r[i].ppl_ratio, r[i].kld, 100 * r[i].top1, verdict_name(r[i].verdict));
    }
}

/* The cheapest ladder step that PASSes, and the classes that cost most. */
static void recommend(const struct cand *c, const struct result *r, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (c[i].klass < 0 && r[i].verdict == VERDICT_PASS &&
            (best < 0 || c[i].bits < c[best].bits ||
             (c[i].bits == c[best].bits && strlen(c[i].name) > strlen(c[best].name))))
            best = i;
    if (best >= 0)
        printf("recommendation: %s (%.2f bits per weight) is the cheapest configuration that "
               "PASSes\n",
               c[best].name, c[best].bits);
    else
        printf("recommendation: no simulated configuration PASSes; keep the original precision "
               "or try a finer format\n");
    int worst[N_CLASSES], m = 0;
    for (int i = 0; i < n; i++)
        if (c[i].klass >= 0) worst[m++] = i;
    int lw = -1; /* the layer that costs most */
    for (int i = 0; i < n; i++)
        if (c[i].layer >= 0 && (lw < 0 || r[i].kld > r[lw].kld)) lw = i;
    if (lw >= 0) printf("most sensitive layer: blk.%d (KLD %.3g alone)\n", c[lw].layer, r[lw].kld);
    for (int a = 1; a < m; a++) /* by KLD, largest first */
        for (int b = a; b > 0 && r[worst[b]].kld > r[worst[b - 1]].kld; b--) {
            int t = worst[b];
            worst[b] = worst[b - 1], worst[b - 1] = t;
        }
    if (m)
        printf("most sensitive: %s (KLD %.3g), %s (KLD %.3g): keep these at higher precision "
               "first\n",
               classes[c[worst[0]].klass][0], r[worst[0]].kld,
               m > 1 ? classes[c[worst[1]].klass][0] : "-", m > 1 ? r[worst[1]].kld : NAN);
}

static int parse_formats(const char *list, struct simfmt *f, int *nf)
{
    *nf = 0;
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        char one[64], err[256];
        snprintf(one, sizeof one, "%.*s", (int)(len < 63 ? len : 63), p);
        if (*nf == MAX_FORMATS) return cmd_usage("--formats: at most %d formats", MAX_FORMATS);
        if (simfmt_parse(one, &f[*nf], err, sizeof err)) return cmd_usage("--formats: %s", err);
        (*nf)++;
        p += len + (p[len] == ',');
    }
    return *nf ? 0 : cmd_usage("'qgate sweep' needs --formats F,G,... (e.g. nvfp4,fp8_e4m3)");
}

static int cmd_sweep(const struct cli_args *a)
{
    struct simfmt f[MAX_FORMATS];
    int nf, n, code = parse_formats(cli_str(a, "formats"), f, &nf);
    if (code) return code;
    if (strchr(a->pos[0], '?') || strchr(a->pos[0], '='))
        return cmd_usage("the baseline must be a plain GGUF path, got '%s'", a->pos[0]);
    static struct cand c[RUNNER_MAX_MODELS];
    plan(a->pos[0], f, nf, !cli_flag(a, "no-scan"), c, &n);
    if (cli_flag(a, "per-layer")) {
        struct gguf *g;
        char e2[QG_ERRMSG_MAX];
        if (gguf_open(a->pos[0], &g, e2, sizeof e2)) return cmd_fail(QG_ERR_NOINPUT, e2);
        struct model_info mi;
        model_info_read(g, &mi);
        gguf_close(g);
        if ((code = plan_layers(a->pos[0], &f[0], (int)mi.n_layers, c, &n))) return code;
    }
    struct runner_params p = {.suite_path = cli_str(a, "suite"),
                              .repeats = 2,
                              .threads = (int)cli_int(a, "threads", 0),
                              .quiet = 1,
                              .progress = !cli_flag(a, "quiet"),
                              .n_models = n + 1};
    p.names[0] = "baseline";
    p.specs[0] = a->pos[0];
    for (int i = 0; i < n; i++)
        p.names[i + 1] = c[i].name, p.specs[i + 1] = c[i].spec;
    struct store *s;
    if ((code = cmd_open_store(a, 0, &s))) return code;
    char dir[4096] = "", suite[4200], err[QG_ERRMSG_MAX];
    if (!p.suite_path && !(code = cmd_default_suite(a, s, &p, dir, suite, sizeof suite)))
        p.suite_path = suite;
    char *cmd = cmd_command_line(a);
    p.command = cmd;
    int64_t run_id = 0;
    if (!code && !cli_flag(a, "quiet"))
        printf("qgate sweep: %d simulated candidates against %s in one lockstep pass...\n", n,
               cmd_term(a->pos[0]));
    if (!code) runner_catch_signals();
    int rc = code ? QG_OK : runner_run(s, &p, &run_id, err, sizeof err);
    if (rc) code = cmd_fail(rc, err);
    static struct result r[RUNNER_MAX_MODELS];
    for (int i = 0; i < n && !code; i++) {
        int64_t cid = 0;
        code = cmd_compare_models(s, run_id, "baseline", c[i].name, NULL,
                                  (uint64_t)cli_int(a, "seed", 20261130), CMP_OUT_NONE, cmd,
                                  &r[i].verdict, &cid);
        if (!code) read_result(s, cid, &r[i]);
    }
    if (!code) {
        printf("sweep of %s (run %lld; every verdict stored: 'qgate comparisons --run %lld')\n",
               cmd_term(a->pos[0]), (long long)run_id, (long long)run_id);
        print_table(c, r, n);
        recommend(c, r, n);
    }
    free(cmd);
    store_close(s);
    sampled_suite_remove(dir);
    return code;
}

const struct cli_cmd cmd_sweep_def = {
    .name = "sweep",
    .fn = cmd_sweep,
    .args_usage = "BASE.gguf --formats F,G,...",
    .summary = "what each simulated format (FP8, MX, NVFP4, INT) would do to a model: the "
               "W, W+A, W+A+KV ladder and a per-class sensitivity scan",
    .description = "Formats: fp8_e4m3, fp8_e5m2, int8, int4 (:tensor, :channel, :group:G, "
                   ":asym), mxfp8,\nmxfp6, mxfp4, nvfp4. Every result is simulated (quantize "
                   "then dequantize) and says so.",
    .opts = opts,
    .min_pos = 1,
    .max_pos = 1,
};

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
 * With --per-layer, also one layer at a time and the layer x class grid
 * (one tensor at a time). More candidates than one lockstep pass holds run
 * in several passes, each with the baseline. --report/--md/--json write
 * the sweep's document (REPORT_SWEEP_SCHEMA): the ladder chart and the
 * grid's heatmap in HTML.
 */
#include "backends/backend.h"
#include "backends/simfmt.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"
#include "backends/gguf.h"
#include "backends/hf_model.h"
#include "cli/commands.h"
#include "harness/runner.h"
#include "harness/sampled.h"
#include "harness/suite.h"
#include "metrics/verdict.h"
#include "reports/report.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"formats", 0, CLI_STR, "F,G,...",
     "formats to simulate (e.g. nvfp4,mxfp4,fp8_e4m3,int4:group:128)", 0},
    {"suite", 's', CLI_STR, "FILE", "the suite (default: text sampled from the baseline)", 0},
    {"no-scan", 0, CLI_FLAG, NULL, "skip the one-class-at-a-time sensitivity scan", 0},
    {"per-layer", 0, CLI_FLAG, NULL, "also scan one layer at a time (the first format)", 0},
    {"sample-tokens", 0, CLI_INT, "N", "without --suite: tokens to sample", 0},
    {"ctx", 0, CLI_INT, "N", "without --suite: window length in tokens", 0},
    {"seed", 0, CLI_INT, "N", "bootstrap and sampling seed (default 20261130)", 0},
    {"threads", 't', CLI_INT, "T", "threads per model", 0},
    CLI_OPT_CPU,
    CLI_OPT_DB,
    {"report", 0, CLI_STR, "FILE", "also write the HTML report (ladder chart, heatmap) to FILE", 0},
    {"md", 0, CLI_STR, "FILE", "also write the Markdown report to FILE", 0},
    {"json", 0, CLI_STR, "FILE", "also write the sweep's JSON document to FILE ('-': stdout)", 0},
    {"quiet", 'q', CLI_FLAG, NULL, "only the table and the recommendation", 0},
    CLI_OPT_END,
};

#define MAX_FORMATS 6
/* every family's tensor classes (a model has some): fused attn_qkv
 * (phi3), the routed experts with their router as one class, the shared
 * expert; token_embd/output last */
static const char *const classes[][2] = {{"attn_q", "*attn_q.*"},
                                         {"attn_k", "*attn_k.*"},
                                         {"attn_v", "*attn_v.*"},
                                         {"attn_qkv", "*attn_qkv.*"},
                                         {"attn_output", "*attn_output.*"},
                                         {"ffn_gate", "*ffn_gate.*"},
                                         {"ffn_up", "*ffn_up.*"},
                                         {"ffn_down", "*ffn_down.*"},
                                         {"experts", "*_exps.*,*ffn_gate_inp.*"},
                                         {"shared_expert", "*_shexp.*"},
                                         {"token_embd/output", "token_embd*,output*"}};
#define N_CLASSES 11
/* the classes the baseline holds, as indices into classes[] (the last is
 * token_embd/output); every class until find_classes ran */
static int cls[N_CLASSES] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, n_cls = N_CLASSES;

/* 1 when a tensor named name is in class k */
static int class_has(int k, const char *name)
{
    char pat[128];
    for (const char *p = classes[k][1]; *p;) {
        size_t m = strcspn(p, ",");
        snprintf(pat, sizeof pat, "%.*s", (int)m, p);
        if (fnmatch(pat, name, 0) == 0) return 1;
        p += m + (p[m] == ',');
    }
    return 0;
}

/* Sets cls/n_cls to the classes of path's matrices; QG_OK or the open error. */
static int find_classes(const char *path, char *err, size_t errlen)
{
    struct gguf *g;
    int rc = model_open(path, &g, err, errlen);
    if (rc) return rc;
    n_cls = 0;
    for (int k = 0; k < N_CLASSES; k++) {
        int has = k == N_CLASSES - 1;
        for (int64_t i = 0; !has && i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(g, i);
            has = t->n_dims >= 2 && class_has(k, t->name);
        }
        if (has) cls[n_cls++] = k;
    }
    gguf_close(g);
    return QG_OK;
}
#define MAX_CANDS 1024
#define PER_PASS (RUNNER_MAX_MODELS - 1) /* candidates beside the baseline */

struct cand {
    char name[128], spec[4400];
    double bits; /* of the simulated weights; activations and cache are not storage */
    int fmt;     /* index of the format */
    int step;    /* the ladder step 0 W, 1 W+A, 2 W+A+KV (-1: a scan) */
    int klass;   /* the class scanned (-1: a ladder step or a whole layer) */
    int layer;   /* the layer scanned (-1: none) */
    int64_t run; /* the run that measured it */
};
static const char *const step_names[] = {"W", "W+A", "W+A+KV"};

/* The candidates: each format's ladder, then the first format one class at a time. */
static int plan(const char *base, const struct simfmt *f, int nf, int scan, struct cand *c, int *n)
{
    *n = 0;
    for (int i = 0; i < nf; i++) {
        char fn[64];
        simfmt_name(&f[i], fn, sizeof fn);
        for (int s = 0; s < 3; s++, (*n)++) {
            struct cand *x = &c[*n];
            snprintf(x->name, sizeof x->name, "%s %s", fn, step_names[s]);
            snprintf(x->spec, sizeof x->spec, "%s?w=%s%s%s%s%s", base, fn, s ? "&a=" : "",
                     s ? fn : "", s > 1 ? "&kv=" : "", s > 1 ? fn : "");
            x->bits = simfmt_bits(&f[i]);
            x->fmt = i, x->step = s;
            x->klass = x->layer = -1;
        }
    }
    char fn[64];
    simfmt_name(&f[0], fn, sizeof fn);
    for (int ki = 0; scan && ki < n_cls; ki++, (*n)++) {
        struct cand *x = &c[*n];
        int k = cls[ki];
        char keep[512] = "";
        for (int j = 0; j < N_CLASSES; j++)
            if (j != k)
                snprintf(keep + strlen(keep), sizeof keep - strlen(keep), "%s%s",
                         keep[0] ? "," : "", classes[j][1]);
        snprintf(x->name, sizeof x->name, "%s only %s", fn, classes[k][0]);
        snprintf(x->spec, sizeof x->spec, "%s?w=%s&keep=%s", base, fn, keep);
        x->bits = NAN;
        x->fmt = 0, x->step = -1;
        x->klass = k;
        x->layer = -1;
    }
    return 0;
}

/* One layer at a time (klass -1: blk.L simulated, every other tensor
 * kept), then the grid: in layer L only class k (k < N_CLASSES - 1: the
 * last class, token_embd/output, has no layer). */
static int plan_layers(const char *base, const struct simfmt *f, int n_layers, struct cand *c,
                       int *n)
{
    char fn[64];
    simfmt_name(f, fn, sizeof fn);
    if (*n + (int64_t)n_layers * n_cls > MAX_CANDS)
        return cmd_usage("--per-layer: %d layers need %d candidates, more than %d", n_layers,
                         *n + n_layers * n_cls, MAX_CANDS);
    for (int l = 0; l < n_layers; l++)
        for (int ki = -1; ki < n_cls - 1; ki++, (*n)++) {
            struct cand *x = &c[*n];
            int k = ki < 0 ? -1 : cls[ki];
            char keep[4096] = "token_embd*,output*";
            for (int j = 0; j < n_layers; j++)
                if (j != l)
                    snprintf(keep + strlen(keep), sizeof keep - strlen(keep), ",blk.%d.*", j);
            for (int j = 0; k >= 0 && j < N_CLASSES - 1; j++)
                if (j != k) { /* every pattern of class j, within layer l */
                    char pat[128];
                    for (const char *p = classes[j][1]; *p;) {
                        size_t m = strcspn(p, ",");
                        snprintf(pat, sizeof pat, "%.*s", (int)m, p);
                        snprintf(keep + strlen(keep), sizeof keep - strlen(keep), ",blk.%d.%s", l,
                                 pat);
                        p += m + (p[m] == ',');
                    }
                }
            if (k < 0)
                snprintf(x->name, sizeof x->name, "%s only blk.%d", fn, l);
            else
                snprintf(x->name, sizeof x->name, "%s only blk.%d.%s", fn, l, classes[k][0]);
            snprintf(x->spec, sizeof x->spec, "%s?w=%s&keep=%s", base, fn, keep);
            x->bits = NAN;
            x->fmt = 0, x->step = -1;
            x->klass = k;
            x->layer = l;
        }
    return 0;
}

struct result {
    int verdict;
    double ppl_ratio, kld, top1;
    double need;      /* items_needed / items of that task: how many times the text would decide
                       * (NAN: not estimated) */
    double kld_limit; /* the policy's (0: no KLD gate) */
};

/* How many times the text an INCONCLUSIVE task would need, if its
 * estimates held: the interval shrinks as 1/sqrt(n), so a criterion whose
 * interval [lo, hi] spans its limit decides once the half-width is below
 * the estimate's distance to the limit; the loss's when underpowered
 * (items_needed). The largest over the loss and every gate; NAN when none
 * can be estimated (an estimate on its limit). */
static double text_needed(const cJSON *t)
{
    if (strcmp(json_str(t, "verdict", ""), "INCONCLUSIVE")) return NAN;
    double need = NAN, have = json_num(t, "items", NAN), n = json_num(t, "items_needed", NAN);
    if (n > 0 && have > 0) need = n / have;
    double lo = json_num(t, "ci_low", NAN), hi = json_num(t, "ci_high", NAN),
           d = json_num(t, "delta", NAN), m = json_num(t, "margin", NAN);
    if (lo < m && hi > m && fabs(m - d) > 0) {
        double f = (hi - lo) / 2 / fabs(m - d);
        need = isnan(need) || f * f > need ? f * f : need;
    }
    const cJSON *g;
    cJSON_ArrayForEach(g, json_get(t, "gates"))
    {
        if (strcmp(json_str(g, "verdict", ""), "INCONCLUSIVE")) continue;
        lo = json_num(g, "ci_low", NAN), hi = json_num(g, "ci_high", NAN);
        double v = json_num(g, "value", NAN), lim = json_num(g, "limit", NAN);
        if (!(fabs(lim - v) > 0) || !isfinite(lo) || !isfinite(hi)) continue;
        double f = (hi - lo) / 2 / fabs(lim - v);
        need = isnan(need) || f * f > need ? f * f : need;
    }
    return need;
}

/* The summary JSON of comparison cid: PPL ratio, KLD and top-1 of its first perplexity task. */
static void read_result(struct store *s, int64_t cid, struct result *r)
{
    int64_t found, run;
    char *sj = NULL, *created = NULL;
    r->ppl_ratio = r->kld = r->top1 = r->need = NAN;
    r->kld_limit = 0;
    if (store_comparison_get(s, cid, &found, &run, &sj, &created) == QG_OK && sj) {
        cJSON *j = cJSON_Parse(sj);
        const cJSON *t;
        r->kld_limit = json_num(json_get(j, "policy"), "margin_kld", 0);
        cJSON_ArrayForEach(t, json_get(j, "tasks")) if (isnan(r->ppl_ratio) &&
                                                        !isnan(json_num(t, "ppl_ratio", NAN)))
        {
            r->ppl_ratio = json_num(t, "ppl_ratio", NAN);
            r->kld = json_num(t, "kld_mean", NAN);
            r->top1 = json_num(t, "same_top1", NAN);
            r->need = text_needed(t);
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

static int is_cell(const struct cand *c)
{
    return c->layer >= 0 && c->klass >= 0;
}

/* order[0..n): by bits per weight, ladder before scans, otherwise stable */
static void rank(const struct cand *c, int n, int *order)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && by_bits(&c[order[j - 1]], &c[order[j]]) > 0; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
}

/* The grid's KLD as text: a row per layer, a column per class. */
static void print_grid(const struct simfmt *f, const struct cand *c, const struct result *r, int n)
{
    int layers = 0;
    for (int i = 0; i < n; i++)
        if (is_cell(&c[i]) && c[i].layer + 1 > layers) layers = c[i].layer + 1;
    if (!layers) return;
    char fn[64];
    simfmt_name(f, fn, sizeof fn);
    printf("KLD with one tensor simulated (%s), the rest kept:\n%-8s", fn, "layer");
    for (int ki = 0; ki < n_cls - 1; ki++)
        printf(" %11s", classes[cls[ki]][0]);
    for (int l = 0; l < layers; l++) {
        printf("\nblk.%-4d", l);
        for (int ki = 0; ki < n_cls - 1; ki++) {
            int k = cls[ki];
            double v = NAN;
            for (int i = 0; i < n; i++)
                if (is_cell(&c[i]) && c[i].layer == l && c[i].klass == k) v = r[i].kld;
            printf(" %11.3g", v);
        }
    }
    printf("\n");
}

static void print_table(const struct simfmt *f, const struct cand *c, const struct result *r, int n)
{
    printf("%-36s %9s %10s %10s %9s  %s\n", "candidate (simulated)", "bits/w", "PPL ratio", "KLD",
           "same top1", "verdict");
    static int order[MAX_CANDS];
    rank(c, n, order);
    for (int k = 0; k < n; k++) {
        int i = order[k];
        if (is_cell(&c[i])) continue; /* in the grid below */
        char bits[16] = "-";
        if (!isnan(c[i].bits)) snprintf(bits, sizeof bits, "%.2f", c[i].bits);
        printf("%-36s %9s %10.4f %10.4g %8.1f%%  %s\n", cmd_term_cut(c[i].name, 36), bits,
               r[i].ppl_ratio, r[i].kld, 100 * r[i].top1, verdict_name(r[i].verdict));
    }
    print_grid(f, c, r, n);
}

/* The ladder steps cheaper than bits (all: INFINITY) that were
 * INCONCLUSIVE, each with how much text would decide it: "fp8_e4m3:tensor
 * W+A (8.50 bits): inconclusive at 3000 tokens, about 9000 would decide".
 * tokens: the text's size (0: a suite, counted in its windows). */
static size_t undecided(const struct cand *c, const struct result *r, int n, double bits,
                        int64_t tokens, char *out, size_t len)
{
    size_t o = 0;
    int k = 0;
    static int order[MAX_CANDS];
    rank(c, n, order);
    for (int j = 0; j < n && o < len; j++) {
        int i = order[j];
        if (c[i].step < 0 || r[i].verdict != VERDICT_INCONCLUSIVE || !(c[i].bits < bits)) continue;
        o += (size_t)snprintf(out + o, len - o, "%s%s (%.2f bits): inconclusive", k++ ? "; " : "",
                              c[i].name, c[i].bits);
        if (o < len && tokens > 0 && r[i].need > 1)
            o +=
                (size_t)snprintf(out + o, len - o,
                                 " at %lld tokens, about %.0f would decide if the estimates hold "
                                 "(--sample-tokens)",
                                 (long long)tokens, ceil(r[i].need * (double)tokens / 1000) * 1000);
        else if (o < len && r[i].need > 1)
            o += (size_t)snprintf(out + o, len - o,
                                  ", about %.1f times the text would decide if the estimates hold",
                                  r[i].need);
        else if (o < len && r[i].need > 0) /* an asymmetric interval: the size should do */
            o += (size_t)snprintf(out + o, len - o,
                                  " (by the interval's half-width this much text should decide; "
                                  "its asymmetry did not: a little more text, or another seed)");
        else if (o < len)
            o += (size_t)snprintf(out + o, len - o,
                                  " (an estimate on its limit: more text alone "
                                  "may not decide)");
    }
    return o < len ? o : len;
}

/* The recommendation into rec: the cheapest ladder step that PASSes (and
 * the cheaper ones too small a text could not decide), the layer and the
 * classes that cost most. */
static void recommend(const struct cand *c, const struct result *r, int n, int64_t tokens,
                      char *rec, size_t len)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (c[i].step >= 0 && r[i].verdict == VERDICT_PASS &&
            (best < 0 || c[i].bits < c[best].bits ||
             (c[i].bits == c[best].bits && c[i].step > c[best].step)))
            best = i;
    size_t o = 0;
    char und[600];
    size_t nu = undecided(c, r, n, best >= 0 ? c[best].bits : INFINITY, tokens, und, sizeof und);
    if (best >= 0 && nu)
        o += (size_t)snprintf(rec, len,
                              "%s (%.2f bits per weight) is the cheapest configuration that "
                              "PASSes; cheaper, too little text to tell: %s.",
                              c[best].name, c[best].bits, und);
    else if (best >= 0)
        o += (size_t)snprintf(rec, len,
                              "%s (%.2f bits per weight) is the cheapest configuration "
                              "that PASSes.",
                              c[best].name, c[best].bits);
    else if (nu)
        o += (size_t)snprintf(rec, len,
                              "no simulated configuration PASSes yet, and some are undecided: "
                              "%s.",
                              und);
    else
        o += (size_t)snprintf(rec, len,
                              "no simulated configuration PASSes; keep the original "
                              "precision or try a finer format.");
    if (o >= len) o = len - 1;
    int worst[N_CLASSES], m = 0, lw = -1; /* the classes; the layer that costs most */
    for (int i = 0; i < n; i++) {
        if (c[i].klass >= 0 && c[i].layer < 0) worst[m++] = i;
        if (c[i].layer >= 0 && c[i].klass < 0 && (lw < 0 || r[i].kld > r[lw].kld)) lw = i;
    }
    for (int a = 1; a < m; a++) /* by KLD, largest first */
        for (int b = a; b > 0 && r[worst[b]].kld > r[worst[b - 1]].kld; b--) {
            int t = worst[b];
            worst[b] = worst[b - 1], worst[b - 1] = t;
        }
    if (m && o < len)
        o += (size_t)snprintf(rec + o, len - o,
                              " Most sensitive: %s (KLD %.3g), %s (KLD %.3g): keep these at "
                              "higher precision first.",
                              classes[c[worst[0]].klass][0], r[worst[0]].kld,
                              m > 1 ? classes[c[worst[1]].klass][0] : "-",
                              m > 1 ? r[worst[1]].kld : NAN);
    if (lw >= 0 && o < len)
        snprintf(rec + o, len - o, " Most sensitive layer: blk.%d (KLD %.3g alone).", c[lw].layer,
                 r[lw].kld);
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (isnan(v))
        cJSON_AddNullToObject(o, k);
    else
        cJSON_AddNumberToObject(o, k, v);
}

/* The sweep's document (REPORT_SWEEP_SCHEMA), candidates ranked as the table. */
static cJSON *sweep_doc(const char *base, const struct simfmt *f, int nf, const struct cand *c,
                        const struct result *r, int n, const char *rec)
{
    cJSON *d = cJSON_CreateObject(), *fl = cJSON_AddArrayToObject(d, "formats");
    char now[32], fn[64];
    qg_utc_now(now);
    cJSON_AddStringToObject(d, "schema", REPORT_SWEEP_SCHEMA);
    cJSON_AddStringToObject(d, "qgate_version", QG_VERSION);
    cJSON_AddStringToObject(d, "generated_at", now);
    cJSON_AddStringToObject(d, "baseline", base);
    cJSON_AddBoolToObject(d, "simulated", 1);
    for (int i = 0; i < nf; i++)
        simfmt_name(&f[i], fn, sizeof fn), cJSON_AddItemToArray(fl, cJSON_CreateString(fn));
    cJSON *cl = cJSON_AddArrayToObject(d, "classes"), *runs = cJSON_AddArrayToObject(d, "runs");
    for (int ki = 0; ki < n_cls; ki++)
        cJSON_AddItemToArray(cl, cJSON_CreateString(classes[cls[ki]][0]));
    for (int i = 0; i < n; i++)
        if (!i || c[i].run != c[i - 1].run)
            cJSON_AddItemToArray(runs, cJSON_CreateNumber((double)c[i].run));
    cJSON_AddStringToObject(d, "recommendation", rec);
    for (int i = 0; i < n; i++) /* the policy's KLD limit, drawn on the ladder */
        if (r[i].kld_limit > 0) {
            cJSON_AddNumberToObject(d, "kld_limit", r[i].kld_limit);
            break;
        }
    cJSON *arr = cJSON_AddArrayToObject(d, "candidates");
    static int order[MAX_CANDS];
    rank(c, n, order);
    for (int k = 0; k < n; k++) {
        const struct cand *x = &c[order[k]];
        const struct result *y = &r[order[k]];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", x->name);
        cJSON_AddStringToObject(o, "spec", x->spec);
        simfmt_name(&f[x->fmt], fn, sizeof fn);
        cJSON_AddStringToObject(o, "format", fn);
        if (x->step >= 0) cJSON_AddStringToObject(o, "step", step_names[x->step]);
        if (x->klass >= 0) cJSON_AddStringToObject(o, "class", classes[x->klass][0]);
        if (x->layer >= 0) cJSON_AddNumberToObject(o, "layer", x->layer);
        add_num(o, "bits_per_weight", x->bits);
        add_num(o, "ppl_ratio", y->ppl_ratio);
        add_num(o, "kld", y->kld);
        add_num(o, "same_top1", y->top1);
        cJSON_AddStringToObject(o, "verdict", verdict_name(y->verdict));
        cJSON_AddNumberToObject(o, "run", (double)x->run);
        cJSON_AddItemToArray(arr, o);
    }
    return d;
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

/* Candidates c[0..n) in passes of at most PER_PASS beside the baseline,
 * each compared with it; results in r. 0 or an exit code. */
static int run_passes(const struct cli_args *a, struct store *s, struct runner_params *p,
                      struct cand *c, int n, struct result *r)
{
    char err[QG_ERRMSG_MAX];
    int passes = (n + PER_PASS - 1) / PER_PASS, code = 0;
    for (int k = 0; k < passes && !code; k++) {
        int from = k * PER_PASS, m = n - from < PER_PASS ? n - from : PER_PASS;
        p->n_models = m + 1;
        for (int i = 0; i < m; i++)
            p->names[i + 1] = c[from + i].name, p->specs[i + 1] = c[from + i].spec;
        if (passes > 1 && !cli_flag(a, "quiet"))
            printf("pass %d of %d: %d candidates\n", k + 1, passes, m);
        int64_t run_id = 0;
        int rc = runner_run(s, p, &run_id, err, sizeof err);
        if (rc) return cmd_fail(rc, err);
        for (int i = from; i < from + m && !code; i++) {
            int64_t cid = 0;
            c[i].run = run_id;
            code = cmd_compare_models(s, run_id, "baseline", c[i].name, NULL,
                                      (uint64_t)cli_int(a, "seed", 20261130), CMP_OUT_NONE,
                                      p->command, &r[i].verdict, &cid);
            if (!code) read_result(s, cid, &r[i]);
        }
    }
    return code;
}

/* --report, --md, --json: the sweep's document in each format asked for. */
static int write_outputs(const struct cli_args *a, const char *base, const struct simfmt *f, int nf,
                         const struct cand *c, const struct result *r, int n, const char *rec)
{
    static const char *const kinds[][2] = {{"report", "html"}, {"md", "md"}, {"json", "json"}};
    int code = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds && !code; k++) {
        const char *path = cli_str(a, kinds[k][0]);
        if (!path) continue;
        code = cmd_write_doc(sweep_doc(base, f, nf, c, r, n, rec), kinds[k][1], path, 0);
        if (!code && !cli_flag(a, "quiet") && strcmp(path, "-")) printf("wrote %s\n", path);
    }
    return code;
}

/* The sampled text's size in tokens (0 with --suite), as cmd_default_suite
 * sized it. */
static int64_t sampled_tokens(const struct cli_args *a)
{
    if (cli_str(a, "suite")) return 0;
    struct verdict_policy pol;
    char err[QG_ERRMSG_MAX];
    suite_policy_from_json(NULL, "defaults", &pol, err, sizeof err);
    return cli_int(a, "sample-tokens", sampled_tokens_for(pol.margin_ppl, pol.alpha, pol.beta));
}

/* Plans the candidates into c (*n); 0 or an exit code. */
static int plan_all(const struct cli_args *a, const struct simfmt *f, int nf, struct cand *c,
                    int *n)
{
    *n = 0;
    char e2[QG_ERRMSG_MAX];
    if (find_classes(a->pos[0], e2, sizeof e2)) return cmd_fail(QG_ERR_NOINPUT, e2);
    plan(a->pos[0], f, nf, !cli_flag(a, "no-scan"), c, n);
    if (!cli_flag(a, "per-layer")) return 0;
    struct backend_identity id;
    int rc = backend_identify(a->pos[0], 0, &id, e2, sizeof e2);
    backend_identity_release(&id);
    if (rc) return cmd_fail(QG_ERR_NOINPUT, e2);
    return plan_layers(a->pos[0], &f[0], (int)id.n_layers, c, n);
}

static int cmd_sweep(const struct cli_args *a)
{
    struct simfmt f[MAX_FORMATS];
    int nf, n = 0, code = parse_formats(cli_str(a, "formats"), f, &nf);
    if (code) return code;
    if (strchr(a->pos[0], '?') || strchr(a->pos[0], '='))
        return cmd_usage("the baseline must be a plain GGUF path, got '%s'", a->pos[0]);
    static const char *const outputs[] = {"report", "md", "json", NULL};
    const char *inputs[] = {cli_str(a, "suite") ? cli_str(a, "suite") : "",
                            cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH, a->pos[0]};
    if ((code = cmd_check_outputs(a, outputs, inputs, 3))) return code;
    if ((code = cmd_check_suite_outputs(a, outputs, cli_str(a, "suite")))) return code;
    static struct cand c[MAX_CANDS];
    if ((code = plan_all(a, f, nf, c, &n))) return code;
    struct runner_params p = {.suite_path = cli_str(a, "suite"),
                              .repeats = 2,
                              .threads = (int)cli_int(a, "threads", 0),
                              .quiet = 1,
                              .progress = !cli_flag(a, "quiet"),
                              .n_models = (n < PER_PASS ? n : PER_PASS) + 1};
    p.names[0] = "baseline";
    p.specs[0] = a->pos[0];
    for (int i = 0; i < p.n_models - 1; i++) /* the first pass's, for the default suite */
        p.names[i + 1] = c[i].name, p.specs[i + 1] = c[i].spec;
    struct store *s;
    if ((code = cmd_open_store(a, 0, &s))) return code;
    char dir[4096] = "", suite[4200];
    code = cmd_default_suite(a, s, &p, dir, suite, sizeof suite, 0);
    char *cmd = cmd_command_line(a);
    p.command = cmd;
    if (!code && !cli_flag(a, "quiet"))
        printf("qgate sweep: %d simulated candidates against %s in %d lockstep pass%s...\n", n,
               cmd_term(a->pos[0]), (n + PER_PASS - 1) / PER_PASS, n > PER_PASS ? "es" : "");
    if (!code) runner_catch_signals();
    static struct result r[MAX_CANDS];
    if (!code) code = run_passes(a, s, &p, c, n, r);
    if (!code) {
        char rec[2048];
        recommend(c, r, n, sampled_tokens(a), rec, sizeof rec);
        printf("sweep of %s (run %lld%s; every verdict stored: 'qgate comparisons --run %lld')\n",
               cmd_term(a->pos[0]), (long long)c[0].run, c[n - 1].run != c[0].run ? " and on" : "",
               (long long)c[0].run);
        print_table(f, c, r, n);
        printf("recommendation: %s\n", rec);
        code = write_outputs(a, a->pos[0], f, nf, c, r, n, rec);
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

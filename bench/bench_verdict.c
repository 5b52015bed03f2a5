/* bench_verdict — calibration of the verdict by simulation, on the real
 * verdict function (verdict_task_compute in metrics/verdict.c, what `qgate
 * gate` calls) with rows built in memory.
 *
 * usage: bench_verdict [--reps N] [--seed S] [--quick]
 *
 * Policy: margin 0.01 (accuracy) or 0.01 nats (ln PPL ratio), alpha 0.05,
 * beta 0.2, default gates (none applies: the rows carry no KLD).
 *
 * Binary cells: n items in {10, 20, 50, 100, 400, 2000}; baseline accuracy
 * p in {0.25, 0.5, 0.9}; background discordance q in {0, 1, 5, 20} %: the
 * candidate differs from the baseline on q of the items in both directions
 * equally, plus the planted drop D (P(base right, cand wrong) = q/2 + D,
 * P(base wrong, cand right) = q/2); unclustered, or in clusters of 10
 * items whose discordance is scaled by a per-cluster factor U(1 - h, 1 + h),
 * h = 1 where the rates allow it (the drop concentrated in some clusters,
 * as subjects or passages do).
 * Perplexity cells: W windows of 64 tokens, per-window ln-ratio noise with
 * SD 2 nats per window, plus the planted drop D per token.
 *
 * Per cell, three scenarios: A/A (D = 0): the FAIL rate must be <= alpha;
 * D = margin: the PASS rate (a false PASS) must be <= alpha; D = 2 margin:
 * the FAIL rate (power; shown, no target: a tiny suite cannot have it).
 * Unclustered binary cells are computed exactly (every (b, c) of non-
 * negligible probability judged once): "ok" means at most alpha. Simulated
 * cells: "ok" means at most alpha + 2 Monte Carlo SE.
 */
#include "bench/bench_args.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/util.h"
#include "metrics/stats.h"
#include "metrics/verdict.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng;

static double unif(void)
{
    return rng_unit(&rng);
}

static double gauss(void)
{
    double u = unif(), v = unif();
    return sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(2 * M_PI * v);
}

enum { MARGIN_X100 = 1 };
static const double margin = 0.01, alpha = 0.05;

/* Runs the real verdict on n paired rows: 1 FAIL, 0 PASS, 2 INCONCLUSIVE. */
static int judge(const struct item_row *base, const struct item_row *cand, int n, int metric,
                 uint64_t seed)
{
    struct verdict_params p = {.policy = verdict_default_policy(), .seed = seed};
    p.policy.margin_acc = p.policy.margin_ppl = margin;
    p.policy.alpha = alpha;
    p.policy.bootstrap = 1000;
    p.policy.max_flip_rate =
        0; /* the loss is calibrated here; the flip gate is a limit, not a test */
    struct verdict_input in = {.critical = 1,
                               .name = "sim",
                               .metric = metric,
                               .kind = metric,
                               .base = base,
                               .cand = cand,
                               .n_base = n,
                               .n_cand = n};
    struct verdict_task v;
    char err[QG_ERRMSG_MAX];
    if (verdict_task_compute(&in, &p, &v, err, sizeof err)) {
        fprintf(stderr, "verdict failed: %s\n", err);
        exit(70);
    }
    return v.verdict == VERDICT_FAIL ? 1 : v.verdict == VERDICT_PASS ? 0 : 2;
}

/* One simulated paired binary comparison (see the file comment). */
static int binary_trial(struct item_row *b, struct item_row *c, int n, double acc, double q,
                        double drop, int clustered, uint64_t seed)
{
    /* the cluster factor's spread: U(1 - h, 1 + h), as wide as the cell allows
     * without capping a rate (a capped rate would plant a drop) */
    double h = 1;
    if (q > 0) h = fmin(h, (1 - acc) / (q / 2) - 1);
    if (q / 2 + drop > 0) h = fmin(h, acc / (q / 2 + drop) - 1);
    h = fmax(0, h);
    double u = 1;
    for (int i = 0; i < n; i++) {
        if (clustered && i % 10 == 0) u = 1 - h + 2 * h * unif();
        double p10 = (q / 2 + drop) * u, p01 = q / 2 * u;
        double x = unif();
        b[i] = c[i] = item_row_empty(i);
        b[i].cluster = c[i].cluster = clustered ? i / 10 : -1;
        /* base right, cand wrong | base wrong, cand right | both right | both wrong */
        int both = x >= p10 + p01 && x < p10 + p01 + (acc - p10);
        b[i].correct = x < p10 || both;
        c[i].correct = (x >= p10 && x < p10 + p01) || both;
    }
    return judge(b, c, n, VERDICT_METRIC_ACC, seed);
}

/* Exact P(FAIL) and P(PASS) of an unclustered binary cell: the verdict
 * depends on the items only through b, c and n, so every (b, c) with a
 * multinomial probability above e^-30 is judged once, on rows built for it. */
static void binary_exact(struct item_row *b, struct item_row *c, int n, double acc, double q,
                         double drop, double *p_fail, double *p_pass)
{
    double p10 = q / 2 + drop, p01 = q / 2, rest = 1 - p10 - p01;
    *p_fail = *p_pass = 0;
    for (int nb = 0; nb <= n && (p10 > 0 || nb == 0); nb++)
        for (int nc = 0; nb + nc <= n && (p01 > 0 || nc == 0); nc++) {
            int m = n - nb - nc;
            double lp = lgamma(n + 1.0) - lgamma(nb + 1.0) - lgamma(nc + 1.0) - lgamma(m + 1.0) +
                        (nb ? nb * log(p10) : 0) + (nc ? nc * log(p01) : 0) +
                        (m ? m * log(rest) : 0);
            if (lp < -30) continue;
            for (int i = 0; i < n; i++) {
                b[i] = c[i] = item_row_empty(i);
                b[i].correct = i < nb || i >= nb + nc; /* b: base right only; c: cand right only */
                c[i].correct = i >= nb;
                if (i >= nb + nc) b[i].correct = c[i].correct = i - nb - nc < (int)(acc * m);
            }
            int v = judge(b, c, n, VERDICT_METRIC_ACC, 1);
            *p_fail += v == 1 ? exp(lp) : 0;
            *p_pass += v == 0 ? exp(lp) : 0;
        }
}

/* One simulated perplexity comparison over W windows of T tokens. */
static int ppl_trial(struct item_row *b, struct item_row *c, int W, double drop, uint64_t seed)
{
    const int T = 64;
    for (int w = 0; w < W; w++) {
        b[w] = c[w] = item_row_empty(w);
        b[w].cluster = c[w].cluster = w;
        b[w].n_tokens = c[w].n_tokens = T;
        b[w].nll = 2.0 * T; /* any baseline: the loss is the difference */
        c[w].nll = b[w].nll + T * drop + 2.0 * gauss();
    }
    return judge(b, c, W, VERDICT_METRIC_PPL, seed);
}

struct cell {
    double fail_aa, pass_at_margin, fail_at_2m; /* counts out of reps, or exact probabilities */
    int exact;                                  /* computed, not simulated */
};

/* rate +/- 2 SE is within alpha */
static int ok(double r, int reps)
{
    return r <= alpha + 2 * sqrt(alpha * (1 - alpha) / reps);
}

static int print_cell(const char *label, const struct cell *c, int reps)
{
    /* exact cells: at most alpha; simulated ones: within 2 Monte Carlo SE */
    double d = c->exact ? 1 : reps, f = c->fail_aa / d, p = c->pass_at_margin / d;
    int good = c->exact ? f <= alpha && p <= alpha : ok(f, reps) && ok(p, reps);
    printf("%-40s %8.4f %8.4f %8.4f  %s%s\n", label, f, p, c->fail_at_2m / d,
           good ? "ok" : "NOT MET", c->exact ? " (exact)" : "");
    return good;
}

static const int sizes[] = {10, 20, 50, 100, 400, 2000};

/* One cell exactly (unclustered). */
static void exact_cell(struct item_row *b, struct item_row *c, int n, double acc, double q,
                       struct cell *k)
{
    double f, p;
    binary_exact(b, c, n, acc, q, 0, &f, &p);
    k->fail_aa = f;
    binary_exact(b, c, n, acc, q, margin, &f, &p);
    k->pass_at_margin = p;
    binary_exact(b, c, n, acc, q, 2 * margin, &f, &p);
    k->fail_at_2m = f;
    k->exact = 1;
}

static int binary_cells(int reps, uint64_t seed, int quick)
{
    static const double accs[] = {0.25, 0.5, 0.9}, discs[] = {0, 0.01, 0.05, 0.2};
    struct item_row *b = malloc(2000 * sizeof *b), *c = malloc(2000 * sizeof *c);
    if (!b || !c) exit(71);
    int bad = 0;
    for (int cl = 0; cl < 2; cl++)
        for (int ni = 0; ni < 6; ni++)
            for (int ai = 0; ai < 3; ai++)
                for (int di = 0; di < 4; di++) {
                    if (quick && (ai != 1 || (di != 0 && di != 2))) continue;
                    int n = sizes[ni];
                    double acc = accs[ai], q = discs[di];
                    struct cell k = {0};
                    if (!cl) exact_cell(b, c, n, acc, q, &k);
                    for (int r = 0; cl && r < reps; r++) {
                        uint64_t s = seed + (uint64_t)r;
                        k.fail_aa += binary_trial(b, c, n, acc, q, 0, 1, s) == 1;
                        k.pass_at_margin += binary_trial(b, c, n, acc, q, margin, 1, s) == 0;
                        k.fail_at_2m += binary_trial(b, c, n, acc, q, 2 * margin, 1, s) == 1;
                    }
                    char label[96];
                    snprintf(label, sizeof label, "binary %-9s n %4d acc %.2f disc %2.0f%%",
                             cl ? "clustered" : "items", n, acc, 100 * q);
                    bad += !print_cell(label, &k, reps);
                }
    free(b);
    free(c);
    return bad;
}

static int ppl_cells(int reps, uint64_t seed)
{
    struct item_row *b = malloc(2000 * sizeof *b), *c = malloc(2000 * sizeof *c);
    if (!b || !c) exit(71);
    int bad = 0;
    for (int ni = 0; ni < 6; ni++) {
        struct cell k = {0};
        int R = sizes[ni] >= 400 ? (reps + 3) / 4 : reps; /* the bootstrap is the cost */
        for (int r = 0; r < R; r++) {
            uint64_t s = seed + (uint64_t)r;
            k.fail_aa += ppl_trial(b, c, sizes[ni], 0, s) == 1;
            k.pass_at_margin += ppl_trial(b, c, sizes[ni], margin, s) == 0;
            k.fail_at_2m += ppl_trial(b, c, sizes[ni], 2 * margin, s) == 1;
        }
        char label[96];
        snprintf(label, sizeof label, "perplexity W %4d (%d reps)", sizes[ni], R);
        bad += !print_cell(label, &k, R);
    }
    free(b);
    free(c);
    return bad;
}

int main(int argc, char **argv)
{
    int reps = 1000, quick = 0;
    uint64_t seed = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = bench_int_arg("--reps", argv[++i], 10, 10000000);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = (uint64_t)bench_int_arg("--seed", argv[++i], 0, 1 << 30);
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;

        else
            return fprintf(stderr, "usage: bench_verdict [--reps N] [--seed S] [--quick]\n"), 64;
    }
    rng = seed;
    printf("bench/verdict: margin %.2f, alpha %.2f, %d simulated comparisons per scenario; "
           "ok: rate <= alpha + 2 SE (%.4f)\n",
           margin, alpha, reps, alpha + 2 * sqrt(alpha * (1 - alpha) / reps));
    printf("%-40s %8s %8s %8s\n", "cell", "FAIL A/A", "PASS D=m", "FAIL 2m");
    int bad = binary_cells(reps, seed, quick) + ppl_cells(reps, seed);
    printf("%d cells not met\n", bad);
    return bad ? 1 : 0;
}

/* bench_verdict — calibration of the verdict's decision rule by simulation.
 *
 * usage: bench_verdict [--reps N] [--seed S]
 *
 * Every simulated comparison is judged by the real verdict
 * (verdict_task_compute in metrics/verdict.c, the function `qgate gate`
 * calls), on item rows built in memory.
 *
 * Binary metric (accuracy, exact match), items as units, Newcombe's paired
 * interval at level 1 - 2 alpha, margin delta = 0.01, alpha 0.05, beta 0.2:
 * - A/A: baseline and candidate answer each item correctly with the same
 *   per-item probability, independently (sampling noise only). The rule
 *   must FAIL at most alpha of the time (a drop of 0 is below the margin,
 *   so the actual rate should be far lower).
 * - planted drop: the candidate is 2 delta worse; n is what the MDE formula
 *   asks for: (z_{1-a} + z_{1-b}) SE = delta with SE^2 = (flip rate - D^2)/n.
 *   FAIL should come at least 1 - beta = 80 % of the time.
 * Continuous metric (per-window NLL differences, cluster bootstrap) the same.
 * Prints the observed rates with their Wilson 95 % intervals; a target is
 * met when that interval is consistent with it.
 */
#include "bench/bench_args.h"
#include "core/rng.h"
#include "core/util.h"
#include "core/status.h"
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

/* Runs the real verdict (metrics/verdict.c) on n paired rows. */
static int judge(const struct item_row *base, const struct item_row *cand, int n, int metric,
                 double delta, int draws, uint64_t seed)
{
    struct verdict_params p = {.policy = verdict_default_policy(), .seed = seed};
    p.policy.margin_acc = p.policy.margin_ppl = delta;
    p.policy.bootstrap = draws;
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

/* one simulated paired binary comparison: 1 FAIL, 0 PASS, 2 INCONCLUSIVE.
 * Items are the units, so the decision rests on Newcombe's interval; the
 * bootstrap (200 draws) only informs the SE shown. */
static int binary_trial(int n, double drop, double delta, uint64_t seed)
{
    struct item_row *b = malloc((size_t)n * sizeof *b), *c = malloc((size_t)n * sizeof *c);
    if (!b || !c) exit(71);
    for (int i = 0; i < n; i++) {
        double p = 0.3 + 0.6 * unif(); /* item difficulty */
        b[i] = c[i] = item_row_empty(i);
        b[i].correct = unif() < p;
        c[i].correct = unif() < p - drop;
    }
    int v = judge(b, c, n, VERDICT_METRIC_ACC, delta, 200, seed);
    free(b);
    free(c);
    return v;
}

/* one simulated perplexity comparison over W windows of T tokens */
static int ppl_trial(int W, int T, double drop, double sd_window, double delta, uint64_t seed)
{
    struct item_row *b = malloc((size_t)W * sizeof *b), *c = malloc((size_t)W * sizeof *c);
    if (!b || !c) exit(71);
    for (int w = 0; w < W; w++) {
        b[w] = c[w] = item_row_empty(w);
        b[w].n_tokens = c[w].n_tokens = T;
        b[w].nll = 2.0 * T; /* any baseline: the loss is the difference */
        c[w].nll = b[w].nll + T * drop + sd_window * gauss();
    }
    int v = judge(b, c, W, VERDICT_METRIC_PPL, delta, 2000, seed);
    free(b);
    free(c);
    return v;
}

static void report(const char *name, int n, int reps, int counts[3], double bound, int want_low)
{
    double lo, hi;
    stats_wilson(counts[1], reps, 1.959963984540054, &lo, &hi);
    double rate = (double)counts[1] / reps;
    /* met when the interval is consistent with the target side */
    int ok = want_low ? lo <= bound : hi >= bound;
    (void)rate;
    printf("%-34s %7d %6d %9.4f  [%.4f, %.4f] %8.4f %8.4f  %s %.2f: %s\n", name, n, reps, rate, lo,
           hi, (double)counts[0] / reps, (double)counts[2] / reps, want_low ? "<=" : ">=", bound,
           ok ? "ok" : "NOT MET");
}

int main(int argc, char **argv)
{
    int reps = 2000;
    uint64_t seed = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = bench_int_arg("--reps", argv[++i], 1, 10000000);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = (uint64_t)strtoull(argv[++i], NULL, 10);
        else
            return fprintf(stderr, "usage: bench_verdict [--reps N] [--seed S]\n"), 64;
    }
    if (reps < 10) return fprintf(stderr, "--reps must be >= 10\n"), 64;
    rng = seed;
    const double alpha = 0.05, beta = 0.2, delta = 0.01;
    const double za = stats_norm_ppf(1 - alpha), zb = stats_norm_ppf(1 - beta);
    printf("bench/verdict: alpha %.2f, beta %.2f, margin %.3f, %d simulated comparisons per row\n",
           alpha, beta, delta, reps);
    printf("%-34s %7s %6s %9s  %16s %8s %8s  %s\n", "scenario", "n", "reps", "FAIL", "95% CI",
           "PASS", "INCONC", "target");
    /* binary: the flip rate of a paired design with items of difficulty U(0.3, 0.9) and no drop */
    double flips = 0;
    for (int i = 0; i < 100000; i++) {
        double p = 0.3 + 0.6 * unif();
        flips += 2 * p * (1 - p);
    }
    flips /= 100000;
    double D = 2 * delta;
    int n_bin = (int)ceil((za + zb) * (za + zb) * (flips - D * D) / (delta * delta));
    int counts[3];
    memset(counts, 0, sizeof counts);
    for (int r = 0; r < reps; r++)
        counts[binary_trial(n_bin, 0, delta, seed + (uint64_t)r)]++;
    report("binary A/A (no drop)", n_bin, reps, counts, alpha, 1);
    memset(counts, 0, sizeof counts);
    for (int r = 0; r < reps; r++)
        counts[binary_trial(n_bin, D, delta, seed + (uint64_t)r)]++;
    report("binary, planted drop 2*margin", n_bin, reps, counts, 1 - beta, 0);
    /* perplexity: windows of 64 tokens, per-window NLL-difference SD 2 nats */
    int T = 64;
    double sdw = 2.0;
    int W = (int)ceil((za + zb) * (za + zb) * (sdw / T) * (sdw / T) / (delta * delta));
    if (W < 10) W = 10;
    memset(counts, 0, sizeof counts);
    for (int r = 0; r < reps; r++)
        counts[ppl_trial(W, T, 0, sdw, delta, seed + (uint64_t)r)]++;
    report("perplexity A/A (no drop)", W, reps, counts, alpha, 1);
    memset(counts, 0, sizeof counts);
    for (int r = 0; r < reps; r++)
        counts[ppl_trial(W, T, D, sdw, delta, seed + (uint64_t)r)]++;
    report("perplexity, planted drop 2*margin", W, reps, counts, 1 - beta, 0);
    /* a drop exactly at the margin must not FAIL more than alpha */
    memset(counts, 0, sizeof counts);
    for (int r = 0; r < reps; r++)
        counts[ppl_trial(W, T, delta, sdw, delta, seed + 77 + (uint64_t)r)]++;
    report("perplexity, drop = margin", W, reps, counts, alpha, 1);
    return 0;
}

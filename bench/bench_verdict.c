/* bench_verdict — calibration of the verdict by simulation, on the real
 * verdict function (verdict_task_compute in metrics/verdict.c, what `qgate
 * gate` calls) with rows built in memory.
 *
 * usage: bench_verdict [--reps N] [--seed S] [--quick]
 *                      [--only binary|clusters|flip|churn|ppl|gates]
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
 * Clusters that count (Dirichlet-multinomial): clusters of 4-10 items
 * (HellaSwag-like passages) or 40-60 (MMLU-like subjects), uniform sizes;
 * each cluster draws its own cell probabilities (base right / cand wrong,
 * the reverse, both right, both wrong) from Dirichlet(kappa pi), kappa =
 * 1 / rho - 1, so items share a within-cluster correlation rho in {0.1,
 * 0.3, 0.8}; pi from acc 0.5 with discordance 20 % both ways plus D, or
 * "losses only": no discordance but the drop (every flip a loss).
 * Flip-rate gate: its false PASS at a true flip rate equal to its limit
 * (0.02, both directions, D = 0), items or clusters as above.
 * Rerun churn: 2q of the items are unstable, correct with a fresh
 * probability 1/2 in every run (baseline, its repeat, candidate), so a
 * rerun changes about q of them; stable items drop by D in the candidate;
 * one baseline repeat; the flip gate on (net of churn); the label gives
 * the A/A PASS rate. Perplexity churn: every run adds N(0, (0.03 T)^2) to
 * every window's NLL.
 * Perplexity cells: W in {1, 2, 3, 5, 10, 20, 50, 100, 400} windows of 64
 * tokens; per-window loss T D plus noise of SD 2 nats, Gaussian,
 * exponential (right-skewed) or lognormal (sigma 1, more so), centred.
 * KLD gate: per-window KLD a token, limit 0.02 times a lognormal factor of
 * mean 1 (sigma 0.5 or 1); top-1 gate: per-window agreement Binomial(64,
 * p_w), p_w ~ Beta of mean 0.9 (the limit) and intra-window correlation
 * 0.1; the false PASS at a true value equal to the limit.
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

/* Gamma(a, 1) (Marsaglia and Tsang; a < 1 by the power boost). */
static double gamma_rand(double a)
{
    if (a < 1) return gamma_rand(a + 1) * pow(unif(), 1 / a);
    double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = gauss(), v = 1 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = unif();
        if (u < 1 - 0.0331 * x * x * x * x) return d * v;
        if (log(u > 0 ? u : 1e-300) < 0.5 * x * x + d * (1 - v + log(v))) return d * v;
    }
}

enum { MARGIN_X100 = 1, NMAX = 10000, T = 64 };
static const double margin = 0.01, alpha = 0.05, flip_limit = 0.02;

/* One comparison's rows and the policy's gates. */
struct sim {
    struct item_row *b, *c, *r; /* baseline, candidate, baseline repeat */
    int n, metric, repeat;      /* repeat: r is the baseline's repeat */
    double max_flip, margin_kld, min_top1;
};

/* Runs the real verdict on the rows. */
static void judge(const struct sim *s, uint64_t seed, struct verdict_task *v)
{
    struct verdict_params p = {.policy = verdict_default_policy(), .seed = seed};
    p.policy.margin_acc = p.policy.margin_ppl = margin;
    p.policy.alpha = alpha;
    p.policy.bootstrap = 1000;
    p.policy.max_flip_rate = s->max_flip;
    p.policy.margin_kld = s->margin_kld;
    p.policy.min_top1 = s->min_top1;
    const struct item_row *reps[1] = {s->r};
    int64_t nrep[1] = {s->n};
    struct verdict_input in = {.critical = 1,
                               .name = "sim",
                               .metric = s->metric,
                               .kind = s->metric,
                               .base = s->b,
                               .cand = s->c,
                               .n_base = s->n,
                               .n_cand = s->n,
                               .repeats = reps,
                               .n_repeat = nrep,
                               .n_repeats = s->repeat};
    char err[QG_ERRMSG_MAX];
    if (verdict_task_compute(&in, &p, v, err, sizeof err)) {
        fprintf(stderr, "verdict failed: %s\n", err);
        exit(70);
    }
}

/* The loss alone (the gates off): 1 FAIL, 0 PASS, 2 INCONCLUSIVE. */
static int judge_loss(struct sim *s, uint64_t seed)
{
    struct verdict_task v;
    judge(s, seed, &v);
    return v.verdict == VERDICT_FAIL ? 1 : v.verdict == VERDICT_PASS ? 0 : 2;
}

/* One simulated paired binary comparison (see the file comment). */
static int binary_trial(struct sim *s, double acc, double q, double drop, int clustered,
                        uint64_t seed)
{
    /* the cluster factor's spread: U(1 - h, 1 + h), as wide as the cell allows
     * without capping a rate (a capped rate would plant a drop) */
    double h = 1;
    if (q > 0) h = fmin(h, (1 - acc) / (q / 2) - 1);
    if (q / 2 + drop > 0) h = fmin(h, acc / (q / 2 + drop) - 1);
    h = fmax(0, h);
    double u = 1;
    for (int i = 0; i < s->n; i++) {
        if (clustered && i % 10 == 0) u = 1 - h + 2 * h * unif();
        double p10 = (q / 2 + drop) * u, p01 = q / 2 * u;
        double x = unif();
        s->b[i] = s->c[i] = item_row_empty(i);
        s->b[i].cluster = s->c[i].cluster = clustered ? i / 10 : -1;
        /* base right, cand wrong | base wrong, cand right | both right | both wrong */
        int both = x >= p10 + p01 && x < p10 + p01 + (acc - p10);
        s->b[i].correct = x < p10 || both;
        s->c[i].correct = (x >= p10 && x < p10 + p01) || both;
    }
    return judge_loss(s, seed);
}

/* Exact P(FAIL) and P(PASS) of an unclustered binary cell: the verdict
 * depends on the items only through b, c and n, so every (b, c) with a
 * multinomial probability above e^-30 is judged once, on rows built for it. */
static void binary_exact(struct sim *s, double acc, double q, double drop, double *p_fail,
                         double *p_pass)
{
    double p10 = q / 2 + drop, p01 = q / 2, rest = 1 - p10 - p01;
    int n = s->n;
    *p_fail = *p_pass = 0;
    for (int nb = 0; nb <= n && (p10 > 0 || nb == 0); nb++)
        for (int nc = 0; nb + nc <= n && (p01 > 0 || nc == 0); nc++) {
            int m = n - nb - nc;
            double lp = lgamma(n + 1.0) - lgamma(nb + 1.0) - lgamma(nc + 1.0) - lgamma(m + 1.0) +
                        (nb ? nb * log(p10) : 0) + (nc ? nc * log(p01) : 0) +
                        (m ? m * log(rest) : 0);
            if (lp < -30) continue;
            for (int i = 0; i < n; i++) {
                s->b[i] = s->c[i] = item_row_empty(i);
                s->b[i].correct = i < nb || i >= nb + nc; /* b: base right only; c: cand only */
                s->c[i].correct = i >= nb;
                if (i >= nb + nc) s->b[i].correct = s->c[i].correct = i - nb - nc < (int)(acc * m);
            }
            int v = judge_loss(s, 1);
            *p_fail += v == 1 ? exp(lp) : 0;
            *p_pass += v == 0 ? exp(lp) : 0;
        }
}

/* Dirichlet-multinomial clustered items: cluster sizes uniform in [smin,
 * smax]; each cluster's probabilities of the four cells (10, 01, 11, 00)
 * from Dirichlet(kappa pi), kappa = 1 / rho - 1; rho 0: independent items
 * (each its own unit). */
static void dm_rows(struct sim *s, const double pi[4], double rho, int smin, int smax)
{
    double pg[4] = {pi[0], pi[1], pi[2], pi[3]}, kappa = rho > 0 ? 1 / rho - 1 : 0;
    int left = 0, cl = -1;
    for (int i = 0; i < s->n; i++, left--) {
        if (rho > 0 && left == 0) {
            left = smin + (int)(unif() * (smax - smin + 1));
            cl++;
            double sum = 0;
            for (int k = 0; k < 4; k++)
                sum += pg[k] = pi[k] > 0 ? gamma_rand(kappa * pi[k]) : 0;
            for (int k = 0; k < 4; k++)
                pg[k] /= sum;
        }
        double x = unif();
        int k = x < pg[0] ? 0 : x < pg[0] + pg[1] ? 1 : x < pg[0] + pg[1] + pg[2] ? 2 : 3;
        s->b[i] = s->c[i] = item_row_empty(i);
        s->b[i].cluster = s->c[i].cluster = rho > 0 ? cl : -1;
        s->b[i].correct = k == 0 || k == 2;
        s->c[i].correct = k == 1 || k == 2;
    }
}

/* Rerun churn (file comment): 2q unstable items, a fresh coin per run. */
static void churn_rows(struct sim *s, double q, double drop)
{
    double pd = drop / ((1 - 2 * q) * 0.5); /* P(cand wrong | stable, base right) */
    for (int i = 0; i < s->n; i++) {
        s->b[i] = s->c[i] = s->r[i] = item_row_empty(i);
        if (unif() < 2 * q) {
            s->b[i].correct = unif() < 0.5;
            s->r[i].correct = unif() < 0.5;
            s->c[i].correct = unif() < 0.5;
        } else {
            s->b[i].correct = s->r[i].correct = unif() < 0.5;
            s->c[i].correct = s->b[i].correct && unif() >= pd;
        }
    }
}

/* Standardized noise: 0 Gaussian, 1 exponential, 2 lognormal (sigma 1). */
static double noise(int dist)
{
    if (dist == 0) return gauss();
    if (dist == 1) return -log(1 - unif()) - 1;
    double e = exp(0.5);
    return (exp(gauss()) - e) / sqrt((e * e - 1) * e * e);
}

/* Perplexity windows: loss T drop + 2 nats of noise (dist); rerun noise of
 * SD rr nats a token in every run (baseline, its repeat, candidate). */
static void ppl_rows(struct sim *s, double drop, int dist, double rr)
{
    for (int w = 0; w < s->n; w++) {
        s->b[w] = s->c[w] = s->r[w] = item_row_empty(w);
        s->b[w].cluster = s->c[w].cluster = s->r[w].cluster = w;
        s->b[w].n_tokens = s->c[w].n_tokens = s->r[w].n_tokens = T;
        double truth = 2.0 * T; /* any baseline: the loss is the difference */
        s->b[w].nll = truth + rr * T * gauss();
        s->r[w].nll = truth + rr * T * gauss();
        s->c[w].nll = truth + T * drop + 2.0 * noise(dist) + rr * T * gauss();
    }
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

/* One row of the table; a NaN column does not apply (a gate's cell). */
static int print_cell(const char *label, const struct cell *c, int reps)
{
    /* exact cells: at most alpha; simulated ones: within 2 Monte Carlo SE */
    double d = c->exact ? 1 : reps, f = c->fail_aa / d, p = c->pass_at_margin / d;
    int good = c->exact ? !(f > alpha) && !(p > alpha) : !(f > 0 && !ok(f, reps)) && ok(p, reps);
    char col[3][16];
    const double x[3] = {f, p, c->fail_at_2m / d};
    for (int i = 0; i < 3; i++) {
        if (isnan(x[i]))
            snprintf(col[i], sizeof col[i], "%8s", "-");
        else
            snprintf(col[i], sizeof col[i], "%8.4f", x[i]);
    }
    printf("%-46s %s %s %s  %s%s\n", label, col[0], col[1], col[2], good ? "ok" : "NOT MET",
           c->exact ? " (exact)" : "");
    return good;
}

static const int sizes[] = {10, 20, 50, 100, 400, 2000};

/* One cell exactly (unclustered). */
static void exact_cell(struct sim *s, double acc, double q, struct cell *k)
{
    double f, p;
    binary_exact(s, acc, q, 0, &f, &p);
    k->fail_aa = f;
    binary_exact(s, acc, q, margin, &f, &p);
    k->pass_at_margin = p;
    binary_exact(s, acc, q, 2 * margin, &f, &p);
    k->fail_at_2m = f;
    k->exact = 1;
}

static int binary_cells(struct sim *s, int reps, uint64_t seed, int quick)
{
    static const double accs[] = {0.25, 0.5, 0.9}, discs[] = {0, 0.01, 0.05, 0.2};
    int bad = 0;
    for (int cl = 0; cl < 2; cl++)
        for (int ni = 0; ni < 6; ni++)
            for (int ai = 0; ai < 3; ai++)
                for (int di = 0; di < 4; di++) {
                    if (quick && (ai != 1 || (di != 0 && di != 2))) continue;
                    s->n = sizes[ni];
                    double acc = accs[ai], q = discs[di];
                    struct cell k = {0};
                    if (!cl) exact_cell(s, acc, q, &k);
                    for (int r = 0; cl && r < reps; r++) {
                        uint64_t sd = seed + (uint64_t)r;
                        k.fail_aa += binary_trial(s, acc, q, 0, 1, sd) == 1;
                        k.pass_at_margin += binary_trial(s, acc, q, margin, 1, sd) == 0;
                        k.fail_at_2m += binary_trial(s, acc, q, 2 * margin, 1, sd) == 1;
                    }
                    char label[96];
                    snprintf(label, sizeof label, "binary %-9s n %4d acc %.2f disc %2.0f%%",
                             cl ? "clustered" : "items", s->n, acc, 100 * q);
                    bad += !print_cell(label, &k, reps);
                }
    return bad;
}

/* Dirichlet-multinomial clusters: the loss at D = 0, margin, 2 margin. */
static int dm_cells(struct sim *s, int reps, uint64_t seed)
{
    static const double rhos[] = {0.1, 0.3, 0.8};
    static const int smin[] = {4, 40}, smax[] = {10, 60}, ns[] = {400, 2000};
    int bad = 0;
    for (int losses = 0; losses < 2; losses++)
        for (int si = 0; si < 2; si++)
            for (int ri = 0; ri < 3; ri++)
                for (int ni = 0; ni < 2; ni++) {
                    struct cell k = {0};
                    s->n = ns[ni];
                    for (int r = 0; r < reps; r++)
                        for (int m = 0; m < 3; m++) {
                            double d = m * margin, q = losses ? 0 : 0.2;
                            double pi[4] = {q / 2 + d, q / 2, 0.5 - q / 2 - d, 0.5 - q / 2};
                            dm_rows(s, pi, rhos[ri], smin[si], smax[si]);
                            int v = judge_loss(s, seed + (uint64_t)r);
                            k.fail_aa += m == 0 && v == 1;
                            k.pass_at_margin += m == 1 && v == 0;
                            k.fail_at_2m += m == 2 && v == 1;
                        }
                    if (losses) k.fail_aa = NAN; /* no flips at all: nothing to test */
                    char label[96];
                    snprintf(label, sizeof label, "clusters %2d-%2d rho %.1f n %4d %s", smin[si],
                             smax[si], rhos[ri], s->n, losses ? "losses only" : "disc 20%");
                    bad += !print_cell(label, &k, reps);
                }
    return bad;
}

/* The flip-rate gate at a true flip rate equal to its limit. */
static int flip_cells(struct sim *s, int reps, uint64_t seed)
{
    static const double rhos[] = {0, 0.3, 0.8};
    static const int smin[] = {4, 40}, smax[] = {10, 60}, ns[] = {400, 2000, 10000};
    int bad = 0;
    s->max_flip = flip_limit;
    for (int ri = 0; ri < 3; ri++)
        for (int si = 0; si < (ri ? 2 : 1); si++)
            for (int ni = 0; ni < 3; ni++) {
                struct cell k = {.fail_aa = NAN, .fail_at_2m = NAN};
                s->n = ns[ni];
                double pi[4] = {flip_limit / 2, flip_limit / 2, 0.5 - flip_limit / 2,
                                0.5 - flip_limit / 2};
                for (int r = 0; r < reps; r++) {
                    dm_rows(s, pi, rhos[ri], smin[si], smax[si]);
                    struct verdict_task v;
                    judge(s, seed + (uint64_t)r, &v);
                    k.pass_at_margin += v.gates[0].verdict == VERDICT_PASS;
                }
                char label[96];
                if (ri)
                    snprintf(label, sizeof label, "flip gate clusters %2d-%2d rho %.1f n %5d",
                             smin[si], smax[si], rhos[ri], s->n);
                else
                    snprintf(label, sizeof label, "flip gate items n %5d", s->n);
                bad += !print_cell(label, &k, reps);
            }
    s->max_flip = 0;
    return bad;
}

/* Rerun churn: binary with the flip gate on; perplexity. A/A: the whole
 * verdict's FAIL; D = margin, 2 margin: the loss's. */
static int churn_cells(struct sim *s, int reps, uint64_t seed)
{
    static const double qs[] = {0, 0.05, 0.15};
    static const int ns[] = {1000, 10000}, ws[] = {20, 100, 400};
    int bad = 0;
    s->repeat = 1;
    for (int ppl = 0; ppl < 2; ppl++)
        for (int qi = 0; qi < (ppl ? 1 : 3); qi++)
            for (int ni = 0; ni < (ppl ? 3 : 2); ni++) {
                struct cell k = {0};
                s->n = ppl ? ws[ni] : ns[ni];
                s->metric = ppl ? VERDICT_METRIC_PPL : VERDICT_METRIC_ACC;
                s->max_flip = ppl ? 0 : flip_limit;
                int R = reps, pass_aa = 0;
                for (int r = 0; r < R; r++)
                    for (int m = 0; m < 3; m++) {
                        if (ppl)
                            ppl_rows(s, m * margin, 0, 0.03);
                        else
                            churn_rows(s, qs[qi], m * margin);
                        struct verdict_task v;
                        judge(s, seed + (uint64_t)r, &v);
                        k.fail_aa += m == 0 && v.verdict == VERDICT_FAIL;
                        pass_aa += m == 0 && v.verdict == VERDICT_PASS;
                        k.pass_at_margin += m == 1 && v.loss_verdict == VERDICT_PASS;
                        k.fail_at_2m += m == 2 && v.loss_verdict == VERDICT_FAIL;
                    }
                char label[96];
                if (ppl)
                    snprintf(label, sizeof label, "churn ppl rerun SD 0.03 W %3d (A/A PASS %.2f)",
                             s->n, (double)pass_aa / R);
                else
                    snprintf(label, sizeof label, "churn q %.2f n %5d flip gate (A/A PASS %.2f)",
                             qs[qi], s->n, (double)pass_aa / R);
                bad += !print_cell(label, &k, R);
            }
    s->repeat = 0, s->max_flip = 0, s->metric = VERDICT_METRIC_ACC;
    return bad;
}

static const int windows[] = {1, 2, 3, 5, 10, 20, 50, 100, 400};

static int ppl_cells(struct sim *s, int reps, uint64_t seed)
{
    static const char *const dists[] = {"gaussian", "exponential", "lognormal"};
    int bad = 0;
    s->metric = VERDICT_METRIC_PPL;
    for (int di = 0; di < 3; di++)
        for (int wi = 0; wi < 9; wi++) {
            struct cell k = {0};
            s->n = windows[wi];
            int R = reps;
            for (int r = 0; r < R; r++)
                for (int m = 0; m < 3; m++) {
                    ppl_rows(s, m * margin, di, 0);
                    int v = judge_loss(s, seed + (uint64_t)r);
                    k.fail_aa += m == 0 && v == 1;
                    k.pass_at_margin += m == 1 && v == 0;
                    k.fail_at_2m += m == 2 && v == 1;
                }
            char label[96];
            snprintf(label, sizeof label, "perplexity %-11s W %3d (%d reps)", dists[di], s->n, R);
            bad += !print_cell(label, &k, R);
        }
    s->metric = VERDICT_METRIC_ACC;
    return bad;
}

/* The candidate's windows for the KLD (sigma > 0: lognormal spread) or the
 * top-1 gate (sigma 0: beta-binomial agreement), true value at the limit. */
static void gate_rows(struct sim *s, double sigma)
{
    for (int w = 0; w < s->n; w++) {
        s->b[w] = s->c[w] = item_row_empty(w);
        s->b[w].n_tokens = s->c[w].n_tokens = T;
        s->b[w].nll = s->c[w].nll = 2.0 * T;
        if (sigma > 0) {
            s->c[w].kld_sum = T * 0.02 * exp(sigma * gauss() - sigma * sigma / 2);
        } else {
            double a = gamma_rand(8.1), pw = a / (a + gamma_rand(0.9)), agree = 0;
            for (int t = 0; t < T; t++)
                agree += unif() < pw;
            s->c[w].top1_agree = agree;
        }
    }
}

/* The KLD and top-1 gates' false PASS at a true value equal to the limit. */
static int gate_cells(struct sim *s, int reps, uint64_t seed)
{
    static const double sigmas[] = {0.5, 1, 0};
    int bad = 0;
    s->metric = VERDICT_METRIC_PPL;
    for (int gi = 0; gi < 3; gi++)
        for (int wi = 1; wi < 9; wi++) {
            struct cell k = {.fail_aa = NAN, .fail_at_2m = NAN};
            s->n = windows[wi];
            s->margin_kld = gi < 2 ? 0.02 : 0;
            s->min_top1 = gi < 2 ? 0 : 0.9;
            int R = reps;
            for (int r = 0; r < R; r++) {
                gate_rows(s, sigmas[gi]);
                struct verdict_task v;
                judge(s, seed + (uint64_t)r, &v);
                k.pass_at_margin += v.gates[0].verdict == VERDICT_PASS;
            }
            char label[96];
            if (gi < 2)
                snprintf(label, sizeof label, "kld gate sigma %.1f W %3d", sigmas[gi], s->n);
            else
                snprintf(label, sizeof label, "top1 gate beta-binomial W %3d", s->n);
            bad += !print_cell(label, &k, R);
        }
    s->metric = VERDICT_METRIC_ACC, s->margin_kld = s->min_top1 = 0;
    return bad;
}

static const char sections[] = "binary|clusters|flip|churn|ppl|gates";

int main(int argc, char **argv)
{
    int reps = 1000, quick = 0;
    const char *only = "";
    uint64_t seed = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = bench_int_arg("--reps", argv[++i], 10, 10000000);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = (uint64_t)bench_int_arg("--seed", argv[++i], 0, 1 << 30);
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc && strstr(sections, argv[i + 1]))
            only = argv[++i];
        else
            return fprintf(stderr,
                           "usage: bench_verdict [--reps N] [--seed S] [--quick] "
                           "[--only %s]\n",
                           sections),
                   64;
    }
    rng = seed;
    struct sim s = {.b = malloc(NMAX * sizeof *s.b),
                    .c = malloc(NMAX * sizeof *s.c),
                    .r = malloc(NMAX * sizeof *s.r),
                    .metric = VERDICT_METRIC_ACC};
    if (!s.b || !s.c || !s.r) return 71;
    printf("bench/verdict: margin %.2f, alpha %.2f, %d simulated comparisons per scenario; "
           "ok: rate <= alpha + 2 SE (%.4f)\n",
           margin, alpha, reps, alpha + 2 * sqrt(alpha * (1 - alpha) / reps));
    printf("%-46s %8s %8s %8s\n", "cell", "FAIL A/A", "PASS D=m", "FAIL 2m");
    int bad = 0;
#define RUN(name, call)                                                                            \
    if (!*only || !strcmp(only, name)) bad += call
    RUN("binary", binary_cells(&s, reps, seed, quick));
    RUN("clusters", dm_cells(&s, reps, seed));
    RUN("flip", flip_cells(&s, reps, seed));
    RUN("churn", churn_cells(&s, reps, seed));
    RUN("ppl", ppl_cells(&s, reps, seed));
    RUN("gates", gate_cells(&s, reps, seed));
#undef RUN
    printf("%d cells not met\n", bad);
    free(s.b), free(s.c), free(s.r);
    return bad ? 1 : 0;
}

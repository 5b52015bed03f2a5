/* test_stats — statistics against independently derived values. */
#include "metrics/stats.h"
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>

TEST(stats_normal, unit)
{
    /* standard tables / high-precision references */
    ASSERT_NEAR(stats_norm_ppf(0.95), 1.6448536269514722, 1e-12);
    ASSERT_NEAR(stats_norm_ppf(0.975), 1.959963984540054, 1e-12);
    ASSERT_NEAR(stats_norm_ppf(0.8), 0.8416212335729143, 1e-12);
    ASSERT_NEAR(stats_norm_ppf(0.5), 0.0, 1e-15);
    ASSERT_NEAR(stats_norm_ppf(1e-10), -6.361340902404056, 1e-9);
    for (double p = 0.001; p < 1; p += 0.0373)
        ASSERT_NEAR(stats_norm_cdf(stats_norm_ppf(p)), p, 1e-13);
    ASSERT_NEAR(stats_norm_cdf(1.96), 0.9750021048517795, 1e-14);
    return 0;
}

TEST(stats_wilson_binomial_mcnemar, unit)
{
    /* Wilson, k=8 n=10 at 95%: the published 0.4902 .. 0.9433; to 1e-12 the
     * values of the textbook formula evaluated independently in Python:
     * c = (p + z^2/2n)/(1 + z^2/n), h = z/(1 + z^2/n) sqrt(p(1-p)/n + z^2/4n^2) */
    double lo, hi;
    stats_wilson(8, 10, 1.959963984540054, &lo, &hi);
    ASSERT_NEAR(lo, 0.4901624715366418, 1e-12);
    ASSERT_NEAR(hi, 0.9433178485456248, 1e-12);
    ASSERT_NEAR(lo, 0.4902, 5e-5);
    ASSERT_NEAR(hi, 0.9433, 5e-5);
    stats_wilson(0, 20, 1.959963984540054, &lo, &hi);
    ASSERT_NEAR(lo, 0.0, 1e-15);
    ASSERT_NEAR(hi, 3.841459 / (20 + 3.841459), 1e-6); /* k=0: z^2/(n+z^2) */
    /* binomial: P(X<=1; 10, 1/2) = (1 + 10)/1024; P(X<=5; 10, 1/2) = 638/1024 */
    ASSERT_NEAR(stats_binom_cdf(1, 10, 0.5), 11.0 / 1024, 1e-15);
    ASSERT_NEAR(stats_binom_cdf(5, 10, 0.5), 638.0 / 1024, 1e-14);
    ASSERT_NEAR(stats_binom_cdf(2, 5, 0.2), 0.94208, 1e-12); /* 0.32768 + 0.4096 + 0.2048 */
    ASSERT_NEAR(stats_binom_cdf(500, 1000, 0.5), 0.5126125090891,
                1e-9); /* symmetric: (1 + P(X=500))/2 */
    /* McNemar: b=1, c=9 -> 2 * 11/1024; b=c -> 1; none -> 1 */
    ASSERT_NEAR(stats_mcnemar(1, 9), 22.0 / 1024, 1e-15);
    ASSERT_NEAR(stats_mcnemar(9, 1), 22.0 / 1024, 1e-15);
    ASSERT_NEAR(stats_mcnemar(5, 5), 1.0, 0);
    ASSERT_NEAR(stats_mcnemar(0, 0), 1.0, 0);
    ASSERT_NEAR(stats_mcnemar(0, 6), 2.0 / 64, 1e-15);
    return 0;
}

TEST(stats_holm_adjust, unit)
{
    /* sorted 0.01, 0.03, 0.04 -> x3, x2, x1 = 0.03, 0.06, 0.04 -> monotone 0.03, 0.06, 0.06 */
    double p[3] = {0.01, 0.04, 0.03}, adj[3];
    stats_holm(p, 3, adj);
    ASSERT_NEAR(adj[0], 0.03, 1e-15);
    ASSERT_NEAR(adj[1], 0.06, 1e-15);
    ASSERT_NEAR(adj[2], 0.06, 1e-15);
    double q[2] = {0.6, 0.7};
    stats_holm(q, 2, q);
    ASSERT_NEAR(q[0], 1.0, 0);
    ASSERT_NEAR(q[1], 1.0, 0);
    return 0;
}

TEST(stats_bootstrap, unit)
{
    /* the mean of n Bernoulli(0.3) units: bootstrap SE ~ sqrt(p(1-p)/n)
     * (closed form of the plug-in bootstrap: sqrt(phat(1-phat)/n)) */
    enum { N = 400 };
    double loss[N], size[N];
    for (int i = 0; i < N; i++)
        loss[i] = i % 10 < 3, size[i] = 1;
    struct boot_result r;
    ASSERT_OK(stats_bootstrap_ratio(loss, size, N, 20000, 42, 0.90, &r));
    double se = sqrt(0.3 * 0.7 / N);
    ASSERT_NEAR(r.estimate, 0.3, 1e-15);
    ASSERT_NEAR(r.se, se, 0.03 * se);
    ASSERT_NEAR(r.hi - r.lo, 2 * 1.6448536 * se, 0.06 * 2 * 1.6448536 * se);
    ASSERT(r.lo < 0.3 && r.hi > 0.3);
    /* deterministic for a seed, different for another */
    struct boot_result r2, r3;
    ASSERT_OK(stats_bootstrap_ratio(loss, size, N, 20000, 42, 0.90, &r2));
    ASSERT_OK(stats_bootstrap_ratio(loss, size, N, 20000, 43, 0.90, &r3));
    ASSERT_NEAR(r2.lo, r.lo, 0);
    ASSERT(r3.se != r.se); /* (percentiles of 0/1 data sit on a 1/400 grid) */
    /* identical units: no spread */
    for (int i = 0; i < N; i++)
        loss[i] = 2.5, size[i] = 5;
    ASSERT_OK(stats_bootstrap_ratio(loss, size, N, 1000, 1, 0.90, &r));
    ASSERT_NEAR(r.lo, 0.5, 1e-12);
    ASSERT_NEAR(r.hi, 0.5, 1e-12);
    ASSERT_NEAR(r.se, 0.0, 1e-12);
    ASSERT_EQ(stats_bootstrap_ratio(loss, size, 0, 1000, 1, 0.9, &r), -1);
    return 0;
}

TEST(stats_newcombe_interval, unit)
{
    /* Newcombe (1998b) method 10 on a=36 b=12 c=2 d=0 (n=50), 95%: the values of
     * the published formula L = D - sqrt((p1-l1)^2 - 2 phi (p1-l1)(u2-p2) + (u2-p2)^2),
     * U likewise, evaluated independently in Python (Wilson limits l, u; phi =
     * (ad - bc)/sqrt((a+b)(c+d)(a+c)(b+d))) */
    double lo, hi;
    stats_newcombe_paired(36, 12, 2, 0, 1.959963984540054, &lo, &hi);
    ASSERT_NEAR(lo, 0.05692958400323869, 1e-12);
    ASSERT_NEAR(hi, 0.3404276029749407, 1e-12);
    /* no discordant pairs in 20 items: not a point, and wider than 1 point */
    stats_newcombe_paired(6, 0, 0, 14, 1.6448536269514722, &lo, &hi);
    ASSERT(lo < -0.01 && hi > 0.01);
    /* 10,000 items, none discordant: the interval is narrow */
    stats_newcombe_paired(3000, 0, 0, 7000, 1.6448536269514722, &lo, &hi);
    ASSERT(hi < 0.002 && lo > -0.002);
    return 0;
}

/* Restricted log-likelihood of the paired 2x2 table at D, maximised over
 * p21 numerically (golden section): an independent check of the closed
 * form the interval uses. */
static double restricted_p21(double a, double b, double c, double d, double D)
{
    double lo = fmax(0, -D) + 1e-15, hi = (1 - D) / 2 - 1e-15;
    double g = (sqrt(5.0) - 1) / 2;
    for (int it = 0; it < 300; it++) {
        double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
        double f1 = b * log(x1 + D) + c * log(x1) + (a + d) * log(1 - 2 * x1 - D);
        double f2 = b * log(x2 + D) + c * log(x2) + (a + d) * log(1 - 2 * x2 - D);
        if (!(f1 == f1)) f1 = -INFINITY;
        if (!(f2 == f2)) f2 = -INFINITY;
        if (f1 < f2)
            lo = x1;
        else
            hi = x2;
    }
    return (lo + hi) / 2;
}

TEST(stats_tango_interval, slow)
{
    const double z = 1.6448536269514722;
    /* b = c = 0: the root of (nD - 1/2)^2 = z^2 n D (1 - D), never a point */
    for (int n = 10; n <= 2000; n *= 10) {
        double A = (double)n * n + z * z * n, B = n + z * z * n;
        double lo, hi, w = (B + sqrt(B * B - A)) / (2 * A);
        stats_tango_paired(0, 0, n, z, &lo, &hi);
        ASSERT_NEAR(hi, w, 1e-9);
        ASSERT_NEAR(lo, -w, 1e-9);
    }
    /* against a brute-force inversion of the score test with a numerically
     * maximised restricted likelihood */
    const int64_t cases[][4] = {{36, 12, 2, 0}, {300, 3, 0, 97}, {10, 5, 5, 30}, {1, 0, 9, 0}};
    for (int k = 0; k < 4; k++) {
        double a = (double)cases[k][0], b = (double)cases[k][1], c = (double)cases[k][2],
               d = (double)cases[k][3], n = a + b + c + d, lo, hi;
        stats_tango_paired(cases[k][1], cases[k][2], (int64_t)n, z, &lo, &hi);
        ASSERT(lo <= (b - c) / n && (b - c) / n <= hi);
        double bf_lo = 2, bf_hi = -2;
        for (int i = 1; i < 20000; i++) {
            double D = -1 + 2.0 * i / 20000;
            double q = restricted_p21(a, b, c, d, D);
            double num = b - c - n * D;
            num = num > 0 ? fmax(0, num - 0.5) : fmin(0, num + 0.5);
            double zz = num / sqrt(n * (2 * q + D * (1 - D)));
            if (fabs(zz) <= z) bf_lo = fmin(bf_lo, D), bf_hi = fmax(bf_hi, D);
        }
        if (!(fabs(lo - bf_lo) < 2e-4 && fabs(hi - bf_hi) < 2e-4))
            T_FAIL_("case %d: [%.6f, %.6f] vs brute force [%.6f, %.6f]", k, lo, hi, bf_lo, bf_hi);
    }
    /* wider than the collapsing intervals for few discordant pairs */
    double lo, hi, nlo, nhi;
    stats_tango_paired(0, 0, 10, z, &lo, &hi);
    stats_newcombe_paired(6, 0, 0, 4, z, &nlo, &nhi);
    ASSERT(hi > 0.2 && hi > 4 * nhi); /* Newcombe without continuity correction: +/- 0.043 */
    return 0;
}

TEST(stats_t_quantile_matches_scipy, unit)
{
    /* scipy.stats.t.ppf(p, df), scipy 1.14 (float64) */
    static const double ref[][3] = {
        {0.95, 3, 2.3533634348018233},      {0.975, 3, 3.1824463052837078},
        {1 - 1e-12, 3, 10331.184426046091}, {0.95, 4, 2.1318467863266495},
        {0.975, 4, 2.7764451051977934},     {0.95, 1999, 1.6456162481872625},
        {0.95, 2001, 1.6456154855920275},
    };
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        double t = stats_t_ppf(ref[i][0], ref[i][1]);
        ASSERT_NEAR(t, ref[i][2], 1e-10 * fmax(1, fabs(ref[i][2])));
        ASSERT_NEAR(stats_t_ppf(1 - ref[i][0], ref[i][1]), -t, 1e-10 * fmax(1, fabs(t)));
    }
    /* exact forms: df 1 (Cauchy) and 2 */
    ASSERT_NEAR(stats_t_ppf(0.95, 1), 6.313751514675043, 1e-12);
    ASSERT_NEAR(stats_t_ppf(0.95, 2), 2.919985580353725, 1e-12);
    for (double df = 1; df < 5000; df *= 1.7)
        for (double p = 0.01; p < 1; p += 0.07)
            ASSERT_NEAR(stats_t_cdf(stats_t_ppf(p, df), df), p, 1e-12);
    ASSERT(isnan(stats_t_ppf(0.5, 0)));
    return 0;
}

TEST(stats_poisson_upper_garwood, unit)
{
    /* k = 0: -ln alpha exactly; k = 5 at 95 %: chi2.ppf(0.95, 12) / 2 (P(X <= 5) = 0.05 there,
     * checked by summing) */
    ASSERT_NEAR(stats_poisson_upper(0, 0.05), -log(0.05), 1e-9);
    ASSERT_NEAR(stats_poisson_upper(5, 0.05), 10.513034908741535, 1e-8);
    ASSERT(isnan(stats_poisson_upper(-1, 0.05)));
    return 0;
}

TEST(stats_ratio_interval_declines_what_it_cannot_bound, unit)
{
    double loss[400], size[400];
    struct boot_result r;
    for (int i = 0; i < 400; i++)
        size[i] = 64, loss[i] = (i % 7) - 3.0; /* symmetric, mean 0 */
    /* too few units: 1, the t interval alone (NaN for one unit) */
    ASSERT_EQ(stats_ratio_interval(loss, size, 1, 1000, 1, 0.9, &r), 1);
    ASSERT(isnan(r.lo) && isnan(r.hi));
    ASSERT_EQ(stats_ratio_interval(loss, size, STATS_RATIO_MIN_UNITS - 1, 1000, 1, 0.9, &r), 1);
    ASSERT(isfinite(r.lo) && isfinite(r.hi));
    /* enough symmetric units: the interval, at least as wide as t_{n-1} SE */
    ASSERT_EQ(stats_ratio_interval(loss, size, 70, 2000, 1, 0.9, &r), 0);
    double tq = stats_t_ppf(0.95, 69);
    ASSERT(r.hi - r.estimate >= tq * r.se - 1e-15 && r.estimate - r.lo >= tq * r.se - 1e-15);
    /* one huge unit among 40: most resamples miss it and have no spread,
     * the bootstrap-t quantile is infinite: declined */
    for (int i = 0; i < 40; i++)
        loss[i] = i == 0 ? 400 : 1;
    ASSERT_EQ(stats_ratio_interval(loss, size, 40, 1000, 1, 0.9, &r), 1);
    ASSERT(r.skew > 5);
    /* right-skewed units (g1 ~ 2.7): 40 units < 40 g1^2: widened by 1 + g1
     * beyond the t interval; 15 units: declined */
    for (int i = 0; i < 40; i++)
        loss[i] = i % 10 == 0 ? 20 + i % 3 : i % 3;
    ASSERT_EQ(stats_ratio_interval(loss, size, 40, 2000, 1, 0.9, &r), 0);
    ASSERT(r.skew > 2 && 40 < STATS_RATIO_SKEW_UNITS * r.skew * r.skew);
    tq = stats_t_ppf(0.95, 39);
    ASSERT(r.hi - r.estimate >= (1 + r.skew) * tq * r.se * (1 - 1e-12));
    ASSERT_EQ(stats_ratio_interval(loss, size, 15, 2000, 1, 0.9, &r), 1);
    ASSERT_EQ(stats_ratio_interval(loss, size, 0, 1000, 1, 0.9, &r), -1);
    return 0;
}

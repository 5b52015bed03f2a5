/* stats — the statistics behind the verdict.
 *
 * Normal distribution, Wilson score interval, exact binomial CDF, exact
 * McNemar test, Holm adjustment, Student's t, and intervals of a ratio
 * estimator (sum of unit losses / sum of unit sizes): the percentile and
 * the studentized bootstrap over units, all in double.
 */
#ifndef QG_STATS_H
#define QG_STATS_H

#include <stdint.h>

double stats_norm_cdf(double x);
/* Quantile of the standard normal (Acklam's rational approximation refined
 * by one Halley step: |error| < 1e-14 for p in (1e-300, 1 - 1e-16)). */
double stats_norm_ppf(double p);

/* Regularized incomplete beta I_x(a, b), a, b > 0, x in [0, 1] (Lentz's
 * continued fraction; relative error ~1e-14). NaN outside the domain. */
double stats_ibeta(double x, double a, double b);

/* CDF of Student's t with df > 0 degrees of freedom (from stats_ibeta). */
double stats_t_cdf(double t, double df);

/* Quantile of Student's t with df > 0 degrees of freedom: exact for df 1
 * and 2; else the Cornish-Fisher start refined by Newton steps on
 * stats_t_cdf (|error| < 1e-10 for p in [1e-12, 1 - 1e-12], checked
 * against scipy in tests/test_stats.c); the Cornish-Fisher expansion
 * alone for df > 2000, where its error is below 1e-12. */
double stats_t_ppf(double p, double df);

/* Wilson score interval for k successes in n trials at normal quantile z. */
void stats_wilson(int64_t k, int64_t n, double z, double *lo, double *hi);

/* The same for an effective count and size (k / deff of n / deff, for
 * clustered items: Kish's effective sample size); [0, 1] when n <= 0. */
void stats_wilson_eff(double k, double n, double z, double *lo, double *hi);

/* P(X <= k) for X ~ Binomial(n, p), exact (summed in log space). */
double stats_binom_cdf(int64_t k, int64_t n, double p);

/* The exact one-sided upper confidence bound of a Poisson mean from k
 * events: the lambda with P(X <= k) = alpha (Garwood); NaN for bad
 * arguments. */
double stats_poisson_upper(int64_t k, double alpha);

/* Exact two-sided McNemar p-value from the discordant counts:
 * min(1, 2 * BinomCDF(min(b, c); b + c, 1/2)); 1 when b + c = 0. */
double stats_mcnemar(int64_t b, int64_t c);

/* Holm step-down adjustment of n p-values (adj may alias p). */
void stats_holm(const double *p, int n, double *adj);

/* Newcombe's hybrid score interval (1998, method 10) for the difference of
 * two paired proportions p1 - p2 = (b - c)/n, from the 2x2 table a (both
 * 1), b (first only), c (second only), d (neither), at normal quantile z.
 * Built from the Wilson intervals of p1 and p2 and the phi correlation;
 * behaves with zero cells, where a bootstrap or Wald interval collapses. */
void stats_newcombe_paired(int64_t a, int64_t b, int64_t c, int64_t d, double z, double *lo,
                           double *hi);

/* Tango's score interval (1998) for the difference of two paired
 * proportions D = (b - c)/n, from the discordant counts b (first only) and
 * c (second only) of n pairs, at normal quantile z: every D whose score
 * statistic (|b - c - nD| - 1/2) / sqrt(n (2 q(D) + D (1 - D))), q(D) the
 * restricted maximum-likelihood P(second only) given D, lies within z. The
 * continuity correction of 1/2 keeps it at or under the nominal error in
 * every cell of bench_verdict (without it the exact false-PASS rate reaches
 * 5.6 % at n = 100, docs/verdict.md). Keeps an honest width with zero or
 * few discordant pairs, where Wald, bootstrap and Newcombe's interval
 * collapse to a point. [-1, 1] when n is 0. */
void stats_tango_paired(int64_t b, int64_t c, int64_t n, double z, double *lo, double *hi);

struct boot_result {
    double estimate; /* sum(loss) / sum(size) over all units */
    double lo, hi;   /* percentile interval */
    double se;       /* standard deviation of the replicates */
    double skew;     /* stats_ratio_interval: sample skewness of the linearized residuals */
    int iters;
    uint64_t seed;
};

/* Paired cluster bootstrap: resamples the n units (with replacement) B
 * times and computes sum(loss)/sum(size) each time; lo/hi are the
 * (1-level)/2 and (1+level)/2 percentiles (level = 0.90 for one-sided
 * alpha 0.05). Deterministic for a seed. 0, or -1 for bad arguments or
 * allocation failure. */
int stats_bootstrap_ratio(const double *loss, const double *size, int64_t n, int B, uint64_t seed,
                          double level, struct boot_result *r);

/* Fewest units stats_ratio_interval bounds a ratio from; and the units it
 * takes per squared skewness g1^2 before the interval is left unwidened
 * (Cochran's rule for the normal approximation of a skewed mean is 25
 * g1^2; bench_verdict's lognormal windows need 40). */
enum { STATS_RATIO_MIN_UNITS = 10, STATS_RATIO_SKEW_UNITS = 40 };

/* The interval of a ratio estimator sum(loss) / sum(size) over n
 * independent units, for few units and skewed losses: on each side the
 * wider of (a) the t interval t_{n-1} * SE, SE^2 = n/(n-1) sum (loss_i -
 * R size_i)^2 / (sum size)^2 (the linearized variance), and (b) the
 * studentized (bootstrap-t) interval from B resamples, each studentized by
 * its own linearized SE (second-order correct under skew, where the
 * percentile bootstrap under-covers). r->se is the linearized SE, r->skew
 * the sample skewness g1 of the linearized residuals. No interval holds
 * for every distribution from few units (Bahadur and Savage), so this one
 * declines where bench_verdict shows it under-covers: fewer than
 * STATS_RATIO_MIN_UNITS units, or fewer than 2 STATS_RATIO_MIN_UNITS and
 * fewer than STATS_RATIO_SKEW_UNITS g1^2 (after Cochran's rule for the
 * normal approximation of a skewed mean); with fewer than 2
 * STATS_RATIO_MIN_UNITS units, or fewer than STATS_RATIO_SKEW_UNITS g1^2,
 * each side is widened by 1 + |g1|. Returns 0 with both bounds
 * finite; 1 when the interval cannot be estimated (those rules, or an
 * infinite bootstrap-t quantile: too many resamples repeat one unit):
 * r->lo / r->hi then hold the t interval alone (NaN for n < 2) and must
 * not decide anything; -1 for bad arguments or allocation failure.
 * Deterministic for a seed. */
int stats_ratio_interval(const double *loss, const double *size, int64_t n, int B, uint64_t seed,
                         double level, struct boot_result *r);

#endif

/* kld — per-token divergence between two models and its summaries. */
#include "metrics/kld.h"

#include <math.h>
#include <stdlib.h>

double kld_full(const float *base, const float *cand, int n_vocab)
{
    double kl = 0;
    for (int v = 0; v < n_vocab; v++) {
        double pb = exp((double)base[v]);
        kl += pb * ((double)base[v] - (double)cand[v]);
    }
    return kl;
}

double kld_top_k(const float *base, int n_vocab, const int32_t *ids, const float *lp, int k)
{
    double kl = 0, pb_s = 0, pm_s = 0;
    for (int q = 0; q < k; q++) {
        if (ids[q] < 0 || ids[q] >= n_vocab) continue;
        double pb = exp((double)base[ids[q]]);
        kl += pb * ((double)base[ids[q]] - (double)lp[q]);
        pb_s += pb;
        pm_s += exp((double)lp[q]);
    }
    double pb_t = fmax(0, 1 - pb_s), pm_t = fmax(1e-12, 1 - pm_s);
    if (pb_t > 0) kl += pb_t * (log(pb_t) - log(pm_t));
    return kl;
}

double kld_delta_p(double lp_base, double lp_cand)
{
    return exp(lp_cand) - exp(lp_base);
}

double kld_percentile(const double *v, int64_t n, double q)
{
    if (n <= 0) return NAN;
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)floor(pos);
    return i >= n - 1 ? v[n - 1] : v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void kld_summarize(double *v, int64_t n, struct kld_summary *out)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += v[i];
    if (n > 0) qsort(v, (size_t)n, sizeof *v, cmp_d);
    out->n = n;
    out->mean = n > 0 ? sum / (double)n : NAN;
    out->median = kld_percentile(v, n, 0.5);
    out->p90 = kld_percentile(v, n, 0.9);
    out->p99 = kld_percentile(v, n, 0.99);
    out->p999 = kld_percentile(v, n, 0.999);
    out->max = n > 0 ? v[n - 1] : NAN;
}

/* rows — a trial's totals from its stored rows. */
#include "metrics/rows.h"

#include <math.h>

int rows_ppl_totals(const struct item_row *rows, int64_t n, struct ppl_totals *out)
{
    double nll = 0, kld = 0, top1 = 0, dp = 0;
    int64_t tokens = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(rows[i].nll) || rows[i].n_tokens < 0) return -1;
        nll += rows[i].nll;
        kld += rows[i].kld_sum;
        top1 += rows[i].top1_agree;
        dp += rows[i].dp_sum;
        tokens += rows[i].n_tokens;
    }
    if (tokens <= 0) return -1;
    out->windows = n;
    out->tokens = tokens;
    out->ppl = exp(nll / (double)tokens);
    out->kld_mean = kld / (double)tokens;
    out->top1_agree = top1 / (double)tokens;
    out->dp_mean = dp / (double)tokens;
    return 0;
}

double rows_accuracy(const struct item_row *rows, int64_t n)
{
    double sum = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (rows[i].correct >= 0) sum += rows[i].correct, k++;
    return k ? sum / (double)k : NAN;
}

int64_t rows_tokens(const struct item_row *rows, int64_t n)
{
    int64_t sum = -1;
    for (int64_t i = 0; i < n; i++)
        if (rows[i].n_tokens >= 0) sum = (sum < 0 ? 0 : sum) + rows[i].n_tokens;
    return sum;
}

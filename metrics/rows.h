/* rows — one scored unit (a perplexity window or an item) as stored and
 * read back: the input of every paired metric and of the verdict; and the
 * totals of a trial computed from its rows.
 *
 * Optional numbers are NAN (doubles) or -1 (ints), an absent hash "".
 */
#ifndef QG_METRICS_ROWS_H
#define QG_METRICS_ROWS_H

#include <math.h>
#include <stdint.h>

struct item_row {
    int64_t idx, cluster, n_tokens;                 /* cluster -1: the item stands alone */
    double nll, score, kld_sum, top1_agree, dp_sum; /* nll: summed over the window's tokens */
    int correct;                                    /* 0/1, -1 n/a */
    char output_hash[72];                           /* sha256 hex of a generation's output */
};

/* Row idx with every optional field absent (NAN, -1, ""). */
static inline struct item_row item_row_empty(int64_t idx)
{
    struct item_row r = {.idx = idx,
                         .cluster = -1,
                         .n_tokens = -1,
                         .nll = NAN,
                         .score = NAN,
                         .kld_sum = NAN,
                         .top1_agree = NAN,
                         .dp_sum = NAN,
                         .correct = -1,
                         .output_hash = ""};
    return r;
}

/* A perplexity trial's totals from its stored windows: PPL =
 * exp(sum nll / sum tokens) and the token-weighted means of KLD, top-1
 * agreement and Δp (NAN where a window lacks them). 0 when every row has
 * an NLL and tokens; -1 otherwise (not a perplexity trial). */
struct ppl_totals {
    int64_t windows, tokens;
    double ppl, kld_mean, top1_agree, dp_mean;
};
int rows_ppl_totals(const struct item_row *rows, int64_t n, struct ppl_totals *out);

/* Mean correctness over the rows that have one (correct >= 0); NAN when
 * none has. */
double rows_accuracy(const struct item_row *rows, int64_t n);

/* Sum of n_tokens over the rows that have a count; -1 when none has. */
int64_t rows_tokens(const struct item_row *rows, int64_t n);

#endif

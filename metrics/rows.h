/* rows — one scored unit (a perplexity window or an item) as stored and
 * read back: the input of every paired metric and of the verdict.
 *
 * Optional numbers are NAN (doubles) or -1 (ints), an absent hash "".
 */
#ifndef QG_METRICS_ROWS_H
#define QG_METRICS_ROWS_H

#include <stdint.h>

struct item_row {
    int64_t idx, cluster, n_tokens;                 /* cluster -1: the item stands alone */
    double nll, score, kld_sum, top1_agree, dp_sum; /* nll: summed over the window's tokens */
    int correct;                                    /* 0/1, -1 n/a */
    char output_hash[72];                           /* sha256 hex of a generation's output */
};

#endif

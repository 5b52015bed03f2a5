/* run — runs one suite task on one backend and hands back a row per item.
 *
 * perplexity: one row per window (summed NLL, tokens, bytes, words);
 * multiple choice: one row per item (correct = acc, score = log-likelihood
 * of the gold choice, extra_json = every choice's log-likelihood and token
 * count, and the acc_norm / per-token predictions);
 * generation: one row per item (prediction = the output, extracted and
 * correct from the first pipeline, extra_json = every pipeline's answer and
 * correctness, output_hash = sha256 of the output). Greedy, or sampled at
 * the task's temperature and top_p; max_tokens is
 * capped at half the context and a longer prompt keeps its last tokens (as
 * lm-eval truncates), recorded as prompt_tokens_dropped.
 */
#ifndef QG_TASKS_RUN_H
#define QG_TASKS_RUN_H

#include "backends/backend.h"
#include "tasks/config.h"

#include <stdint.h>

struct task_row {
    int64_t idx;
    const char *id;
    int64_t cluster;
    double nll;
    int64_t n_tokens, n_bytes, n_words;
    int correct; /* -1 n/a */
    double score;
    const char *prediction, *extracted, *output_hash, *extra_json;
};

/* Called for every row in order; nonzero stops the run with that status. */
typedef int (*task_row_fn)(void *ud, const struct task_row *r);

struct task_summary {
    int64_t items;
    double metric;  /* ppl, acc, or the first pipeline's exact match */
    double metric2; /* -, acc_norm, or the second pipeline's exact match (NAN when absent) */
    const char *metric_name, *metric2_name;
    int64_t tokens; /* positions evaluated */
    double seconds;
    int max_tokens_asked, max_tokens_used; /* generation: the task's, and after the cap at
                                            * half the context (0: not generation) */
};

/* Which items of a task run: those with index % count == index (shards). */
struct task_shard {
    int index, count; /* 0/1: everything */
};

/* n_ctx: the backend's context. seed: for sampled generation (the task's
 * temperature > 0); each item draws with seed + item index. */
int task_run(const struct task_config *t, const struct backend *b, int n_ctx, uint64_t seed,
             struct task_shard shard, task_row_fn fn, void *ud, struct task_summary *sum, char *err,
             size_t errlen);

#endif

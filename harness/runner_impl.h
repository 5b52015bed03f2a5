/* runner_impl — what the runner's files share (folder-private): the run in
 * progress, the sinks rows come through, and the helpers one file defines
 * for the others (rn_ names). */
#ifndef QG_RUNNER_IMPL_H
#define QG_RUNNER_IMPL_H

#include "harness/runner.h"
#include "harness/baseline.h"
#include "harness/progress.h"
#include "harness/suite.h"
#include "backends/backend.h"
#include "metrics/kld_ref.h"
#include "tasks/perplexity.h"
#include "tasks/run.h"

#include <stddef.h>
#include <stdint.h>

struct runner {
    struct store *s;
    const struct runner_params *p;
    struct suite *suite;
    struct backend b[RUNNER_MAX_MODELS];
    int n_ctx[RUNNER_MAX_MODELS];
    int64_t run_id, model_ids[RUNNER_MAX_MODELS], *task_ids;
    /* rows computed but not yet stored: written in one short transaction
     * when RUNNER_BATCH are ready or RUNNER_FLUSH_S have passed, so that
     * the write lock is never held while a model computes */
    struct store_item batch[RUNNER_BATCH];
    int64_t pending;
    double pending_since;
    int store_failed; /* the last batch could not be written: store_errmsg says why */
    struct progress pg;
    int64_t rows_done, rows_total; /* total 0 when unknown */
    /* references of the baseline's windows waiting to be stored with the batch */
    struct pending_ref {
        int64_t trial, idx;
        unsigned char *blob;
        size_t n;
    } refs[RUNNER_BATCH];
    int n_refs;
    struct baseline_ref base; /* base.run > 0: the baseline is reused, not run */
    char base_sha[HASH_HEX_LEN + 1];
    int cur_repeat; /* the repeat being run: salts the response cache's keys */
    char what[256]; /* the progress line's label: which task, model and repeat */
};

struct row_sink {
    struct runner *r;
    int64_t trial;
};

/* run, models and tasks rows */
/* What is stored of a model file: read before the setup transaction, so
 * that hashing a large file holds no lock. */
struct model_facts {
    char sha[HASH_HEX_LEN + 1], arch[64];
    int64_t n_params, bytes;
    char *types_json;
};

struct lock_sink {
    struct runner *r;
    int64_t ref_trial; /* the stored baseline's trial whose references are read */
    int64_t trials[RUNNER_MAX_MODELS];
    int64_t top1[RUNNER_MAX_MODELS], tokens[RUNNER_MAX_MODELS];
    double dp[RUNNER_MAX_MODELS];
};

/* The batch in one write transaction; the batch is emptied either way. */
int rn_batch_write(struct runner *r);

/* one computed row: kept in the batch, which is stored when full or old */
int rn_put(struct runner *r, const struct store_item *it);

/* the rows still in the batch: stored when the trial went well or a stop
 * was asked for (the rows done before a stop are kept for --resume),
 * dropped when it failed */
int rn_flush(struct runner *r, int ok);

/* The run's rows before any work: a new run's, or the resumed one's checked
 * (runner_setup.c). */
int rn_record_setup(struct runner *r, char *err, size_t errlen);

int rn_finish_trial(struct runner *r, int64_t trial, int ok, int64_t items, int64_t tokens,
                    double secs, cJSON *metrics, const char *error);

/* one perplexity task, all models in lockstep (a reused baseline: its
 * stored references in its place) */
int rn_run_lockstep(struct runner *r, int t, int repeat, char *err, size_t errlen);

/* s made safe for a terminal (reports/escape.h's esc_term: no control
 * characters or escape sequences), cut to fit buf of n bytes. */
const char *rn_term(const char *s, char *buf, size_t n);

#endif

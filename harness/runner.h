/* runner — runs a suite on several models and stores every result.
 *
 * Every task x model x repeat is a trial; every window or item a row,
 * computed outside any transaction and written in short transactions of up
 * to RUNNER_BATCH rows, or of what RUNNER_FLUSH_S seconds gave (a run killed
 * at any instant loses at most that batch; another process waiting to write
 * waits only for the inserts). All models are opened once (memory:
 * the sum of their f32 weights). Perplexity tasks run the models in lockstep
 * over the same windows: the first model is the baseline, and the others'
 * rows carry per-window sums of KL(base || model), top-1 agreement and dp,
 * with the per-token KLD distribution in the trial's metrics. Repeats: the
 * baseline repeats first, alone; when its second repeat's rows equal its
 * first's (local greedy runs are bit-identical), the run is recorded
 * deterministic and nothing else repeats (the candidates' noise is the
 * baseline's). Only when the baseline proved nondeterministic do the
 * candidates repeat too.
 *
 * Stored baseline: with baseline_run, the baseline is not run at all. Its
 * trials (every repeat, with their items) are copied from the stored run,
 * and the candidates' perplexity windows are judged against its stored
 * top-K references (KLD a lower bound, metrics/kld_ref.h); candidates
 * repeat only when the stored baseline was not deterministic.
 *
 * Resume: with p->resume set, the run's suite hash and models must match;
 * finished trials are kept, unfinished ones rerun from their start (rows are
 * keyed by trial and index, so a rerun overwrites what a killed process
 * left), and the finished run equals one never interrupted.
 */
#ifndef QG_RUNNER_H
#define QG_RUNNER_H

#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

#define RUNNER_BATCH 256
#define RUNNER_FLUSH_S 2.0 /* rows wait at most this long to be stored */
#define RUNNER_MAX_MODELS 32

struct runner_params {
    const char *suite_path;
    int allow_changed;
    int n_models;
    const char *names[RUNNER_MAX_MODELS]; /* the first is the baseline */
    const char *specs[RUNNER_MAX_MODELS];
    int repeats; /* >= 1 */
    uint64_t seed;
    int threads;
    int quiet;
    int no_cache; /* 1: remote backends ignore and do not fill the response cache */
    const char *command;
    int64_t resume;               /* > 0: finish this run (same suite and models) */
    int shard_index, shard_count; /* run items with index % count == index (0/1: all) */
    int noise_perturb;            /* 1: one more baseline repeat under a benign numerical
                                   * perturbation (two-batch evaluation) */
    const char *tasks;            /* comma-separated task names to run (NULL: all) */
    int64_t limit;                /* > 0: at most this many items (windows) per task */
    int progress;                 /* 1: progress on stderr even when quiet */
    int keep_refs;                /* 1: keep the baseline's top-K references of every
                                   * perplexity window (repeat 0), for later reuse */
    int64_t baseline_run;         /* > 0: reuse that run's baseline (harness/baseline.h);
                                   * -1: the newest run that can stand in, if any; 0: none */
    const char *baseline_db;      /* the database holding it (NULL: this one) */
    const char *baseline_sha;     /* with baseline_run: the baseline's sha256, its file not
                                   * read (absent: a stored baseline stands in, or an error) */
};

/* Runs and stores; *run_id is set as soon as the run exists (also on
 * failure, when the run is marked failed). QG_OK or a status with err. */
/* SIGINT and SIGTERM make runner_run store the row in hand and return
 * QG_ERR_INTERRUPTED with the run marked interrupted (resumable); a second
 * signal ends the process. For commands, not for library use. */
void runner_catch_signals(void);

int runner_run(struct store *s, const struct runner_params *p, int64_t *run_id, char *err,
               size_t errlen);

#endif

/* baseline — a stored baseline to reuse: `gate --baseline-run RUN` runs
 * only the candidates and judges them against the baseline's stored
 * trials (and, for perplexity, its stored top-K references).
 *
 * A run can stand in for the baseline when it is done, its first model is
 * the same file (sha256), it was made by this qgate version (the engine's
 * numbers), every task of the suite is in it with the same configuration
 * hash and a done baseline trial, and every perplexity task keeps its
 * references (runs of `gate` keep them unless told not to).
 */
#ifndef QG_BASELINE_H
#define QG_BASELINE_H

#include "store/store.h"
#include "harness/suite.h"

#include <stddef.h>
#include <stdint.h>

struct baseline_ref {
    struct store *store; /* where it is: the run's own store or a second handle */
    int own;             /* 1: store is ours to close */
    const char *path;    /* that file, NULL when it is the run's own database */
    int64_t run;
    char model[128]; /* the baseline's name in that run */
    int deterministic;
    int n_tasks;
    int64_t *trial0;        /* per suite task: the baseline's repeat-0 trial there */
    char (*tokens_sha)[65]; /* per perplexity task: sha256 of its token ids ("" if unknown) */
    int n_vocab;            /* the baseline's vocabulary (0: not stored, runs before it was) */
    int64_t file_bytes, n_params; /* the stored model's facts (-1: unknown) */
    char arch[64];
    char *types_json; /* or NULL */
};

/* A stored baseline's identity, for a baseline whose file is not here (a
 * CI job that holds only the candidates and the database). */
struct baseline_identity {
    char sha256[65];
    int64_t run;        /* the run it was found in */
    int ctx;            /* that run's sampled-text window (0: it has none) */
    int64_t file_bytes; /* the stored file's size (-1: unknown) */
    char spec[4096];    /* how it was given then */
};

/* Finds the identity of a baseline by selector: a run id ("12"), the
 * model's sha256 (64 hex digits: the newest done run whose baseline is that
 * file), or "auto" (the newest done run whose baseline was given as `spec`,
 * or as a file of the same name). db: the database holding it (NULL: s).
 * QG_OK; QG_ERR_NOTFOUND naming what was looked for; a store error. */
int baseline_identify(struct store *s, const char *db, const char *sel, const char *spec,
                      struct baseline_identity *out, char *err, size_t errlen);

/* 1 when sel is a sha256 (64 hex digits) */
int baseline_sel_is_sha(const char *sel);

/* Finds the run to reuse: run > 0 that run (QG_ERR_DATA saying what
 * differs when it cannot stand in), run < 0 the newest that can
 * (QG_ERR_NOTFOUND when none). db: the database holding it (NULL: s). */
int baseline_find(struct store *s, const char *db, int64_t run, const char *sha256,
                  const struct suite *suite, struct baseline_ref *out, char *err, size_t errlen);
void baseline_release(struct baseline_ref *b);

#endif

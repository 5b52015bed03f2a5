/* registry_suite — a suite of named benchmarks (tasks/registry.h) over the
 * files of a data folder, pinned in the database: `--tasks hellaswag,arc_easy
 * --data DIR` without a suite file.
 *
 * Each task's files are the first of its candidates found under the data
 * folder; each file (a folder: its listing hash) is hashed and checked
 * against the database's pin for "TASK/ROLE": the first use pins it, a
 * later run with a different file is refused unless allow_changed (the pin
 * then stays). The suite is written as suite.json into a new temporary
 * folder, with the files' absolute paths and sha256s.
 */
#ifndef QG_REGISTRY_SUITE_H
#define QG_REGISTRY_SUITE_H

#include "store/store.h"

#include <cjson/cJSON.h>

#include <stddef.h>

struct registry_suite_params {
    const char *tasks;    /* comma-separated registry names (mmlu_SUBJECT too) */
    const char *data_dir; /* the data folder */
    int allow_changed;
    int ctx;   /* perplexity tasks' window in tokens */
    int quiet; /* 0: a line per newly pinned file */
};

/* A suite file's task that names a registry task ({"task": "hellaswag",
 * "data": ..., ...}): what the registry sets, added to o where o does not
 * say otherwise: "name", "benchmark" or "kind" (and a perplexity task's
 * "protocol"), gsm8k's "max_tokens", and a "policy" "metric" of acc_norm
 * where lm-eval reports it first. ctx: a perplexity task's default window.
 * QG_OK, or QG_ERR_USAGE naming an unknown task (err). */
int registry_task_fill(cJSON *o, int ctx, char *err, size_t errlen);

/* 1 when every name in the comma-separated list is a registry task */
int registry_suite_names_known(const char *tasks);

/* Writes the suite (dir and suite as sampled_suite_make's; remove it with
 * sampled_suite_remove). QG_OK; QG_ERR_USAGE for an unknown name (with the
 * closest and the list); QG_ERR_NOINPUT naming the files looked for;
 * QG_ERR_DATA for a changed file; a store error. */
int registry_suite_make(struct store *s, const struct registry_suite_params *p, char *dir,
                        size_t dirlen, char *suite, size_t suitelen, char *err, size_t errlen);

#endif

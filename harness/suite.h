/* suite — a suite file: named tasks over pinned data files, and a policy.
 *
 * JSON (see docs/suite.md):
 *   {"name": "quick", "policy": {...}, "tasks": [TASK, ...]}
 * TASK: {"name", "kind": "perplexity" | "multiple_choice" | "generation" |
 *        "custom", or "benchmark": one of bench_names(),
 *        "data": PATH | {"data": PATH, "labels": PATH, "train": PATH},
 *        "sha256": HEX | {"data": HEX, ...}, and kind options}
 * Relative paths resolve against the suite file's folder. Every data file
 * (or directory) must match its pinned sha256 unless allow_changed is set.
 * Unknown keys are errors (with the closest known key suggested).
 */
#ifndef QG_SUITE_H
#define QG_SUITE_H

#include "datasets/hash.h"
#include "metrics/verdict.h"
#include "tasks/config.h"

#include <stdint.h>

#include <cjson/cJSON.h>

struct suite {
    char *path, *dir, *name;
    char sha256[HASH_HEX_LEN + 1];
    struct verdict_policy policy;
    struct task_config *tasks;
    int n_tasks;
};

/* Fills pol from a JSON policy object (NULL = defaults: margin ln 1.01,
 * 1 point, alpha 0.05, beta 0.2, 10000 bootstrap iterations). where names
 * the source in messages. QG_OK or QG_ERR_DATA. */
/* Applies the keys of a JSON policy object (NULL: none) over *pol: a
 * task's "policy" over its suite's. QG_OK or QG_ERR_DATA naming where. */
int suite_policy_apply(const cJSON *p, const char *where, struct verdict_policy *pol, char *err,
                       size_t errlen);

int suite_policy_from_json(const cJSON *p, const char *where, struct verdict_policy *pol, char *err,
                           size_t errlen);

/* Parses, validates, resolves and hashes. QG_OK; QG_ERR_DATA with err
 * naming the file and task (and, for JSON syntax errors, the line);
 * QG_ERR_NOINPUT when a file is missing. */
int suite_load(const char *path, int allow_changed, struct suite **out, char *err, size_t errlen);
void suite_free(struct suite *s);

/* Keeps only the tasks named in names (comma-separated; NULL: all) and,
 * with limit > 0, caps every task at limit items (perplexity: windows);
 * the configuration hashes follow. QG_OK, or QG_ERR_USAGE naming an
 * unknown task and the suite's tasks. */
int suite_select(struct suite *s, const char *names, int64_t limit, char *err, size_t errlen);

/* The files the suite at path names (tasks' "data" and "items_file",
 * resolved against its folder), read from its JSON without loading or
 * hashing anything: for refusing an output that would overwrite one
 * (suite_inputs.c). QG_OK with *paths (free with suite_input_paths_free)
 * and *n (an invalid suite lists nothing: loading it says why);
 * qg_read_file's errors; QG_ERR_NOMEM. */
int suite_input_paths(const char *path, char ***paths, int *n, char *err, size_t errlen);
void suite_input_paths_free(char **paths, int n);

#endif

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
#include "tasks/bench.h"
#include "tasks/extract.h"

#include <stdint.h>

#include <cjson/cJSON.h>

enum { SUITE_MAX_FILES = 3, SUITE_MAX_PIPELINES = 8 };

struct suite_file {
    const char *role;          /* "data", "labels", "train" (static) */
    char *path;                /* resolved */
    char sha256[HASH_HEX_LEN + 1];
    int changed;               /* hash differs from the pin (allowed) */
};

struct suite_task {
    char *name;
    int kind;                  /* enum store_task_kind */
    char *benchmark;           /* NULL for plain kinds */
    struct suite_file files[SUITE_MAX_FILES];
    int n_files;
    int critical;
    /* perplexity */
    int protocol, ctx, stride;
    int64_t chunks;
    /* multiple choice / generation */
    int64_t limit;
    int fewshot, max_tokens;
    uint64_t fewshot_seed;
    double temperature, top_p; /* generation: 0 = greedy; sampled with the run's seed + repeat */
    char *delimiter;
    struct pipeline *pipelines[SUITE_MAX_PIPELINES];
    int n_pipelines;
    struct normalizer *norm;
    char **stop;
    int n_stop;
    /* custom: field names in the user's JSONL */
    char *f_id, *f_prompt, *f_answer, *f_context, *f_choices, *f_gold;
    char config_hash[HASH_HEX_LEN + 1]; /* over the task's settings and data hashes */
    char *config_json;
};

struct suite_policy {
    double margin_ppl;  /* ln PPL ratio (default ln 1.01) */
    double margin_acc;  /* absolute accuracy points as a fraction (default 0.01) */
    double alpha, beta;
    int bootstrap;
};

struct suite {
    char *path, *dir, *name;
    char sha256[HASH_HEX_LEN + 1];
    struct suite_policy policy;
    struct suite_task *tasks;
    int n_tasks;
};

/* Fills pol from a JSON policy object (NULL = defaults: margin ln 1.01,
 * 1 point, alpha 0.05, beta 0.2, 10000 bootstrap iterations). where names
 * the source in messages. QG_OK or QG_ERR_DATA. */
int suite_policy_from_json(const cJSON *p, const char *where, struct suite_policy *pol, char *err, size_t errlen);

/* Parses, validates, resolves and hashes. QG_OK; QG_ERR_DATA with err
 * naming the file and task (and, for JSON syntax errors, the line);
 * QG_ERR_NOINPUT when a file is missing. */
int suite_load(const char *path, int allow_changed, struct suite **out, char *err, size_t errlen);
void suite_free(struct suite *s);

/* The file with the given role, or NULL. */
const struct suite_file *suite_task_file(const struct suite_task *t, const char *role);

/* Items of a multiple-choice / generation task (benchmark or custom). */
int suite_task_mc_items(const struct suite_task *t, struct mc_item **items, int64_t *n, char *err, size_t errlen);
int suite_task_gen_items(const struct suite_task *t, struct gen_item **items, int64_t *n, char *err, size_t errlen);

#endif

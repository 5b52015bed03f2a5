/* config — one task's settings as the suite file gave them, resolved:
 * the kind, the pinned data files and every kind option. harness/suite.c
 * fills it; tasks/ reads it and knows nothing of suite files.
 *
 * Ownership: every pointer member is owned by the struct and freed by
 * task_config_release.
 */
#ifndef QG_TASKS_CONFIG_H
#define QG_TASKS_CONFIG_H

#include "datasets/hash.h"
#include "tasks/bench.h"
#include "tasks/extract.h"
#include "tasks/kind.h"

#include <stdint.h>

enum { TASK_MAX_FILES = 3, TASK_MAX_PIPELINES = 8 };

struct task_file {
    const char *role; /* "data", "labels", "train" (static) */
    char *path;       /* resolved */
    char sha256[HASH_HEX_LEN + 1];
    int changed; /* hash differs from the pin (allowed) */
};

struct task_config {
    char *name;
    int kind;        /* enum task_kind */
    char *benchmark; /* NULL for plain kinds */
    struct task_file files[TASK_MAX_FILES];
    int n_files;
    int critical;
    /* perplexity */
    int protocol, ctx, stride;
    int64_t chunks;
    /* multiple choice / generation */
    int64_t limit;
    int64_t *select, n_select; /* item indices to run, sorted (n_select 0: every item) */
    int fewshot, max_tokens;
    uint64_t fewshot_seed;
    double temperature, top_p; /* generation: 0 = greedy; sampled with the run's seed + repeat */
    char *delimiter;
    struct pipeline *pipelines[TASK_MAX_PIPELINES];
    int n_pipelines;
    struct normalizer *norm;
    char **stop;
    int n_stop;
    /* custom: field names in the user's JSONL */
    char *f_id, *f_prompt, *f_answer, *f_context, *f_choices, *f_gold;
    char config_hash[HASH_HEX_LEN + 1]; /* over the task's settings and data hashes */
    char *config_json;
};

/* The file with the given role ("data", "labels", "train"), or NULL. */
const struct task_file *task_config_file(const struct task_config *t, const char *role);

/* A perplexity task's text: its data file read whole (at most 4 GiB) into
 * a malloc'd NUL-terminated buffer. QG_OK; QG_ERR_NOINPUT / QG_ERR_DATA /
 * QG_ERR_IO naming the file. */
int task_read_text(const struct task_config *t, char **text, size_t *n, char *err, size_t errlen);

/* 1 when item idx is to run: no selection, or idx is selected. */
int task_item_selected(const struct task_config *t, int64_t idx);

/* Whether the task's "items" selection fits data of n_items items: QG_OK,
 * or QG_ERR_DATA naming the first index past the end (a selection is never
 * silently cut to what exists). */
int task_check_selection(const struct task_config *t, int64_t n_items, char *err, size_t errlen);

/* Frees what t owns (t itself is not freed); accepts NULL. */
void task_config_release(struct task_config *t);

/* Items of a multiple-choice / generation task, from its benchmark reader
 * or, for a custom task, its JSONL file with the field names it gives.
 * QG_OK with *items (free with mc_items_free / gen_items_free) and *n;
 * QG_ERR_USAGE for a task of another kind; QG_ERR_DATA naming the file,
 * line and item; QG_ERR_NOINPUT, QG_ERR_NOMEM. */
int task_mc_items(const struct task_config *t, struct mc_item **items, int64_t *n, char *err,
                  size_t errlen);
int task_gen_items(const struct task_config *t, struct gen_item **items, int64_t *n, char *err,
                   size_t errlen);

#endif

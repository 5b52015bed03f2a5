/* registry — the benchmarks qgate knows by name, as lm-evaluation-harness
 * names them: what each one scores, how, and which files it reads from a
 * data folder (the first of each role's candidates that exists).
 *
 * `qgate tasks` lists them; `gate`/`run --tasks hellaswag,arc_easy --data
 * DIR` runs them without a suite file (harness/registry_suite.h). MMLU's
 * subjects are tasks too: mmlu_SUBJECT reads mmlu/test/SUBJECT_test.csv.
 */
#ifndef QG_REGISTRY_H
#define QG_REGISTRY_H

#include <stddef.h>

enum { REGISTRY_MAX_ROLES = 2, REGISTRY_MAX_PATHS = 5 };

struct registry_file {
    const char *role;                      /* "data", "labels", "train"; NULL ends the list */
    const char *paths[REGISTRY_MAX_PATHS]; /* candidates under the data folder, NULL-ended */
    int optional;                          /* 1: used when there (gsm8k's few-shot examples) */
};

struct registry_task {
    const char *name;    /* lm-eval's task name ("arc_easy") */
    const char *kind;    /* "perplexity", or the benchmark reader ("arc") */
    const char *metric;  /* what lm-eval reports first ("acc_norm"); the gated metric */
    const char *what;    /* one line for `qgate tasks` */
    const char *differs; /* where qgate's number differs from lm-eval's on purpose, or NULL */
    struct registry_file files[REGISTRY_MAX_ROLES + 1];
};

/* The n-th task (0-based), NULL past the end. */
const struct registry_task *registry_at(int i);

/* The task of that name; "arc-easy" finds arc_easy. mmlu_SUBJECT is not
 * in the table: registry_mmlu_subject says whether a name is one. NULL
 * when unknown. */
const struct registry_task *registry_find(const char *name);

/* For "mmlu_SUBJECT": SUBJECT (a pointer into name), else NULL. */
const char *registry_mmlu_subject(const char *name);

/* Every registry name, comma-separated, into out (for messages). */
void registry_names(char *out, size_t n);

#endif

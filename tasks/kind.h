/* kind — the kinds of task qgate runs.
 *
 * Values are persisted in the store (tasks.kind): append-only.
 * How to add a task kind: add the value at the end here and its name in
 * task_kind_name (tasks/config.c), teach harness/suite.c to parse its
 * options into struct task_config, tasks/run.c to run it, and
 * metrics/verdict.c which loss it is judged on; document it in docs/suite.md.
 */
#ifndef QG_TASKS_KIND_H
#define QG_TASKS_KIND_H

enum task_kind {
    TASK_PERPLEXITY = 0,
    TASK_MULTIPLE_CHOICE = 1,
    TASK_GENERATION = 2,
    TASK_CUSTOM = 3,
};

/* "perplexity", "multiple_choice", "generation", "custom"; "unknown" else. */
const char *task_kind_name(int kind);

/* The kind named name, or -1. */
int task_kind_from_name(const char *name);

#endif

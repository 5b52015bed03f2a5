/* compare — the verdict of a stored run: reads each task's paired rows and
 * the baseline's repeats from the store, judges them with metrics/verdict,
 * and saves the comparison with its rows.
 */
#ifndef QG_COMPARE_H
#define QG_COMPARE_H

#include "core/util.h"
#include "store/store.h"
#include "metrics/verdict.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* The policy: file ({"policy": {...}} or the object itself) when not NULL,
 * else the run's stored suite policy, else the defaults. QG_OK;
 * QG_ERR_NOINPUT / QG_ERR_DATA naming the file. */
int compare_load_policy(struct store *s, int64_t run_id, const char *file,
                        struct verdict_policy *pol, char *err, size_t errlen);

/* Compares candidate with baseline (model names) on every task of run_id.
 * *tasks (malloc'd, *n entries) and *suite are set. QG_OK; QG_ERR_NOTFOUND
 * for a missing model or trial; QG_ERR_DATA for a trial not done or when
 * the two trials of a task do not pair. */
int compare_run(struct store *s, int64_t run_id, const char *baseline, const char *candidate,
                const struct verdict_params *p, struct verdict_task **tasks, int *n, int *suite,
                char *err, size_t errlen);

/* Whether two model specs run their file the same way: the same backend
 * ("cpu:" or none, or "cuda:") and the same ?query (simulated formats,
 * devices, options). Files of one content run differently are different
 * models to compare. */
int compare_same_setup(const char *spec_a, const char *spec_b);

/* Whether baseline and candidate of run_id are the same model: the same
 * name or spec, or one file content (sha256) run the same way
 * (compare_same_setup). 1 with why saying which (a
 * comparison of a model with itself proves nothing unless it is meant as
 * an A/A check), 0 when they differ, or a QG_ERR_* status (why holds the
 * store's message). */
int compare_same_model(struct store *s, int64_t run_id, const char *baseline, const char *candidate,
                       char *why, size_t whylen);

/* One task's verdict as the JSON object reports and `compare --format json`
 * show (a new object the caller frees). */
cJSON *compare_task_json(const struct verdict_task *v);

/* The verdict in one plain-English line, appended to b: every gating task
 * that FAILed, then every one that is INCONCLUSIVE, each named (when the
 * suite has several) with its own loss, interval, and what decided it (the
 * margin, or each gate with that verdict and its limit), its own KLD and
 * top-1 agreement where measured; then how many other tasks passed, and the
 * non-gating tasks that did not pass. All passing: the first task's
 * figures. "q4: FAIL — wikitext-2: perplexity +5.3 % (90 % CI +4.9…+5.7 %)
 * beyond the 1 % margin; KLD 0.049, same top token 89.4 %; mmlu: accuracy
 * +1.0 points (…), flip rate 9.1 % beyond its 5 % limit; 2 other tasks
 * pass". The candidate's name is printed as given. */
void compare_plain(const char *cand, const struct verdict_task *v, int n, int suite,
                   struct sbuf *b);

/* The policy as JSON (a new object). */
cJSON *compare_policy_json(const struct verdict_policy *pol);

/* Saves a comparison (summary JSON, policy, every task's verdict row) in
 * one transaction. QG_OK with *comparison_id; a store error otherwise,
 * with nothing saved. */
struct compare_save {
    int64_t run_id;
    const char *baseline, *candidate, *command;
    const struct verdict_params *params;
    const struct verdict_task *tasks;
    int n_tasks, suite;
    const cJSON *summary;
    int *reused; /* non-NULL: set to 1 when an identical stored comparison was found */
};
/* An identical comparison already stored (store_comparison_find_same) is
 * reused: its id, nothing added. */
int compare_save(struct store *s, const struct compare_save *c, int64_t *comparison_id);

#endif

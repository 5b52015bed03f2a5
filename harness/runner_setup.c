/* runner_setup — a run's rows before any work: the run, its models (file
 * facts) and tasks in one transaction, or a run to resume checked against
 * what is asked now. */
#include "harness/runner.h"
#include "harness/runner_impl.h"
#include "backends/kernel_set.h"
#include "core/json.h"
#include "metrics/kld.h"
#include "backends/backend.h"
#include "datasets/hash.h"
#include "harness/baseline.h"
#include "harness/progress.h"
#include "metrics/kld_ref.h"
#include "core/status.h"
#include "harness/suite.h"
#include "core/util.h"
#include "tasks/perplexity.h"
#include "tasks/run.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* resume: model m must be the stored one — same name and spec, and a
 * local file must still have the sha256 stored with the run. */
static int resume_model(struct runner *r, int m, const cJSON *mj, char *err, size_t errlen)
{
    const struct runner_params *p = r->p;
    const char *name = json_str(mj, "name", ""), *path = json_str(mj, "path", NULL),
               *spec = json_str(mj, "spec", ""), *sha = json_str(mj, "sha256", NULL);
    const char *eq = strchr(spec, '=');
    if (!path) path = eq ? eq + 1 : spec; /* a remote model: its spec */
    if (strcmp(name, p->names[m]) || strcmp(path, p->specs[m]))
        return qg_errf(err, errlen, QG_ERR_DATA, "run %lld's model %d is %s=%s, not %s=%s",
                       (long long)p->resume, m + 1, name, path, p->names[m], p->specs[m]);
    char now[HASH_HEX_LEN + 1], e2[QG_ERRMSG_MAX], file[4096];
    qg_spec_file(p->specs[m], file, sizeof file);
    if (sha && backend_model_sha256(file, now, e2, sizeof e2) == QG_OK && strcmp(now, sha))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s changed since run %lld (sha256 %.12s..., now %.12s...): its rows would "
                       "mix two models; start a new run",
                       p->specs[m], (long long)p->resume, sha, now);
    r->model_ids[m] = json_int(mj, "id", 0);
    return QG_OK;
}

/* resume: the stored run's task ids, each task's settings unchanged */
static int resume_tasks(struct runner *r, const cJSON *tasks, char *err, size_t errlen)
{
    const struct runner_params *p = r->p;
    r->task_ids = calloc((size_t)r->suite->n_tasks, sizeof *r->task_ids);
    if (!r->task_ids) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    for (int t = 0; t < r->suite->n_tasks; t++) {
        const cJSON *tj, *found = NULL;
        cJSON_ArrayForEach(
            tj, tasks) if (!strcmp(json_str(tj, "name", ""), r->suite->tasks[t].name)) found = tj;
        r->task_ids[t] = found ? json_int(found, "id", 0) : 0;
        if (!r->task_ids[t])
            return qg_errf(err, errlen, QG_ERR_DATA, "run %lld has no task '%s'",
                           (long long)p->resume, r->suite->tasks[t].name);
        if (strcmp(json_str(found, "config_hash", ""), r->suite->tasks[t].config_hash))
            /* a run measures one item set: a resume may not change it */
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "run %lld's task '%s' was run with other settings (its --limit, "
                           "items, chunks or options differ from now): resume with the same "
                           "--limit and suite, or start a new run",
                           (long long)p->resume, r->suite->tasks[t].name);
    }
    return QG_OK;
}

/* resume: check the stored run matches, and find its model and task ids;
 * a refused resume leaves the run as it was (r->run_id stays 0 until the
 * checks pass, so the run is not marked failed) */
static int resume_setup(struct runner *r, char *err, size_t errlen)
{
    const struct runner_params *p = r->p;
    cJSON *run;
    int rc = store_run_json(r->s, p->resume, &run);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    const cJSON *sh = cJSON_GetObjectItem(run, "suite_hash"),
                *models = cJSON_GetObjectItem(run, "models"),
                *tasks = cJSON_GetObjectItem(run, "tasks");
    if (!cJSON_IsString(sh) || strcmp(sh->valuestring, r->suite->sha256))
        rc = qg_errf(
            err, errlen, QG_ERR_DATA, "run %lld was made with another suite (sha256 %s, now %s)",
            (long long)p->resume, cJSON_IsString(sh) ? sh->valuestring : "?", r->suite->sha256);
    if (!rc && cJSON_GetArraySize(models) != p->n_models)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "run %lld has %d models; give the same --model list",
                     (long long)p->resume, cJSON_GetArraySize(models));
    for (int m = 0; m < p->n_models && !rc; m++)
        rc = resume_model(r, m, cJSON_GetArrayItem(models, m), err, errlen);
    if (!rc && (json_int(run, "shard_index", 0) != (p->shard_count > 1 ? p->shard_index : 0) ||
                json_int(run, "shard_count", 1) != (p->shard_count > 1 ? p->shard_count : 1)))
        rc = qg_errf(err, errlen, QG_ERR_DATA,
                     "run %lld is shard %lld/%lld; resume it with that --shard",
                     (long long)p->resume, json_int(run, "shard_index", 0) + 1,
                     json_int(run, "shard_count", 1));
    if (!rc) rc = resume_tasks(r, tasks, err, errlen);
    cJSON_Delete(run);
    if (rc) return rc;
    r->run_id = p->resume;
    char kernels[128]; /* numbers from now on may come from other kernels */
    kernel_set_describe(kernels, sizeof kernels);
    if ((rc = store_run_add_kernels(r->s, r->run_id, kernels)))
        return qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    return store_run_set_status(r->s, r->run_id, STORE_RUN_RUNNING);
}

static void model_facts_read(const char *full, const char *sha, struct model_facts *f)
{
    char e2[QG_ERRMSG_MAX];
    struct backend_identity id;
    backend_identify(full, !(sha && sha[0]), &id, e2, sizeof e2); /* unknown facts stay -1 */
    f->n_params = id.n_params;
    f->bytes = id.file_bytes;
    snprintf(f->arch, sizeof f->arch, "%s", id.arch);
    snprintf(f->sha, sizeof f->sha, "%s", sha && sha[0] ? sha : id.sha256); /* hashed already */
    f->types_json = id.types_json; /* freed with the facts */
}

/* The run, its models and its tasks, in one transaction: a process killed
 * during setup leaves no half-made run behind. */
static int setup_rows(struct runner *r, const struct model_facts *mf, const char *suite_text)
{
    const struct runner_params *p = r->p;
    char kernels[128];
    kernel_set_describe(kernels, sizeof kernels);
    struct store_run_new rn = {.command = p->command,
                               .kernels = kernels,
                               .suite_name = r->suite->name,
                               .suite_hash = r->suite->sha256,
                               .suite_json = suite_text,
                               .seed = (int64_t)p->seed,
                               .repeats = p->repeats,
                               .shard_index = p->shard_count > 1 ? p->shard_index : 0,
                               .shard_count = p->shard_count > 1 ? p->shard_count : 1};
    int rc = store_run_create(r->s, &rn, &r->run_id);
    for (int i = 0; i < p->n_models && !rc; i++) {
        struct backend_info bi = {0};
        if (r->b[i].ops) backend_info(&r->b[i], &bi); /* opened: not a reused baseline */
        struct store_model_new mn = {.name = p->names[i],
                                     .spec = p->specs[i],
                                     .backend = r->b[i].ops ? r->b[i].ops->name : "cpu",
                                     .provenance_json = bi.provenance,
                                     .path = bi.provenance ? NULL : p->specs[i],
                                     .sha256 = mf[i].sha[0] ? mf[i].sha : NULL,
                                     .file_bytes = mf[i].bytes,
                                     .n_params = mf[i].n_params,
                                     .arch = mf[i].arch,
                                     .format = bi.provenance ? "remote" : "gguf",
                                     .types_json = mf[i].types_json,
                                     .role = i > 0};
        rc = store_model_add(r->s, r->run_id, &mn, &r->model_ids[i]);
    }
    for (int t = 0; t < r->suite->n_tasks && !rc; t++) {
        const struct task_config *st = &r->suite->tasks[t];
        struct store_task_new tn = {.name = st->name,
                                    .kind = st->kind,
                                    .config_json = st->config_json,
                                    .config_hash = st->config_hash,
                                    .n_items = -1,
                                    .critical = st->critical};
        rc = store_task_add(r->s, r->run_id, &tn, &r->task_ids[t]);
        for (int f = 0; f < st->n_files && !rc; f++) {
            int64_t ds;
            rc = store_dataset_add(r->s, st->files[f].path, st->files[f].sha256, -1, &ds);
            if (!rc) rc = store_task_link_dataset(r->s, r->task_ids[t], ds, st->files[f].role);
        }
    }
    return rc;
}

int rn_record_setup(struct runner *r, char *err, size_t errlen)
{
    if (r->p->resume > 0) return resume_setup(r, err, errlen);
    const struct runner_params *p = r->p;
    char *suite_text = NULL;
    size_t n;
    qg_read_file(p->suite_path, (size_t)16 << 20, &suite_text, &n, err, errlen);
    err[0] = '\0';
    struct model_facts mf[RUNNER_MAX_MODELS] = {0};
    for (int i = 0; i < p->n_models; i++)
        model_facts_read(p->specs[i], i == 0 ? r->base_sha : NULL, &mf[i]);
    if (r->base.run > 0 && mf[0].bytes < 0) { /* its file is not here: as stored */
        mf[0].bytes = r->base.file_bytes;
        mf[0].n_params = r->base.n_params;
        snprintf(mf[0].arch, sizeof mf[0].arch, "%s", r->base.arch);
        free(mf[0].types_json);
        mf[0].types_json = r->base.types_json ? qg_strdup(r->base.types_json) : NULL;
    }
    r->task_ids = calloc((size_t)r->suite->n_tasks, sizeof *r->task_ids);
    int rc = r->task_ids ? store_begin(r->s) : QG_ERR_NOMEM;
    if (!rc) {
        rc = setup_rows(r, mf, suite_text);
        if (!rc)
            rc = store_commit(r->s);
        else
            store_rollback(r->s);
        if (rc) r->run_id = 0; /* rolled back: there is no run to mark */
    }
    free(suite_text);
    for (int i = 0; i < p->n_models; i++)
        free(mf[i].types_json);
    if (rc)
        qg_errf(err, errlen, rc, "%s", rc == QG_ERR_NOMEM ? "out of memory" : store_errmsg(r->s));
    return rc;
}

/* runner — suite x models x repeats into the store. */
#include "harness/runner.h"
#include "backends/kernel_set.h"
#include "core/json.h"
#include "metrics/kld.h"
#include "backends/backend.h"
#include "backends/gguf.h"
#include "backends/model_info.h"
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

struct runner {
    struct store *s;
    const struct runner_params *p;
    struct suite *suite;
    struct backend b[RUNNER_MAX_MODELS];
    int n_ctx[RUNNER_MAX_MODELS];
    int64_t run_id, model_ids[RUNNER_MAX_MODELS], *task_ids;
    /* rows computed but not yet stored: written in one short transaction
     * when RUNNER_BATCH are ready or RUNNER_FLUSH_S have passed, so that
     * the write lock is never held while a model computes */
    struct store_item batch[RUNNER_BATCH];
    int64_t pending;
    double pending_since;
    int store_failed; /* the last batch could not be written: store_errmsg says why */
    struct progress pg;
    int64_t rows_done, rows_total; /* total 0 when unknown */
    /* references of the baseline's windows waiting to be stored with the batch */
    struct pending_ref {
        int64_t trial, idx;
        unsigned char *blob;
        size_t n;
    } refs[RUNNER_BATCH];
    int n_refs;
    struct baseline_ref base; /* base.run > 0: the baseline is reused, not run */
    char base_sha[HASH_HEX_LEN + 1];
    int cur_repeat; /* the repeat being run: salts the response cache's keys */
};

/* Set by SIGINT/SIGTERM: the row in hand is stored, then the run stops. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    stop_requested = 1;
    signal(sig, SIG_DFL); /* a second signal ends the process at once */
}

void runner_catch_signals(void)
{
    stop_requested = 0;
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
}

static char *dup_or_null(const char *v)
{
    return v ? qg_strdup(v) : NULL;
}

static void batch_drop(struct runner *r)
{
    for (int64_t i = 0; i < r->pending; i++) {
        struct store_item *it = &r->batch[i];
        free((char *)it->prediction);
        free((char *)it->extracted);
        free((char *)it->output_hash);
        free((char *)it->extra_json);
    }
    r->pending = 0;
}

static void refs_drop(struct runner *r)
{
    for (int i = 0; i < r->n_refs; i++)
        free(r->refs[i].blob);
    r->n_refs = 0;
}

/* The batch in one write transaction; the batch is emptied either way. */
static int batch_write(struct runner *r)
{
    int rc = store_begin(r->s);
    for (int64_t i = 0; !rc && i < r->pending; i++)
        rc = store_item_put(r->s, &r->batch[i]);
    for (int i = 0; !rc && i < r->n_refs; i++)
        rc = store_ref_put(r->s, r->refs[i].trial, r->refs[i].idx, r->refs[i].blob, r->refs[i].n);
    refs_drop(r);
    if (!rc)
        rc = store_commit(r->s);
    else
        store_rollback(r->s);
    batch_drop(r);
    r->store_failed = rc != QG_OK;
    return rc;
}

/* one computed row: kept in the batch, which is stored when full or old */
static int put(struct runner *r, const struct store_item *it)
{
    int rc = QG_OK;
    struct store_item *b = &r->batch[r->pending];
    *b = *it;
    b->prediction = dup_or_null(it->prediction);
    b->extracted = dup_or_null(it->extracted);
    b->output_hash = dup_or_null(it->output_hash);
    b->extra_json = dup_or_null(it->extra_json);
    if (r->pending++ == 0) r->pending_since = qg_now_s();
    if ((it->prediction && !b->prediction) || (it->extracted && !b->extracted) ||
        (it->output_hash && !b->output_hash) || (it->extra_json && !b->extra_json))
        return QG_ERR_NOMEM;
    if (r->pending == RUNNER_BATCH || qg_now_s() - r->pending_since >= RUNNER_FLUSH_S)
        rc = batch_write(r);
    progress_update(&r->pg, ++r->rows_done, r->rows_total, "rows");
    if (!rc && stop_requested) rc = QG_ERR_INTERRUPTED;
    return rc;
}

/* the rows still in the batch: stored when the trial went well or a stop
 * was asked for (the rows done before a stop are kept for --resume),
 * dropped when it failed */
static int flush(struct runner *r, int ok)
{
    if (!r->pending && !r->n_refs) return QG_OK;
    if (!(ok | stop_requested)) {
        batch_drop(r);
        refs_drop(r);
        return QG_OK;
    }
    return batch_write(r);
}

struct row_sink {
    struct runner *r;
    int64_t trial;
};

static int on_row(void *ud, const struct task_row *x)
{
    struct row_sink *k = ud;
    struct store_item it = {.trial_id = k->trial,
                            .idx = x->idx,
                            .cluster = x->cluster,
                            .nll = x->nll,
                            .n_tokens = x->n_tokens,
                            .n_bytes = x->n_bytes,
                            .n_words = x->n_words,
                            .correct = x->correct,
                            .score = x->score,
                            .prediction = x->prediction,
                            .extracted = x->extracted,
                            .output_hash = x->output_hash,
                            .extra_json = x->extra_json,
                            .kld_sum = NAN,
                            .top1_agree = NAN,
                            .dp_sum = NAN};
    return put(k->r, &it);
}

static char *model_types(const char *path, int64_t *n_params, char *arch, size_t archn)
{
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    if (gguf_open(path, &g, err, sizeof err)) return NULL;
    struct model_info m;
    model_info_read(g, &m);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < m.n_types; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", ggml_type_name(m.types[i].type));
        cJSON_AddNumberToObject(o, "count", (double)m.types[i].count);
        cJSON_AddNumberToObject(o, "bytes", (double)m.types[i].bytes);
        cJSON_AddItemToArray(a, o);
    }
    *n_params = m.n_params;
    snprintf(arch, archn, "%s", m.arch);
    char *s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    gguf_close(g);
    return s;
}

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
    if (sha && hash_sha256_file(file, now, e2, sizeof e2) == QG_OK && strcmp(now, sha))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s changed since run %lld (sha256 %.12s..., now %.12s...): its rows would "
                       "mix two models; start a new run",
                       p->specs[m], (long long)p->resume, sha, now);
    r->model_ids[m] = json_int(mj, "id", 0);
    return QG_OK;
}

/* resume: check the stored run matches, and find its model and task ids */
static int resume_setup(struct runner *r, char *err, size_t errlen)
{
    const struct runner_params *p = r->p;
    cJSON *run;
    int rc = store_run_json(r->s, p->resume, &run);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    r->run_id = p->resume;
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
    if (!rc) { /* numbers from now on may come from other kernels */
        char kernels[128];
        kernel_set_describe(kernels, sizeof kernels);
        if ((rc = store_run_add_kernels(r->s, r->run_id, kernels)))
            qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    }
    r->task_ids = calloc((size_t)r->suite->n_tasks, sizeof *r->task_ids);
    if (!rc && !r->task_ids) rc = QG_ERR_NOMEM;
    for (int t = 0; t < r->suite->n_tasks && !rc; t++) {
        const cJSON *tj;
        cJSON_ArrayForEach(tj,
                           tasks) if (!strcmp(json_str(tj, "name", ""), r->suite->tasks[t].name))
            r->task_ids[t] = json_int(tj, "id", 0);
        if (!r->task_ids[t])
            rc = qg_errf(err, errlen, QG_ERR_DATA, "run %lld has no task '%s'",
                         (long long)p->resume, r->suite->tasks[t].name);
    }
    cJSON_Delete(run);
    if (!rc) rc = store_run_set_status(r->s, r->run_id, STORE_RUN_RUNNING);
    return rc;
}

/* The trial of (model, task, repeat): 1 when it is already done (skip);
 * else 0 with *id a fresh or restarted trial. */
static int trial_for(struct runner *r, int m, int t, int repeat, int64_t *id, char *err,
                     size_t errlen)
{
    int status;
    int rc = store_trial_find(r->s, r->run_id, r->p->names[m], r->task_ids[t], repeat, id, &status);
    if (rc == QG_OK) {
        if (status == STORE_TRIAL_DONE) return 1;
        rc = store_trial_restart(r->s, *id);
        return rc ? qg_errf(err, errlen, rc, "%s", store_errmsg(r->s)) : 0;
    }
    if (rc != QG_ERR_NOTFOUND) return qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    struct store_trial_new tr = {.run_id = r->run_id,
                                 .model_id = r->model_ids[m],
                                 .task_id = r->task_ids[t],
                                 .repeat = repeat,
                                 .seed = (int64_t)r->p->seed + repeat};
    rc = store_trial_create(r->s, &tr, id);
    return rc ? qg_errf(err, errlen, rc, "%s", store_errmsg(r->s)) : 0;
}

/* run, models and tasks rows */
/* What is stored of a model file: read before the setup transaction, so
 * that hashing a large file holds no lock. */
struct model_facts {
    char sha[HASH_HEX_LEN + 1], arch[64];
    int64_t n_params, bytes;
    char *types_json;
};

static void model_facts_read(const char *full, const char *sha, struct model_facts *f)
{
    char e2[QG_ERRMSG_MAX], spec[4096]; /* the file: a local spec without its ?query */
    qg_spec_file(full, spec, sizeof spec);
    struct stat st;
    f->n_params = -1;
    f->bytes = stat(spec, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
    f->types_json = model_types(spec, &f->n_params, f->arch, sizeof f->arch);
    if (sha && sha[0]) /* hashed already */
        snprintf(f->sha, sizeof f->sha, "%s", sha);
    else if (hash_sha256_file(spec, f->sha, e2, sizeof e2))
        f->sha[0] = '\0';
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
        struct store_model_new mn = {.name = p->names[i],
                                     .spec = p->specs[i],
                                     .backend = "cpu",
                                     .path = p->specs[i],
                                     .sha256 = mf[i].sha[0] ? mf[i].sha : NULL,
                                     .file_bytes = mf[i].bytes,
                                     .n_params = mf[i].n_params,
                                     .arch = mf[i].arch,
                                     .format = "gguf",
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

static int record_setup(struct runner *r, char *err, size_t errlen)
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

struct lock_sink {
    struct runner *r;
    int64_t ref_trial; /* the stored baseline's trial whose references are read */
    int64_t trials[RUNNER_MAX_MODELS];
    int64_t top1[RUNNER_MAX_MODELS], tokens[RUNNER_MAX_MODELS];
    double dp[RUNNER_MAX_MODELS];
};

static int on_window(void *ud, int64_t w, int m, const struct ppl_lockstep_window *x)
{
    struct lock_sink *k = ud;
    if (m == 0 && k->r->base.run > 0) return QG_OK; /* the stored baseline's rows were copied */
    struct store_item it = {.trial_id = k->trials[m],
                            .idx = w,
                            .cluster = w,
                            .nll = x->stat.nll,
                            .n_tokens = x->stat.tokens,
                            .n_bytes = x->stat.bytes,
                            .n_words = x->stat.words,
                            .correct = -1,
                            .score = NAN,
                            .kld_sum = m ? x->kld_sum : NAN,
                            .top1_agree = m ? (double)x->top1_agree : NAN,
                            .dp_sum = m ? x->dp_sum : NAN};
    k->top1[m] += x->top1_agree;
    k->tokens[m] += x->stat.tokens;
    k->dp[m] += x->dp_sum;
    return put(k->r, &it);
}

/* the baseline's reference of window w, stored with the batch */
static int ref_put(void *ud, int64_t w, const unsigned char *blob, size_t n)
{
    struct lock_sink *k = ud;
    struct runner *r = k->r;
    if (r->n_refs == RUNNER_BATCH) {
        int rc = batch_write(r);
        if (rc) return rc;
    }
    struct pending_ref *x = &r->refs[r->n_refs];
    if (!(x->blob = malloc(n))) return QG_ERR_NOMEM;
    memcpy(x->blob, blob, n);
    x->n = n, x->trial = k->trials[0], x->idx = w;
    r->n_refs++;
    return QG_OK;
}

/* the stored baseline's reference of window w */
static int ref_get(void *ud, int64_t w, unsigned char **blob, size_t *n)
{
    struct lock_sink *k = ud;
    return store_ref_get(k->r->base.store, k->ref_trial, w, blob, n);
}

static int finish_trial(struct runner *r, int64_t trial, int ok, int64_t items, int64_t tokens,
                        double secs, cJSON *metrics, const char *error)
{
    char *mj = metrics ? cJSON_PrintUnformatted(metrics) : NULL;
    struct store_trial_result res = {.status = ok ? STORE_TRIAL_DONE : STORE_TRIAL_FAILED,
                                     .n_items = items,
                                     .n_tokens = tokens,
                                     .wall_seconds = secs,
                                     .deterministic = -1,
                                     .metrics_json = mj,
                                     .error = error};
    int rc = store_trial_finish(r->s, trial, &res);
    free(mj);
    return rc;
}

/* Tokenizes a perplexity task's text with every model; they must agree. */
static int lockstep_tokens(struct runner *r, const struct task_config *st, int32_t **ids,
                           int64_t *k, char *err, size_t errlen)
{
    const struct runner_params *p = r->p;
    char *buf = NULL;
    size_t n;
    int rc = task_read_text(st, &buf, &n, err, errlen);
    int m0 = r->base.run > 0; /* the first model tokenizing: the baseline, unless reused */
    for (int m = m0; m < p->n_models && !rc; m++) {
        if ((rc = backend_tokenize(&r->b[m], buf, n, 1, &ids[m], &k[m])))
            qg_errf(err, errlen, rc, "tokenizing failed");
        else if (m > m0 &&
                 (k[m] != k[m0] || memcmp(ids[m], ids[m0], (size_t)k[m0] * sizeof *ids[0]) != 0))
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "task '%s': models '%s' and '%s' tokenize the text differently; "
                         "a paired comparison needs the same tokens",
                         st->name, p->names[m0], p->names[m]);
    }
    free(buf);
    return rc;
}

/* The trials of every model on task t at repeat: 1 in *all_done when all
 * are done already; else each is restarted or created (lockstep: when any
 * model's trial is unfinished, all rerun, the others' rows overwritten with
 * identical values). */
static int lockstep_trials(struct runner *r, int t, int repeat, int64_t *trials, int *all_done,
                           char *err, size_t errlen)
{
    const struct runner_params *p = r->p;
    *all_done = 1;
    int m0 = r->base.run > 0; /* a reused baseline's trials are copied, never rerun */
    for (int m = m0; m < p->n_models; m++) {
        int64_t id;
        int tstatus;
        if (store_trial_find(r->s, r->run_id, p->names[m], r->task_ids[t], repeat, &id, &tstatus) !=
                QG_OK ||
            tstatus != STORE_TRIAL_DONE)
            *all_done = 0;
    }
    int rc = QG_OK;
    for (int m = m0; m < p->n_models && !rc && !*all_done; m++) {
        int tstatus;
        int f = store_trial_find(r->s, r->run_id, p->names[m], r->task_ids[t], repeat, &trials[m],
                                 &tstatus);
        if (f == QG_OK) {
            rc = store_trial_restart(r->s, trials[m]);
        } else if (f == QG_ERR_NOTFOUND) {
            struct store_trial_new tr = {.run_id = r->run_id,
                                         .model_id = r->model_ids[m],
                                         .task_id = r->task_ids[t],
                                         .repeat = repeat,
                                         .seed = (int64_t)p->seed + repeat};
            rc = store_trial_create(r->s, &tr, &trials[m]);
        } else {
            rc = f;
        }
        if (rc) qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    }
    return rc;
}

/* A lockstep trial's metrics: PPL figures, and for a candidate with KLD
 * (kld NULL or NaN: a backend without full rows or top-K) its summary. */
static cJSON *lockstep_metrics(const struct ppl_result *res, double *kld, int64_t n_kld, int top_k,
                               const struct lock_sink *ks, int m)
{
    cJSON *mj = cJSON_CreateObject();
    cJSON_AddNumberToObject(mj, "ppl", res->ppl);
    cJSON_AddNumberToObject(mj, "ppl_se_cluster", res->ppl_se_cluster);
    cJSON_AddNumberToObject(mj, "nll_mean", res->nll_mean);
    cJSON_AddNumberToObject(mj, "bits_per_byte", res->bits_per_byte);
    cJSON_AddNumberToObject(mj, "tokens_scored", (double)res->tokens);
    if (m == 0 || n_kld <= 0 || !kld || isnan(kld[0])) return mj;
    struct kld_summary s;
    kld_summarize(kld, n_kld, &s);
    cJSON_AddNumberToObject(mj, "kld_mean", s.mean);
    cJSON_AddNumberToObject(mj, "kld_median", s.median);
    cJSON_AddNumberToObject(mj, "kld_p90", s.p90);
    cJSON_AddNumberToObject(mj, "kld_p99", s.p99);
    cJSON_AddNumberToObject(mj, "kld_p999", s.p999);
    cJSON_AddNumberToObject(mj, "kld_max", s.max);
    cJSON_AddNumberToObject(mj, "top1_agree", (double)ks->top1[m] / (double)ks->tokens[m]);
    cJSON_AddNumberToObject(mj, "dp_mean", ks->dp[m] / (double)ks->tokens[m]);
    if (top_k > 0) cJSON_AddNumberToObject(mj, "kld_top_k", top_k); /* a lower bound */
    return mj;
}

static void print_lockstep(const char *model, const char *task, int repeat, int m,
                           const struct ppl_result *res, const cJSON *mj)
{
    printf("  %-10s %-16s r%d %6lld windows  ppl %.4f", model, task, repeat,
           (long long)res->windows, res->ppl);
    const cJSON *km = cJSON_GetObjectItem(mj, "kld_mean"),
                *t1 = cJSON_GetObjectItem(mj, "top1_agree");
    if (m > 0 && km && t1)
        printf("  KLD mean %.6f  same top-1 %.2f%%", km->valuedouble, 100 * t1->valuedouble);
    printf("\n");
}

/* one perplexity task, all models in lockstep */
/* sha256 of a token stream (its int32 ids as stored in memory) */
static void tokens_sha(const int32_t *ids, int64_t k, char out[HASH_HEX_LEN + 1])
{
    hash_sha256_mem(ids, (size_t)k * sizeof *ids, out);
}

/* The link to stored references: keep the baseline's (repeat 0, when
 * asked), or read a reused baseline's, checking first that the candidates
 * tokenize the text as it did. */
static int lockstep_refs(struct runner *r, int t, int repeat, const char *sha, struct lock_sink *ks,
                         struct ppl_ref_io *io, char *err, size_t errlen)
{
    const struct task_config *st = &r->suite->tasks[t];
    *io = (struct ppl_ref_io){.top_k = KLD_REF_TOP_K, .ud = ks};
    if (r->base.run <= 0) {
        if (r->p->keep_refs && repeat == 0) io->put = ref_put;
        return QG_OK;
    }
    if (strcmp(sha, r->base.tokens_sha[t]))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "task '%s': the candidates tokenize the text differently from the stored "
                       "baseline (run %lld); a paired comparison needs the same tokens",
                       st->name, (long long)r->base.run);
    ks->ref_trial = r->base.trial0[t];
    io->get = ref_get;
    return QG_OK;
}

/* Each model's trial of a finished (or failed) lockstep pass. */
static int lockstep_finish(struct runner *r, int t, int repeat, int rc,
                           const struct ppl_result *res, double *const *kld, int64_t n_kld,
                           const int *kld_top_k, const struct lock_sink *ks, const char *sha,
                           double secs, char *err, size_t errlen)
{
    const struct runner_params *p = r->p;
    for (int m = r->base.run > 0; m < p->n_models && ks->trials[m]; m++) {
        cJSON *mj = rc ? cJSON_CreateObject()
                       : lockstep_metrics(&res[m], kld[m], n_kld, kld_top_k[m], ks, m);
        if (!rc && m == 0) cJSON_AddStringToObject(mj, "tokens_sha256", sha);
        if (!rc && m > 0 && r->base.run > 0) /* its KLD: against the stored reference */
            cJSON_AddNumberToObject(mj, "kld_reference", (double)r->base.run);
        int rc2 = finish_trial(r, ks->trials[m], rc == QG_OK, res[m].windows, res[m].tokens, secs,
                               mj, rc ? err : NULL);
        if (!rc && rc2) rc = qg_errf(err, errlen, rc2, "%s", store_errmsg(r->s));
        if (!rc && !p->quiet)
            print_lockstep(p->names[m], r->suite->tasks[t].name, repeat, m, &res[m], mj);
        cJSON_Delete(mj);
    }
    return rc;
}

/* one perplexity task, all models in lockstep (a reused baseline: its
 * stored references in its place) */
static int run_lockstep(struct runner *r, int t, int repeat, char *err, size_t errlen)
{
    const struct task_config *st = &r->suite->tasks[t];
    const struct runner_params *p = r->p;
    int nm = p->n_models, all_done = 0, m0 = r->base.run > 0;
    r->cur_repeat = repeat;
    for (int m = m0; m < nm; m++)
        if (st->ctx > r->n_ctx[m])
            return qg_errf(err, errlen, QG_ERR_USAGE,
                           "task '%s': ctx %d is longer than model '%s''s context %d", st->name,
                           st->ctx, p->names[m], r->n_ctx[m]);
    int32_t *ids[RUNNER_MAX_MODELS] = {0};
    int64_t k[RUNNER_MAX_MODELS] = {0};
    struct lock_sink ks = {.r = r};
    struct ppl_ref_io io;
    char sha[HASH_HEX_LEN + 1] = ""; /* of the token stream: stored, and checked on reuse */
    int rc = lockstep_tokens(r, st, ids, k, err, errlen);
    if (!rc) tokens_sha(ids[m0], k[m0], sha);
    if (!rc) rc = lockstep_refs(r, t, repeat, sha, &ks, &io, err, errlen);
    if (!rc) rc = lockstep_trials(r, t, repeat, ks.trials, &all_done, err, errlen);
    double *kld[RUNNER_MAX_MODELS] = {0};
    int64_t n_kld = 0;
    struct ppl_result res[RUNNER_MAX_MODELS] = {0};
    const struct backend *bs[RUNNER_MAX_MODELS];
    for (int m = 0; m < nm; m++)
        bs[m] = m < m0 ? NULL : &r->b[m];
    struct ppl_params pp = ppl_task_params(st, p->shard_index, p->shard_count);
    pp.ref = &io;
    int kld_top_k[RUNNER_MAX_MODELS] = {0};
    double t0 = qg_now_s();
    if (!rc && !all_done)
        rc = ppl_evaluate_lockstep(bs, nm, ids[m0], k[m0], &pp, on_window, &ks, kld, &n_kld,
                                   kld_top_k, res, err, errlen);
    double secs = qg_now_s() - t0; /* the joint pass: every model's trial records it */
    if (rc && !all_done) ppl_task_error(st, err, errlen);
    if (!all_done) {
        int frc = flush(r, rc == QG_OK);
        if (!rc) rc = frc;
        if (r->store_failed) qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
        rc = lockstep_finish(r, t, repeat, rc, res, kld, n_kld, kld_top_k, &ks, sha, secs, err,
                             errlen);
    }
    for (int m = 0; m < nm; m++) {
        free(ids[m]);
        free(kld[m]);
    }
    return rc;
}

static int run_single(struct runner *r, int t, int m, int repeat, const struct backend *b,
                      char *err, size_t errlen)
{
    const struct task_config *st = &r->suite->tasks[t];
    int64_t trial;
    err[0] = '\0';
    r->cur_repeat = repeat;
    int rc = trial_for(r, m, t, repeat, &trial, err, errlen);
    if (rc == 1) return QG_OK; /* finished before */
    if (rc) return rc;
    struct row_sink k = {r, trial};
    struct task_summary sum;
    err[0] = '\0';
    struct task_shard sh = {r->p->shard_index, r->p->shard_count};
    rc = task_run(st, b, r->n_ctx[m], r->p->seed + (uint64_t)repeat, sh, on_row, &k, &sum, err,
                  errlen);
    int frc = flush(r, rc == QG_OK);
    if (!rc) rc = frc;
    if (r->store_failed) qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    cJSON *mj = cJSON_CreateObject();
    cJSON_AddNumberToObject(mj, sum.metric_name ? sum.metric_name : "metric", sum.metric);
    if (sum.metric2_name && !isnan(sum.metric2))
        cJSON_AddNumberToObject(mj, sum.metric2_name, sum.metric2);
    int rc2 = finish_trial(r, trial, rc == QG_OK, sum.items, sum.tokens, sum.seconds, mj,
                           rc ? (err[0] ? err : store_errmsg(r->s)) : NULL);
    cJSON_Delete(mj);
    if (!rc && rc2) rc = qg_errf(err, errlen, rc2, "%s", store_errmsg(r->s));
    if (rc && !err[0]) qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    if (!rc && !r->p->quiet)
        printf("  %-10s %-16s r%d %6lld items    %s %.4f\n", r->p->names[m], st->name, repeat,
               (long long)sum.items, sum.metric_name, sum.metric);
    return rc;
}

/* 1 when every trial of models 0..n_models-1 at repeat 1 has exactly the
 * rows of repeat 0 */
static int repeats_identical(struct runner *r, int n_models)
{
    for (int t = 0; t < r->suite->n_tasks; t++)
        for (int m = 0; m < n_models; m++) {
            int64_t a, b;
            if (store_trial_find(r->s, r->run_id, r->p->names[m], r->task_ids[t], 0, &a, NULL) ||
                store_trial_find(r->s, r->run_id, r->p->names[m], r->task_ids[t], 1, &b, NULL))
                return 0;
            struct item_row *x, *y;
            int64_t nx, ny;
            if (store_items_read(r->s, a, &x, &nx)) return 0;
            if (store_items_read(r->s, b, &y, &ny)) {
                free(x);
                return 0;
            }
            int same = nx == ny;
            for (int64_t i = 0; same && i < nx; i++)
                same = x[i].idx == y[i].idx && strcmp(x[i].output_hash, y[i].output_hash) == 0 &&
                       x[i].correct == y[i].correct &&
                       (x[i].nll == y[i].nll || (isnan(x[i].nll) && isnan(y[i].nll)));
            free(x);
            free(y);
            if (!same) return 0;
        }
    return 1;
}

/* Rows the run will write (windows or items x models x repeats), for the
 * progress bar's ETA; 0 when something cannot be counted. */
static int64_t estimate_rows(struct runner *r)
{
    const struct runner_params *p = r->p;
    int64_t total = 0;
    char err[QG_ERRMSG_MAX];
    for (int t = 0; t < r->suite->n_tasks; t++) {
        const struct task_config *st = &r->suite->tasks[t];
        int64_t n = 0;
        if (st->kind == TASK_PERPLEXITY) {
            int32_t *ids = NULL;
            int64_t k = 0;
            if (ppl_task_tokens(st, &r->b[r->base.run > 0], &ids, &k, err, sizeof err)) return 0;
            int rc = QG_OK;
            struct ppl_params pp = ppl_task_params(st, 0, 1);
            struct ppl_window *w = NULL;
            if (rc || ppl_plan(&pp, k, &w, &n, err, sizeof err)) n = 0;
            free(w);
            free(ids);
        } else if (st->kind == TASK_MULTIPLE_CHOICE) {
            struct mc_item *it;
            if (task_mc_items(st, &it, &n, err, sizeof err)) return 0;
            mc_items_free(it, n);
        } else {
            struct gen_item *it;
            if (task_gen_items(st, &it, &n, err, sizeof err)) return 0;
            gen_items_free(it, n);
        }
        if (p->shard_count > 1) n = (n + p->shard_count - 1 - p->shard_index) / p->shard_count;
        total += n;
    }
    /* every model once, then the baseline's repeats (deterministic runs stop there) */
    return total * (p->n_models + (p->repeats > 1));
}

/* The store's response cache, for remote backends. Repeat 0 uses the
 * request's own key; repeat k > 0 a key of its own ("KEY#repeat=k"), so
 * that a repeat asks the server again (the noise measured is the
 * server's, not the cache's) while a resume or an identical rerun is
 * still served from the cache. */
static void cache_key_for(const struct runner *r, const char *key, char *out, size_t n)
{
    if (r->cur_repeat > 0)
        snprintf(out, n, "%s#repeat=%d", key, r->cur_repeat);
    else
        snprintf(out, n, "%s", key);
}

static char *cache_get(void *ud, const char *key)
{
    const struct runner *r = ud;
    char k[256], *v = NULL;
    cache_key_for(r, key, k, sizeof k);
    return store_cache_get(r->s, k, &v) == QG_OK ? v : NULL;
}

static void cache_put(void *ud, const char *key, const char *endpoint, const char *model,
                      const char *value)
{
    const struct runner *r = ud;
    char k[256];
    cache_key_for(r, key, k, sizeof k);
    (void)store_cache_put(r->s, k, endpoint, model, value);
}

/* Every task at repeat rep: perplexity in lockstep, the rest model by model
 * (a reused baseline is not run). */
static int run_repeat(struct runner *r, int rep, char *err, size_t errlen)
{
    int rc = QG_OK;
    for (int t = 0; t < r->suite->n_tasks && !rc; t++) {
        if (r->suite->tasks[t].kind == TASK_PERPLEXITY && r->p->n_models > 1)
            rc = run_lockstep(r, t, rep, err, errlen);
        else
            for (int m = r->base.run > 0; m < r->p->n_models && !rc; m++)
                rc = run_single(r, t, m, rep, &r->b[m], err, errlen);
    }
    return rc;
}

/* With a reused baseline: the candidates, once when the stored baseline was
 * deterministic, else every repeat. */
static int run_candidates(struct runner *r, int *deterministic, char *err, size_t errlen)
{
    int rc = QG_OK, reps = r->base.deterministic ? 1 : r->p->repeats;
    *deterministic = r->base.deterministic;
    if (!r->p->quiet || r->p->progress)
        printf("  baseline reused from run %lld%s%s (%s); running the candidates only\n",
               (long long)r->base.run, r->base.path ? " of " : "", r->base.path ? r->base.path : "",
               r->base.deterministic ? "deterministic" : "not deterministic: candidates repeat");
    for (int rep = 0; rep < reps && !rc; rep++)
        rc = run_repeat(r, rep, err, errlen);
    return rc;
}

/* The stored baseline: found, or (asked to find one) none and a note. */
static int find_baseline(struct runner *r, char *err, size_t errlen)
{
    const struct runner_params *p = r->p;
    if (p->noise_perturb || p->resume > 0 || p->shard_count > 1)
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "a stored baseline cannot be combined with --noise, --resume or --shard");
    char file[4096];
    qg_spec_file(p->specs[0], file, sizeof file);
    int rc = hash_sha256_file(file, r->base_sha, err, errlen);
    if (!rc)
        rc = baseline_find(r->s, p->baseline_db, p->baseline_run, r->base_sha, r->suite, &r->base,
                           err, errlen);
    if (rc == QG_ERR_NOTFOUND && p->baseline_run < 0) { /* none yet: run it, keep it */
        if (!p->quiet || p->progress)
            fprintf(stderr, "qgate: no stored baseline to reuse (%s); running it now\n", err);
        baseline_release(&r->base);
        err[0] = '\0';
        return QG_OK;
    }
    return rc;
}

/* The stored baseline's trials and items, copied into the new run. */
static int copy_baseline(struct runner *r, char *err, size_t errlen)
{
    int rc = QG_OK;
    for (int t = 0; t < r->suite->n_tasks && !rc; t++)
        rc = store_copy_trials(r->s, r->base.path, r->base.run, r->base.model,
                               r->suite->tasks[t].name, r->run_id, r->model_ids[0], r->task_ids[t]);
    return rc ? qg_errf(err, errlen, rc, "%s", store_errmsg(r->s)) : QG_OK;
}

/* The repeats. The baseline repeats alone first: when it reproduces itself
 * exactly, the run is deterministic and nothing else needs repeating. */
static int run_repeats(struct runner *r, int *deterministic, int *next_repeat, char *err,
                       size_t errlen)
{
    const struct runner_params *p = r->p;
    int rc = QG_OK;
    for (int rep = 0; rep < p->repeats && !rc; rep++) {
        if (rep == 1) {
            for (int t = 0; t < r->suite->n_tasks && !rc; t++)
                rc = run_single(r, t, 0, 1, &r->b[0], err, errlen);
            if (!rc && repeats_identical(r, 1)) {
                *deterministic = 1;
                *next_repeat = 2;
                if (!p->quiet)
                    printf("  the baseline's repeats 0 and 1 are identical: deterministic, no "
                           "more repeats\n");
                break;
            }
        }
        if (!rc) rc = run_repeat(r, rep, err, errlen);
    }
    return rc;
}

/* Model m can run every selected task: log-likelihood tasks (perplexity,
 * multiple choice) need scores of prompt tokens, which some endpoints do
 * not give. Checked before anything is stored. */
static int check_caps(const struct runner *r, int m, unsigned caps, char *err, size_t errlen)
{
    for (int t = 0; t < r->suite->n_tasks; t++) {
        const struct task_config *st = &r->suite->tasks[t];
        if (st->kind == TASK_GENERATION || (caps & BACKEND_CAP_SCORE)) continue;
        return qg_errf(err, errlen, QG_ERR_UNAVAILABLE,
                       "task '%s' (%s) needs the log-probs of prompt tokens, and model '%s' (%s) "
                       "gives none: %s. Servers that give them: vLLM (echo or prompt_logprobs), "
                       "qgate serve. Generation and exact-match tasks run against any "
                       "completions or chat endpoint (select them with --tasks).",
                       st->name, task_kind_name(st->kind), r->p->names[m], r->p->specs[m],
                       backend_errmsg(&r->b[m]));
    }
    return QG_OK;
}

int runner_run(struct store *s, const struct runner_params *p, int64_t *run_id, char *err,
               size_t errlen)
{
    *run_id = 0;
    struct runner r = {.s = s, .p = p};
    err[0] = '\0';
    int rc = suite_load(p->suite_path, p->allow_changed, &r.suite, err, errlen);
    if (!rc) rc = suite_select(r.suite, p->tasks, p->limit, err, errlen);
    if (rc) {
        suite_free(r.suite);
        return rc;
    }
    if (p->baseline_run) rc = find_baseline(&r, err, errlen);
    if (rc) {
        suite_free(r.suite);
        baseline_release(&r.base);
        return rc;
    }
    struct backend_cache cache = {.ud = &r, .get = cache_get, .put = cache_put};
    for (int m = r.base.run > 0; m < p->n_models && !rc; m++) { /* a reused baseline: not opened */
        struct backend_open_params bp = {.n_threads = p->threads,
                                         .cache = p->no_cache ? NULL : &cache};
        if ((rc = backend_open(p->specs[m], &bp, &r.b[m], err, errlen))) break;
        struct backend_info info;
        backend_info(&r.b[m], &info);
        r.n_ctx[m] = info.n_ctx_train;
        rc = check_caps(&r, m, info.caps, err, errlen);
    }
    if (!rc) rc = record_setup(&r, err, errlen);
    if (!rc && r.base.run > 0) rc = copy_baseline(&r, err, errlen);
    *run_id = r.run_id;
    progress_init(&r.pg, "run", p->quiet && !p->progress);
    if (!rc && r.pg.enabled) r.rows_total = estimate_rows(&r);
    int deterministic = 0, next_repeat = p->repeats;
    if (!rc && r.base.run > 0)
        rc = run_candidates(&r, &deterministic, err, errlen);
    else if (!rc)
        rc = run_repeats(&r, &deterministic, &next_repeat, err, errlen);
    if (!rc && p->noise_perturb) {
        /* the baseline once more, each window evaluated in two batches */
        struct backend pb;
        struct backend_open_params bp = {.n_threads = p->threads, .perturb = 1};
        if ((rc = backend_open(p->specs[0], &bp, &pb, err, errlen)) == QG_OK) {
            if (!p->quiet)
                printf("  noise: baseline repeat %d under a perturbation (two-batch evaluation)\n",
                       next_repeat);
            for (int t = 0; t < r.suite->n_tasks && !rc; t++)
                rc = run_single(&r, t, 0, next_repeat, &pb, err, errlen);
            backend_close(&pb);
        }
    }
    progress_done(&r.pg);
    if (r.run_id) {
        if (!rc && p->repeats > 1) store_run_mark_deterministic(s, r.run_id, deterministic);
        store_run_set_status(s, r.run_id,
                             rc == QG_ERR_INTERRUPTED ? STORE_RUN_INTERRUPTED
                             : rc                     ? STORE_RUN_FAILED
                                                      : STORE_RUN_DONE);
        if (rc == QG_ERR_INTERRUPTED)
            snprintf(err, errlen,
                     "interrupted: run %lld keeps the rows done so far; continue it with the same "
                     "command and --resume %lld",
                     (long long)r.run_id, (long long)r.run_id);
    }
    for (int m = 0; m < p->n_models; m++)
        backend_close(&r.b[m]);
    baseline_release(&r.base);
    free(r.task_ids);
    suite_free(r.suite);
    return rc;
}

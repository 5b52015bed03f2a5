/* runner — runs a suite: the repeats, the tasks per model, rows to the
 * store in batches, the response cache, a stored baseline in place of the
 * baseline model, and Ctrl-C (runner.h). */
#include "harness/runner.h"
#include "harness/runner_impl.h"
#include "core/json.h"
#include "metrics/kld.h"
#include "backends/backend.h"
#include "datasets/hash.h"
#include "harness/baseline.h"
#include "harness/progress.h"
#include "metrics/kld_ref.h"
#include "core/status.h"
#include "harness/suite.h"
#include "reports/escape.h"
#include "core/util.h"
#include "tasks/perplexity.h"
#include "tasks/run.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
int rn_batch_write(struct runner *r)
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
int rn_put(struct runner *r, const struct store_item *it)
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
        rc = rn_batch_write(r);
    progress_update(&r->pg, ++r->rows_done, r->rows_total, "rows");
    if (!rc && stop_requested) rc = QG_ERR_INTERRUPTED;
    return rc;
}

/* the rows still in the batch: stored when the trial went well or a stop
 * was asked for (the rows done before a stop are kept for --resume),
 * dropped when it failed */
int rn_flush(struct runner *r, int ok)
{
    if (!r->pending && !r->n_refs) return QG_OK;
    if (!(ok | stop_requested)) {
        batch_drop(r);
        refs_drop(r);
        return QG_OK;
    }
    return rn_batch_write(r);
}

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
    return rn_put(k->r, &it);
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

int rn_finish_trial(struct runner *r, int64_t trial, int ok, int64_t items, int64_t tokens,
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

static int run_single(struct runner *r, int t, int m, int repeat, const struct backend *b,
                      char *err, size_t errlen)
{
    const struct task_config *st = &r->suite->tasks[t];
    int64_t trial;
    err[0] = '\0';
    r->cur_repeat = repeat;
    snprintf(r->what, sizeof r->what, "run: %.100s on %.100s, repeat %d", st->name, r->p->names[m],
             repeat);
    r->pg.label = r->what;
    int rc = trial_for(r, m, t, repeat, &trial, err, errlen);
    if (rc == 1) return QG_OK; /* finished before */
    if (rc) return rc;
    struct row_sink k = {r, trial};
    struct task_summary sum;
    err[0] = '\0';
    struct task_shard sh = {r->p->shard_index, r->p->shard_count};
    rc = task_run(st, b, r->n_ctx[m], r->p->seed + (uint64_t)repeat, sh, on_row, &k, &sum, err,
                  errlen);
    int frc = rn_flush(r, rc == QG_OK);
    if (!rc) rc = frc;
    if (r->store_failed) qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    cJSON *mj = cJSON_CreateObject();
    cJSON_AddNumberToObject(mj, sum.metric_name ? sum.metric_name : "metric", sum.metric);
    if (sum.metric2_name && !isnan(sum.metric2))
        cJSON_AddNumberToObject(mj, sum.metric2_name, sum.metric2);
    if (sum.max_tokens_used > 0) { /* what generation was allowed, and a cap said */
        cJSON_AddNumberToObject(mj, "max_tokens", sum.max_tokens_used);
        if (sum.max_tokens_used < sum.max_tokens_asked) {
            cJSON_AddNumberToObject(mj, "max_tokens_asked", sum.max_tokens_asked);
            if (repeat == 0)
                fprintf(stderr,
                        "qgate: task '%s' on '%s': max_tokens %d capped at %d (half of the %d "
                        "positions the model gives a prompt); recorded with the trial\n",
                        st->name, r->p->names[m], sum.max_tokens_asked, sum.max_tokens_used,
                        r->n_ctx[m]);
        }
    }
    int rc2 = rn_finish_trial(r, trial, rc == QG_OK, sum.items, sum.tokens, sum.seconds, mj,
                              rc ? (err[0] ? err : store_errmsg(r->s)) : NULL);
    cJSON_Delete(mj);
    if (!rc && rc2) rc = qg_errf(err, errlen, rc2, "%s", store_errmsg(r->s));
    if (rc && !err[0]) qg_errf(err, errlen, rc, "%s", store_errmsg(r->s));
    char mn[256], tn[256];
    if (!rc && !r->p->quiet)
        printf("  %-10s %-16s r%d %6lld items    %s %.4f\n", rn_term(r->p->names[m], mn, sizeof mn),
               rn_term(st->name, tn, sizeof tn), repeat, (long long)sum.items, sum.metric_name,
               sum.metric);
    return rc;
}

const char *rn_term(const char *s, char *buf, size_t n)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 16);
    esc_term(&b, s);
    snprintf(buf, n, "%s", b.failed || !b.data ? "?" : b.data);
    sbuf_release(&b);
    return buf;
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
            rc = rn_run_lockstep(r, t, rep, err, errlen);
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
    int rc = QG_OK;
    if (p->baseline_sha)
        snprintf(r->base_sha, sizeof r->base_sha, "%s", p->baseline_sha);
    else
        rc = backend_model_sha256(file, r->base_sha, err, errlen);
    if (!rc)
        rc = baseline_find(r->s, p->baseline_db, p->baseline_run, r->base_sha, r->suite, &r->base,
                           err, errlen);
    if (rc == QG_ERR_NOTFOUND && p->baseline_sha) { /* no file to run it from */
        char why[QG_ERRMSG_MAX];
        snprintf(why, sizeof why, "%s", err);
        return qg_errf(err, errlen, QG_ERR_NOINPUT,
                       "the baseline '%s' is not here and %s; give the baseline file, or the "
                       "database of a run that can stand in",
                       p->specs[0], why);
    }
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
    char names[1024] = "";
    size_t used = 0;
    int n = 0;
    for (int t = 0; t < r->suite->n_tasks && !(caps & BACKEND_CAP_SCORE); t++) {
        const struct task_config *st = &r->suite->tasks[t];
        if (st->kind == TASK_GENERATION) continue;
        if (used < sizeof names) { /* every such task named, not the first alone */
            int k = snprintf(names + used, sizeof names - used, "%s'%s' (%s)", n ? ", " : "",
                             st->name, task_kind_name(st->kind));
            used = k > 0 ? used + (size_t)k : used;
        }
        n++;
    }
    if (!n) return QG_OK;
    return qg_errf(err, errlen, QG_ERR_UNAVAILABLE,
                   "task%s %s need%s the log-probs of prompt tokens, and model '%s' (%s) gives "
                   "none: %s. Servers that give them: vLLM (echo or prompt_logprobs), SGLang and "
                   "TGI (their /generate), qgate serve. Generation and exact-match tasks run "
                   "against any completions or chat endpoint (select them with --tasks).",
                   n > 1 ? "s" : "", names, n > 1 ? "" : "s", r->p->names[m], r->p->specs[m],
                   backend_errmsg(&r->b[m]));
}

/* One line per remote model: what open detected (also stored with it). */
static void say_remote(const char *name, const struct backend_info *info)
{
    cJSON *o = cJSON_Parse(info->provenance);
    fprintf(stderr,
            "qgate: model '%s': %s serves '%s' (%s%s%s); scoring route: %s; context %lld "
            "(%s)\n",
            name, json_str(o, "endpoint", "?"), json_str(o, "model", "?"),
            json_str(o, "server", "?"), json_get(o, "system_fingerprint") ? ", " : "",
            json_str(o, "system_fingerprint", ""), json_str(o, "route", "?"), json_int(o, "ctx", 0),
            json_str(o, "ctx_source", "?"));
    cJSON_Delete(o);
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
        if (info.provenance && (!p->quiet || p->progress)) say_remote(p->names[m], &info);
        rc = check_caps(&r, m, info.caps, err, errlen);
    }
    if (!rc) rc = rn_record_setup(&r, err, errlen);
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

/* runner_lockstep — perplexity tasks with all models on the same windows:
 * KLD, top-1 and dp per window against the baseline (or a stored
 * baseline's top-K references), and the trials' totals. */
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
#include "core/util.h"
#include "tasks/perplexity.h"
#include "tasks/run.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    return rn_put(k->r, &it);
}

/* the baseline's reference of window w, stored with the batch */
static int ref_put(void *ud, int64_t w, const unsigned char *blob, size_t n)
{
    struct lock_sink *k = ud;
    struct runner *r = k->r;
    if (r->n_refs == RUNNER_BATCH) {
        int rc = rn_batch_write(r);
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
    if (res->seconds > 0) /* this model's own time in the joint pass */
        cJSON_AddNumberToObject(mj, "eval_seconds", res->seconds);
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
    char mn[256], tn[256];
    printf("  %-10s %-16s r%d %6lld windows  ppl %.4f", rn_term(model, mn, sizeof mn),
           rn_term(task, tn, sizeof tn), repeat, (long long)res->windows, res->ppl);
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
    for (int m = 1; m < r->p->n_models && r->base.n_vocab > 0; m++) {
        struct backend_info bi;
        backend_info(&r->b[m], &bi);
        if (bi.n_vocab != r->base.n_vocab)
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "model '%s' has %d tokens, the stored baseline (run %lld) %d: KLD and "
                           "a paired comparison need one vocabulary",
                           r->p->names[m], bi.n_vocab, (long long)r->base.run, r->base.n_vocab);
    }
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
        if (!rc && m == 0) {
            struct backend_info bi;
            cJSON_AddStringToObject(mj, "tokens_sha256", sha);
            backend_info(&r->b[0], &bi); /* checked against candidates replaying it */
            cJSON_AddNumberToObject(mj, "n_vocab", bi.n_vocab);
        }
        if (!rc && m > 0 && r->base.run > 0) /* its KLD: against the stored reference */
            cJSON_AddNumberToObject(mj, "kld_reference", (double)r->base.run);
        int rc2 = rn_finish_trial(r, ks->trials[m], rc == QG_OK, res[m].windows, res[m].tokens,
                                  secs, mj, rc ? err : NULL);
        if (!rc && rc2) rc = qg_errf(err, errlen, rc2, "%s", store_errmsg(r->s));
        if (!rc && !p->quiet)
            print_lockstep(p->names[m], r->suite->tasks[t].name, repeat, m, &res[m], mj);
        cJSON_Delete(mj);
    }
    return rc;
}

/* one perplexity task, all models in lockstep (a reused baseline: its
 * stored references in its place) */
int rn_run_lockstep(struct runner *r, int t, int repeat, char *err, size_t errlen)
{
    const struct task_config *st = &r->suite->tasks[t];
    const struct runner_params *p = r->p;
    int nm = p->n_models, all_done = 0, m0 = r->base.run > 0;
    r->cur_repeat = repeat;
    snprintf(r->what, sizeof r->what, "run: %.100s, %d models in lockstep, repeat %d", st->name,
             nm - m0, repeat);
    r->pg.label = r->what;
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
        int frc = rn_flush(r, rc == QG_OK);
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

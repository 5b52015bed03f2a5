/* run — one task on one backend, row by row. */
#include "tasks/run.h"
#include "datasets/hash.h"
#include "core/status.h"
#include "core/util.h"
#include "tasks/perplexity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int in_shard(struct task_shard sh, int64_t idx)
{
    return sh.count <= 1 || idx % sh.count == sh.index;
}

struct ppl_sink {
    struct task_shard sh;
    task_row_fn fn;
    void *ud;
};

/* each window's row as soon as it is scored */
static int ppl_row(void *ud, int64_t w, int64_t total, const struct ppl_window_stat *ws)
{
    (void)total;
    const struct ppl_sink *k = ud;
    if (!in_shard(k->sh, w)) return QG_OK;
    char id[32];
    snprintf(id, sizeof id, "w%lld", (long long)w);
    struct task_row row = {.idx = w,
                           .id = id,
                           .cluster = w,
                           .nll = ws->nll,
                           .n_tokens = ws->tokens,
                           .n_bytes = ws->bytes,
                           .n_words = ws->words,
                           .correct = -1,
                           .score = NAN};
    return k->fn(k->ud, &row);
}

static int run_ppl(const struct task_config *t, const struct backend *b, int n_ctx,
                   struct task_shard sh, task_row_fn fn, void *ud, struct task_summary *sum,
                   char *err, size_t errlen)
{
    int32_t *ids;
    int64_t k;
    int rc = ppl_task_tokens(t, b, &ids, &k, err, errlen);
    if (rc) return rc;
    if (t->ctx > n_ctx) {
        free(ids);
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "task '%s': ctx %d is longer than the model's context %d", t->name, t->ctx,
                       n_ctx);
    }
    struct ppl_params p = ppl_task_params(t, sh.index, sh.count);
    struct ppl_run r;
    struct ppl_sink sink = {sh, fn, ud};
    rc = ppl_evaluate(b, ids, k, &p, ppl_row, &sink, &r, err, errlen);
    if (rc) ppl_task_error(t, err, errlen);
    free(ids);
    if (rc) return rc;
    sum->items = r.n_windows;
    sum->metric = r.result.ppl;
    sum->metric_name = "ppl";
    sum->metric2 = r.result.bits_per_byte;
    sum->metric2_name = "bits_per_byte";
    sum->tokens = r.tokens_evaluated;
    ppl_run_release(&r);
    return rc;
}

/* Writes the row of one scored multiple-choice item. */
static int mc_row(const struct mc_item *it, int64_t i, const struct mc_result *r, task_row_fn fn,
                  void *ud, int64_t *right, int64_t *right_norm)
{
    cJSON *x = cJSON_CreateObject();
    cJSON *ll = cJSON_AddArrayToObject(x, "ll"), *tk = cJSON_AddArrayToObject(x, "tokens");
    int64_t toks = 0;
    for (int c = 0; c < it->n_choices; c++) {
        cJSON_AddItemToArray(ll, cJSON_CreateNumber(r->ll[c]));
        cJSON_AddItemToArray(tk, cJSON_CreateNumber(r->tokens[c]));
        toks += r->tokens[c];
    }
    cJSON_AddStringToObject(x, "id", it->id);
    cJSON_AddStringToObject(x, "prompt", it->context ? it->context : it->contexts[0]);
    cJSON *chs = cJSON_AddArrayToObject(x, "choices");
    for (int c = 0; c < it->n_choices; c++)
        cJSON_AddItemToArray(chs, cJSON_CreateString(it->choices[c]));
    cJSON_AddNumberToObject(x, "gold", it->gold);
    cJSON_AddNumberToObject(x, "pred", r->pred);
    cJSON_AddNumberToObject(x, "pred_norm", r->pred_norm);
    cJSON_AddNumberToObject(x, "pred_tok", r->pred_tok);
    cJSON_AddBoolToObject(x, "acc_norm", r->pred_norm == it->gold);
    char *extra = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    char pred[16];
    snprintf(pred, sizeof pred, "%d", r->pred);
    struct task_row row = {.idx = i,
                           .id = it->id,
                           .cluster = it->cluster,
                           .nll = -r->ll[it->gold],
                           .n_tokens = toks,
                           .n_bytes = -1,
                           .n_words = -1,
                           .correct = r->pred == it->gold,
                           .score = r->ll[it->gold],
                           .prediction = pred,
                           .extra_json = extra};
    *right += r->pred == it->gold;
    *right_norm += r->pred_norm == it->gold;
    int rc = extra ? fn(ud, &row) : QG_ERR_NOMEM;
    free(extra);
    return rc;
}

static int run_mc(const struct task_config *t, const struct backend *b, int n_ctx,
                  struct task_shard sh, task_row_fn fn, void *ud, struct task_summary *sum,
                  char *err, size_t errlen)
{
    struct mc_item *items;
    int64_t n;
    int rc = task_mc_items(t, &items, &n, err, errlen);
    if (!rc && (rc = task_check_selection(t, n, err, errlen))) mc_items_free(items, n);
    if (rc) return rc;
    int64_t right = 0, right_norm = 0, done = 0;
    /* items go to the backend MC_BATCH at a time (a remote backend keeps
     * their choices in flight together); rows are written in item order */
    enum { MC_BATCH = 16 };
    struct mc_item batch[MC_BATCH];
    struct mc_result results[MC_BATCH];
    int64_t index[MC_BATCH];
    int nb = 0, next = 0;
    for (int64_t i = 0; !rc && (i < n || next < nb);) {
        if (next == nb) { /* refill the batch */
            nb = next = 0;
            for (; i < n && nb < MC_BATCH; i++)
                if (in_shard(sh, i) && task_item_selected(t, i))
                    index[nb] = i, batch[nb++] = items[i];
            if (nb && (rc = mc_score_many(b, n_ctx, batch, nb, t->delimiter, results, err, errlen)))
                break;
            if (!nb) break;
        }
        int64_t k = next++;
        done++;
        sum->tokens += results[k].evaluated;
        rc = mc_row(&items[index[k]], index[k], &results[k], fn, ud, &right, &right_norm);
    }
    sum->items = done;
    sum->metric = done ? (double)right / (double)done : NAN;
    sum->metric_name = "acc";
    sum->metric2 = done ? (double)right_norm / (double)done : NAN;
    sum->metric2_name = "acc_norm";
    mc_items_free(items, n);
    return rc;
}

/* Every pipeline's answer from a generation's output: right[p] counts
 * each pipeline's correct answers; *first (malloc'd) and *first_ok are the
 * first pipeline's. Returns the row's extra JSON (malloc'd). */
static char *judge_output(const struct task_config *t, const struct gen_item *item, const char *out,
                          int64_t cut, int max_tokens, int64_t *right, char **first, int *first_ok,
                          int *failed)
{
    cJSON *x = cJSON_CreateObject(), *pj = cJSON_AddObjectToObject(x, "pipelines");
    if (cut) cJSON_AddNumberToObject(x, "prompt_tokens_dropped", (double)cut);
    cJSON_AddNumberToObject(x, "max_tokens", max_tokens); /* as sent, after any cap */
    cJSON_AddStringToObject(x, "id", item->id);
    size_t pl = strlen(item->prompt);
    /* the question itself: the tail after any few-shot examples */
    cJSON_AddStringToObject(x, "prompt", pl > 600 ? item->prompt + pl - 600 : item->prompt);
    cJSON_AddStringToObject(x, "target", item->targets[0]);
    for (int p = 0; p < t->n_pipelines; p++) {
        char *ans = extract_pipeline_extract(t->pipelines[p], out);
        if (!ans && !*failed) *failed = p + 1;
        int ok = 0;
        for (int g = 0; ans && g < item->n_targets && !ok; g++)
            ok = extract_normalized_equal(t->norm, ans, item->targets[g]);
        cJSON *o = cJSON_AddObjectToObject(pj, extract_pipeline_name(t->pipelines[p]));
        cJSON_AddStringToObject(o, "extracted", ans ? ans : "");
        cJSON_AddBoolToObject(o, "correct", ok);
        right[p] += ok;
        if (p == 0) {
            *first = ans;
            *first_ok = ok;
        } else {
            free(ans);
        }
    }
    char *extra = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    return extra;
}

static int run_gen(const struct task_config *t, const struct backend *b, int n_ctx, uint64_t seed,
                   struct task_shard sh, task_row_fn fn, void *ud, struct task_summary *sum,
                   char *err, size_t errlen)
{
    struct gen_item *items;
    int64_t n;
    int rc = task_gen_items(t, &items, &n, err, errlen);
    if (!rc && (rc = task_check_selection(t, n, err, errlen))) gen_items_free(items, n);
    if (rc) return rc;
    int64_t right[TASK_MAX_PIPELINES] = {0};
    struct backend_gen_params gp = {.max_tokens = t->max_tokens,
                                    .temperature = (float)t->temperature,
                                    .top_p = (float)t->top_p,
                                    .stop = (const char *const *)t->stop,
                                    .n_stop = t->n_stop};
    if (gp.max_tokens > n_ctx / 2) gp.max_tokens = n_ctx / 2; /* leave room for the prompt */
    sum->max_tokens_asked = t->max_tokens, sum->max_tokens_used = gp.max_tokens; /* recorded */
    int64_t done = 0;
    for (int64_t i = 0; i < n && !rc; i++) {
        if (!in_shard(sh, i) || !task_item_selected(t, i)) continue;
        done++;
        gp.seed = seed * 1000003u + (uint64_t)i;
        int32_t *ids = NULL;
        int64_t k = 0;
        char *out = NULL;
        if ((rc = backend_tokenize(b, items[i].prompt, strlen(items[i].prompt), 1, &ids, &k)))
            break;
        /* as lm-eval: keep the prompt's last n_ctx - max_tokens tokens */
        int64_t keep = n_ctx - gp.max_tokens, cut = k > keep ? k - keep : 0;
        rc = backend_generate(b, ids + cut, k - cut, &gp, &out, NULL, NULL);
        free(ids);
        if (rc) {
            qg_errf(err, errlen, rc, "task '%s', item %s: %s", t->name, items[i].id,
                    backend_errmsg(b));
            break;
        }
        char *first = NULL;
        int first_ok = 0;
        int failed = 0;
        char *extra =
            judge_output(t, &items[i], out, cut, gp.max_tokens, right, &first, &first_ok, &failed);
        if (failed) {
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "task '%s', item %lld: pipeline '%s' could not match the output (a "
                         "regex match error, or out of memory): no answer is scored as a miss",
                         t->name, (long long)i, extract_pipeline_name(t->pipelines[failed - 1]));
            free(extra), free(first), free(out);
            break;
        }
        char hash[HASH_HEX_LEN + 1];
        hash_sha256_mem(out, strlen(out), hash);
        struct task_row row = {.idx = i,
                               .id = items[i].id,
                               .cluster = items[i].cluster,
                               .nll = NAN,
                               .n_tokens = -1,
                               .n_bytes = -1,
                               .n_words = -1,
                               .correct = first_ok,
                               .score = first_ok,
                               .prediction = out,
                               .extracted = first,
                               .output_hash = hash,
                               .extra_json = extra};
        rc = fn(ud, &row);
        free(extra);
        free(first);
        free(out);
    }
    sum->items = done;
    sum->metric = done ? (double)right[0] / (double)done : NAN;
    sum->metric_name = t->n_pipelines > 0 ? extract_pipeline_name(t->pipelines[0]) : "exact_match";
    sum->metric2 = done && t->n_pipelines > 1 ? (double)right[1] / (double)done : NAN;
    sum->metric2_name = t->n_pipelines > 1 ? extract_pipeline_name(t->pipelines[1]) : NULL;
    gen_items_free(items, n);
    return rc;
}

int task_run(const struct task_config *t, const struct backend *b, int n_ctx, uint64_t seed,
             struct task_shard sh, task_row_fn fn, void *ud, struct task_summary *sum, char *err,
             size_t errlen)
{
    memset(sum, 0, sizeof *sum);
    sum->metric = sum->metric2 = NAN;
    double t0 = qg_now_s();
    int rc;
    if (t->kind == TASK_PERPLEXITY)
        rc = run_ppl(t, b, n_ctx, sh, fn, ud, sum, err, errlen);
    else if (t->kind == TASK_MULTIPLE_CHOICE)
        rc = run_mc(t, b, n_ctx, sh, fn, ud, sum, err, errlen);
    else
        rc = run_gen(t, b, n_ctx, seed, sh, fn, ud, sum, err, errlen);
    sum->seconds = qg_now_s() - t0;
    return rc;
}

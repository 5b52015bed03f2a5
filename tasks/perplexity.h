/* perplexity — scoring a token stream under a named protocol.
 *
 * Protocols (the token stream starts with BOS when the model adds one):
 * - llamacpp: llama-perplexity's default. Non-overlapping chunks of n_ctx
 *   tokens, the first token of each replaced by BOS, only the second half
 *   scored (tokens n_ctx/2+1 .. n_ctx-1 of each chunk). At least 2 n_ctx
 *   tokens are needed.
 * - rolling: lm-eval's loglikelihood_rolling. Disjoint windows that score
 *   every token exactly once; the first window is conditioned on BOS, each
 *   later one on the single token before it... plus the rest of its window.
 * - stride: Hugging Face's sliding window. Windows of n_ctx start every S
 *   tokens; each scores the tokens the previous one did not, so every token
 *   is scored once with at least n_ctx - S tokens of context.
 */
#ifndef QG_TASKS_PERPLEXITY_H
#define QG_TASKS_PERPLEXITY_H

#include "backends/backend.h"
#include "metrics/ppl.h"
#include "tasks/config.h"

#include <stdint.h>

enum ppl_protocol { PPL_LLAMACPP = 0, PPL_ROLLING = 1, PPL_STRIDE = 2 };

/* "llamacpp" -> PPL_LLAMACPP ...; -1 when unknown. */
int ppl_protocol_from_name(const char *name);
const char *ppl_protocol_name(int p);

struct ppl_window {
    int64_t start; /* index of the window's first token in the stream */
    int n;         /* tokens in the window (the last is only a target) */
    int from;      /* first scored position in the window */
    int bos_first; /* replace the first token with BOS (llamacpp) */
};

/* A lockstep run's link to stored baselines (metrics/kld_ref.h): put
 * receives the baseline's top-K reference of every window as it is scored
 * (to store it); with get, models[0] is absent (NULL) and each window's
 * reference is read back instead, the candidates judged against it (their
 * KLD then a lower bound). Both return a status; nonzero stops the run. */
struct ppl_ref_io {
    int top_k;
    int (*put)(void *ud, int64_t w, const unsigned char *blob, size_t n);
    int (*get)(void *ud, int64_t w, unsigned char **blob, size_t *n); /* malloc'd */
    void *ud;
};

struct ppl_params {
    const struct ppl_ref_io *ref; /* lockstep only; NULL: none */
    int protocol;
    int n_ctx;
    int stride;                   /* PPL_STRIDE */
    int64_t max_windows;          /* 0 = all (llama-perplexity's --chunks) */
    int shard_index, shard_count; /* score only windows with index % count == index */
};

/* A perplexity task's parameters (its protocol, ctx, stride and chunks),
 * scoring the windows of shard index/count (0/1: all). */
struct ppl_params ppl_task_params(const struct task_config *t, int shard_index, int shard_count);

/* Prefixes err with the task's name and data file (unless it names the
 * task already), so a planning error says where it comes from. */
void ppl_task_error(const struct task_config *t, char *err, size_t errlen);

/* A perplexity task's text, read and tokenized by b with its BOS: *ids
 * (malloc'd, *n). QG_OK; the reader's or the backend's status with err
 * naming the task. */
int ppl_task_tokens(const struct task_config *t, const struct backend *b, int32_t **ids, int64_t *n,
                    char *err, size_t errlen);

/* Plans the windows over n tokens. On success *out (malloc'd) holds *n_out
 * windows. QG_ERR_USAGE with err when the stream is too short or the
 * parameters are inconsistent. */
int ppl_plan(const struct ppl_params *p, int64_t n_tokens, struct ppl_window **out, int64_t *n_out,
             char *err, size_t errlen);

/* Called as each window w (of total) is scored, in order, with its stats;
 * a nonzero return (a status) stops the evaluation with that status. */
typedef int (*ppl_window_fn)(void *ud, int64_t w, int64_t total, const struct ppl_window_stat *ws);

struct ppl_run {
    struct ppl_result result;
    double seconds;                  /* wall time of the scoring */
    int64_t tokens_evaluated;        /* positions run through the model */
    struct ppl_window_stat *windows; /* per-window stats (malloc'd), n_windows */
    int64_t n_windows;
};

/* Scores ids (the whole stream, BOS first when the model adds one) with the
 * backend. Per-token byte and word counts come from the backend's pieces.
 * QG_OK, or the backend's status with err filled. */
int ppl_evaluate(const struct backend *b, const int32_t *ids, int64_t n, const struct ppl_params *p,
                 ppl_window_fn on_window, void *ud, struct ppl_run *out, char *err, size_t errlen);
void ppl_run_release(struct ppl_run *r);

/* Lockstep scoring of one token stream by several models over the same
 * windows, models[0] being the baseline: every model's per-window stats, and
 * for every other model, from full-vocabulary log-softmax rows, per scored
 * token KL(base || model) = sum_v p_b(v) (log p_b(v) - log p_m(v)), whether
 * the top-1 tokens agree, and dp = p_m(x) - p_b(x) of the actual token
 * (llama-perplexity's --kl-divergence, without a logits file). */
struct ppl_lockstep_window {
    struct ppl_window_stat stat;
    double kld_sum, dp_sum;
    int64_t top1_agree; /* tokens whose top-1 agrees with the baseline's */
};

/* Called per window and model (m = 0 the baseline); nonzero stops. */
typedef int (*ppl_lockstep_fn)(void *ud, int64_t window, int m,
                               const struct ppl_lockstep_window *w);

/* kld[m] (m >= 1) receives every scored token's KLD (malloc'd, *n_kld values
 * each; kld[0] stays NULL); res[m] each model's totals. All models must have
 * the same vocabulary size.
 *
 * A model without full rows (a remote one) is asked for its top
 * PPL_KLD_TOP_K tokens per position; its KLD is then computed over those
 * tokens plus one bucket for the rest of the vocabulary:
 *   sum_{v in S} p_b(v) log(p_b(v)/p_m(v)) + P_b(T) log(P_b(T)/P_m(T)),
 * T the complement of S. Merging outcomes never raises a KL divergence, so
 * this is a lower bound of the full KLD; kld_top_k[m] says K (0: full rows;
 * -1: no KLD, the model gives neither). Top-1 agreement stays exact. */
#define PPL_KLD_TOP_K 20
int ppl_evaluate_lockstep(const struct backend *const *models, int n_models, const int32_t *ids,
                          int64_t n, const struct ppl_params *p, ppl_lockstep_fn fn, void *ud,
                          double **kld, int64_t *n_kld, int *kld_top_k, struct ppl_result *res,
                          char *err, size_t errlen);

#endif

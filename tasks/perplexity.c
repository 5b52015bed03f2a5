/* perplexity — window planning for the three protocols and the scoring loop. */
#include "tasks/perplexity.h"
#include "metrics/kld_ref.h"
#include "core/status.h"
#include "core/util.h"
#include "metrics/kld.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ppl_protocol_from_name(const char *name)
{
    if (strcmp(name, "llamacpp") == 0) return PPL_LLAMACPP;
    if (strcmp(name, "rolling") == 0) return PPL_ROLLING;
    if (strcmp(name, "stride") == 0) return PPL_STRIDE;
    return -1;
}

const char *ppl_protocol_name(int p)
{
    static const char *n[] = {"llamacpp", "rolling", "stride"};
    return p >= 0 && p < 3 ? n[p] : "unknown";
}

static int push_window(struct ppl_window **w, int64_t *n, int64_t *cap, struct ppl_window v)
{
    if (*n == *cap) {
        int64_t c = *cap ? *cap * 2 : 64;
        struct ppl_window *p = realloc(*w, (size_t)c * sizeof *p);
        if (!p) return QG_ERR_NOMEM;
        *w = p;
        *cap = c;
    }
    (*w)[(*n)++] = v;
    return QG_OK;
}

int ppl_plan(const struct ppl_params *p, int64_t n, struct ppl_window **out, int64_t *n_out,
             char *err, size_t errlen)
{
    *out = NULL;
    *n_out = 0;
    int64_t cap = 0, k = 0;
    int ctx = p->n_ctx, rc = QG_OK;
    if (ctx < 4)
        return qg_errf(err, errlen, QG_ERR_USAGE, "context %d is too small (at least 4)", ctx);
    if (p->protocol == PPL_LLAMACPP) {
        if (n < 2 * (int64_t)ctx)
            return qg_errf(
                err, errlen, QG_ERR_DATA,
                "the llamacpp protocol needs at least 2 x ctx = %lld tokens; the text has %lld",
                2 * (long long)ctx, (long long)n);
        int64_t chunks = n / ctx;
        if (p->max_windows > 0 && p->max_windows < chunks) chunks = p->max_windows;
        for (int64_t i = 0; i < chunks && !rc; i++)
            rc = push_window(out, &k, &cap, (struct ppl_window){i * ctx, ctx, ctx / 2 + 1, 1});
    } else if (p->protocol == PPL_ROLLING) {
        /* token 0 is the prefix (BOS); T text tokens follow */
        int64_t T = n - 1;
        if (T < 1) return qg_errf(err, errlen, QG_ERR_DATA, "the text has no tokens to score");
        int64_t first = T < ctx ? T : ctx;
        rc = push_window(out, &k, &cap, (struct ppl_window){0, (int)first + 1, 1, 0});
        for (int64_t done = first; done < T && !rc;) {
            int64_t len = T - done < ctx ? T - done : ctx, end = done + len;
            rc = push_window(out, &k, &cap,
                             (struct ppl_window){end - ctx, ctx + 1, (int)(ctx + 1 - len), 0});
            done = end;
            if (p->max_windows > 0 && k >= p->max_windows) break;
        }
    } else if (p->protocol == PPL_STRIDE) {
        if (p->stride < 1 || p->stride > ctx)
            return qg_errf(err, errlen, QG_ERR_USAGE, "stride %d must be in 1..ctx (%d)", p->stride,
                           ctx);
        if (n < 2) return qg_errf(err, errlen, QG_ERR_DATA, "the text has no tokens to score");
        for (int64_t begin = 0, prev_end = 0; !rc; begin += p->stride) {
            int64_t end = begin + ctx < n ? begin + ctx : n, trg = end - prev_end;
            int w = (int)(end - begin);
            int from = w - trg > 1 ? (int)(w - trg) : 1;
            if (from < w) rc = push_window(out, &k, &cap, (struct ppl_window){begin, w, from, 0});
            prev_end = end;
            if (end == n || (p->max_windows > 0 && k >= p->max_windows)) break;
        }
    } else {
        return qg_errf(err, errlen, QG_ERR_USAGE, "unknown protocol %d", p->protocol);
    }
    if (rc) {
        free(*out);
        *out = NULL;
        return qg_errf(err, errlen, rc, "out of memory planning windows");
    }
    *n_out = k;
    return QG_OK;
}

struct ppl_params ppl_task_params(const struct task_config *t, int shard_index, int shard_count)
{
    struct ppl_params p = {.protocol = t->protocol,
                           .n_ctx = t->ctx,
                           .stride = t->stride,
                           .max_windows = t->chunks,
                           .shard_index = shard_index,
                           .shard_count = shard_count};
    return p;
}

void ppl_task_error(const struct task_config *t, char *err, size_t errlen)
{
    const struct task_file *f = task_config_file(t, "data");
    char msg[QG_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", err);
    if (strncmp(msg, "task '", 6))
        snprintf(err, errlen, "task '%s' (%s): %s", t->name, f ? f->path : "no data file", msg);
}

int ppl_task_tokens(const struct task_config *t, const struct backend *b, int32_t **ids, int64_t *n,
                    char *err, size_t errlen)
{
    char *buf;
    size_t len;
    *ids = NULL;
    *n = 0;
    int rc = task_read_text(t, &buf, &len, err, errlen);
    if (rc) return rc;
    rc = backend_tokenize(b, buf, len, 1, ids, n);
    free(buf);
    return rc ? qg_errf(err, errlen, rc, "task '%s': tokenizing failed", t->name) : QG_OK;
}

/* Bytes and words that each token of the stream stands for. Token 1 (the
 * first after the prefix) is measured as detokenised, without the space a
 * SentencePiece tokenizer prefixed. */
static int piece_counts(const struct backend *b, const int32_t *ids, int64_t n, int32_t *bytes,
                        int32_t *words)
{
    char buf[512];
    int prev_ws = 1;
    for (int64_t i = 0; i < n; i++) {
        const char *s = buf;
        char *owned = NULL;
        int len;
        if (i == 1) {
            owned = backend_detokenize(b, &ids[1], 1);
            if (!owned) return QG_ERR_NOMEM;
            s = owned;
            len = (int)strlen(owned);
        } else {
            len = backend_piece(b, ids[i], buf, sizeof buf);
            if (len < 0) return len == QG_ERR_UNSUPPORTED ? QG_ERR_UNSUPPORTED : QG_ERR_DATA;
            if (len > (int)sizeof buf) len = (int)sizeof buf; /* only counts are needed */
        }
        int w = 0;
        for (int j = 0; j < len; j++) {
            int ws = isspace((unsigned char)s[j]);
            if (!ws && prev_ws) w++;
            prev_ws = ws;
        }
        bytes[i] = i == 0 ? 0 : len;
        words[i] = i == 0 ? 0 : w;
        free(owned);
    }
    return QG_OK;
}

/* Windows a remote model (no full rows) is asked for at once, so that its
 * requests are in flight together (backend_score_many). */
#define PPL_REMOTE_BATCH 32

/* The next group of up to max windows of this shard from *w_next on: their
 * indices in gw, their tokens in rows of n_ctx + 1 of tok (the first
 * replaced by BOS where the window asks). Returns the group's size. */
static int next_group(const struct ppl_params *p, const struct ppl_window *win, int64_t nw,
                      const int32_t *ids, int32_t bos, int max, int64_t *w_next, int32_t *tok,
                      int64_t *gw)
{
    int g = 0;
    for (; *w_next < nw && g < max; (*w_next)++) {
        if (p->shard_count > 1 && *w_next % p->shard_count != p->shard_index) continue;
        const struct ppl_window *W = &win[*w_next];
        int32_t *t = tok + (size_t)g * ((size_t)p->n_ctx + 1);
        memcpy(t, ids + W->start, (size_t)W->n * sizeof *t);
        if (W->bos_first && bos >= 0) t[0] = bos;
        gw[g++] = *w_next;
    }
    return g;
}

int ppl_evaluate(const struct backend *b, const int32_t *ids, int64_t n, const struct ppl_params *p,
                 ppl_window_fn on_window, void *ud, struct ppl_run *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct backend_info info;
    backend_info(b, &info);
    struct ppl_window *win;
    int64_t nw;
    int rc = ppl_plan(p, n, &win, &nw, err, errlen);
    if (rc) return rc;
    int32_t *bytes = malloc((size_t)n * sizeof *bytes), *words = malloc((size_t)n * sizeof *words);
    /* a remote backend gets PPL_REMOTE_BATCH windows at once (its requests
     * in flight together), a local one a window at a time */
    int batch = (backend_caps(b) & BACKEND_CAP_FULL_ROWS) ? 1 : PPL_REMOTE_BATCH;
    size_t stride = (size_t)p->n_ctx + 1;
    int32_t *tok = malloc((size_t)batch * stride * sizeof *tok);
    double *lp = malloc((size_t)batch * stride * sizeof *lp);
    out->windows = calloc((size_t)(nw ? nw : 1), sizeof *out->windows);
    if (!bytes || !words || !tok || !lp || !out->windows)
        rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    if (!rc && (rc = piece_counts(b, ids, n, bytes, words)))
        qg_errf(err, errlen, rc, "cannot measure the bytes of the tokens (%s)", qg_strerror(rc));
    struct ppl_stats st;
    ppl_stats_init(&st);
    double t0 = qg_now_s();
    int64_t w_next = 0;
    struct backend_score reqs[PPL_REMOTE_BATCH];
    int64_t gw[PPL_REMOTE_BATCH];
    while (w_next < nw && !rc) {
        int g = next_group(p, win, nw, ids, info.bos, batch, &w_next, tok, gw);
        for (int j = 0; j < g; j++)
            reqs[j] = (struct backend_score){.tokens = tok + (size_t)j * stride,
                                             .n_tokens = win[gw[j]].n,
                                             .from = win[gw[j]].from,
                                             .logprob = lp + (size_t)j * stride};
        if (g && (rc = backend_score_many(b, reqs, g))) {
            if (g == 1)
                qg_errf(err, errlen, rc, "window %lld: %s", (long long)gw[0], backend_errmsg(b));
            else
                qg_errf(err, errlen, rc, "windows %lld-%lld: %s", (long long)gw[0],
                        (long long)gw[g - 1], backend_errmsg(b));
            break;
        }
        for (int j = 0; j < g && !rc; j++) {
            int64_t w = gw[j];
            const struct ppl_window *W = &win[w];
            const double *lpw = lp + (size_t)j * stride;
            struct ppl_window_stat *ws = &out->windows[w];
            for (int i = W->from; i < W->n; i++) {
                double nll = -lpw[i - W->from];
                ws->nll += nll;
                ws->nll2 += nll * nll;
                ws->tokens++;
                ws->bytes += bytes[W->start + i];
                ws->words += words[W->start + i];
            }
            ppl_stats_add(&st, ws);
            out->tokens_evaluated += W->n - 1;
            if (on_window && (rc = on_window(ud, w, nw, ws))) {
                qg_errf(err, errlen, rc, "window %lld: stopped (%s)", (long long)w,
                        qg_strerror(rc));
                break;
            }
        }
    }
    out->seconds = qg_now_s() - t0;
    out->n_windows = nw;
    ppl_stats_result(&st, &out->result);
    free(win);
    free(bytes);
    free(words);
    free(tok);
    free(lp);
    if (rc) ppl_run_release(out);
    return rc;
}

void ppl_run_release(struct ppl_run *r)
{
    free(r->windows);
    r->windows = NULL;
}

/* A remote model's answers for one group of windows: per window its
 * log-probs and top-K, indexed by the window's place in the group. */
struct prefetch {
    double *lp;      /* [PPL_REMOTE_BATCH][n_ctx + 1] */
    int32_t *tk_ids; /* [PPL_REMOTE_BATCH][n_ctx + 1][PPL_KLD_TOP_K] */
    float *tk_lp;
};

/* A lockstep run: the plan, per-token counts and the buffers of one window
 * (rows of n_ctx + 1 = stride positions). */
struct lockstep {
    const struct backend *const *models;
    const struct backend *first; /* the first model present (models[0] absent on replay) */
    const struct ppl_ref_io *ref;
    int replay;              /* models[0] is a stored reference (ref->get) */
    unsigned char *ref_blob; /* the current window's reference */
    int ref_k;
    int nm, V, kld_ok; /* kld_ok: the baseline gives full rows */
    size_t stride;
    struct ppl_window *win;
    int64_t nw;
    int32_t *bytes, *words;  /* per stream token */
    int32_t *tok, *gtok;     /* one window; a group of windows */
    double *lp;              /* [stride] */
    float *base_rows, *rows; /* [stride][V] log-softmax */
    int32_t *base_top, *top; /* [stride] argmax */
    int32_t *tk_ids;         /* [stride][K] */
    float *tk_lp;
    struct ppl_stats *st; /* [nm] */
    double *secs;         /* [nm]: each model's time scoring */
    struct prefetch *pf;  /* [nm]; lp NULL for local models */
    int *kld_top_k;       /* [nm], the caller's */
    double **kld;         /* [nm], the caller's */
    int64_t k;            /* scored tokens so far */
};

static void lockstep_release(struct lockstep *L)
{
    free(L->win);
    free(L->secs);
    free(L->bytes);
    free(L->words);
    free(L->tok);
    free(L->gtok);
    free(L->lp);
    free(L->base_rows);
    free(L->rows);
    free(L->base_top);
    free(L->top);
    free(L->tk_ids);
    free(L->tk_lp);
    free(L->st);
    free(L->ref_blob);
    for (int m = 0; L->pf && m < L->nm; m++)
        free(L->pf[m].lp), free(L->pf[m].tk_ids), free(L->pf[m].tk_lp);
    free(L->pf);
}

/* Group buffers of a remote model; which KLD each model can give. */
static int lockstep_alloc_models(struct lockstep *L)
{
    int rc = QG_OK;
    size_t group = PPL_REMOTE_BATCH * L->stride;
    for (int m = 0; m < L->nm; m++) {
        if (!L->models[m]) { /* a stored reference */
            L->kld_top_k[m] = 0;
            ppl_stats_init(&L->st[m]);
            continue;
        }
        unsigned caps = backend_caps(L->models[m]);
        L->kld_top_k[m] = !L->kld_ok                                          ? -1
                          : (caps & BACKEND_CAP_FULL_ROWS)                    ? 0
                          : m > 0 && !L->replay && (caps & BACKEND_CAP_TOP_K) ? PPL_KLD_TOP_K
                                                                              : -1;
        ppl_stats_init(&L->st[m]);
        if (m > 0 && !(L->kld[m] = malloc((size_t)(L->k ? L->k : 1) * sizeof **L->kld)))
            rc = QG_ERR_NOMEM;
        if (rc || (caps & BACKEND_CAP_FULL_ROWS)) continue; /* local: window by window */
        L->pf[m].lp = malloc(group * sizeof *L->pf[m].lp);
        if (L->kld_top_k[m] > 0) {
            L->pf[m].tk_ids = malloc(group * PPL_KLD_TOP_K * sizeof *L->pf[m].tk_ids);
            L->pf[m].tk_lp = malloc(group * PPL_KLD_TOP_K * sizeof *L->pf[m].tk_lp);
        }
        if (!L->pf[m].lp || (L->kld_top_k[m] > 0 && (!L->pf[m].tk_ids || !L->pf[m].tk_lp)))
            rc = QG_ERR_NOMEM;
    }
    return rc;
}

/* Plans the windows and allocates every buffer; L->k holds the number of
 * tokens to score until the run starts. */
static int lockstep_alloc(struct lockstep *L, const int32_t *ids, int64_t n,
                          const struct ppl_params *p, char *err, size_t errlen)
{
    int rc = ppl_plan(p, n, &L->win, &L->nw, err, errlen);
    if (rc) return rc;
    for (int64_t w = 0; w < L->nw; w++)
        L->k += L->win[w].n - L->win[w].from;
    size_t S = L->stride, V = (size_t)L->V;
    L->bytes = malloc((size_t)n * sizeof *L->bytes);
    L->words = malloc((size_t)n * sizeof *L->words);
    L->tok = malloc(S * sizeof *L->tok);
    L->gtok = malloc(PPL_REMOTE_BATCH * S * sizeof *L->gtok);
    L->lp = malloc(S * sizeof *L->lp);
    L->base_rows = malloc(S * V * sizeof *L->base_rows);
    L->rows = malloc(S * V * sizeof *L->rows);
    L->base_top = malloc(S * sizeof *L->base_top);
    L->top = malloc(S * sizeof *L->top);
    L->tk_ids = malloc(S * PPL_KLD_TOP_K * sizeof *L->tk_ids);
    L->tk_lp = malloc(S * PPL_KLD_TOP_K * sizeof *L->tk_lp);
    L->st = calloc((size_t)L->nm, sizeof *L->st);
    L->secs = calloc((size_t)L->nm, sizeof *L->secs);
    L->pf = calloc((size_t)L->nm, sizeof *L->pf);
    if (!L->bytes || !L->words || !L->tok || !L->gtok || !L->lp || !L->base_rows || !L->rows ||
        !L->base_top || !L->top || !L->tk_ids || !L->tk_lp || !L->st || !L->secs || !L->pf ||
        lockstep_alloc_models(L))
        return qg_errf(err, errlen, QG_ERR_NOMEM,
                       "out of memory for lockstep scoring (%d models, vocabulary %d)", L->nm,
                       L->V);
    L->k = 0;
    if ((rc = piece_counts(L->first, ids, n, L->bytes, L->words)))
        return qg_errf(err, errlen, rc, "cannot measure the bytes of the tokens (%s)",
                       qg_strerror(rc));
    return QG_OK;
}

/* Remote models score the whole group of g windows at once. */
static int lockstep_prefetch(struct lockstep *L, int g, const int64_t *gw, char *err, size_t errlen)
{
    for (int m = 0; m < L->nm && g; m++) {
        const struct prefetch *pf = &L->pf[m];
        if (!pf->lp) continue;
        struct backend_score reqs[PPL_REMOTE_BATCH];
        int K = m > 0 && L->kld_top_k[m] > 0 ? L->kld_top_k[m] : 0;
        for (int j = 0; j < g; j++) {
            const struct ppl_window *W = &L->win[gw[j]];
            size_t at = (size_t)j * L->stride;
            reqs[j] = (struct backend_score){.tokens = L->gtok + at,
                                             .n_tokens = W->n,
                                             .from = W->from,
                                             .logprob = pf->lp + at,
                                             .top_k = K,
                                             .top_ids = K ? pf->tk_ids + at * PPL_KLD_TOP_K : NULL,
                                             .top_lp = K ? pf->tk_lp + at * PPL_KLD_TOP_K : NULL};
        }
        double t0 = qg_now_s();
        int rc = backend_score_many(L->models[m], reqs, g);
        L->secs[m] += qg_now_s() - t0;
        if (rc)
            return qg_errf(err, errlen, rc, "windows %lld-%lld, model %d: %s", (long long)gw[0],
                           (long long)gw[g - 1], m, backend_errmsg(L->models[m]));
    }
    return QG_OK;
}

/* Replay: window w's stored reference stands for the baseline: the
 * log-probs of its actual tokens (*lpm); the blob kept for the candidates. */
static int lockstep_reference(struct lockstep *L, int64_t w, const double **lpm, char *err,
                              size_t errlen)
{
    const struct ppl_window *W = &L->win[w];
    int ns = W->n - W->from;
    size_t len = 0;
    free(L->ref_blob);
    L->ref_blob = NULL;
    int rc = L->ref->get(L->ref->ud, w, &L->ref_blob, &len);
    if (rc)
        return qg_errf(err, errlen, rc, "window %lld: no stored baseline reference", (long long)w);
    if (kld_ref_check(L->ref_blob, len, ns, &L->ref_k))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "window %lld: the stored baseline reference does not fit the window (%d "
                       "positions); the baseline run scored other windows",
                       (long long)w, ns);
    char why[256];
    if (kld_ref_validate(L->ref_blob, L->ref_k, ns, L->V, why, sizeof why))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "window %lld: the stored baseline reference is corrupt (%s): rerun the "
                       "baseline instead of --baseline-run",
                       (long long)w, why);
    for (int i = 0; i < ns; i++)
        L->lp[i] = kld_ref_lp_actual(L->ref_blob, L->ref_k, i);
    *lpm = L->lp;
    return QG_OK;
}

/* Record: the baseline's reference of window w, from its full rows. */
static int lockstep_record(struct lockstep *L, int64_t w, char *err, size_t errlen)
{
    const struct ppl_window *W = &L->win[w];
    int ns = W->n - W->from, k = L->ref->top_k > 0 ? L->ref->top_k : KLD_REF_TOP_K;
    if (k > L->V) k = L->V;
    size_t len = kld_ref_size(ns, k);
    unsigned char *blob = malloc(len);
    if (!blob) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    kld_ref_encode(L->base_rows, L->V, L->tok + W->from, ns, k, blob);
    int rc = L->ref->put(L->ref->ud, w, blob, len);
    free(blob);
    return rc ? qg_errf(err, errlen, rc, "window %lld: storing the baseline reference failed",
                        (long long)w)
              : QG_OK;
}

/* One model's answers for window j of the group: log-probs of the scored
 * tokens (*lpm) and, for a top-K model, its top tokens (*tki, *tkl). A
 * local model computes them now (with full rows when KLD needs them). */
static int lockstep_answers(struct lockstep *L, int m, int j, int64_t w, int full, int K,
                            const double **lpm, const int32_t **tki, const float **tkl, char *err,
                            size_t errlen)
{
    const struct prefetch *pf = &L->pf[m];
    if (!L->models[m]) return lockstep_reference(L, w, lpm, err, errlen);
    if (pf->lp) { /* scored with its group */
        size_t at = (size_t)j * L->stride;
        *lpm = pf->lp + at;
        *tki = K ? pf->tk_ids + at * PPL_KLD_TOP_K : NULL;
        *tkl = K ? pf->tk_lp + at * PPL_KLD_TOP_K : NULL;
        return QG_OK;
    }
    const struct ppl_window *W = &L->win[w];
    struct backend_score req = {.tokens = L->tok,
                                .n_tokens = W->n,
                                .from = W->from,
                                .logprob = L->lp,
                                .rows = full ? (m == 0 ? L->base_rows : L->rows) : NULL,
                                .argmax = full ? (m == 0 ? L->base_top : L->top) : NULL,
                                .top_k = K,
                                .top_ids = K ? L->tk_ids : NULL,
                                .top_lp = K ? L->tk_lp : NULL};
    double t0 = qg_now_s();
    int rc = backend_score(L->models[m], &req);
    L->secs[m] += qg_now_s() - t0;
    if (rc)
        return qg_errf(err, errlen, rc, "window %lld, model %d: %s", (long long)w, m,
                       backend_errmsg(L->models[m]));
    *lpm = L->lp;
    *tki = L->tk_ids;
    *tkl = L->tk_lp;
    return QG_OK;
}

/* Token i of window W for candidate m: its KLD (full rows, top-K with one
 * bucket, or NAN when neither), Δp and top-1 agreement, into lw and kld. */
static void lockstep_token(struct lockstep *L, int m, const struct ppl_window *W, int i,
                           double lp_m, int full, int K, const int32_t *tki, const float *tkl,
                           struct ppl_lockstep_window *lw)
{
    const float *b = L->base_rows + (size_t)i * (size_t)L->V;
    int32_t x = L->tok[W->from + i];
    double kl;
    if (L->replay && full) { /* against the stored reference: a lower bound */
        int agree = 0;
        double dp = 0;
        kl = kld_ref_against(L->ref_blob, L->ref_k, i, L->rows + (size_t)i * (size_t)L->V, L->V,
                             L->top[i], x, &agree, &dp);
        lw->dp_sum += dp;
        lw->top1_agree += agree;
    } else if (K) { /* top-K with one bucket for the rest: a lower bound */
        const int32_t *ti = tki + (size_t)i * K;
        kl = kld_top_k(b, L->V, ti, tkl + (size_t)i * K, K);
        lw->dp_sum += kld_delta_p(b[x], lp_m);
        lw->top1_agree += ti[0] >= 0 && ti[0] == L->base_top[i];
    } else if (full) {
        const float *c = L->rows + (size_t)i * (size_t)L->V;
        kl = kld_full(b, c, L->V);
        lw->dp_sum += kld_delta_p(b[x], c[x]);
        lw->top1_agree += L->top[i] == L->base_top[i];
    } else {
        kl = lw->kld_sum = lw->dp_sum = NAN;
    }
    if (K || full) lw->kld_sum += kl;
    L->kld[m][L->k + i] = kl;
}

/* Scores window j of the group with every model, in order. */
static int lockstep_window(struct lockstep *L, int j, int64_t w, ppl_lockstep_fn fn, void *ud,
                           char *err, size_t errlen)
{
    const struct ppl_window *W = &L->win[w];
    memcpy(L->tok, L->gtok + (size_t)j * L->stride, (size_t)W->n * sizeof *L->tok);
    int ns = W->n - W->from;
    for (int m = 0; m < L->nm; m++) {
        /* KLD needs full rows from the baseline and the candidate; a
         * backend without them (http) is scored on its tokens only */
        int full =
            L->kld_ok && L->models[m] && (backend_caps(L->models[m]) & BACKEND_CAP_FULL_ROWS);
        int K = m > 0 && L->kld_top_k[m] > 0 ? L->kld_top_k[m] : 0;
        const double *lpm = NULL;
        const int32_t *tki = NULL;
        const float *tkl = NULL;
        int rc = lockstep_answers(L, m, j, w, full, K, &lpm, &tki, &tkl, err, errlen);
        if (!rc && m == 0 && full && L->ref && L->ref->put) rc = lockstep_record(L, w, err, errlen);
        if (rc) return rc;
        struct ppl_lockstep_window lw = {0};
        for (int i = 0; i < ns; i++) {
            double nll = -lpm[i];
            lw.stat.nll += nll;
            lw.stat.nll2 += nll * nll;
            lw.stat.tokens++;
            lw.stat.bytes += L->bytes[W->start + W->from + i];
            lw.stat.words += L->words[W->start + W->from + i];
            if (m > 0) lockstep_token(L, m, W, i, lpm[i], full, K, tki, tkl, &lw);
        }
        ppl_stats_add(&L->st[m], &lw.stat);
        if (fn && (rc = fn(ud, w, m, &lw)))
            return qg_errf(err, errlen, rc, "window %lld: stopped (%s)", (long long)w,
                           qg_strerror(rc));
    }
    L->k += ns;
    return QG_OK;
}

int ppl_evaluate_lockstep(const struct backend *const *models, int nm, const int32_t *ids,
                          int64_t n, const struct ppl_params *p, ppl_lockstep_fn fn, void *ud,
                          double **kld, int64_t *n_kld, int *kld_top_k, struct ppl_result *res,
                          char *err, size_t errlen)
{
    int replay = p->ref && p->ref->get && !models[0];
    if (!models[0] && !replay)
        return qg_errf(err, errlen, QG_ERR_INTERNAL, "lockstep without a baseline");
    struct backend_info info;
    const struct backend *first = models[0] ? models[0] : models[1];
    backend_info(first, &info);
    for (int m = 1; m < nm; m++) {
        struct backend_info im;
        backend_info(models[m], &im);
        if (im.n_vocab != info.n_vocab)
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "model %d has %d tokens, the baseline %d: KLD needs one vocabulary", m,
                           im.n_vocab, info.n_vocab);
    }
    for (int m = 0; m < nm; m++)
        kld[m] = NULL;
    struct lockstep L = {.models = models,
                         .first = first,
                         .ref = p->ref,
                         .replay = replay,
                         .nm = nm,
                         .V = info.n_vocab,
                         .stride = (size_t)p->n_ctx + 1,
                         .kld_ok = replay || (backend_caps(models[0]) & BACKEND_CAP_FULL_ROWS) != 0,
                         .kld_top_k = kld_top_k,
                         .kld = kld};
    int rc = lockstep_alloc(&L, ids, n, p, err, errlen);
    /* windows in groups: a remote model scores the whole group at once
     * (its requests in flight together); then each window in order, local
     * models computing theirs as before */
    int64_t w_next = 0, gw[PPL_REMOTE_BATCH];
    while (!rc && w_next < L.nw) {
        int g = next_group(p, L.win, L.nw, ids, info.bos, PPL_REMOTE_BATCH, &w_next, L.gtok, gw);
        rc = lockstep_prefetch(&L, g, gw, err, errlen);
        for (int j = 0; j < g && !rc; j++)
            rc = lockstep_window(&L, j, gw[j], fn, ud, err, errlen);
    }
    for (int m = 0; m < nm && L.st; m++) {
        ppl_stats_result(&L.st[m], &res[m]);
        res[m].seconds = L.secs ? L.secs[m] : 0;
    }
    for (int m = 1; m < nm && replay && L.kld_top_k; m++) /* a lower bound from K tokens */
        if (L.kld_top_k[m] == 0) L.kld_top_k[m] = L.ref_k > 0 ? L.ref_k : KLD_REF_TOP_K;
    *n_kld = L.k;
    lockstep_release(&L);
    if (rc)
        for (int m = 0; m < nm; m++) {
            free(kld[m]);
            kld[m] = NULL;
        }
    return rc;
}

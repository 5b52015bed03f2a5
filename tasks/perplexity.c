/* perplexity — window planning for the three protocols and the scoring loop. */
#include "tasks/perplexity.h"
#include "core/util.h"

#include <ctype.h>
#include <math.h>
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

int ppl_plan(const struct ppl_params *p, int64_t n, struct ppl_window **out, int64_t *n_out, char *err,
             size_t errlen)
{
    *out = NULL;
    *n_out = 0;
    int64_t cap = 0, k = 0;
    int ctx = p->n_ctx, rc = QG_OK;
    if (ctx < 4) return qg_errf(err, errlen, QG_ERR_USAGE, "context %d is too small (at least 4)", ctx);
    if (p->protocol == PPL_LLAMACPP) {
        if (n < 2 * (int64_t)ctx)
            return qg_errf(err, errlen, QG_ERR_USAGE,
                           "the llamacpp protocol needs at least 2 x ctx = %lld tokens; the text has %lld",
                           2 * (long long)ctx, (long long)n);
        int64_t chunks = n / ctx;
        if (p->max_windows > 0 && p->max_windows < chunks) chunks = p->max_windows;
        for (int64_t i = 0; i < chunks && !rc; i++)
            rc = push_window(out, &k, &cap, (struct ppl_window){i * ctx, ctx, ctx / 2 + 1, 1});
    } else if (p->protocol == PPL_ROLLING) {
        /* token 0 is the prefix (BOS); T text tokens follow */
        int64_t T = n - 1;
        if (T < 1) return qg_errf(err, errlen, QG_ERR_USAGE, "the text has no tokens to score");
        int64_t first = T < ctx ? T : ctx;
        rc = push_window(out, &k, &cap, (struct ppl_window){0, (int)first + 1, 1, 0});
        for (int64_t done = first; done < T && !rc;) {
            int64_t len = T - done < ctx ? T - done : ctx, end = done + len;
            rc = push_window(out, &k, &cap, (struct ppl_window){end - ctx, ctx + 1, (int)(ctx + 1 - len), 0});
            done = end;
            if (p->max_windows > 0 && k >= p->max_windows) break;
        }
    } else if (p->protocol == PPL_STRIDE) {
        if (p->stride < 1 || p->stride > ctx)
            return qg_errf(err, errlen, QG_ERR_USAGE, "stride %d must be in 1..ctx (%d)", p->stride, ctx);
        if (n < 2) return qg_errf(err, errlen, QG_ERR_USAGE, "the text has no tokens to score");
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

/* Bytes and words that each token of the stream stands for. Token 1 (the
 * first after the prefix) is measured as detokenised, without the space a
 * SentencePiece tokenizer prefixed. */
static int piece_counts(const struct backend *b, const int32_t *ids, int64_t n, int32_t *bytes, int32_t *words)
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
static int next_group(const struct ppl_params *p, const struct ppl_window *win, int64_t nw, const int32_t *ids, int32_t bos,
                      int max, int64_t *w_next, int32_t *tok, int64_t *gw)
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
                 ppl_progress_fn progress, void *ud, struct ppl_run *out, char *err, size_t errlen)
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
    int batch = (b->ops->caps & BACKEND_CAP_FULL_ROWS) ? 1 : PPL_REMOTE_BATCH;
    size_t stride = (size_t)p->n_ctx + 1;
    int32_t *tok = malloc((size_t)batch * stride * sizeof *tok);
    double *lp = malloc((size_t)batch * stride * sizeof *lp);
    out->windows = calloc((size_t)(nw ? nw : 1), sizeof *out->windows);
    if (!bytes || !words || !tok || !lp || !out->windows) rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
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
            reqs[j] = (struct backend_score){.tokens = tok + (size_t)j * stride, .n_tokens = win[gw[j]].n, .from = win[gw[j]].from,
                                             .logprob = lp + (size_t)j * stride};
        if (g && (rc = backend_score_many(b, reqs, g))) {
            if (g == 1) qg_errf(err, errlen, rc, "window %lld: %s", (long long)gw[0], backend_errmsg(b));
            else qg_errf(err, errlen, rc, "windows %lld-%lld: %s", (long long)gw[0], (long long)gw[g - 1], backend_errmsg(b));
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
            if (progress && progress(ud, w + 1, nw)) {
                rc = qg_errf(err, errlen, QG_ERR_INTERNAL, "interrupted");
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

int ppl_evaluate_lockstep(const struct backend *const *models, int nm, const int32_t *ids, int64_t n,
                          const struct ppl_params *p, ppl_lockstep_fn fn, void *ud, double **kld, int64_t *n_kld,
                          int *kld_top_k, struct ppl_result *res, char *err, size_t errlen)
{
    struct backend_info info;
    backend_info(models[0], &info);
    int V = info.n_vocab;
    for (int m = 1; m < nm; m++) {
        struct backend_info im;
        backend_info(models[m], &im);
        if (im.n_vocab != V) return qg_errf(err, errlen, QG_ERR_DATA, "model %d has %d tokens, the baseline %d: KLD needs one vocabulary", m, im.n_vocab, V);
    }
    int kld_ok = (models[0]->ops->caps & BACKEND_CAP_FULL_ROWS) != 0;
    struct ppl_window *win;
    int64_t nw;
    int rc = ppl_plan(p, n, &win, &nw, err, errlen);
    if (rc) return rc;
    int64_t total = 0;
    for (int64_t w = 0; w < nw; w++) total += win[w].n - win[w].from;
    int32_t *bytes = malloc((size_t)n * sizeof *bytes), *words = malloc((size_t)n * sizeof *words);
    int32_t *tok = malloc(((size_t)p->n_ctx + 1) * sizeof *tok);
    double *lp = malloc(((size_t)p->n_ctx + 1) * sizeof *lp);
    float *base_rows = malloc((size_t)(p->n_ctx + 1) * (size_t)V * sizeof *base_rows);
    float *rows = malloc((size_t)(p->n_ctx + 1) * (size_t)V * sizeof *rows);
    int32_t *base_top = malloc(((size_t)p->n_ctx + 1) * sizeof *base_top), *top = malloc(((size_t)p->n_ctx + 1) * sizeof *top);
    int32_t *tk_ids = malloc(((size_t)p->n_ctx + 1) * PPL_KLD_TOP_K * sizeof *tk_ids);
    float *tk_lp = malloc(((size_t)p->n_ctx + 1) * PPL_KLD_TOP_K * sizeof *tk_lp);
    struct ppl_stats *st = calloc((size_t)nm, sizeof *st);
    struct prefetch *pf = calloc((size_t)nm, sizeof *pf);
    int32_t *gtok = malloc((size_t)PPL_REMOTE_BATCH * ((size_t)p->n_ctx + 1) * sizeof *gtok);
    int64_t gw[PPL_REMOTE_BATCH];
    size_t stride = (size_t)p->n_ctx + 1;
    for (int m = 0; m < nm; m++) {
        kld[m] = m > 0 ? malloc((size_t)(total ? total : 1) * sizeof **kld) : NULL;
        if (m > 0 && !kld[m]) rc = QG_ERR_NOMEM;
        ppl_stats_init(&st[m]);
    }
    if (!bytes || !words || !tok || !lp || !base_rows || !rows || !base_top || !top || !st || !tk_ids || !tk_lp || !pf || !gtok)
        rc = QG_ERR_NOMEM;
    for (int m = 0; m < nm; m++) {
        unsigned caps = models[m]->ops->caps;
        kld_top_k[m] = !kld_ok ? -1 : (caps & BACKEND_CAP_FULL_ROWS) ? 0 : m > 0 && (caps & BACKEND_CAP_TOP_K) ? PPL_KLD_TOP_K : -1;
        if (rc || (caps & BACKEND_CAP_FULL_ROWS)) continue; /* local: window by window */
        pf[m].lp = malloc(PPL_REMOTE_BATCH * stride * sizeof *pf[m].lp);
        if (kld_top_k[m] > 0) {
            pf[m].tk_ids = malloc(PPL_REMOTE_BATCH * stride * PPL_KLD_TOP_K * sizeof *pf[m].tk_ids);
            pf[m].tk_lp = malloc(PPL_REMOTE_BATCH * stride * PPL_KLD_TOP_K * sizeof *pf[m].tk_lp);
        }
        if (!pf[m].lp || (kld_top_k[m] > 0 && (!pf[m].tk_ids || !pf[m].tk_lp))) rc = QG_ERR_NOMEM;
    }
    if (rc) qg_errf(err, errlen, rc, "out of memory for lockstep scoring (%d models, vocabulary %d)", nm, V);
    if (!rc && (rc = piece_counts(models[0], ids, n, bytes, words)))
        qg_errf(err, errlen, rc, "cannot measure the bytes of the tokens (%s)", qg_strerror(rc));
    int64_t k = 0;
    /* windows in groups: a remote model scores the whole group at once
     * (its requests in flight together); then each window in order, local
     * models computing theirs as before */
    int64_t w_next = 0;
    while (w_next < nw && !rc) {
        int g = next_group(p, win, nw, ids, info.bos, PPL_REMOTE_BATCH, &w_next, gtok, gw);
        for (int m = 0; m < nm && !rc && g; m++) {
            if (!pf[m].lp) continue;
            struct backend_score reqs[PPL_REMOTE_BATCH];
            int K = m > 0 && kld_top_k[m] > 0 ? kld_top_k[m] : 0;
            for (int j = 0; j < g; j++) {
                const struct ppl_window *W = &win[gw[j]];
                reqs[j] = (struct backend_score){.tokens = gtok + (size_t)j * stride, .n_tokens = W->n, .from = W->from,
                                                 .logprob = pf[m].lp + (size_t)j * stride, .top_k = K,
                                                 .top_ids = K ? pf[m].tk_ids + (size_t)j * stride * PPL_KLD_TOP_K : NULL,
                                                 .top_lp = K ? pf[m].tk_lp + (size_t)j * stride * PPL_KLD_TOP_K : NULL};
            }
            if ((rc = backend_score_many(models[m], reqs, g)))
                qg_errf(err, errlen, rc, "windows %lld-%lld, model %d: %s", (long long)gw[0], (long long)gw[g - 1], m,
                        backend_errmsg(models[m]));
        }
        for (int j = 0; j < g && !rc; j++) {
            int64_t w = gw[j];
            const struct ppl_window *W = &win[w];
            memcpy(tok, gtok + (size_t)j * stride, (size_t)W->n * sizeof *tok);
            int ns = W->n - W->from;
            for (int m = 0; m < nm && !rc; m++) {
                /* KLD needs full rows from the baseline and the candidate; a
                 * backend without them (http) is scored on its tokens only */
                int full = kld_ok && (models[m]->ops->caps & BACKEND_CAP_FULL_ROWS);
                int K = m > 0 && kld_top_k[m] > 0 ? kld_top_k[m] : 0;
                const double *lpm = lp;
                const int32_t *tki = tk_ids;
                const float *tkl = tk_lp;
                if (pf[m].lp) { /* scored with its group */
                    lpm = pf[m].lp + (size_t)j * stride;
                    if (K) tki = pf[m].tk_ids + (size_t)j * stride * PPL_KLD_TOP_K, tkl = pf[m].tk_lp + (size_t)j * stride * PPL_KLD_TOP_K;
                } else {
                    struct backend_score req = {.tokens = tok, .n_tokens = W->n, .from = W->from, .logprob = lp,
                                                .rows = full ? (m == 0 ? base_rows : rows) : NULL,
                                                .argmax = full ? (m == 0 ? base_top : top) : NULL,
                                                .top_k = K, .top_ids = K ? tk_ids : NULL, .top_lp = K ? tk_lp : NULL};
                    if ((rc = backend_score(models[m], &req))) {
                        qg_errf(err, errlen, rc, "window %lld, model %d: %s", (long long)w, m, backend_errmsg(models[m]));
                        break;
                    }
                }
                struct ppl_lockstep_window lw = {0};
                for (int i = 0; i < ns; i++) {
                    double nll = -lpm[i];
                    lw.stat.nll += nll;
                    lw.stat.nll2 += nll * nll;
                    lw.stat.tokens++;
                    lw.stat.bytes += bytes[W->start + W->from + i];
                    lw.stat.words += words[W->start + W->from + i];
                    if (m == 0) continue;
                    if (K) { /* top-K with one bucket for the rest: a lower bound */
                        const float *b = base_rows + (size_t)i * V;
                        const int32_t *ti = tki + (size_t)i * K;
                        const float *tl = tkl + (size_t)i * K;
                        double kl = 0, pb_s = 0, pm_s = 0;
                        for (int q = 0; q < K; q++) {
                            if (ti[q] < 0 || ti[q] >= V) continue;
                            double pb = exp((double)b[ti[q]]);
                            kl += pb * ((double)b[ti[q]] - (double)tl[q]);
                            pb_s += pb;
                            pm_s += exp((double)tl[q]);
                        }
                        double pb_t = fmax(0, 1 - pb_s), pm_t = fmax(1e-12, 1 - pm_s);
                        if (pb_t > 0) kl += pb_t * (log(pb_t) - log(pm_t));
                        int32_t x = tok[W->from + i];
                        lw.kld_sum += kl;
                        lw.dp_sum += exp(lpm[i]) - exp((double)b[x]);
                        lw.top1_agree += ti[0] >= 0 && ti[0] == base_top[i];
                        kld[m][k + i] = kl;
                        continue;
                    }
                    if (!full) {
                        lw.kld_sum = lw.dp_sum = NAN;
                        kld[m][k + i] = NAN;
                        continue;
                    }
                    const float *b = base_rows + (size_t)i * V, *c = rows + (size_t)i * V;
                    double kl = 0;
                    for (int v = 0; v < V; v++) {
                        double pb = exp((double)b[v]);
                        kl += pb * ((double)b[v] - (double)c[v]);
                    }
                    int32_t x = tok[W->from + i];
                    lw.kld_sum += kl;
                    lw.dp_sum += exp((double)c[x]) - exp((double)b[x]);
                    lw.top1_agree += top[i] == base_top[i];
                    kld[m][k + i] = kl;
                }
                ppl_stats_add(&st[m], &lw.stat);
                if (fn && (rc = fn(ud, w, m, &lw))) qg_errf(err, errlen, rc, "storing window %lld failed", (long long)w);
            }
            k += ns;
        }
    }
    for (int m = 0; m < nm; m++) ppl_stats_result(&st[m], &res[m]);
    *n_kld = k;
    free(win);
    free(bytes);
    free(words);
    free(tok);
    free(lp);
    free(base_rows);
    free(rows);
    free(base_top);
    free(top);
    free(tk_ids);
    free(tk_lp);
    free(st);
    for (int m = 0; pf && m < nm; m++) free(pf[m].lp), free(pf[m].tk_ids), free(pf[m].tk_lp);
    free(pf);
    free(gtok);
    if (rc)
        for (int m = 0; m < nm; m++) {
            free(kld[m]);
            kld[m] = NULL;
        }
    return rc;
}

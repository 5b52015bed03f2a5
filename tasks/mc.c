/* mc — log-likelihood multiple choice (lm-eval's conventions). */
#include "tasks/mc.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void mc_item_free(struct mc_item *it)
{
    if (!it) return;
    free(it->id);
    free(it->context);
    for (int i = 0; i < it->n_choices; i++) {
        if (it->choices) free(it->choices[i]);
        if (it->contexts) free(it->contexts[i]);
    }
    free(it->choices);
    free(it->contexts);
    memset(it, 0, sizeof *it);
}

void mc_items_free(struct mc_item *items, int64_t n)
{
    for (int64_t i = 0; items && i < n; i++)
        mc_item_free(&items[i]);
    free(items);
}

/* One choice's scoring request: the tokens of context + continuation (left
 * truncated to fit), scored from the first continuation token. */
struct choice_req {
    int32_t *ids; /* owned; the request's tokens start at ids + start */
    int64_t start;
    double *lp;
};

/* lm-eval _encode_pair: tokenizes ctx and ctx+cont and fills *req and q. */
static int prepare(const struct backend *b, int n_ctx, const char *ctx, const char *cont,
                   struct choice_req *q, struct backend_score *req, char *err, size_t errlen)
{
    size_t lc = strlen(ctx), spaces = 0;
    while (spaces < lc && ctx[lc - 1 - spaces] == ' ')
        spaces++;
    struct sbuf whole;
    sbuf_init(&whole, 0);
    sbuf_append(&whole, ctx, lc);
    sbuf_append(&whole, cont, strlen(cont));
    int32_t *c_ids = NULL, *w_ids = NULL;
    int64_t nc = 0, nw = 0;
    int rc = backend_tokenize(b, ctx, lc - spaces, 1, &c_ids, &nc);
    if (!rc) rc = backend_tokenize(b, sbuf_str(&whole), whole.len, 1, &w_ids, &nw);
    sbuf_release(&whole);
    if (!rc &&
        nc < 1) { /* no BOS and an empty context: score after EOS, as lm-eval's prefix token */
        struct backend_info info;
        backend_info(b, &info);
        int32_t *p = realloc(w_ids, (size_t)(nw + 1) * sizeof *p);
        if (!p)
            rc = QG_ERR_NOMEM;
        else {
            memmove(p + 1, p, (size_t)nw * sizeof *p);
            p[0] = info.eos >= 0 ? info.eos : 0;
            w_ids = p;
            nw++;
            nc = 1;
        }
    }
    if (!rc && nw <= nc)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "the continuation '%.40s' has no tokens", cont);
    free(c_ids);
    if (rc) {
        free(w_ids);
        return rc;
    }
    /* keep the continuation and as much context as fits (left truncation) */
    int64_t start = nw - 1 > n_ctx ? nw - 1 - n_ctx : 0;
    int from = (int)(nc - start);
    if (from < 1) from = 1;
    q->ids = w_ids;
    q->start = start;
    q->lp = malloc((size_t)nw * sizeof *q->lp);
    if (!q->lp) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    *req = (struct backend_score){
        .tokens = w_ids + start, .n_tokens = (int)(nw - start), .from = from, .logprob = q->lp};
    return QG_OK;
}

int mc_score_many(const struct backend *b, int n_ctx, const struct mc_item *items, int n_items,
                  const char *delim, struct mc_result *res, char *err, size_t errlen)
{
    int total = 0;
    for (int k = 0; k < n_items; k++) {
        const struct mc_item *it = &items[k];
        if (it->n_choices < 1 || it->n_choices > MC_MAX_CHOICES)
            return qg_errf(err, errlen, QG_ERR_DATA, "item %s: %d choices (1..%d allowed)", it->id,
                           it->n_choices, MC_MAX_CHOICES);
        total += it->n_choices;
    }
    struct choice_req *q = calloc((size_t)total, sizeof *q);
    struct backend_score *reqs = calloc((size_t)total, sizeof *reqs);
    int rc = q && reqs ? QG_OK : qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    for (int k = 0, j = 0; k < n_items && !rc; k++) {
        const struct mc_item *it = &items[k];
        for (int c = 0; c < it->n_choices && !rc; c++, j++) {
            char e[QG_ERRMSG_MAX];
            if (it->contexts) {
                rc = prepare(b, n_ctx, it->contexts[c], it->choices[c], &q[j], &reqs[j], e,
                             sizeof e);
            } else {
                struct sbuf cont;
                sbuf_init(&cont, 0);
                sbuf_printf(&cont, "%s%s", delim, it->choices[c]);
                rc = prepare(b, n_ctx, it->context, sbuf_str(&cont), &q[j], &reqs[j], e, sizeof e);
                sbuf_release(&cont);
            }
            if (rc) qg_errf(err, errlen, rc, "item %s, choice %d: %s", it->id, c, e);
        }
    }
    if (!rc && (rc = backend_score_many(b, reqs, total)))
        qg_errf(err, errlen, rc, n_items == 1 ? "item %s: %s" : "items %s..%s: %s", items[0].id,
                n_items == 1 ? backend_errmsg(b) : items[n_items - 1].id, backend_errmsg(b));
    for (int k = 0, j = 0; k < n_items && !rc; k++) {
        const struct mc_item *it = &items[k];
        struct mc_result *r = &res[k];
        memset(r, 0, sizeof *r);
        double best = -INFINITY, best_norm = -INFINITY, best_tok = -INFINITY;
        for (int c = 0; c < it->n_choices; c++, j++) {
            r->ll[c] = 0;
            for (int i = 0; i < reqs[j].n_tokens - reqs[j].from; i++)
                r->ll[c] += q[j].lp[i];
            r->tokens[c] = reqs[j].n_tokens - reqs[j].from;
            r->evaluated += reqs[j].n_tokens;
            size_t len = 0; /* characters, as Python's len() in lm-eval */
            for (const char *p = it->choices[c]; *p; p++)
                len += ((unsigned char)*p & 0xC0) != 0x80;
            double norm = r->ll[c] / (double)(len ? len : 1), tok = r->ll[c] / r->tokens[c];
            if (r->ll[c] > best) best = r->ll[c], r->pred = c;
            if (norm > best_norm) best_norm = norm, r->pred_norm = c;
            if (tok > best_tok) best_tok = tok, r->pred_tok = c;
        }
    }
    for (int j = 0; q && j < total; j++)
        free(q[j].ids), free(q[j].lp);
    free(q);
    free(reqs);
    return rc;
}

int mc_score(const struct backend *b, int n_ctx, const struct mc_item *it, const char *delim,
             struct mc_result *r, char *err, size_t errlen)
{
    return mc_score_many(b, n_ctx, it, 1, delim, r, err, errlen);
}

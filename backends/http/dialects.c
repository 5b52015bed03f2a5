/* dialects — reading scores from the three log-prob dialects servers
 * answer with: OpenAI's echo (tokens, token_logprobs, top_logprobs),
 * qgate serve's id extensions, and vLLM's prompt_logprobs keyed by token
 * id; every number bounds-checked. */
#include "backends/backend.h"
#include "backends/gguf.h"
#include "backends/http/http.h"
#include "backends/http/http_impl.h"
#include "backends/tokenizer.h"
#include "datasets/hash.h"
#include "datasets/reader.h"
#include "core/status.h"
#include "core/util.h"
#include "core/utf8.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static int sane_logprob(double v)
{
    return isfinite(v) && v <= 0 && v >= HTTP_LOGPROB_FLOOR;
}

/* A log-prob from an answer as a float (out-of-range values saturate:
 * converting them is undefined). */
static float lp_float(double d)
{
    return d < -3.0e38 ? -INFINITY : d > 3.0e38 ? INFINITY : (float)d;
}

/* Inserts (id, v) into the top-K lists ids/lp (most likely first), keeping
 * k entries. */
static void top_insert(int32_t *ids, float *lp, int k, int32_t id, float v)
{
    int j = k - 1;
    if (!(v > lp[j])) return;
    while (j > 0 && lp[j - 1] < v)
        lp[j] = lp[j - 1], ids[j] = ids[j - 1], j--;
    lp[j] = v, ids[j] = id;
}

/* A log-prob of vLLM's prompt_logprobs: {"logprob": x, ...} or a bare x. */
static const cJSON *plp_value(const cJSON *e)
{
    return cJSON_IsObject(e) ? cJSON_GetObjectItem(e, "logprob") : e;
}

/* Reads vLLM's choices[0].prompt_logprobs: [null, {"ID": {"logprob": x,
 * "rank": r, ...}, ...}, ...], one entry per prompt token, each holding the
 * token sent and the top-K. */
static int parse_plp(struct http *h, const char *url, const cJSON *plp,
                     const struct backend_score *r)
{
    int n = r->n_tokens, m = cJSON_GetArraySize(plp);
    if (m != n)
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: sent %d prompt ids, got %d prompt_logprobs back: the endpoint "
                       "re-tokenized the prompt",
                       url, n, m);
    int i = 0;
    const cJSON *pos;
    cJSON_ArrayForEach(pos, plp)
    {
        if (i < r->from) {
            i++;
            continue;
        }
        char key[16];
        snprintf(key, sizeof key, "%d", (int)r->tokens[i]);
        const cJSON *v = plp_value(cJSON_GetObjectItemCaseSensitive(pos, key));
        if (!cJSON_IsObject(pos))
            return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                           "%s: no prompt_logprobs for prompt token %d: this endpoint cannot score "
                           "prompts, so it cannot run "
                           "log-likelihood tasks",
                           url, i);
        if (!cJSON_IsNumber(v) || !sane_logprob(v->valuedouble))
            return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                           "%s: prompt_logprobs[%d] has no possible log-prob for the token sent "
                           "(id %s)",
                           url, i, key);
        r->logprob[i - r->from] = v->valuedouble;
        if (r->top_k > 0) {
            int32_t *ids_out = r->top_ids + (size_t)(i - r->from) * (size_t)r->top_k;
            float *lp_out = r->top_lp + (size_t)(i - r->from) * (size_t)r->top_k;
            for (int k = 0; k < r->top_k; k++)
                ids_out[k] = -1, lp_out[k] = -INFINITY;
            const cJSON *e;
            cJSON_ArrayForEach(e, pos)
            {
                const cJSON *ev = plp_value(e);
                char *end;
                long id = e->string ? strtol(e->string, &end, 10) : -1;
                if (!e->string || *end || id < 0 ||
                    (h->n_vocab > 0 ? id >= h->n_vocab : id >= 2147483647L) ||
                    !cJSON_IsNumber(ev) || !sane_logprob(ev->valuedouble))
                    return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                                   "%s: prompt_logprobs[%d] lists an impossible entry (%s: %g)",
                                   url, i, e->string ? e->string : "?",
                                   cJSON_IsNumber(ev) ? ev->valuedouble : NAN);
                /* the token sent is listed even when outside the top-K; as
                 * the least likely entry it falls off the list */
                top_insert(ids_out, lp_out, r->top_k, (int32_t)id, lp_float(ev->valuedouble));
            }
        }
        i++;
    }
    return QG_OK;
}

/* Walks a cJSON array by increasing index in O(1) a step (cJSON's
 * GetArrayItem walks from the start: quadratic over a 2048-token window). */
struct cursor {
    const cJSON *at;
    int i;
};

static struct cursor cursor_of(const cJSON *a)
{
    return (struct cursor){cJSON_IsArray(a) ? a->child : NULL, 0};
}

/* item i (>= the last asked), or NULL past the end */
static const cJSON *cursor_get(struct cursor *c, int i)
{
    while (c->at && c->i < i)
        c->at = c->at->next, c->i++;
    return c->i == i ? c->at : NULL;
}

/* Reads a scoring answer into r->logprob. QG_OK, or the error in h->err. */
/* The answer scored the ids sent: its token_ids match, or (a text prompt
 * without token_ids back) each token's text is the text of the id meant
 * (after the first; pieces that are not UTF-8 on their own cannot be
 * compared). */
static int check_prompt_ids(struct http *h, const char *url, const cJSON *lpo, const cJSON *tid,
                            const int32_t *ids, int n)
{
    int rc = QG_OK;
    struct cursor c_tid = cursor_of(tid), c_texts;
    for (int i = 0; i < n && !rc && cJSON_IsArray(tid); i++) {
        const cJSON *v = cursor_get(&c_tid, i);
        if (!cJSON_IsNumber(v) || v->valuedouble != (double)ids[i])
            rc = qg_errf(
                h->err, sizeof h->err, QG_ERR_DATA, "%s: token %d scored as id %g, sent %d%s", url,
                i, cJSON_IsNumber(v) ? v->valuedouble : -1.0, ids[i],
                h->text_prompt
                    ? " (the server takes text prompts only, and re-tokenized this one differently)"
                    : "");
    }
    c_texts = cursor_of(cJSON_GetObjectItem(lpo, "tokens"));
    for (int i = 1; i < n && !rc && h->text_prompt && !cJSON_IsArray(tid); i++) {
        const cJSON *t = cursor_get(&c_texts, i);
        char buf[512];
        int len = hp_http_piece(h, ids[i], buf, sizeof buf - 1);
        size_t bad;
        if (len < 0 || len >= (int)sizeof buf - 1) continue;
        buf[len] = '\0';
        if (!utf8_valid(buf, (size_t)len, &bad) || strlen(buf) != (size_t)len) continue;
        if (!cJSON_IsString(t) || strcmp(t->valuestring, buf))
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                         "%s: token %d came back as '%.40s', sent '%.40s': the server takes text "
                         "prompts only, and re-tokenized "
                         "this one differently",
                         url, i, cJSON_IsString(t) ? t->valuestring : "?", buf);
    }
    return rc;
}

/* The top-K of every scored position into r->top_ids / r->top_lp. */
static int parse_top_k(struct http *h, const char *url, const cJSON *lpo,
                       const struct backend_score *r)
{
    /* top-K: qgate serve's top_token_ids ([[id, logprob], ...], exact), else
     * top_logprobs[i], text -> log-prob, mapped to ids through the local
     * tokenizer's pieces (texts several ids share stay unknown) */
    struct cursor c_top = cursor_of(cJSON_GetObjectItem(lpo, "top_logprobs"));
    struct cursor c_topid = cursor_of(cJSON_GetObjectItem(lpo, "top_token_ids"));
    int rc = QG_OK, n = r->n_tokens;
    for (int i = r->from; i < n && !rc; i++) {
        int32_t *ids_out = r->top_ids + (size_t)(i - r->from) * (size_t)r->top_k;
        float *lp_out = r->top_lp + (size_t)(i - r->from) * (size_t)r->top_k;
        for (int k = 0; k < r->top_k; k++)
            ids_out[k] = -1, lp_out[k] = -INFINITY;
        const cJSON *pairs = cursor_get(&c_topid, i), *pr;
        if (cJSON_IsArray(pairs)) {
            int k = 0;
            cJSON_ArrayForEach(pr, pairs)
            {
                const cJSON *pid = cJSON_GetArrayItem(pr, 0), *plp = cJSON_GetArrayItem(pr, 1);
                if (k == r->top_k) break; /* at most top_k, most likely first */
                if (!cJSON_IsNumber(pid) || !cJSON_IsNumber(plp) ||
                    !sane_logprob(plp->valuedouble) || pid->valuedouble < 0 ||
                    pid->valuedouble != floor(pid->valuedouble) ||
                    (h->n_vocab > 0 ? pid->valuedouble >= h->n_vocab
                                    : pid->valuedouble >= 2147483647.0) ||
                    (k && plp->valuedouble > lp_out[k - 1]))
                    return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                                   "%s: top token %d of prompt token %d is impossible (id %g, "
                                   "log-prob %g; vocabulary %d, most likely first)",
                                   url, k, i, cJSON_IsNumber(pid) ? pid->valuedouble : -1.0,
                                   cJSON_IsNumber(plp) ? plp->valuedouble : NAN, h->n_vocab);
                ids_out[k] = (int32_t)pid->valuedouble, lp_out[k] = lp_float(plp->valuedouble), k++;
            }
            continue;
        }
        const cJSON *o = cursor_get(&c_top, i), *e;
        if (!cJSON_IsObject(o)) {
            rc =
                qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                        "%s: no top_logprobs for prompt token %d (asked for %d)", url, i, r->top_k);
            break;
        }
        if (!h->pieces) {
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                         "%s: the server names its top tokens by text only; give "
                         "?tokenizer=PATH.gguf so qgate can map them to ids",
                         url);
            break;
        }
        cJSON_ArrayForEach(e, o)
        {
            if (!cJSON_IsNumber(e) || !(e->valuedouble <= 0) || !e->string) continue;
            /* unknown texts keep -1 but still take their place, so the
             * order stays the server's */
            top_insert(ids_out, lp_out, r->top_k, hp_piece_lookup(h, e->string),
                       lp_float(e->valuedouble));
        }
    }
    return rc;
}

/* The log-prob of each prompt token against the top-K of the same answer:
 * listed, it must be the listed value; unlisted from a full list of known
 * ids, it must not beat the list's last; the list's mass at most 1. A
 * server claiming p = 1 for every token while listing others above it is
 * refused, not scored. */
static int check_consistent(struct http *h, const char *url, const struct backend_score *r)
{
    const double tol = 1e-3; /* float rounding of log-probs */
    for (int i = 0; i < r->n_tokens - r->from; i++) {
        const int32_t *ids = r->top_ids + (size_t)i * (size_t)r->top_k;
        const float *lp = r->top_lp + (size_t)i * (size_t)r->top_k;
        double mass = 0, x = r->logprob[i];
        int listed = 0, known = 1;
        for (int k = 0; k < r->top_k; k++) {
            known &= ids[k] >= 0;
            if (isfinite(lp[k])) mass += exp((double)lp[k]);
            if (ids[k] == r->tokens[r->from + i]) {
                listed = 1;
                if (fabs(lp[k] - x) > tol)
                    return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                                   "%s: prompt token %d has log-prob %g, but the same answer's "
                                   "top-%d lists it at %g: refusing contradictory numbers",
                                   url, r->from + i, x, r->top_k, (double)lp[k]);
            }
        }
        if (!listed && known && isfinite(lp[r->top_k - 1]) && x > lp[r->top_k - 1] + tol)
            return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                           "%s: prompt token %d has log-prob %g, above every one of the same "
                           "answer's top-%d (the last at %g), which does not list it: refusing "
                           "contradictory numbers",
                           url, r->from + i, x, r->top_k, (double)lp[r->top_k - 1]);
        if (mass > 1 + tol)
            return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                           "%s: the top-%d of prompt token %d hold probability %g > 1", url,
                           r->top_k, r->from + i, mass);
    }
    return QG_OK;
}

int hp_parse_score(struct http *h, const char *url, const cJSON *ans, const struct backend_score *r)
{
    hp_note_fingerprint(h, ans);
    if (h->api) return hp_native_parse(h, url, ans, r);
    const cJSON *e = cJSON_GetObjectItem(ans, "error");
    if (e) { /* an error body with status 200: say what the server said */
        const cJSON *em = cJSON_GetObjectItem(e, "message");
        char m[320];
        snprintf(m, sizeof m, "%.300s",
                 cJSON_IsString(em)  ? em->valuestring
                 : cJSON_IsString(e) ? e->valuestring
                                     : "?");
        hp_redact_key(h, m, sizeof m);
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: the server answered 200 with an error: %s", url, m);
    }
    const int32_t *ids = r->tokens;
    int n = r->n_tokens, from = r->from, rc = QG_OK;
    const cJSON *ch0 = cJSON_GetArrayItem(cJSON_GetObjectItem(ans, "choices"), 0);
    const cJSON *vllm = cJSON_GetObjectItem(ch0, "prompt_logprobs");
    if (cJSON_IsArray(vllm)) {
        rc = parse_plp(h, url, vllm, r);
        return rc || r->top_k <= 0 ? rc : check_consistent(h, url, r);
    }
    const cJSON *lpo = cJSON_GetObjectItem(ch0, "logprobs");
    const cJSON *tl = cJSON_GetObjectItem(lpo, "token_logprobs"),
                *tid = cJSON_GetObjectItem(lpo, "token_ids");
    int m = cJSON_GetArraySize(tl);
    if (h->text_prompt && cJSON_IsArray(tl) && (m < n || m > n + h->max_tokens_one))
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: sent %d prompt ids as text, the server tokenized it into %d: this "
                       "endpoint takes text prompts only, "
                       "and a window that starts inside a text does not re-tokenize to the same "
                       "ids (run perplexity tasks "
                       "against a server that takes token ids)",
                       url, n, m - h->max_tokens_one);
    if (!cJSON_IsArray(tl)) /* no completions-style prompt log-probs at all: llama-server since
                             * 2025 ignores echo and answers chat-style log-probs of the
                             * generated token only. The endpoint cannot score prompts: generation
                             * still runs, log-likelihood tasks are refused with this */
        return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                       "%s: asked with echo for the log-probs of %d prompt ids, the answer has "
                       "no logprobs.token_logprobs: the endpoint cannot score prompts",
                       url, n);
    if (m < n || m > n + h->max_tokens_one)
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: sent %d prompt ids, got %d token log-probs back: the endpoint "
                       "re-tokenized the prompt or cannot "
                       "score prompts (echo with logprobs)",
                       url, n, cJSON_IsArray(tl) ? m : -1);
    struct cursor c_tl = cursor_of(tl);
    rc = check_prompt_ids(h, url, lpo, tid, ids, n);
    for (int i = from; i < n && !rc; i++) {
        const cJSON *v = cursor_get(&c_tl, i);
        if (cJSON_IsNumber(v) && !sane_logprob(v->valuedouble))
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                         "%s: the server's log-prob for prompt token %d is %g, which no "
                         "probability has: refusing its numbers",
                         url, i, v->valuedouble);
        else if (!cJSON_IsNumber(v))
            rc = qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                         "%s: no log-prob for prompt token %d: this endpoint cannot score prompts, "
                         "so it cannot run "
                         "log-likelihood tasks",
                         url, i);
        else
            r->logprob[i - from] = v->valuedouble;
    }
    if (!rc && r->top_k > 0) rc = parse_top_k(h, url, lpo, r);
    /* (a text prompt's tokens are the server's, not the ids sent: no check) */
    if (!rc && r->top_k > 0 && !h->text_prompt) rc = check_consistent(h, url, r);
    return rc;
}

int http_parse_score(const char *json, size_t n, int extra_tokens, struct backend_score *r,
                     char *err, size_t errlen)
{
    struct http h;
    memset(&h, 0, sizeof h);
    h.max_tokens_one = extra_tokens;
    cJSON *ans = cJSON_ParseWithLength(json, n);
    int rc = ans ? hp_parse_score(&h, "answer", ans, r)
                 : qg_errf(h.err, sizeof h.err, QG_ERR_DATA, "answer: not JSON");
    cJSON_Delete(ans);
    if (rc) snprintf(err, errlen, "%s", h.err);
    return rc;
}

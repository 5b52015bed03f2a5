/* native — scoring through SGLang's and text-generation-inference's own
 * /generate (the request and answer shapes of SGLang 0.5 and TGI 3.x;
 * docs/http.md says where in their sources). */
#include "backends/http/http_impl.h"
#include "backends/tokenizer.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SGLang: the ids as they are; the log-probs from token from-1 on (its
 * first element is always null), with the top_k of each position. TGI:
 * text only (BOS left to the server, which adds it), one new token (it
 * refuses 0), the prompt's log-probs in details.prefill. */
char *hp_native_body(struct http *h, const int32_t *ids, int n, int from, int top_k)
{
    cJSON *req = cJSON_CreateObject();
    if (h->api == HP_API_SGLANG) {
        cJSON *a = cJSON_AddArrayToObject(req, "input_ids"),
              *sp = cJSON_AddObjectToObject(req, "sampling_params");
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
        cJSON_AddNumberToObject(sp, "max_new_tokens", 0);
        cJSON_AddNumberToObject(sp, "temperature", 0);
        cJSON_AddTrueToObject(req, "return_logprob");
        cJSON_AddNumberToObject(req, "logprob_start_len", from > 0 ? from - 1 : 0);
        cJSON_AddNumberToObject(req, "top_logprobs_num", top_k > 0 ? top_k : 0);
    } else {
        char *text = hp_prompt_text(h, ids, n);
        if (!text) {
            cJSON_Delete(req);
            return NULL;
        }
        cJSON_AddStringToObject(req, "inputs", text);
        free(text);
        cJSON *p = cJSON_AddObjectToObject(req, "parameters");
        cJSON_AddNumberToObject(p, "max_new_tokens", 1);
        cJSON_AddTrueToObject(p, "details");
        cJSON_AddTrueToObject(p, "decoder_input_details");
        cJSON_AddFalseToObject(p, "do_sample");
    }
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    return body;
}

/* one log-prob as the server gave it: a finite number <= 0 */
static int take_lp(struct http *h, const char *url, const cJSON *v, int i, double *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble <= 0) || !(v->valuedouble > -1e4))
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: the log-prob of prompt token %d is missing or impossible", url, i);
    *out = v->valuedouble;
    return QG_OK;
}

static int parse_sglang(struct http *h, const char *url, const cJSON *ans,
                        const struct backend_score *r)
{
    const cJSON *mi = cJSON_GetObjectItem(ans, "meta_info"),
                *il = cJSON_GetObjectItem(mi, "input_token_logprobs"),
                *it = cJSON_GetObjectItem(mi, "input_top_logprobs"),
                *pt = cJSON_GetObjectItem(mi, "prompt_tokens");
    int start = r->from > 0 ? r->from - 1 : 0, m = r->n_tokens - r->from;
    if (!cJSON_IsArray(il) || cJSON_GetArraySize(il) == 0)
        return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                       "%s: the answer has no meta_info.input_token_logprobs (no prompt "
                       "log-probs)",
                       url);
    if (!cJSON_IsNumber(pt) || pt->valuedouble != (double)r->n_tokens ||
        cJSON_GetArraySize(il) != r->n_tokens - start)
        return qg_errf(
            h->err, sizeof h->err, QG_ERR_DATA,
            "%s: the server read %d prompt tokens and gave %d log-probs for the %d "
            "sent from %d: it did not score the prompt sent",
            url, cJSON_IsNumber(pt) && fabs(pt->valuedouble) < 1e9 ? (int)pt->valuedouble : -1,
            cJSON_GetArraySize(il), r->n_tokens, start);
    for (int i = 0; i < m; i++) { /* element 1 + i is token from + i */
        const cJSON *e = cJSON_GetArrayItem(il, 1 + i), *id = cJSON_GetArrayItem(e, 1);
        if (!cJSON_IsNumber(id) || id->valuedouble != (double)r->tokens[r->from + i])
            return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                           "%s: log-prob %d is of another token than the one sent", url, i);
        int rc = take_lp(h, url, cJSON_GetArrayItem(e, 0), r->from + i, &r->logprob[i]);
        if (rc) return rc;
        for (int k = 0; r->top_k > 0 && k < r->top_k; k++) { /* [[lp, id, text], ...] */
            const cJSON *t = cJSON_GetArrayItem(cJSON_GetArrayItem(it, 1 + i), k);
            const cJSON *tl = cJSON_GetArrayItem(t, 0), *ti = cJSON_GetArrayItem(t, 1);
            int ok = cJSON_IsNumber(tl) && cJSON_IsNumber(ti) && ti->valuedouble >= 0 &&
                     ti->valuedouble < 2147483647.0;
            r->top_ids[(size_t)i * (size_t)r->top_k + (size_t)k] =
                ok ? (int32_t)ti->valuedouble : -1;
            r->top_lp[(size_t)i * (size_t)r->top_k + (size_t)k] =
                ok ? (float)tl->valuedouble : -INFINITY;
        }
    }
    return QG_OK;
}

static int parse_tgi(struct http *h, const char *url, const cJSON *ans,
                     const struct backend_score *r)
{
    const cJSON *pf = cJSON_GetObjectItem(cJSON_GetObjectItem(ans, "details"), "prefill");
    if (!cJSON_IsArray(pf) || cJSON_GetArraySize(pf) == 0)
        return qg_errf(h->err, sizeof h->err, QG_ERR_UNSUPPORTED,
                       "%s: details.prefill is empty: TGI gives prompt log-probs only when "
                       "started with --enable-prefill-logprobs",
                       url);
    int n = cJSON_GetArraySize(pf);
    for (int i = 0; i < n && n == r->n_tokens; i++) {
        const cJSON *id = cJSON_GetObjectItem(cJSON_GetArrayItem(pf, i), "id");
        if (!cJSON_IsNumber(id) || id->valuedouble != (double)r->tokens[i]) n = -1;
    }
    if (n != r->n_tokens) { /* text goes in: its tokens must be the ones meant */
        int bos = h->tok ? tok_bos(h->tok) : h->bos;
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA,
                       "%s: TGI tokenized the text into other tokens than the %d meant (%d in "
                       "details.prefill): %s",
                       url, r->n_tokens, cJSON_GetArraySize(pf),
                       r->n_tokens > 0 && r->tokens[0] != bos
                           ? "a window cut from the left (not starting with BOS) cannot be sent "
                             "as text, TGI adds BOS to it"
                           : "the text does not come back as the same tokens (a window that "
                             "starts inside a word does not); TGI takes text only");
    }
    for (int i = r->from; i < r->n_tokens; i++) {
        int rc = take_lp(h, url, cJSON_GetObjectItem(cJSON_GetArrayItem(pf, i), "logprob"), i,
                         &r->logprob[i - r->from]);
        if (rc) return rc;
    }
    for (size_t k = 0; r->top_k > 0 && k < (size_t)(r->n_tokens - r->from) * (size_t)r->top_k; k++)
        r->top_ids[k] = -1, r->top_lp[k] = -INFINITY; /* TGI has no top tokens of a prompt */
    return QG_OK;
}

int hp_native_parse(struct http *h, const char *url, const cJSON *ans,
                    const struct backend_score *r)
{
    const cJSON *e = cJSON_GetObjectItem(ans, "error");
    if (e) {
        const cJSON *m = cJSON_IsString(e) ? e : cJSON_GetObjectItem(e, "message");
        return qg_errf(h->err, sizeof h->err, QG_ERR_DATA, "%s: %.300s", url,
                       cJSON_IsString(m) ? m->valuestring : "an error");
    }
    return h->api == HP_API_SGLANG ? parse_sglang(h, url, ans, r) : parse_tgi(h, url, ans, r);
}

/* native — `qgate serve` answering as SGLang's and text-generation-
 * inference's native APIs (testing: --inject-faults sglang | tgi), in the
 * shapes their sources give (docs/http.md cites them):
 *
 * SGLang 0.5: POST /generate {input_ids | text, sampling_params
 * {max_new_tokens (0 allowed), temperature}, return_logprob,
 * logprob_start_len, top_logprobs_num} -> {text, output_ids, meta_info {id,
 * finish_reason {type, length}, prompt_tokens, completion_tokens,
 * cached_tokens, input_token_logprobs [[logprob|null, id, null], ...] (the
 * first null), output_token_logprobs, input_top_logprobs [null, [[lp, id,
 * null], ...], ...] when asked}}; GET /get_model_info.
 *
 * TGI 3.x: POST /generate {inputs (text only), parameters {max_new_tokens
 * >= 1, details, decoder_input_details, top_n_tokens <= 5, do_sample}} ->
 * {generated_text, details {finish_reason, generated_tokens, seed, prefill
 * [{id, text, logprob|null}] (empty unless the server was started with
 * --enable-prefill-logprobs: "tgi-no-prefill"), tokens [{id, text, logprob,
 * special}]}}; validation errors 422 {"error", "error_type": "validation"};
 * GET /info; POST /tokenize {"inputs"} -> [{id, text, start, stop}]. */
#include "serve/serve_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum MHD_Result tgi_error(struct MHD_Connection *c, const char *msg)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "error", msg);
    cJSON_AddStringToObject(j, "error_type", "validation");
    return sv_send_json(c, 422, j);
}

static enum MHD_Result sglang_error(struct MHD_Connection *c, const char *msg)
{
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    return sv_send_json(c, 400, j);
}

/* [logprob|null, id, null] */
static cJSON *triple(double lp, int32_t id, int null_lp)
{
    cJSON *t = cJSON_CreateArray();
    cJSON_AddItemToArray(t, null_lp ? cJSON_CreateNull() : cJSON_CreateNumber(lp));
    cJSON_AddItemToArray(t, cJSON_CreateNumber(id));
    cJSON_AddItemToArray(t, cJSON_CreateNull());
    return t;
}

/* the k most likely tokens of one log-softmax row, most likely first */
static cJSON *top_of(const float *row, int V, int k)
{
    cJSON *a = cJSON_CreateArray();
    int32_t ids[32];
    int n = 0;
    for (int v = 0; v < V; v++) {
        if (n == k && !(row[v] > row[ids[k - 1]])) continue;
        int at = n < k ? n++ : k - 1; /* a new slot, or the last one replaced */
        while (at > 0 && row[ids[at - 1]] < row[v]) {
            ids[at] = ids[at - 1];
            at--;
        }
        ids[at] = v;
    }
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, triple(row[ids[i]], ids[i], 0));
    return a;
}

/* the prompt's ids: input_ids, or text tokenized with BOS (as the HF
 * tokenizer does); 0 or an error message in msg */
static int sglang_ids(struct server *s, struct backend *b, const cJSON *req, int32_t **ids,
                      int64_t *n, char *msg, size_t msglen)
{
    const cJSON *in = cJSON_GetObjectItem(req, "input_ids"), *t = cJSON_GetObjectItem(req, "text");
    *ids = NULL, *n = 0;
    if (cJSON_IsString(t))
        return backend_tokenize(b, t->valuestring, strlen(t->valuestring), 1, ids, n)
               ? snprintf(msg, msglen, "cannot tokenize the text"),
               -1 : 0;
    if (!cJSON_IsArray(in) || cJSON_GetArraySize(in) < 1)
        return snprintf(msg, msglen, "give exactly one of text and input_ids"), -1;
    *ids = malloc((size_t)cJSON_GetArraySize(in) * sizeof **ids);
    const cJSON *v;
    cJSON_ArrayForEach(v, in)
    {
        if (!*ids || !cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= s->info.n_vocab)
            return free(*ids), *ids = NULL, snprintf(msg, msglen, "input_ids: bad token id"), -1;
        (*ids)[(*n)++] = (int32_t)v->valuedouble;
    }
    return 0;
}

static enum MHD_Result sglang_generate(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    char msg[256];
    const cJSON *sp = cJSON_GetObjectItem(req, "sampling_params"),
                *mn = cJSON_GetObjectItem(sp, "max_new_tokens"),
                *ls = cJSON_GetObjectItem(req, "logprob_start_len"),
                *tk = cJSON_GetObjectItem(req, "top_logprobs_num");
    int max_new = cJSON_IsNumber(mn) ? (int)mn->valuedouble : 128,
        top = cJSON_IsNumber(tk) ? (int)tk->valuedouble : 0,
        want = cJSON_IsTrue(cJSON_GetObjectItem(req, "return_logprob"));
    if (max_new < 0) return sglang_error(c, "max_new_tokens must be at least 0");
    if (top < 0 || top > 32) return sglang_error(c, "top_logprobs_num must be 0..32");
    struct backend *b = sv_acquire(s);
    int32_t *ids = NULL;
    int64_t n = 0;
    int bad = sglang_ids(s, b, req, &ids, &n, msg, sizeof msg);
    int64_t start = cJSON_IsNumber(ls) ? (int64_t)ls->valuedouble : -1;
    if (!bad && start < 0) start = n; /* 0.5: output log-probs only */
    if (!bad && start > n) bad = -1, snprintf(msg, sizeof msg, "logprob_start_len > input length");
    if (!bad && n + max_new > s->info.n_ctx_train)
        bad = -1, snprintf(msg, sizeof msg,
                           "Requested token count exceeds the model's maximum context length of "
                           "%d tokens.",
                           s->info.n_ctx_train);
    double *lp = NULL;
    float *rows = NULL;
    char *gtext = NULL;
    int32_t *gen = NULL;
    int64_t n_gen = 0;
    int rc = QG_OK;
    /* the positions asked for only: from logprob_start_len on (its first is null) */
    int64_t from = start + 1 > 1 ? start + 1 : 1;
    if (!bad && want && n > from) {
        lp = malloc((size_t)(n - from) * sizeof *lp);
        rows = top ? malloc((size_t)(n - from) * (size_t)s->info.n_vocab * sizeof *rows) : NULL;
        struct backend_score q = {
            .tokens = ids, .n_tokens = (int)n, .from = (int)from, .logprob = lp, .rows = rows};
        rc = !lp || (top && !rows) ? QG_ERR_NOMEM : backend_score(b, &q);
    }
    struct backend_gen_params gp = {.max_tokens = max_new, .top_p = 1};
    if (!bad && !rc && max_new > 0) rc = backend_generate(b, ids, n, &gp, &gtext, &gen, &n_gen);
    sv_release(s, b);
    if (bad || rc) {
        free(ids), free(lp), free(rows), free(gtext), free(gen);
        return sglang_error(c, bad ? msg : "the model failed");
    }
    cJSON *j = cJSON_CreateObject(), *mi, *og = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "text", gtext ? gtext : "");
    for (int64_t i = 0; i < n_gen; i++)
        cJSON_AddItemToArray(og, cJSON_CreateNumber(gen[i]));
    cJSON_AddItemToObject(j, "output_ids", og);
    mi = cJSON_AddObjectToObject(j, "meta_info");
    cJSON_AddStringToObject(mi, "id", "qgate-sglang");
    cJSON *fr = cJSON_AddObjectToObject(mi, "finish_reason");
    cJSON_AddStringToObject(fr, "type", "length");
    cJSON_AddNumberToObject(fr, "length", (double)n_gen);
    cJSON_AddNumberToObject(mi, "prompt_tokens", (double)n);
    cJSON_AddNumberToObject(mi, "completion_tokens", (double)n_gen);
    cJSON_AddNumberToObject(mi, "cached_tokens", 0);
    if (want) {
        cJSON *il = cJSON_AddArrayToObject(mi, "input_token_logprobs"),
              *it = top ? cJSON_AddArrayToObject(mi, "input_top_logprobs") : NULL;
        for (int64_t i = start; i < n; i++) { /* element 0 is null, whatever start is */
            int none = i < from;
            cJSON_AddItemToArray(il, triple(none ? 0 : lp[i - from], ids[i], none));
            if (it)
                cJSON_AddItemToArray(it, none ? cJSON_CreateNull()
                                              : top_of(rows + (size_t)(i - from) * s->info.n_vocab,
                                                       s->info.n_vocab, top));
        }
        cJSON_AddArrayToObject(mi, "output_token_logprobs");
        if (top) cJSON_AddArrayToObject(mi, "output_top_logprobs");
    }
    free(ids), free(lp), free(rows), free(gtext), free(gen);
    return sv_send_json(c, 200, j);
}

static cJSON *tgi_token(const char *text, int32_t id, double lp, int null_lp)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "id", id);
    cJSON_AddStringToObject(t, "text", text);
    if (null_lp)
        cJSON_AddNullToObject(t, "logprob");
    else
        cJSON_AddNumberToObject(t, "logprob", lp);
    return t;
}

static const char *piece(const struct server *s, int32_t id)
{
    return s->piece && id >= 0 && id < s->n_piece && s->piece[id] ? s->piece[id] : "";
}

static enum MHD_Result tgi_generate(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    const cJSON *in = cJSON_GetObjectItem(req, "inputs"),
                *p = cJSON_GetObjectItem(req, "parameters"),
                *mn = cJSON_GetObjectItem(p, "max_new_tokens"),
                *te = cJSON_GetObjectItem(p, "temperature");
    if (!cJSON_IsString(in)) return tgi_error(c, "Failed to deserialize the JSON body: inputs");
    int max_new = cJSON_IsNumber(mn) ? (int)mn->valuedouble : 100;
    if (max_new <= 0) return tgi_error(c, "`max_new_tokens` must be strictly positive");
    if (te && (!cJSON_IsNumber(te) || te->valuedouble <= 0))
        return tgi_error(c, "`temperature` must be strictly positive");
    int prefill = cJSON_IsTrue(cJSON_GetObjectItem(p, "decoder_input_details")) && !s->no_prefill,
        details = prefill || cJSON_IsTrue(cJSON_GetObjectItem(p, "details")) ||
                  cJSON_IsTrue(cJSON_GetObjectItem(p, "decoder_input_details"));
    struct backend *b = sv_acquire(s);
    int32_t *ids = NULL, *gen = NULL;
    int64_t n = 0, n_gen = 0;
    double *lp = NULL;
    char *gtext = NULL;
    int rc = backend_tokenize(b, in->valuestring, strlen(in->valuestring), 1, &ids, &n);
    int too_long = !rc && n + max_new > s->info.n_ctx_train;
    if (!rc && !too_long && prefill && n > 1) {
        lp = malloc((size_t)(n - 1) * sizeof *lp);
        struct backend_score q = {.tokens = ids, .n_tokens = (int)n, .from = 1, .logprob = lp};
        rc = lp ? backend_score(b, &q) : QG_ERR_NOMEM;
    }
    struct backend_gen_params gp = {.max_tokens = max_new, .top_p = 1};
    if (!rc && !too_long) rc = backend_generate(b, ids, n, &gp, &gtext, &gen, &n_gen);
    sv_release(s, b);
    if (rc || too_long) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "`inputs` tokens + `max_new_tokens` must be <= %d. Given: %lld `inputs` tokens "
                 "and %d `max_new_tokens`",
                 s->info.n_ctx_train, (long long)n, max_new);
        free(ids), free(lp), free(gtext), free(gen);
        return tgi_error(c, too_long ? msg : "the model failed");
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "generated_text", gtext ? gtext : "");
    if (details) {
        cJSON *d = cJSON_AddObjectToObject(j, "details"),
              *pf = cJSON_AddArrayToObject(d, "prefill"), *tk = cJSON_AddArrayToObject(d, "tokens");
        cJSON_AddStringToObject(d, "finish_reason", "length");
        cJSON_AddNumberToObject(d, "generated_tokens", (double)n_gen);
        cJSON_AddNullToObject(d, "seed");
        for (int64_t i = 0; prefill && i < n; i++) /* the first: NaN, written as null */
            cJSON_AddItemToArray(pf, tgi_token(piece(s, ids[i]), ids[i], i ? lp[i - 1] : 0, !i));
        for (int64_t i = 0; i < n_gen; i++) {
            cJSON *t = tgi_token(piece(s, gen[i]), gen[i], 0, 0);
            cJSON_AddFalseToObject(t, "special");
            cJSON_AddItemToArray(tk, t);
        }
    }
    free(ids), free(lp), free(gtext), free(gen);
    return sv_send_json(c, 200, j);
}

enum MHD_Result sv_native_generate(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    return s->native == SV_NATIVE_TGI ? tgi_generate(s, c, req) : sglang_generate(s, c, req);
}

enum MHD_Result sv_native_tokenize(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    const cJSON *in = cJSON_GetObjectItem(req, "inputs");
    if (!cJSON_IsString(in)) return tgi_error(c, "Failed to deserialize the JSON body: inputs");
    struct backend *b = sv_acquire(s);
    int32_t *ids = NULL;
    int64_t n = 0;
    int rc = backend_tokenize(b, in->valuestring, strlen(in->valuestring), 1, &ids, &n);
    sv_release(s, b);
    if (rc) return tgi_error(c, "cannot tokenize");
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; i < n; i++) { /* special tokens: empty text at 0 */
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", ids[i]);
        int special = i == 0 && s->info.add_bos && ids[i] == s->info.bos;
        cJSON_AddStringToObject(t, "text", special ? "" : piece(s, ids[i]));
        cJSON_AddNumberToObject(t, "start", 0);
        cJSON_AddNumberToObject(t, "stop", 0);
        cJSON_AddItemToArray(a, t);
    }
    free(ids);
    return sv_send_json(c, 200, a);
}

enum MHD_Result sv_native_info(struct server *s, struct MHD_Connection *c)
{
    cJSON *j = cJSON_CreateObject();
    if (s->native == SV_NATIVE_TGI) {
        cJSON_AddStringToObject(j, "model_id", s->model_id);
        cJSON_AddNullToObject(j, "model_sha");
        cJSON_AddNumberToObject(j, "max_input_tokens", s->info.n_ctx_train - 1);
        cJSON_AddNumberToObject(j, "max_total_tokens", s->info.n_ctx_train);
        cJSON_AddStringToObject(j, "router", "text-generation-router");
        cJSON_AddStringToObject(j, "version", "3.3.6-dev0");
        cJSON_AddNullToObject(j, "sha");
    } else {
        cJSON_AddStringToObject(j, "model_path", s->model_id);
        cJSON_AddStringToObject(j, "tokenizer_path", s->model_id);
        cJSON_AddTrueToObject(j, "is_generation");
    }
    return sv_send_json(c, 200, j);
}

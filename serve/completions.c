/* completions — /v1/completions: prompts as text or token ids, sampling
 * options, echo and prompt log-probs (OpenAI's and vLLM's forms), batches
 * and streaming. */
#include "serve/serve.h"
#include "serve/serve_impl.h"
#include "serve/serve_fmt.h"
#include "datasets/reader.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"
#include "reports/escape.h"
#include "core/rng.h"
#include "core/utf8.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The prompt as token ids: a string (tokenized with BOS), an array of ids,
 * or a one-element array of either. 0 or an HTTP status with msg. */
static unsigned prompt_ids(struct server *s, struct backend *b, const cJSON *p, int32_t **ids,
                           int64_t *n, char **text, char *msg, size_t msglen)
{
    *ids = NULL, *n = 0, *text = NULL;
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && !cJSON_IsNumber(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p)) {
        int rc = backend_tokenize(b, p->valuestring, strlen(p->valuestring), 1, ids, n);
        if (rc)
            return snprintf(msg, msglen, "cannot tokenize the prompt: %s", qg_strerror(rc)), 400;
        *text = qg_strdup(p->valuestring);
        return 0;
    }
    if (s->text_prompts_only) return snprintf(msg, msglen, "\"prompt\" must be a string"), 400;
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0)
        return snprintf(msg, msglen,
                        "\"prompt\" must be a string or a non-empty array of token ids (one prompt "
                        "per request)"),
               400;
    int64_t k = cJSON_GetArraySize(p), i = 0;
    *ids = malloc((size_t)k * sizeof **ids);
    if (!*ids) return snprintf(msg, msglen, "out of memory"), 500;
    const cJSON *v;
    cJSON_ArrayForEach(v, p)
    {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
            v->valuedouble >= s->info.n_vocab) {
            free(*ids), *ids = NULL;
            return snprintf(msg, msglen, "prompt token %lld is not a token id in [0, %d)",
                            (long long)i, s->info.n_vocab),
                   400;
        }
        (*ids)[i++] = (int32_t)v->valuedouble;
    }
    *n = k;
    *text = backend_detokenize(b, *ids, k);
    if (!*text) *text = qg_strdup("");
    return 0;
}

static const char *piece_of(const struct server *s, int32_t id)
{
    return s->piece && id >= 0 && id < s->n_piece && s->piece[id] ? s->piece[id] : "";
}

/* Scores seq (n tokens) from its second token: lp[n-1], and the rows of
 * log-probs rows[n-1][V] when want_rows (malloc'd). Runs while the request
 * holds b. */
static int score_seq(struct server *s, struct backend *b, const int32_t *seq, int64_t n,
                     int want_rows, double **lp, float **rows)
{
    int64_t m = n - 1; /* scored positions: tokens 1..n-1 */
    *lp = NULL, *rows = NULL;
    if (m <= 0) return QG_OK;
    *lp = malloc((size_t)m * sizeof **lp);
    if (want_rows) *rows = malloc((size_t)m * (size_t)s->info.n_vocab * sizeof **rows);
    if (!*lp || (want_rows && !*rows)) return QG_ERR_NOMEM;
    struct backend_score req = {
        .tokens = seq, .n_tokens = (int)n, .from = 1, .logprob = *lp, .rows = *rows};
    return backend_score(b, &req);
}

/* The logprobs object of seq[first..n-1] from score_seq's lp and rows
 * (seq[0] gets null when included). Needs no backend: pieces come from the
 * server's table, so it runs after the request gave its instance back. */
static cJSON *logprobs_json(struct server *s, const int32_t *seq, int64_t n, int64_t n_prompt,
                            int64_t first, int top_k, const double *lp, const float *rows,
                            const int64_t *offsets)
{
    int V = s->info.n_vocab;
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens"),
          *ids = cJSON_AddArrayToObject(o, "token_ids"),
          *tlp = cJSON_AddArrayToObject(o, "token_logprobs"),
          *top = cJSON_AddArrayToObject(o, "top_logprobs"),
          *off = cJSON_AddArrayToObject(o, "text_offset"),
          *topid = cJSON_AddArrayToObject(o, "top_token_ids");
    int64_t offset = 0;
    for (int64_t i = first; i < n; i++) {
        const char *pc = piece_of(s, seq[i]);
        cJSON_AddItemToArray(toks, cJSON_CreateString(pc));
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(seq[i]));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(offsets ? offsets[i] : offset)));
        offset += (int64_t)strlen(pc);
        if (i == 0 || (s->no_prompt_logprobs && i < n_prompt)) {
            cJSON_AddItemToArray(tlp, cJSON_CreateNull());
            cJSON_AddItemToArray(top, cJSON_CreateNull());
            cJSON_AddItemToArray(topid, cJSON_CreateNull());
            continue;
        }
        cJSON_AddItemToArray(tlp, cJSON_CreateNumber(lp[i - 1]));
        if (top_k <= 0) {
            cJSON_AddItemToArray(top, cJSON_CreateNull());
            cJSON_AddItemToArray(topid, cJSON_CreateNull());
            continue;
        }
        cJSON *pairs = cJSON_CreateArray();
        cJSON_AddItemToArray(topid, pairs);
        /* the top_k entries of the row, by selection */
        const float *row = rows + (size_t)(i - 1) * (size_t)V;
        cJSON *t = cJSON_CreateObject();
        int32_t chosen[32];
        int k = top_k < 32 ? top_k : 32;
        if (k > V) k = V;
        for (int j = 0; j < k; j++) {
            int32_t best = -1;
            for (int32_t v = 0; v < V; v++) {
                int taken = 0;
                for (int q = 0; q < j && !taken; q++)
                    taken = chosen[q] == v;
                if (!taken && (best < 0 || row[v] > row[best])) best = v;
            }
            chosen[j] = best;
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(best));
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(row[best]));
            cJSON_AddItemToArray(pairs, pair);
            /* two ids with the same piece text keep the larger probability */
            const char *bp = piece_of(s, best);
            if (!cJSON_GetObjectItemCaseSensitive(t, bp)) cJSON_AddNumberToObject(t, bp, row[best]);
        }
        cJSON_AddItemToArray(top, t);
    }
    if (s->text_prompts_only) { /* a plain OpenAI-style answer: no id extensions */
        cJSON_DeleteItemFromObject(o, "token_ids");
        cJSON_DeleteItemFromObject(o, "top_token_ids");
    }
    return o;
}

/* vLLM's prompt_logprobs for the n prompt tokens of seq: null for the
 * first, then per token an object keyed by token id (as a string) holding
 * {"logprob", "rank", "decoded_token"} for the token itself and the k most
 * likely. */
static cJSON *vllm_prompt_logprobs(struct server *s, const int32_t *seq, int64_t n, int k,
                                   const double *lp, const float *rows)
{
    int V = s->info.n_vocab;
    if (k > V) k = V;
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; i < n; i++) {
        if (i == 0) {
            cJSON_AddItemToArray(a, cJSON_CreateNull());
            continue;
        }
        const float *row = rows + (size_t)(i - 1) * (size_t)V;
        cJSON *o = cJSON_CreateObject();
        int32_t chosen[21];
        int n_chosen = 0;
        for (int j = 0; j < k && j < 20; j++) { /* the j-th most likely, by selection */
            int32_t best = -1;
            for (int32_t v = 0; v < V; v++) {
                int taken = 0;
                for (int q = 0; q < n_chosen && !taken; q++)
                    taken = chosen[q] == v;
                if (!taken && (best < 0 || row[v] > row[best])) best = v;
            }
            chosen[n_chosen++] = best;
        }
        int has_self = 0;
        for (int q = 0; q < n_chosen; q++)
            has_self |= chosen[q] == seq[i];
        if (!has_self) chosen[n_chosen++] = seq[i];
        for (int q = 0; q < n_chosen; q++) {
            int32_t id = chosen[q];
            double v = id == seq[i] ? lp[i - 1] : (double)row[id];
            int rank = 1;
            for (int32_t u = 0; u < V; u++)
                rank += row[u] > row[id];
            char key[16];
            snprintf(key, sizeof key, "%d", (int)id);
            cJSON *e = cJSON_AddObjectToObject(o, key);
            cJSON_AddNumberToObject(e, "logprob", v);
            cJSON_AddNumberToObject(e, "rank", rank);
            cJSON_AddStringToObject(e, "decoded_token", piece_of(s, id));
        }
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

unsigned sv_fail(cJSON **out, unsigned status, const char *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    *out = sv_error_body(status, type, fmt, ap);
    va_end(ap);
    return status;
}

static void completion_out_release(struct completion_out *o)
{
    cJSON_Delete(o->lpo);
    cJSON_Delete(o->plpo);
    free(o->ids), free(o->gen), free(o->seq), free(o->ptext), free(o->gtext), free(o->offsets);
}

/* An optional integer member k in [0, hi]; *v untouched when absent or null. */
static int opt_int(const cJSON *req, const char *k, double hi, int *v)
{
    const cJSON *j = cJSON_GetObjectItem(req, k);
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > hi) return -1;
    *v = (int)j->valuedouble;
    return 0;
}

/* Sampling: ranges checked before any conversion (an out-of-range one is undefined). */
static unsigned parse_sampling(const cJSON *req, struct completion_req *q, cJSON **out)
{
    const cJSON *v;
    if ((v = cJSON_GetObjectItem(req, "temperature")) && cJSON_IsNumber(v)) {
        if (!(v->valuedouble >= 0 && v->valuedouble <= 100))
            return sv_fail(out, 400, "invalid_request_error",
                           "\"temperature\" must be in [0, 100]");
        q->gp.temperature = (float)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItem(req, "top_p")) && cJSON_IsNumber(v)) {
        if (!(v->valuedouble > 0 && v->valuedouble <= 1))
            return sv_fail(out, 400, "invalid_request_error", "\"top_p\" must be in (0, 1]");
        q->gp.top_p = (float)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItem(req, "seed")) &&
        cJSON_IsNumber(v)) { /* an integer; a negative one as its 64-bit pattern */
        double d = v->valuedouble;
        if (d != floor(d) || d < -9223372036854775808.0 || d >= 18446744073709551616.0)
            return sv_fail(out, 400, "invalid_request_error", "\"seed\" must be an integer");
        q->gp.seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    }
    const cJSON *st = cJSON_GetObjectItem(req, "stop");
    if (cJSON_IsString(st))
        q->stops[q->gp.n_stop++] = st->valuestring;
    else if (cJSON_IsArray(st)) {
        cJSON_ArrayForEach(v, st)
        {
            if (!cJSON_IsString(v) || q->gp.n_stop == 4)
                return sv_fail(out, 400, "invalid_request_error",
                               "\"stop\" must be a string or up to 4 strings");
            q->stops[q->gp.n_stop++] = v->valuestring;
        }
    }
    q->gp.stop = q->stops;
    return 0;
}

/* logit_bias {"ID": bias in [-100, 100]} into q. 0 or the error's status. */
static unsigned parse_bias(struct server *s, const cJSON *lb, struct completion_req *q, cJSON **out)
{
    const cJSON *e;
    if (!lb || cJSON_IsNull(lb)) return 0;
    if (!cJSON_IsObject(lb))
        return sv_fail(out, 400, "invalid_request_error",
                       "\"logit_bias\" must be an object of token id -> bias");
    cJSON_ArrayForEach(e, lb)
    {
        int64_t id;
        if (q->gp.n_bias == SERVE_MAX_BIAS)
            return sv_fail(out, 400, "invalid_request_error",
                           "\"logit_bias\" holds at most %d tokens", SERVE_MAX_BIAS);
        if (qg_parse_i64(e->string, 0, s->info.n_vocab - 1, &id))
            return sv_fail(out, 400, "invalid_request_error",
                           "\"logit_bias\": '%s' is not a token id in [0, %d)", e->string,
                           s->info.n_vocab);
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= -100 && e->valuedouble <= 100))
            return sv_fail(out, 400, "invalid_request_error",
                           "\"logit_bias\": the bias of token %lld must be a number in [-100, 100]",
                           (long long)id);
        q->bias_ids[q->gp.n_bias] = (int32_t)id;
        q->bias[q->gp.n_bias++] = (float)e->valuedouble;
    }
    q->gp.bias_ids = q->bias_ids;
    q->gp.bias = q->bias;
    return 0;
}

/* What OpenAI's API has beyond the basics: suffix and best_of (refused,
 * not ignored), logit_bias, stream and stream_options. */
static unsigned parse_extras(struct server *s, const cJSON *req, struct completion_req *q,
                             cJSON **out)
{
    const cJSON *v = cJSON_GetObjectItem(req, "suffix");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !*v->valuestring))
        return sv_fail(out, 400, "invalid_request_error",
                       "\"suffix\" (insertion) is not supported by this server");
    v = cJSON_GetObjectItem(req, "best_of");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 1))
        return sv_fail(out, 400, "invalid_request_error", "only \"best_of\": 1 is supported");
    q->stream = cJSON_IsTrue(cJSON_GetObjectItem(req, "stream"));
    q->include_usage = cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(req, "stream_options"), "include_usage"));
    return parse_bias(s, cJSON_GetObjectItem(req, "logit_bias"), q, out);
}

/* 0 with *q filled, or the HTTP status of the error written to *out. */
static unsigned parse_completion(struct server *s, const cJSON *req, struct completion_req *q,
                                 cJSON **out)
{
    memset(q, 0, sizeof *q);
    static const char *const llama_unsupported[] = {"best_of", "echo", "suffix"};
    for (int i = 0; s->llama_server && i < 3; i++)
        if (cJSON_GetObjectItem(req, llama_unsupported[i])) { /* its form: a numeric code */
            sv_fail(out, 500, "server_error", "Unsupported param: %s", llama_unsupported[i]);
            cJSON_ReplaceItemInObject(cJSON_GetObjectItem(*out, "error"), "code",
                                      cJSON_CreateNumber(500));
            return 500;
        }
    const cJSON *model = cJSON_GetObjectItem(req, "model");
    if (model && (!cJSON_IsString(model) || strcmp(model->valuestring, s->model_id)))
        return sv_fail(out, 404, "invalid_request_error",
                       "model '%s' is not served here (this server serves '%s')",
                       cJSON_IsString(model) ? model->valuestring : "?", s->model_id);
    const cJSON *n_choices = cJSON_GetObjectItem(req, "n");
    if (n_choices && (!cJSON_IsNumber(n_choices) || n_choices->valuedouble != 1))
        return sv_fail(out, 400, "invalid_request_error", "only \"n\": 1 is supported");
    q->echo = cJSON_IsTrue(cJSON_GetObjectItem(req, "echo"));
    q->top_k = q->plp_k = -1;
    q->max_tokens = 16;
    if (opt_int(req, "logprobs", 20, &q->top_k))
        return sv_fail(out, 400, "invalid_request_error", "\"logprobs\" must be an integer 0..20");
    const cJSON *jp = s->llama_server ? NULL : cJSON_GetObjectItem(req, "prompt_logprobs");
    if (jp && !cJSON_IsNull(jp) && s->no_vllm_prompt_logprobs)
        return sv_fail(out, 400, "invalid_request_error", "unknown parameter \"prompt_logprobs\"");
    if (jp && opt_int(req, "prompt_logprobs", 20, &q->plp_k))
        return sv_fail(out, 400, "invalid_request_error",
                       "\"prompt_logprobs\" must be an integer 0..20");
    if (opt_int(req, "max_tokens", 1e6, &q->max_tokens))
        return sv_fail(out, 400, "invalid_request_error",
                       "\"max_tokens\" must be a non-negative integer");
    q->gp = (struct backend_gen_params){
        .max_tokens = q->max_tokens, .temperature = 1.0f, .top_p = 1.0f, .seed = 0};
    unsigned st = parse_extras(s, req, q, out);
    return st ? st : parse_sampling(req, q, out);
}

/* Each token's text_offset in the text the answer returns (the prompt's
 * text when echoed, then the generated text), in characters: the
 * characters of the pieces before it (piece_chars, so a character split
 * over byte tokens counts once), SentencePiece's leading space of the first
 * word not counted. malloc'd [n], NULL on no memory. */
static int64_t *text_offsets(const struct server *s, const int32_t *seq, int64_t n_prompt,
                             int64_t n, int echo, const char *ptext)
{
    int64_t *off = malloc((size_t)(n ? n : 1) * sizeof *off);
    int64_t pchars = echo ? serve_chars(ptext) : 0, run = 0, base = 0, lead = -1;
    for (int64_t i = 0; off && i < n; i++) {
        if (i == n_prompt) base = run;
        if (i < n_prompt) {
            int64_t c = run - (lead > 0 ? lead : 0);
            off[i] = c < 0 ? 0 : c < pchars ? c : pchars;
        } else {
            off[i] = pchars + run - base;
        }
        int32_t id = seq[i];
        int64_t c = id >= 0 && id < s->n_piece ? s->piece_chars[id] : 0;
        /* the first word's space, which the prompt's text lacks */
        if (lead < 0 && c > 0)
            lead = i < n_prompt && piece_of(s, id)[0] == ' ' && ptext && ptext[0] != ' ';
        run += c;
    }
    return off;
}

/* Runs the request on a model instance: tokens, generation, log-probs.
 * 0 or an HTTP status with msg. */
static unsigned run_completion(struct server *s, const cJSON *req, const struct completion_req *q,
                               struct completion_out *o, char *msg, size_t msglen)
{
    int rc = QG_OK;
    struct backend *b = sv_acquire(s);
    unsigned status = prompt_ids(s, b, cJSON_GetObjectItem(req, "prompt"), &o->ids, &o->n,
                                 &o->ptext, msg, msglen);
    if (!status && s->slot_ctx > 0 && o->n + q->max_tokens - 1 > s->slot_ctx) {
        /* llama-server with -c N: "input truncated", the prompt's tail kept; the answer is
         * to another prompt, and only usage.prompt_tokens says so */
        int64_t keep = s->slot_ctx - q->max_tokens + 1 > 1 ? s->slot_ctx - q->max_tokens + 1 : 1;
        if (keep < o->n) {
            memmove(o->ids, o->ids + (o->n - keep), (size_t)keep * sizeof *o->ids);
            o->n = keep;
        }
    }
    /* n prompt tokens and max_tokens new ones take n + max_tokens - 1
     * evaluated positions (the last token is only a target) */
    if (!status && o->n + q->max_tokens - 1 > s->info.n_ctx_train && s->info.n_ctx_train > 0) {
        status = 400;
        snprintf(msg, msglen,
                 "prompt (%lld tokens) plus max_tokens (%d) needs %lld positions, over the context "
                 "length %d",
                 (long long)o->n, q->max_tokens, (long long)o->n + q->max_tokens - 1,
                 s->info.n_ctx_train);
    }
    if (!status && q->max_tokens > 0)
        rc = backend_generate(b, o->ids, o->n, &q->gp, &o->gtext, &o->gen, &o->n_gen);
    double *lp = NULL;
    float *rows = NULL;
    int64_t n = o->n, n_gen = o->n_gen;
    if (!status && !rc && ((q->top_k >= 0 && (q->echo || n_gen > 0)) || q->plp_k >= 0)) {
        o->seq = malloc((size_t)(n + n_gen) * sizeof *o->seq);
        if (!o->seq)
            rc = QG_ERR_NOMEM;
        else {
            memcpy(o->seq, o->ids, (size_t)n * sizeof *o->seq);
            if (n_gen) memcpy(o->seq + n, o->gen, (size_t)n_gen * sizeof *o->seq);
            /* the generated tokens only when their log-probs are asked for:
             * prompt_logprobs alone scores the prompt as echo does, in one
             * batch of the same size, so the numbers are the same */
            int64_t n_scored = q->top_k >= 0 ? n + n_gen : n;
            rc = score_seq(s, b, o->seq, n_scored, q->top_k > 0 || q->plp_k >= 0, &lp, &rows);
            if (!rc && q->top_k >= 0 &&
                !(o->offsets = text_offsets(s, o->seq, n, n + n_gen, q->echo, o->ptext)))
                rc = QG_ERR_NOMEM;
        }
    }
    sv_release(s, b);
    if (!status && !rc && o->seq && q->top_k >= 0 &&
        !(o->lpo = logprobs_json(s, o->seq, n + n_gen, n, q->echo ? 0 : n, q->top_k, lp, rows,
                                 o->offsets)))
        rc = QG_ERR_NOMEM;
    if (!status && !rc && o->seq && q->plp_k >= 0 &&
        !(o->plpo = vllm_prompt_logprobs(s, o->seq, n, q->plp_k, lp, rows)))
        rc = QG_ERR_NOMEM;
    free(lp), free(rows);
    if (!status && rc) status = 500, snprintf(msg, msglen, "the model failed: %s", qg_strerror(rc));
    return status;
}

/* Appends text to the array a as valid UTF-8. */
static void add_clean(cJSON *a, const char *text)
{
    char *c = utf8_sanitize(text);
    cJSON_AddItemToArray(a, cJSON_CreateString(c ? c : ""));
    free(c);
}

/* The OpenAI text_completion object (takes o's log-prob objects). */
static cJSON *completion_json(struct server *s, int64_t id, const struct completion_req *q,
                              struct completion_out *o)
{
    struct sbuf text;
    sbuf_init(&text, (size_t)1 << 30);
    if (q->echo) sbuf_append(&text, o->ptext, strlen(o->ptext));
    if (o->gtext) sbuf_append(&text, o->gtext, strlen(o->gtext));
    char *clean = utf8_sanitize(text.data ? text.data : "");
    sbuf_release(&text);
    cJSON *j = cJSON_CreateObject();
    char cid[48];
    snprintf(cid, sizeof cid, "cmpl-qgate-%lld", (long long)id);
    cJSON_AddStringToObject(j, "id", cid);
    cJSON_AddStringToObject(j, "object", "text_completion");
    cJSON_AddNumberToObject(j, "created", (double)time(NULL));
    cJSON_AddStringToObject(j, "model", s->model_id);
    if (s->llama_server) cJSON_AddStringToObject(j, "system_fingerprint", SV_LLAMA_BUILD);
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "choices"), ch);
    cJSON_AddNumberToObject(ch, "index", 0);
    cJSON_AddStringToObject(ch, "text", clean ? clean : "");
    if (o->lpo)
        cJSON_AddItemToObject(ch, "logprobs", o->lpo), o->lpo = NULL;
    else
        cJSON_AddNullToObject(ch, "logprobs");
    if (o->plpo) cJSON_AddItemToObject(ch, "prompt_logprobs", o->plpo), o->plpo = NULL;
    cJSON_AddStringToObject(ch, "finish_reason",
                            q->max_tokens > 0 && o->n_gen >= q->max_tokens ? "length" : "stop");
    if (q->stream) { /* the pieces the stream is cut into (serve_fmt.h) */
        const char **pc = malloc((size_t)(o->n_gen + 1) * sizeof *pc);
        for (int64_t i = 0; pc && i < o->n_gen; i++)
            pc[i] = piece_of(s, o->gen[i]);
        cJSON *chunks = cJSON_AddArrayToObject(j, "_chunks"),
              *counts = cJSON_AddArrayToObject(j, "_chunk_tokens"), *gt = NULL;
        if (q->echo) { /* the prompt (even of no text): its log-prob entries too */
            add_clean(chunks, o->ptext ? o->ptext : "");
            cJSON_AddItemToArray(counts, cJSON_CreateNumber((double)o->n));
        }
        cJSON *g = pc ? serve_chunks(o->gtext ? o->gtext : "", pc, o->n_gen, &gt) : NULL, *k;
        cJSON_ArrayForEach(k, g) add_clean(chunks, k->valuestring);
        cJSON_ArrayForEach(k, gt) cJSON_AddItemToArray(counts, cJSON_Duplicate(k, 1));
        cJSON_Delete(g);
        cJSON_Delete(gt);
        free(pc);
    }
    cJSON *u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)o->n);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)o->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(o->n + o->n_gen));
    free(clean);
    return j;
}

unsigned sv_completion(struct server *s, const cJSON *req, cJSON **out)
{
    struct completion_req q;
    unsigned status = parse_completion(s, req, &q, out);
    if (status) return status;
    char msg[512];
    struct completion_out o = {0};
    status = run_completion(s, req, &q, &o, msg, sizeof msg);
    pthread_mutex_lock(&s->lock);
    int64_t id = ++s->next_id;
    pthread_mutex_unlock(&s->lock);
    if (status) {
        sv_fail(out, status, status == 500 ? "server_error" : "invalid_request_error", "%s", msg);
    } else {
        *out = completion_json(s, id, &q, &o);
        status = 200;
    }
    completion_out_release(&o);
    return status;
}

/* A finished completion (chat: a chat.completion) as the client asked
 * for it: one JSON body, or server-sent events when "stream" is true. */
enum MHD_Result sv_answer(struct MHD_Connection *c, unsigned status, cJSON *body, const cJSON *req,
                          int chat)
{
    int stream = cJSON_IsTrue(cJSON_GetObjectItem(req, "stream"));
    if (status != 200 || !stream) {
        cJSON_DeleteItemFromObject(body, "_chunks");
        cJSON_DeleteItemFromObject(body, "_chunk_tokens");
        return sv_send_json(c, status, body);
    }
    char *sse = serve_sse(body, chat,
                          cJSON_IsTrue(cJSON_GetObjectItem(
                              cJSON_GetObjectItem(req, "stream_options"), "include_usage")));
    cJSON_Delete(body);
    if (!sse) return sv_send_error(c, 500, "server_error", "out of memory");
    enum MHD_Result ok = sv_send_text(c, 200, sse, strlen(sse), "text/event-stream", NULL);
    free(sse);
    return ok;
}

/* A prompt list ["a", "b"] or [[ids], [ids]]: more than one prompt. */
static int is_batch(const cJSON *p)
{
    const cJSON *first = cJSON_GetArrayItem(p, 0);
    return cJSON_IsArray(p) && cJSON_GetArraySize(p) > 1 &&
           (cJSON_IsString(first) || cJSON_IsArray(first));
}

/* Several prompts: one completion each, their choices indexed in order and
 * their usage summed. The first error answers for the request. */
static unsigned completion_batch(struct server *s, const cJSON *req, cJSON **out)
{
    const cJSON *p = cJSON_GetObjectItem(req, "prompt"), *e;
    if (cJSON_IsTrue(cJSON_GetObjectItem(req, "stream")))
        return sv_fail(out, 400, "invalid_request_error",
                       "\"stream\" takes one prompt per request, not a list");
    cJSON *all = NULL, *choices = NULL;
    double usage[3] = {0};
    static const char *const uk[3] = {"prompt_tokens", "completion_tokens", "total_tokens"};
    int i = 0;
    cJSON_ArrayForEach(e, p)
    {
        cJSON *one = cJSON_Duplicate(req, 1), *body = NULL;
        cJSON_ReplaceItemInObject(one, "prompt", cJSON_Duplicate(e, 1));
        unsigned st = sv_completion(s, one, &body);
        cJSON_Delete(one);
        if (st != 200) {
            cJSON_Delete(all);
            *out = body;
            return st;
        }
        cJSON *ch = cJSON_DetachItemFromArray(cJSON_GetObjectItem(body, "choices"), 0);
        cJSON_ReplaceItemInObject(ch, "index", cJSON_CreateNumber(i++));
        for (int k = 0; k < 3; k++)
            usage[k] += json_num(cJSON_GetObjectItem(body, "usage"), uk[k], 0);
        if (!all) {
            all = body;
            choices = cJSON_GetObjectItem(all, "choices");
        } else {
            cJSON_Delete(body);
        }
        cJSON_AddItemToArray(choices, ch);
    }
    cJSON *u = cJSON_GetObjectItem(all, "usage");
    for (int k = 0; k < 3; k++)
        cJSON_ReplaceItemInObject(u, uk[k], cJSON_CreateNumber(usage[k]));
    *out = all;
    return 200;
}

enum MHD_Result sv_completions(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    cJSON *body = NULL;
    unsigned status = is_batch(cJSON_GetObjectItem(req, "prompt")) ? completion_batch(s, req, &body)
                                                                   : sv_completion(s, req, &body);
    return sv_answer(c, status, body, req, 0);
}

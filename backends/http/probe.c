/* probe — what `open` learns of an endpoint before anything is trusted:
 * the model list, the context a request gets, the tokenizer, which scoring
 * route works, the chat template's overhead, and the record of it all
 * (docs/http.md, "What open checks"). */
#include "backends/http/http_impl.h"
#include "backends/gguf.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model list: the id must be served; it may say the context length
 * and the vocabulary size (which must match the local tokenizer's). */
int hp_probe_models(struct http *h, const char *tokpath, char *err, size_t errlen)
{
    cJSON *r = NULL;
    long status;
    char url[1100];
    snprintf(url, sizeof url, "%s/models", h->base);
    int rc = hp_request(h, url, NULL, &r, &status);
    if (rc) return qg_errf(err, errlen, rc, "%s", h->err);
    const cJSON *m, *found = NULL;
    int n = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(r, "data"))
    {
        const cJSON *id = cJSON_GetObjectItem(m, "id");
        n++;
        if (cJSON_IsString(id) && (!*h->model ? n == 1 : !strcmp(id->valuestring, h->model)))
            found = m;
    }
    h->models_json = cJSON_PrintUnformatted(r);
    if (!*h->model && n != 1)
        rc = qg_errf(err, errlen, QG_ERR_USAGE, "%s serves %d models: name one with ?model=ID",
                     h->base, n);
    else if (!found)
        rc = qg_errf(err, errlen, QG_ERR_USAGE, "%s does not serve model '%s' (see %s/models)",
                     h->base, h->model, h->base);
    else {
        if (!*h->model)
            snprintf(h->model, sizeof h->model, "%s",
                     cJSON_GetObjectItem(found, "id")->valuestring);
        const cJSON *ml = cJSON_GetObjectItem(found, "max_model_len"),
                    *nv = cJSON_GetObjectItem(found, "n_vocab");
        if (!cJSON_IsNumber(nv))
            nv = cJSON_GetObjectItem(cJSON_GetObjectItem(found, "meta"), "n_vocab"); /* llama.cpp */
        if (!cJSON_IsNumber(ml)) /* llama.cpp: the trained context (its -c may be smaller) */
            ml = cJSON_GetObjectItem(cJSON_GetObjectItem(found, "meta"), "n_ctx_train");
        if (!h->n_ctx && cJSON_IsNumber(ml) && ml->valuedouble >= 2 && ml->valuedouble <= (1 << 24))
            h->n_ctx = (int)ml->valuedouble, h->ctx_from_models = 1;
        if (cJSON_IsNumber(nv) && nv->valuedouble >= 1 && nv->valuedouble < (1 << 24))
            h->n_vocab = (int)nv->valuedouble;
        if (h->tok && h->n_vocab && h->n_vocab != tok_n_vocab(h->tok))
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "%s: the server's model has %d tokens, the tokenizer %s has %d", h->base,
                         h->n_vocab, tokpath, tok_n_vocab(h->tok));
    }
    cJSON_Delete(r);
    return rc;
}

void hp_note_fingerprint(struct http *h, const cJSON *ans)
{
    const cJSON *f = cJSON_GetObjectItem(ans, "system_fingerprint");
    if (!h->sys_fp[0] && cJSON_IsString(f) && f->valuestring[0])
        snprintf(h->sys_fp, sizeof h->sys_fp, "%.120s", f->valuestring);
}

/* A GET of root/path asked once (a server without it is no error): its
 * JSON, or NULL. */
static cJSON *get_once(struct http *h, const char *path)
{
    char url[1100], err[QG_ERRMSG_MAX];
    snprintf(url, sizeof url, "%s%s", h->root, path);
    cJSON *r = NULL;
    long status;
    int retries = h->retries;
    h->retries = 0;
    memcpy(err, h->err, sizeof err);
    if (hp_request(h, url, NULL, &r, &status) != QG_OK) r = NULL;
    memcpy(h->err, err, sizeof err);
    h->retries = retries;
    return r;
}

/* The context the server really gives a request, where it says:
 * llama-server's /props (default_generation_settings.n_ctx: one slot's,
 * -c / -np), TGI's /info (max_total_tokens); vLLM and SGLang say it as
 * max_model_len in /v1/models (probe_models). The smaller of that and
 * ctx=N is used; where it came from is kept for the record. */
void hp_probe_context(struct http *h)
{
    int server = 0;
    cJSON *r = get_once(h, "/props");
    const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "default_generation_settings"),
                                         "n_ctx"),
                *b = cJSON_GetObjectItem(r, "build_info");
    if (cJSON_IsNumber(n) && n->valuedouble >= 2 && n->valuedouble <= (1 << 24)) {
        server = (int)n->valuedouble - 1; /* a slot stops generating at n_ctx - 1 tokens */
        snprintf(h->ctx_source, sizeof h->ctx_source, "/props default_generation_settings.n_ctx");
        if (cJSON_IsString(b) && !strncmp(b->valuestring, "qgate ", 6))
            snprintf(h->server, sizeof h->server, "qgate serve %.100s", b->valuestring + 6);
        else
            snprintf(h->server, sizeof h->server, "llama-server%s%.100s",
                     cJSON_IsString(b) ? " " : "", cJSON_IsString(b) ? b->valuestring : "");
    }
    cJSON_Delete(r);
    if (!server && (r = get_once(h, "/info")) != NULL) { /* text-generation-inference */
        const cJSON *t = cJSON_GetObjectItem(r, "max_total_tokens"),
                    *v = cJSON_GetObjectItem(r, "version");
        if (!h->api_set && cJSON_IsNumber(t)) h->api = HP_API_TGI; /* its own route scores */
        if (cJSON_IsNumber(t) && t->valuedouble >= 2 && t->valuedouble <= (1 << 24)) {
            server = (int)t->valuedouble;
            snprintf(h->ctx_source, sizeof h->ctx_source, "/info max_total_tokens");
            snprintf(h->server, sizeof h->server, "text-generation-inference%s%.100s",
                     cJSON_IsString(v) ? " " : "", cJSON_IsString(v) ? v->valuestring : "");
        }
        cJSON_Delete(r);
    }
    if (!server && !h->server[0] && (r = get_once(h, "/get_model_info")) != NULL) { /* SGLang */
        if (cJSON_IsString(cJSON_GetObjectItem(r, "model_path"))) {
            if (!h->api_set) h->api = HP_API_SGLANG;
            snprintf(h->server, sizeof h->server, "sglang");
        }
        cJSON_Delete(r);
    }
    if (server > 0 && h->api == HP_API_TGI) server -= 2; /* prompt + 1 new <= max_total_tokens */
    if (server > 0 && (!h->n_ctx || server < h->n_ctx || h->ctx_from_models)) {
        if (!h->ctx_user || server < h->n_ctx) h->n_ctx = server;
    }
    if (h->api == HP_API_SGLANG && h->n_ctx > 2 && h->ctx_from_models && !h->ctx_user)
        h->n_ctx--; /* SGLang refuses a prompt of context_len tokens */
    if (!h->ctx_source[0])
        snprintf(h->ctx_source, sizeof h->ctx_source, "%s",
                 h->ctx_user          ? "ctx= in the model spec"
                 : h->ctx_from_models ? "/v1/models"
                                      : "default (the server says none)");
    else if (h->ctx_user && h->n_ctx != server)
        snprintf(h->ctx_source, sizeof h->ctx_source, "ctx= in the model spec");
}

/* chat=1: the positions the server's chat template adds to a message. */
void hp_chat_overhead(struct http *h, const char *sample)
{
    if (!h->chat || h->chat_reserve >= 0) return;
    h->chat_reserve = HTTP_CHAT_RESERVE;
    cJSON *req = cJSON_CreateObject(), *msg = cJSON_CreateObject(), *r = NULL;
    cJSON_AddStringToObject(msg, "role", "user");
    cJSON_AddStringToObject(msg, "content", sample);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "messages"), msg);
    char *body = cJSON_PrintUnformatted(req), url[1100], err[QG_ERRMSG_MAX];
    cJSON_Delete(req);
    snprintf(url, sizeof url, "%s/apply-template", h->root);
    long status;
    int retries = h->retries;
    h->retries = 0; /* one question: a server without the endpoint is no error */
    memcpy(err, h->err, sizeof err);
    if (body && hp_request(h, url, body, &r, &status) == QG_OK) {
        const cJSON *p = cJSON_GetObjectItem(r, "prompt");
        int32_t *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        if (cJSON_IsString(p) &&
            !hp_tokenize(h, p->valuestring, strlen(p->valuestring), 1, &a, &na) &&
            !hp_tokenize(h, sample, strlen(sample), 1, &b, &nb) && na >= nb)
            h->chat_reserve = (int)(na - nb) + HTTP_CHAT_SLACK;
        free(a), free(b);
    }
    memcpy(h->err, err, sizeof err);
    h->retries = retries;
    cJSON_Delete(r);
    free(body);
}

const char *const hp_open_sample =
    "Once upon a time, there was a little girl named Lily. She said: \"3 + 4 = 7!\"";

/* BOS without a local tokenizer: what add_special puts in front of ids. */
static int learn_bos(struct http *h, const int32_t *ids, int64_t n_ids, char *err, size_t errlen)
{
    int32_t *plain = NULL;
    int64_t n_plain = 0;
    long status;
    int rc = hp_server_tokenize(h, hp_open_sample, strlen(hp_open_sample), 0, 1, &plain, &n_plain,
                                &status);
    if (rc)
        qg_errf(err, errlen, rc, "%s", h->err);
    else if (n_plain < 1)
        rc = qg_errf(err, errlen, QG_ERR_DATA,
                     "%s: the server's /tokenize gives no tokens for a sentence", h->base);
    else {
        h->add_bos =
            n_ids == n_plain + 1 && !memcmp(ids + 1, plain, (size_t)n_plain * sizeof *plain);
        h->bos = h->add_bos ? ids[0] : -1;
        h->eos = -1;
        h->pair_a = plain[0];
    }
    free(plain);
    return rc;
}

/* The tokenizers agree on a sample (when the server tokenizes); without a
 * local one the server's must work, and says what BOS is. *ids (malloc'd)
 * is the sample's ids, for the scoring probe. */
int hp_check_tokenizer(struct http *h, const char *tokpath, int32_t **ids, int64_t *n_ids,
                       char *err, size_t errlen)
{
    int32_t *sids = NULL;
    int64_t n_sids = 0;
    long status;
    int rc = h->tok ? tok_encode(h->tok, hp_open_sample, strlen(hp_open_sample), 1, 0, ids, n_ids)
                    : QG_OK;
    if (rc) return rc;
    int trc = hp_server_tokenize(h, hp_open_sample, strlen(hp_open_sample), 1, 1, &sids, &n_sids,
                                 &status);
    if (trc == QG_OK && h->tok) {
        int same = n_sids == *n_ids;
        for (int64_t i = 0; same && i < *n_ids; i++)
            same = sids[i] == (*ids)[i];
        if (!same)
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "%s: the server tokenizes differently from %s (sample: %lld local ids, "
                         "%lld server ids)",
                         h->base, tokpath, (long long)*n_ids, (long long)n_sids);
    } else if (trc == QG_OK) {
        *ids = sids, *n_ids = n_sids, sids = NULL;
    } else if (!h->tok) {
        rc = qg_errf(
            err, errlen, trc == QG_ERR_DATA ? QG_ERR_DATA : QG_ERR_USAGE,
            "%s: no local tokenizer was given and the server's /tokenize does not work (%s); give "
            "?tokenizer=PATH.gguf",
            h->base, h->err);
    } else if (status != 404 && status != 405) {
        rc = qg_errf(err, errlen, trc, "%s", h->err);
    }
    free(sids);
    if (!rc && !h->tok) rc = learn_bos(h, *ids, *n_ids, err, errlen);
    return rc;
}

/* The server's fingerprint: its model list and the log-probs it gives the
 * probe sample now. Cache keys include it, so a server redeployed with
 * another model at the same address and id is not answered from the cache;
 * a change against the fingerprint stored last time is said. */
static void fingerprint(struct http *h, const double *lp, int n)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 24);
    sbuf_printf(&b, "%s\n", h->models_json ? h->models_json : "");
    for (int i = 0; lp && i < n - 1; i++)
        sbuf_printf(&b, "%.9g,", lp[i]);
    hash_sha256_mem(sbuf_str(&b), b.len, h->fp);
    sbuf_release(&b);
    if (!h->cache.get || !h->cache.put) return;
    char key[HASH_HEX_LEN + 1], *old;
    sbuf_init(&b, 1 << 16);
    sbuf_printf(&b, "qgate-http-fingerprint\n%s\n%s", h->base, h->model);
    hash_sha256_mem(sbuf_str(&b), b.len, key);
    sbuf_release(&b);
    if ((old = h->cache.get(h->cache.ud, key)) && strcmp(old, h->fp))
        qg_warn("%s (model '%s') answers differently from the last run that used this database: "
                "its cached answers are not used",
                h->base, h->model);
    free(old);
    h->cache.put(h->cache.ud, key, h->base, h->model, h->fp);
}

/* Scoring works: token ids with echo (max_tokens 0, else 1), ids with
 * vLLM's prompt_logprobs, then text prompts with echo (a server that takes
 * no ids; each answer is checked against the ids meant). The first that
 * scores every prompt token is kept. A server that answers but gives no
 * prompt log-probs is refused for scoring (not for generation); any other
 * failure fails open with the first error. */
int hp_probe_scoring(struct http *h, const int32_t *ids, int64_t n_ids, char *err, size_t errlen)
{
    double lp[128];
    int n = n_ids < 128 ? (int)n_ids : 128;
    static const struct {
        int text, max1, plp;
    } tries[] = {{0, 0, 0}, {0, 1, 0}, {0, 1, 1}, {1, 0, 0}, {1, 1, 0}};
    struct backend_cache cache = h->cache; /* the probe asks the live server */
    memset(&h->cache, 0, sizeof h->cache);
    char first[QG_ERRMSG_MAX] = "", unsup[QG_ERRMSG_MAX] = "";
    int src = QG_ERR_DATA, first_rc = QG_OK;
    if (n < 2)
        snprintf(first, sizeof first, "%.300s: the sample is one token", h->base),
            first_rc = QG_ERR_DATA;
    if (h->api == HP_API_TGI && !h->tok)
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "%s: TGI's /generate takes text only, and its /tokenize gives no pieces to "
                       "turn token ids back into text: give tokenizer=PATH.gguf (the served "
                       "model's)",
                       h->base);
    int echo_refused = 0; /* "Unsupported param: echo" decides every echo route at once */
    for (size_t t = 0; n >= 2 && t < (h->api ? 1 : sizeof tries / sizeof *tries); t++) {
        if (echo_refused && !tries[t].plp) continue;
        h->text_prompt = tries[t].text, h->max_tokens_one = tries[t].max1, h->plp = tries[t].plp;
        if ((src = hp_score_ids(h, ids, n, 1, lp)) == QG_OK) break;
        if (!first_rc) first_rc = src, snprintf(first, sizeof first, "%s", h->err);
        if (src == QG_ERR_UNSUPPORTED && !*unsup) snprintf(unsup, sizeof unsup, "%s", h->err);
        if (src == QG_ERR_UNSUPPORTED && !tries[t].plp && strstr(h->err, "echo")) echo_refused = 1;
        if (src == QG_ERR_UNAVAILABLE || src == QG_ERR_NOMEM) break; /* no server to ask */
    }
    if (src != QG_OK) {
        h->text_prompt = 0, h->max_tokens_one = 0, h->plp = 0;
        if (*unsup && first_rc != QG_ERR_UNAVAILABLE)
            src = QG_ERR_UNSUPPORTED, snprintf(h->err, sizeof h->err, "%s", unsup);
        else
            src = first_rc, snprintf(h->err, sizeof h->err, "%s", first);
    }
    h->cache = cache;
    h->can_score = src == QG_OK;
    fingerprint(h, src == QG_OK ? lp : NULL, n);
    return src && src != QG_ERR_UNSUPPORTED ? qg_errf(err, errlen, src, "%s", h->err) : QG_OK;
}

/* What open found, for the record: a JSON object (malloc'd). */
char *hp_provenance(const struct http *h)
{
    cJSON *o = cJSON_CreateObject(), *caps = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "endpoint", h->base);
    cJSON_AddStringToObject(o, "model", h->model);
    cJSON_AddStringToObject(o, "server", h->server[0] ? h->server : "unknown");
    if (h->sys_fp[0]) cJSON_AddStringToObject(o, "system_fingerprint", h->sys_fp);
    cJSON_AddStringToObject(o, "route",
                            !h->can_score             ? "none: generation only"
                            : h->api == HP_API_SGLANG ? "SGLang /generate input_token_logprobs"
                            : h->api == HP_API_TGI    ? "TGI /generate details.prefill, text"
                            : h->plp                  ? "prompt_logprobs (vLLM)"
                            : h->text_prompt          ? "echo, text prompts"
                                                      : "echo, token-id prompts");
    if (h->can_score) cJSON_AddItemToArray(caps, cJSON_CreateString("prompt log-probs"));
    if (h->can_score && !h->text_prompt && h->api != HP_API_TGI)
        cJSON_AddItemToArray(caps, cJSON_CreateString("token ids"));
    cJSON_AddItemToArray(caps, cJSON_CreateString(h->tok ? "local tokenizer" : "server /tokenize"));
    if (h->chat) cJSON_AddItemToArray(caps, cJSON_CreateString("chat"));
    cJSON_AddItemToObject(o, "capabilities", caps);
    cJSON_AddNumberToObject(o, "ctx", h->n_ctx);
    cJSON_AddStringToObject(o, "ctx_source", h->ctx_source);
    if (h->chat) cJSON_AddNumberToObject(o, "chat_reserve", h->chat_reserve);
    cJSON_AddStringToObject(o, "fingerprint_sha256", h->fp);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

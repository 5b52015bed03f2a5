/* chat — /v1/chat/completions: messages through the model's chat template
 * into a completion. */
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

/* The chat template (documented in serve.h): each message as "Role: text"
 * followed by a blank line, then "Assistant:". 0 with the prompt in p, or
 * 400 with msg. */
static unsigned render_messages(const cJSON *msgs, struct sbuf *p, char *msg, size_t msglen)
{
    const cJSON *m;
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return snprintf(msg, msglen, "\"messages\" must be a non-empty array"), 400;
    cJSON_ArrayForEach(m, msgs)
    {
        const cJSON *role = cJSON_GetObjectItem(m, "role"),
                    *content = cJSON_GetObjectItem(m, "content"), *part;
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        const char *name = !strcmp(r, "system") || !strcmp(r, "developer") ? "System"
                           : !strcmp(r, "user")                            ? "User"
                           : !strcmp(r, "assistant")                       ? "Assistant"
                                                                           : NULL;
        if (!name || !(cJSON_IsString(content) || cJSON_IsArray(content)))
            return snprintf(msg, msglen,
                            "each message needs \"role\" (system, developer, user or assistant) "
                            "and \"content\" (a string or an array of text parts)"),
                   400;
        sbuf_printf(p, "%s: ", name);
        if (cJSON_IsString(content)) sbuf_printf(p, "%s", content->valuestring);
        int k = 0;
        const cJSON *parts = cJSON_IsArray(content) ? content : NULL;
        cJSON_ArrayForEach(part, parts)
        {
            const cJSON *text = cJSON_GetObjectItem(part, "text");
            if (strcmp(json_str(part, "type", ""), "text") || !cJSON_IsString(text))
                return snprintf(msg, msglen,
                                "content parts must be {\"type\": \"text\", \"text\": ...}: "
                                "this server takes text only"),
                       400;
            sbuf_printf(p, "%s%s", k++ ? "\n" : "", text->valuestring);
        }
        sbuf_printf(p, "\n\n");
    }
    sbuf_printf(p, "Assistant:");
    return p->failed ? (snprintf(msg, msglen, "the messages are too long"), 400) : 0;
}

/* The request's "messages" rendered into p: 1, or 0 with the error sent
 * (*sent) and p released. */
static int render_request(struct server *s, struct MHD_Connection *c, const cJSON *req,
                          struct sbuf *p, enum MHD_Result *sent)
{
    char msg[256];
    sbuf_init(p, s->max_body);
    unsigned st = render_messages(cJSON_GetObjectItem(req, "messages"), p, msg, sizeof msg);
    if (!st) return 1;
    sbuf_release(p);
    *sent = sv_send_error(c, st, "invalid_request_error", "%s", msg);
    return 0;
}

/* POST /apply-template: the prompt the chat template makes of "messages". */
enum MHD_Result sv_apply_template(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    struct sbuf p;
    enum MHD_Result sent;
    if (!render_request(s, c, req, &p, &sent)) return sent;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "prompt", p.data ? p.data : "");
    sbuf_release(&p);
    return sv_send_json(c, 200, j);
}

/* Chat's own options into the completion request creq: max_completion_tokens
 * (the current name of max_tokens), logprobs true with top_logprobs K. 0 or
 * the status of the error in *out. */
static unsigned chat_options(const cJSON *req, cJSON *creq, cJSON **out)
{
    const cJSON *mct = cJSON_GetObjectItem(req, "max_completion_tokens");
    if (mct && !cJSON_IsNull(mct)) {
        cJSON_DeleteItemFromObject(creq, "max_tokens");
        cJSON_DeleteItemFromObject(creq, "max_completion_tokens");
        cJSON_AddItemToObject(creq, "max_tokens", cJSON_Duplicate(mct, 1));
    }
    const cJSON *lp = cJSON_GetObjectItem(req, "logprobs"),
                *top = cJSON_GetObjectItem(req, "top_logprobs");
    if (lp && !cJSON_IsNull(lp) && !cJSON_IsBool(lp))
        return sv_fail(out, 400, "invalid_request_error", "\"logprobs\" must be true or false");
    if (top && !cJSON_IsNull(top) &&
        (!cJSON_IsNumber(top) || top->valuedouble < 0 || top->valuedouble > 20 ||
         top->valuedouble != floor(top->valuedouble)))
        return sv_fail(out, 400, "invalid_request_error",
                       "\"top_logprobs\" must be an integer 0..20");
    if (top && cJSON_IsNumber(top) && !cJSON_IsTrue(lp))
        return sv_fail(out, 400, "invalid_request_error",
                       "\"top_logprobs\" needs \"logprobs\": true");
    if (cJSON_IsTrue(lp))
        cJSON_AddNumberToObject(creq, "logprobs", cJSON_IsNumber(top) ? top->valuedouble : 0);
    return 0;
}

/* text_completion -> chat.completion: a "chatcmpl-" id, the message (the
 * text as generated: its leading space too, so that it equals the
 * log-prob tokens concatenated, as llama-server's does) and chat
 * log-probs. */
static void chat_answer(cJSON *body, const cJSON *req)
{
    const cJSON *id = cJSON_GetObjectItem(body, "id");
    if (cJSON_IsString(id)) {
        char cid[64];
        snprintf(cid, sizeof cid, "chat%.50s", id->valuestring);
        cJSON_ReplaceItemInObject(body, "id", cJSON_CreateString(cid));
    }
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(body, "choices"), 0);
    const cJSON *t = cJSON_GetObjectItem(ch, "text");
    const char *text = cJSON_IsString(t) ? t->valuestring : "";
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON_AddStringToObject(msg, "content", text);
    cJSON_AddNullToObject(msg, "refusal");
    cJSON_AddItemToObject(ch, "message", msg);
    cJSON_DeleteItemFromObject(ch, "text");
    cJSON *lp = cJSON_DetachItemFromObject(ch, "logprobs");
    const cJSON *top = cJSON_GetObjectItem(req, "top_logprobs");
    cJSON *clp = cJSON_IsObject(lp)
                     ? serve_chat_logprobs(lp, cJSON_IsNumber(top) ? (int)top->valuedouble : 0)
                     : NULL;
    cJSON_Delete(lp);
    if (clp)
        cJSON_AddItemToObject(ch, "logprobs", clp);
    else
        cJSON_AddNullToObject(ch, "logprobs");
    cJSON_ReplaceItemInObject(body, "object", cJSON_CreateString("chat.completion"));
}

/* Chat: the rendered messages completed; generation also stops at
 * "\nUser:". */
enum MHD_Result sv_chat(struct server *s, struct MHD_Connection *c, const cJSON *req)
{
    struct sbuf p;
    enum MHD_Result sent;
    if (!render_request(s, c, req, &p, &sent)) return sent;
    cJSON *creq = cJSON_Duplicate(req, 1), *body_err = NULL;
    cJSON_DeleteItemFromObject(creq, "messages");
    cJSON_DeleteItemFromObject(creq, "logprobs");
    cJSON_DeleteItemFromObject(creq, "top_logprobs");
    cJSON_DeleteItemFromObject(creq, "echo");
    cJSON_AddStringToObject(creq, "prompt", p.data ? p.data : "");
    sbuf_release(&p);
    cJSON *st = cJSON_GetObjectItem(creq, "stop");
    if (!st)
        cJSON_AddItemToObject(creq, "stop", cJSON_CreateString("\nUser:"));
    else if (cJSON_IsString(st)) {
        cJSON *arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, cJSON_CreateString(st->valuestring));
        cJSON_AddItemToArray(arr, cJSON_CreateString("\nUser:"));
        cJSON_ReplaceItemInObject(creq, "stop", arr);
    } else if (cJSON_IsArray(st) && cJSON_GetArraySize(st) < 4) {
        cJSON_AddItemToArray(st, cJSON_CreateString("\nUser:"));
    }
    unsigned bad2 = chat_options(req, creq, &body_err);
    cJSON *body = body_err;
    unsigned status = bad2 ? bad2 : sv_completion(s, creq, &body);
    cJSON_Delete(creq);
    if (status == 200) chat_answer(body, req);
    return sv_answer(c, status, body, req, 1);
}

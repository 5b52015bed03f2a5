/* serve_fmt — the OpenAI shapes `qgate serve` answers in, built from its
 * completion objects: server-sent event streams for completions and chat,
 * chat log-probs, and the text chunks a stream is cut into. Pure JSON
 * work: no server, no model. */
#ifndef QG_SERVE_FMT_H
#define QG_SERVE_FMT_H

#include <cjson/cJSON.h>
#include <stdint.h>

/* The chunks text is streamed in: one per piece (pieces[0..n), the
 * generated tokens' texts) while the pieces spell text from its start (a
 * piece's leading space may be absent from the text), then the rest of
 * text as one chunk. The chunks always concatenate to text. *tokens (when
 * not NULL) gets a parallel array: how many of the n tokens each chunk
 * carries (1, and the rest for the last). NULL on no memory. */
cJSON *serve_chunks(const char *text, const char *const *pieces, int64_t n, cJSON **tokens);

/* The SSE body of a finished completion: body is a text_completion (chat:
 * a chat.completion) carrying "_chunks" (serve_chunks) and "_chunk_tokens"
 * (the log-prob entries each chunk carries); one event per chunk with its
 * slice of the choice's log-probs (completions: tokens, token_logprobs,
 * top_logprobs, text_offset, top_token_ids; chat: content), a last one with
 * finish_reason, the usage (choices []) when include_usage, then "data:
 * [DONE]". malloc'd, NULL on no memory. */
char *serve_sse(const cJSON *body, int chat, int include_usage);

/* Chat log-probs {"content": [{token, logprob, bytes, top_logprobs:
 * [{token, logprob, bytes}]}]} from a completion's logprobs object
 * (tokens, token_logprobs, top_token_ids, top_logprobs), top_logprobs
 * keeping k entries. NULL on no memory or a malformed object. */
cJSON *serve_chat_logprobs(const cJSON *lp, int k);

/* Unicode code points in the UTF-8 text s (continuation bytes not counted). */
int64_t serve_chars(const char *s);

#endif

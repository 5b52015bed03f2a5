/* http — internals of the HTTP backend exposed for its fuzzer and tests.
 * Callers use the backend through backends/backend.h (spec "http://..."). */
#ifndef QG_HTTP_H
#define QG_HTTP_H

#include "backends/backend.h"

#include <stddef.h>

/* Reads a /completions answer (json, n bytes, untrusted) scoring r->tokens
 * into r->logprob, as the backend does: QG_OK, or QG_ERR_DATA /
 * QG_ERR_UNSUPPORTED with err filled. extra_tokens is how many generated
 * tokens the answer may carry after the prompt (0 or 1). */
int http_parse_score(const char *json, size_t n, int extra_tokens, struct backend_score *r,
                     char *err, size_t errlen);

/* Reads a /tokenize answer (json, n bytes, untrusted): "tokens" as ids or
 * as {"id", "piece"} (the piece a string or an array of bytes), each id in
 * [0, n_vocab) (any non-negative int32 when n_vocab is 0). QG_OK with *ids
 * (malloc'd), or QG_ERR_DATA with err filled. */
int http_parse_tokenize(const char *json, size_t n, int n_vocab, int32_t **ids, int64_t *n_ids,
                        char *err, size_t errlen);

#endif

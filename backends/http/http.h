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
int http_parse_score(const char *json, size_t n, int extra_tokens, struct backend_score *r, char *err, size_t errlen);

#endif

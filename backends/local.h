/* local — what the local backends (cpu, cuda) share: a GGUF's tokenizer
 * and model loaded together, their backend_info, a model spec's ?query
 * read one KEY=VALUE at a time, and the names of the devices. */
#ifndef QG_LOCAL_H
#define QG_LOCAL_H

#include "backends/backend.h"
#include "backends/llama.h"
#include "backends/tokenizer.h"

#include <stddef.h>

/* Opens path and loads its tokenizer and model (the model keeps the file
 * mapped); the tokenizer's vocabulary must match the embedding. QG_OK, or
 * a status with err naming the file and the problem (*tok and *model then
 * hold what was loaded, for the caller's cleanup). */
int local_load(const char *path, struct tokenizer **tok, struct llama_model **model, char *err,
               size_t errlen);

/* backend_info of a loaded tokenizer and model. */
void local_info(const struct tokenizer *tok, const struct llama_model *m, struct backend_info *o);

/* The next KEY=VALUE of the query at *q ("w=int8&keep=output"): key and
 * value copied (cut to their buffers; a part without '=' has an empty
 * value) and *q advanced past it. 0 at the end, else 1. */
int local_query_next(const char **q, char *key, size_t kn, char *val, size_t vn);

/* A device name: 0 for "cpu", 1 for "cuda" or "cuda:N" (*index set to N,
 * 0 for "cuda"), -1 for anything else. */
int local_device(const char *name, int *index);

#endif

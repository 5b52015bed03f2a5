/* gguf_cases — malformed GGUF files, one per failure the reader guards
 * against, each with the words its error message must contain. Used by the
 * tests and, as seeds, by the fuzzer. */
#ifndef QG_GGUF_CASES_H
#define QG_GGUF_CASES_H

#include "tests/test.h"

struct gguf_case {
    const char *name;
    void (*build)(struct bb *b);
    const char *expect; /* substring of the error message */
};

extern const struct gguf_case gguf_bad_cases[];
extern const int gguf_n_bad_cases;

/* A small valid file (one metadata key, one F32 tensor of 8 elements). */
void gguf_case_valid(struct bb *b);

#endif

/* strmap — an open-addressing hash map from byte strings (borrowed, not
 * copied) to int32, sized once for n keys: the tokenizer's vocabulary and
 * merge ranks. */
#ifndef QG_STRMAP_H
#define QG_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct strmap {
    uint32_t cap;  /* power of two */
    int32_t *slot; /* index into keys, -1 empty */
    const char **keys;
    uint32_t *lens;
    int32_t *vals;
    int32_t n;
};

/* Room for n keys. QG_OK or QG_ERR_NOMEM (release it either way). */
int map_init(struct strmap *m, int32_t n);
void map_release(struct strmap *m);
/* The value of key s[0..n), or -1. */
int32_t map_get(const struct strmap *m, const char *s, size_t n);
/* Inserts key (borrowed) unless present: the first insertion wins, as in
 * llama.cpp where later duplicates do not replace earlier tokens; at most
 * the n keys map_init was given. */
void map_put(struct strmap *m, const char *s, size_t n, int32_t v);

#endif

/* strmap — open-addressing string hash map (see the header). */
#include "backends/strmap.h"
#include "core/status.h"

#include <stdlib.h>
#include <string.h>

static uint32_t fnv1a(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

int map_init(struct strmap *m, int32_t n)
{
    m->cap = 16;
    while (m->cap < (uint32_t)n * 2 + 1)
        m->cap *= 2;
    m->slot = malloc(m->cap * sizeof *m->slot);
    m->keys = malloc(((size_t)n + 1) * sizeof *m->keys);
    m->lens = malloc(((size_t)n + 1) * sizeof *m->lens);
    m->vals = malloc(((size_t)n + 1) * sizeof *m->vals);
    m->n = 0;
    if (!m->slot || !m->keys || !m->lens || !m->vals) return QG_ERR_NOMEM;
    memset(m->slot, 0xff, m->cap * sizeof *m->slot);
    return QG_OK;
}

void map_release(struct strmap *m)
{
    free(m->slot);
    free(m->keys);
    free(m->lens);
    free(m->vals);
}

int32_t map_get(const struct strmap *m, const char *s, size_t n)
{
    if (!m->slot) return -1;
    for (uint32_t h = fnv1a(s, n) & (m->cap - 1);; h = (h + 1) & (m->cap - 1)) {
        int32_t k = m->slot[h];
        if (k < 0) return -1;
        if (m->lens[k] == n && memcmp(m->keys[k], s, n) == 0) return m->vals[k];
    }
}

/* Inserts key (borrowed) unless present: the first insertion wins, as in
 * llama.cpp where later duplicates do not replace earlier tokens. */
void map_put(struct strmap *m, const char *s, size_t n, int32_t v)
{
    uint32_t h = fnv1a(s, n) & (m->cap - 1);
    for (;; h = (h + 1) & (m->cap - 1)) {
        int32_t k = m->slot[h];
        if (k < 0) break;
        if (m->lens[k] == n && memcmp(m->keys[k], s, n) == 0) return;
    }
    m->keys[m->n] = s;
    m->lens[m->n] = (uint32_t)n;
    m->vals[m->n] = v;
    m->slot[h] = m->n++;
}

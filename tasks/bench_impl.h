/* bench_impl — what the benchmark readers share (folder-private): a growing
 * item list, the JSONL walker's callback, and the helpers one file defines
 * for the others (bn_ names). */
#ifndef QG_BENCH_IMPL_H
#define QG_BENCH_IMPL_H

#include "tasks/bench.h"
#include "datasets/reader.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* ---- a growable array of items ---- */
struct vec {
    void *p;
    int64_t n, cap;
    size_t elem;
};

/* Runs fn on every object of src->data (up to src->limit items in v);
 * fn returns 0 or an error status (set with lines_fail). */
typedef int (*jsonl_item_fn)(struct lines *l, const cJSON *o, struct vec *v);

void *bn_vec_push(struct vec *v);

char *bn_xstrdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* a string field of a JSONL object, or an error naming file:line and field */
const char *bn_jfield(struct lines *l, const cJSON *o, const char *key, int *rc);

int64_t bn_cluster_of(const char *s);

int bn_each_jsonl(const struct bench_source *src, struct vec *v, jsonl_item_fn fn, char *err,
                  size_t errlen);

/* llama.cpp's --hellaswag layout: 6 lines per task */
int bn_load_hellaswag_txt(const struct bench_source *src, struct vec *v, char *err, size_t errlen);

int bn_load_hellaswag_jsonl(const struct bench_source *src, struct vec *v, char *err,
                            size_t errlen);

int bn_ends_with(const char *s, const char *suffix);

int bn_cmp_str(const void *a, const void *b);

int bn_load_mmlu(const struct bench_source *src, struct vec *v, char *err, size_t errlen);

int bn_load_piqa(const struct bench_source *src, struct vec *v, char *err, size_t errlen);

int bn_load_arc(const struct bench_source *src, struct vec *v, char *err, size_t errlen);

int bn_load_boolq(const struct bench_source *src, struct vec *v, char *err, size_t errlen);

int bn_load_winogrande(const struct bench_source *src, struct vec *v, char *err, size_t errlen);

/* text between `after` and the earliest of the `ends` markers (trimmed),
 * searching from *pos; advances *pos past it. NULL when not found. */
char *bn_between(const char *s, const char **pos, const char *after, const char *const *ends,
                 int n_ends);

/* LLM-Adapters' JSON array layout (the ARC, BoolQ and WinoGrande copies in
 * ../shared/data/llm-adapters): one object per item */
int bn_load_adapters(const char *name, const struct bench_source *src, struct vec *v, char *err,
                     size_t errlen);

#endif

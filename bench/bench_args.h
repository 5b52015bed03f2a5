/* bench_args — option values and small statistics of the bench programs
 * (not library code: a bad value ends the program with exit 64). */
#ifndef QG_BENCH_ARGS_H
#define QG_BENCH_ARGS_H

#include "backends/ggml_types.h"
#include "backends/matmul.h"
#include "backends/synth.h"
#include "core/util.h"
#include "cli/cpu_select.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A whole integer value of option opt in [lo, hi], or exit 64 naming it. */
static inline int bench_int_arg(const char *opt, const char *v, int lo, int hi)
{
    int64_t x;
    if (qg_parse_i64(v, lo, hi, &x)) {
        fprintf(stderr, "%s: '%s' is not an integer in %d..%d\n", opt, v, lo, hi);
        exit(64);
    }
    return (int)x;
}

/* Forces kernel set `name` (NULL: $QG_CPU, if set) for this program, or
 * exits 64 with the reason; may start the program again (cpu_select). */
static inline void bench_cpu(const char *name, char **argv)
{
    char err[QG_ERRMSG_MAX];
    if (cpu_select(name, "--cpu ", argv, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(64);
    }
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (n >= 1); sorts v. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* W: a random matrix of type `name`, rows x in (random blocks, as the
 * tests' synth_random_blocks makes them; MXFP4's scales near 1, since its
 * E8M0 255 is NaN), named name (borrowed), its data malloc'd for the
 * caller to free; a name that is not a block format of in's size ends
 * the program with exit 64, no memory with 70. */
static inline void bench_random_matrix(const char *name, int in, int rows, uint64_t *st,
                                       struct wmat *W)
{
    const int type = ggml_type_from_name(name);
    const struct ggml_type_info *ti = type < 0 ? NULL : ggml_type_get((uint32_t)type);
    if (!ti || in % (int)ti->block) {
        fprintf(stderr, "--types: '%s' is not a block format of --in %d's size\n", name, in);
        exit(64);
    }
    const size_t rb = (size_t)(in / (int)ti->block) * ti->type_size;
    uint8_t *q = malloc(rb * (size_t)rows);
    if (!q) exit(70);
    synth_random_blocks((uint32_t)type, q, (int64_t)in * rows, 0.5f, st);
    for (size_t o = 0; type == GGML_MXFP4 && o < rb * (size_t)rows; o += 17)
        q[o] = (uint8_t)(120 + q[o] % 12);
    *W = (struct wmat){name, (uint32_t)type, q, in, rows, rb, 0, NULL, 0};
}

#endif

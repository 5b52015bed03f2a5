/* bench_args — option values and small statistics of the bench programs
 * (not library code: a bad value ends the program with exit 64). */
#ifndef QG_BENCH_ARGS_H
#define QG_BENCH_ARGS_H

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

#endif

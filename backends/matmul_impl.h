/* matmul_impl — the x86 decode kernels behind matmul.c (folder-private).
 *
 * Kernel sets: AVX2 (with FMA and F16C), AVX-512 (F, BW, VL, DQ) and
 * AVX-512 with VNNI, VBMI and GFNI (the AVX-512 set with an integer Q4_K
 * kernel), chosen once at run time by matmul.c; on other CPUs and compilers every
 * call answers "no kernel" and matmul.c's portable C runs.
 */
#ifndef QG_MATMUL_IMPL_H
#define QG_MATMUL_IMPL_H

#include "backends/matmul.h"

#include <stddef.h>
#include <stdint.h>

enum mv_isa { MV_PORTABLE, MV_AVX2, MV_AVX512, MV_AVX512_VNNI };

/* The best kernel set this CPU runs. */
enum mv_isa mv_isa_detect(void);

/* mv_isa_detect's, or lower when matmul_cap_kernel held the process to a
 * lower set. */
enum mv_isa mv_isa_best(void);

/* The kernel set in use (matmul.c: mv_isa_detect's, or matmul_use_kernel's
 * choice); vecmath.c follows it too. */
enum mv_isa mv_isa_current(void);

typedef float (*mv_dot_fn)(const float *a, const float *b, int64_t n);
/* The f32 dot product of a kernel set; NULL for MV_PORTABLE. */
mv_dot_fn mv_x86_dot(enum mv_isa isa);

/* the set's dot product over T rows: out[t] = dot(a, b + t stride, n) *
 * scale, each as mv_x86_dot's function gives it, to the bit */
typedef void (*mv_dots_fn)(float *out, const float *a, const float *b, int64_t T, int64_t stride,
                           int64_t n, float scale);

/* the set's mv_dots_fn, or NULL (portable: the caller loops) */
mv_dots_fn mv_x86_dots(enum mv_isa isa);

/* mv_dots_fn with b's rows in fp16, the bits of the set's mv_dots_fn on
 * their f32 values; NULL for MV_PORTABLE */
typedef void (*mv_dots_f16_fn)(float *out, const float *a, const uint16_t *b, int64_t T,
                               int64_t stride, int64_t n, float scale);
mv_dots_f16_fn mv_x86_dots_f16(enum mv_isa isa);

/* Floats of x's preparation the kernel of `type` reads in a product over
 * `in` inputs (x re-laid for the kernel set, then its sums over groups of
 * 32); 0 when it reads none. Best 64-byte aligned. */
size_t mv_x86_prep_floats(enum mv_isa isa, uint32_t type, int64_t in);
/* Writes that preparation of x[0..n), for the kernel of `type`, into prep
 * (mv_x86_prep_floats); only where mv_x86_prep_floats is not 0 (which
 * holds n to a multiple of 64 on AVX-512, 32 on AVX2). */
void mv_x86_prep(enum mv_isa isa, uint32_t type, const float *x, int64_t n, float *prep);

/* y[r - r0] = dot(row r of W, x) for rows [r0, r1) by the set's kernel for
 * W's type; returns 1, or 0 (nothing written) when the set has no kernel
 * for it or the kernel needs a preparation and prep is NULL. */
int mv_x86_rows(enum mv_isa isa, float *y, const float *x, const float *prep, const struct wmat *W,
                int64_t r0, int64_t r1);

/* y[r - r0] = the integer product of row r of W with a (matmul_w_group_q8)
 * for rows [r0, r1); returns 1, or 0 (nothing written) when the set has
 * no integer kernel for W's type and a's kind. */
int mv_x86_q8_rows(enum mv_isa isa, float *y, const struct matmul_q8 *a, const struct wmat *W,
                   int64_t r0, int64_t r1);

#endif
